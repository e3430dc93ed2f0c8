"""The load generator: requests offered to a server, closed or open loop, and their accounting.

Contract:

- A :class:`Server` takes requests (``room`` / ``submit``) and hands back :class:`Answer` s
  (``poll``, which waits at most the time it is given). The serving harness is one; tests drive
  the same generator with a server whose service time they control. An answer may carry the
  server's own time for the request (``service_s``: the model call that served it).
- :func:`run_level` offers one level of load and returns its :class:`LevelRecord`. An
  :class:`OpenLoop` draws Poisson arrivals at a rate (exponential gaps from a seeded generator,
  drawn as the level goes, so that every level of one seed offers the same arrivals); a
  :class:`ClosedLoop` keeps ``concurrency`` requests outstanding, each answer (or give-up)
  starting the next. A request *arrives* at its scheduled time whether or not the server has
  room: it then waits in the generator's queue, in arrival order, until there is room, and
  that wait is recorded (``queued_s``: for a server the user runs, its client's own queue).
- How long a level offers requests is its :class:`~tfperf.serving.tail.LevelLength`: at least
  its minimums, then on until its p99 stands (and is precise enough), never past its cap. The
  stopping rule reads the latencies so far at most every :data:`CHECK_S` seconds.
- The *window* of a level runs from its first arrival to its last; after it, the level only
  waits for the requests still open (the *drain*). The record keeps when each completion came,
  the requests open when the window closed and the slowest of those that ended after it (the
  straggler), so that a rate can be taken over the window alone.
- Latency counts from the scheduled arrival to the answer's receipt, so a server that stalls
  makes every request that should have arrived meanwhile late (no coordinated omission);
  ``from_send_s`` keeps the time from the actual send too, for comparison.
- Accounting: every arrival is ``sent``; each ends exactly once as ``completed``, ``failed``
  (the server answered with an error, or its instance died) or ``timed_out`` (no answer within
  ``timeout_s`` of its scheduled arrival; a later answer is ignored), so
  ``sent == completed + failed + timed_out``.
- Every level stops by itself: arrivals end at the level's cap at the latest, and every
  request is given up ``timeout_s`` after its arrival.
- ``clock`` (``time.monotonic`` by default) is the one source of time, so a test can run the
  generator on a simulated clock that its server's ``poll`` advances.
- While a level runs, the generator's thread asks Linux for timers without slack
  (``PR_SET_TIMERSLACK`` of 1 ns, restored after): a thread's default lets a sleep that should
  end at an arrival end up to 50 microseconds late, a delay every request would count.
"""

from __future__ import annotations

import ctypes
import math
import resource
import sys
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from tfperf.serving.tail import LevelLength, ready, settled

CHECK_S = 0.25
"""How often (in the level's own time) the stopping rule reads the latencies so far: a sort of
a few thousand of them, kept off the generator's every turn."""


@dataclass(frozen=True)
class Answer:
    """One request's end at the server: ``ok``, or failed with ``error`` on ``instance``;
    ``service_s`` is the server's own time for it, where the server says."""

    request_id: int
    ok: bool
    error: str | None = None
    instance: int | None = None
    service_s: float | None = None


class Server(Protocol):
    """What the generator drives (the harness, or a test's synthetic server)."""

    def room(self) -> bool:
        """Whether it takes one more request now."""
        ...

    def submit(self, request_id: int) -> None: ...

    def poll(self, timeout_s: float) -> list[Answer]:
        """The answers that arrived, waiting at most ``timeout_s`` for the first."""
        ...


_CHUNK = 1024
"""Gaps drawn at a time: a seeded generator draws the same sequence in chunks as at once."""


@dataclass(frozen=True)
class OpenLoop:
    """Poisson arrivals at ``rate`` per second for as long as ``length`` says."""

    rate: float
    length: LevelLength
    seed: int = 0

    def arrivals(self) -> Iterator[float]:
        """Arrival offsets in seconds from the level's start (the first at 0), without end."""
        rng = np.random.default_rng(self.seed)
        at = 0.0
        while True:
            for gap in rng.exponential(1.0 / self.rate, _CHUNK):
                yield at
                at += float(gap)

    def schedule(self) -> np.ndarray:
        """The arrivals of the level's minimums: at least ``min_requests`` and ``min_s``
        seconds' worth, none past ``max_s``."""
        out = []
        for at in self.arrivals():
            enough = len(out) >= self.length.min_requests and at >= self.length.min_s
            if enough or at > self.length.max_s:
                return np.asarray(out)
            out.append(at)
        return np.asarray(out)  # pragma: no cover - arrivals() has no end


@dataclass(frozen=True)
class ClosedLoop:
    """``concurrency`` requests outstanding for as long as ``length`` says."""

    concurrency: int
    length: LevelLength


@dataclass
class LevelRecord:
    """What one level did (raw; :mod:`tfperf.serving.levels` makes the statistics)."""

    sent: int = 0
    completed: int = 0
    failed: int = 0
    timed_out: int = 0
    latencies_s: list[float] = field(default_factory=list)
    """Completed requests, from scheduled arrival to answer."""
    from_send_s: list[float] = field(default_factory=list)
    """Completed requests, from the send to the server to the answer."""
    answered_s: list[float] = field(default_factory=list)
    """Completed requests: when each answer came, from the level's start."""
    service_s: list[float] = field(default_factory=list)
    """Completed requests whose server said: its own time for each."""
    queued_s: list[float] = field(default_factory=list)
    """Every request sent to the server (or given up before): how long it waited in the
    generator's queue for room, from the moment the generator noticed its arrival."""
    waited_s: list[float] = field(default_factory=list)
    """Timed-out requests: how long each had waited when given up."""
    failures: dict[str, int] = field(default_factory=dict)
    """``"instance N: reason"`` (or the error) -> failed requests."""
    lags_s: list[float] = field(default_factory=list)
    """Open loop: how late the generator noticed each arrival (its own delay, whatever the
    server does; it counts in the latency)."""
    arrivals_s: float = 0.0
    """The window: from the first arrival to the last."""
    duration_s: float = 0.0
    """From the first arrival to the last answer or give-up."""
    drain_s: float = 0.0
    """From the window's end to the last answer or give-up."""
    open_at_close: int = 0
    """Requests sent and not yet ended when the window closed (the last arrival among them)."""
    straggler: tuple[float, float, str] | None = None
    """Of the requests that ended after the window closed, the slowest: when it arrived (s
    from the start), its latency (s) and how it ended (``completed``, ``failed``,
    ``timed_out``)."""
    stopped: str = "minimum"
    """Why the arrivals ended: ``"minimum"`` (the level's minimums, all it asks), ``"stable"``
    (its p99 stood, precise enough) or ``"cap"`` (its maximum duration)."""
    cpu_s: float = 0.0
    """The generator's process CPU time over the level."""


_EPSILON_S = 1e-9
"""A deadline met within rounding counts as met (a clock advanced to it by a sum)."""


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Level:
    """The state of one level under way (see :func:`run_level`)."""

    def __init__(self, server: Server, timeout_s: float, clock: Callable[[], float]) -> None:
        self.server = server
        self.timeout_s = timeout_s
        self.clock = clock
        self.start = clock()
        self.record = LevelRecord()
        # outstanding: request id -> scheduled arrival, oldest first (an OrderedDict: the
        # oldest is read after every give-up, which a plain dict makes slower as it empties)
        self.arrived: OrderedDict[int, float] = OrderedDict()
        self.sent_at: dict[int, float] = {}
        self.noticed: dict[int, float] = {}
        self.queue: deque[int] = deque()
        self.last_arrival = self.start
        self.closed_at: float | None = None
        self.checked_at = -math.inf
        self.settled = False

    def arrive(self, at: float) -> None:
        rid = self.record.sent
        self.record.sent += 1
        self.arrived[rid] = at
        self.noticed[rid] = self.clock()
        self.queue.append(rid)
        self.last_arrival = at

    def offering(self, length: LevelLength, offset: float) -> bool:
        """Whether the level still offers a request ``offset`` s after its start (the rule of
        :class:`~tfperf.serving.tail.LevelLength`); why not, in the record, once it stops."""
        if offset > length.max_s + _EPSILON_S:
            self.record.stopped = "cap"
            return False
        if self.record.sent < length.min_requests or offset < length.min_s:
            return True
        if offset - self.checked_at >= CHECK_S:
            self.checked_at = offset
            self.settled = settled(self.record.latencies_s + self.record.waited_s, length)
        if self.settled:
            self.record.stopped = "stable" if length.extends else "minimum"
        return not self.settled

    def close_window(self) -> None:
        """The arrivals are over: what is open now is the drain's."""
        if self.closed_at is None:
            self.closed_at = self.last_arrival
            self.record.open_at_close = len(self.arrived)

    def dispatch(self) -> None:
        while self.queue and self.server.room():
            rid = self.queue.popleft()
            if rid in self.arrived:  # not given up while it waited
                now = self.clock()
                self.sent_at[rid] = now
                self.record.queued_s.append(now - self.noticed.pop(rid, now))
                self.server.submit(rid)

    def _ended(self, at: float, latency: float, how: str) -> None:
        """Keep the slowest request that ended after the window closed."""
        if self.closed_at is None:
            return
        worst = self.record.straggler
        if worst is None or latency > worst[1]:
            self.record.straggler = (at - self.start, latency, how)

    def give_up_late(self, now: float) -> int:
        """Time out what waited ``timeout_s``; how many."""
        gone = 0
        while self.arrived:
            rid, at = next(iter(self.arrived.items()))
            if now < at + self.timeout_s - _EPSILON_S:
                break
            del self.arrived[rid]
            self.sent_at.pop(rid, None)
            if rid in self.noticed:  # given up before it was sent: it waited all along
                self.record.queued_s.append(now - self.noticed.pop(rid))
            self.record.timed_out += 1
            self.record.waited_s.append(now - at)
            self._ended(at, now - at, "timed_out")
            gone += 1
        return gone

    def settle(self, answers: list[Answer]) -> int:
        """Count the answers of requests still outstanding; how many ended."""
        now = self.clock()
        ended = 0
        for answer in answers:
            at = self.arrived.pop(answer.request_id, None)
            if at is None:
                continue  # given up already: counted as timed out
            sent = self.sent_at.pop(answer.request_id, at)
            ended += 1
            if answer.ok:
                self._completed(answer, at, sent, now)
            else:
                self.record.failed += 1
                where = f"instance {answer.instance}: " if answer.instance is not None else ""
                key = where + (answer.error or "failed")
                self.record.failures[key] = self.record.failures.get(key, 0) + 1
                self._ended(at, now - at, "failed")
        return ended

    def _completed(self, answer: Answer, at: float, sent: float, now: float) -> None:
        record = self.record
        record.completed += 1
        record.latencies_s.append(now - at)
        record.from_send_s.append(now - sent)
        record.answered_s.append(now - self.start)
        if answer.service_s is not None:
            record.service_s.append(answer.service_s)
        self._ended(at, now - at, "completed")

    def wait(self, until: float | None) -> int:
        """Poll the server until ``until`` at most (or the next give-up); how many ended."""
        now = self.clock()
        deadline = now + 0.1 if until is None else until
        if self.arrived:
            deadline = min(deadline, next(iter(self.arrived.values())) + self.timeout_s)
        ended = self.settle(self.server.poll(max(0.0, deadline - now)))
        return ended + self.give_up_late(self.clock())

    def finish(self, cpu0: float) -> LevelRecord:
        end = self.clock()
        self.close_window()
        record = self.record
        record.arrivals_s = self.last_arrival - self.start
        record.duration_s = end - self.start
        record.drain_s = end - (self.closed_at if self.closed_at is not None else end)
        record.cpu_s = _cpu_s() - cpu0
        return record


def run_level(
    server: Server,
    load: OpenLoop | ClosedLoop,
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> LevelRecord:
    """Offer one level of ``load`` to ``server`` (see the module docstring)."""
    ready(load.length)  # before the clock: nothing the stopping rule needs loads mid-level
    cpu0 = _cpu_s()
    with _precise_timers():
        level = _Level(server, timeout_s, clock)
        if isinstance(load, OpenLoop):
            _open(level, load)
        else:
            _closed(level, load)
    return level.finish(cpu0)


_PR_SET_TIMERSLACK, _PR_GET_TIMERSLACK = 29, 30


@contextmanager
def _precise_timers() -> Iterator[None]:
    """This thread's timer slack at 1 ns meanwhile, where Linux lets it be set (module
    docstring)."""
    libc = None
    if sys.platform.startswith("linux"):
        with suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
    before = libc.prctl(_PR_GET_TIMERSLACK, 0, 0, 0, 0) if libc is not None else -1
    if before > 0:
        libc.prctl(_PR_SET_TIMERSLACK, 1, 0, 0, 0)
    try:
        yield
    finally:
        if before > 0:
            libc.prctl(_PR_SET_TIMERSLACK, before, 0, 0, 0)


def _open(level: _Level, load: OpenLoop) -> None:
    arrivals = load.arrivals()
    offset = next(arrivals)
    offering = level.offering(load.length, offset)
    while offering or level.arrived:
        now = level.clock()
        while offering and level.start + offset <= now:
            level.arrive(level.start + offset)
            level.record.lags_s.append(now - level.last_arrival)
            offset = next(arrivals)
            offering = level.offering(load.length, offset)
        if not offering:
            level.close_window()
        level.dispatch()
        level.wait(level.start + offset if offering else None)


def _closed(level: _Level, load: ClosedLoop) -> None:
    for _ in range(load.concurrency):
        level.arrive(level.start)
    offering = True
    while level.arrived:
        level.dispatch()
        ended = level.wait(None)
        now = level.clock()
        for _ in range(ended):
            offering = offering and level.offering(load.length, now - level.start)
            if not offering:
                level.close_window()
                break
            level.arrive(now)
