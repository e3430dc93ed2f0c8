"""The load generator: requests offered to a server, closed or open loop, and their accounting.

Contract:

- A :class:`Server` takes requests (``room`` / ``submit``) and hands back :class:`Answer` s
  (``poll``, which waits at most the time it is given). The serving harness is one; tests drive
  the same generator with a server whose service time they control.
- :func:`run_level` offers one level of load and returns its :class:`LevelRecord`. An
  :class:`OpenLoop` draws Poisson arrivals at a rate (exponential gaps from a seeded generator);
  a :class:`ClosedLoop` keeps ``concurrency`` requests outstanding, each answer (or give-up)
  starting the next. A request *arrives* at its scheduled time whether or not the server has
  room: it then waits in the generator's queue, in arrival order, until an instance has room.
- Latency counts from the scheduled arrival to the answer's receipt, so a server that stalls
  makes every request that should have arrived meanwhile late (no coordinated omission);
  ``from_send_s`` keeps the time from the actual send too, for comparison.
- Accounting: every arrival is ``sent``; each ends exactly once as ``completed``, ``failed``
  (the server answered with an error, or its instance died) or ``timed_out`` (no answer within
  ``timeout_s`` of its scheduled arrival; a later answer is ignored), so
  ``sent == completed + failed + timed_out``.
- Every level stops by itself: an open loop's arrivals are a finite schedule, a closed loop
  starts no request after ``max_s``, and every request is given up ``timeout_s`` after its
  arrival.
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


@dataclass(frozen=True)
class Answer:
    """One request's end at the server: ``ok``, or failed with ``error`` on ``instance``."""

    request_id: int
    ok: bool
    error: str | None = None
    instance: int | None = None


class Server(Protocol):
    """What the generator drives (the harness, or a test's synthetic server)."""

    def room(self) -> bool:
        """Whether it takes one more request now."""
        ...

    def submit(self, request_id: int) -> None: ...

    def poll(self, timeout_s: float) -> list[Answer]:
        """The answers that arrived, waiting at most ``timeout_s`` for the first."""
        ...


@dataclass
class OpenLoop:
    """Poisson arrivals at ``rate`` per second: at least ``min_requests`` of them and at least
    ``min_s`` seconds' worth, never past ``max_s`` seconds."""

    rate: float
    min_requests: int
    min_s: float
    max_s: float
    seed: int = 0

    def schedule(self) -> np.ndarray:
        """Arrival offsets in seconds from the level's start (the first at 0)."""
        n = max(self.min_requests, math.ceil(self.rate * self.min_s))
        gaps = np.random.default_rng(self.seed).exponential(1.0 / self.rate, n)
        offsets = np.concatenate([[0.0], np.cumsum(gaps[:-1])])
        return offsets[offsets <= self.max_s]


@dataclass
class ClosedLoop:
    """``concurrency`` requests outstanding until both ``min_requests`` were sent and ``min_s``
    passed, and never past ``max_s``."""

    concurrency: int
    min_requests: int
    min_s: float
    max_s: float

    def more(self, sent: int, elapsed_s: float) -> bool:
        if elapsed_s >= self.max_s:
            return False
        return sent < self.min_requests or elapsed_s < self.min_s


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
    waited_s: list[float] = field(default_factory=list)
    """Timed-out requests: how long each had waited when given up."""
    failures: dict[str, int] = field(default_factory=dict)
    """``"instance N: reason"`` (or the error) -> failed requests."""
    lags_s: list[float] = field(default_factory=list)
    """Open loop: how late the generator noticed each arrival (its own delay, whatever the
    server does; it counts in the latency)."""
    arrivals_s: float = 0.0
    """From the first arrival to the last."""
    duration_s: float = 0.0
    """From the first arrival to the last answer or give-up."""
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
        self.queue: deque[int] = deque()
        self.last_arrival = self.start

    def arrive(self, at: float) -> None:
        rid = self.record.sent
        self.record.sent += 1
        self.arrived[rid] = at
        self.queue.append(rid)
        self.last_arrival = at

    def dispatch(self) -> None:
        while self.queue and self.server.room():
            rid = self.queue.popleft()
            if rid in self.arrived:  # not given up while it waited
                self.sent_at[rid] = self.clock()
                self.server.submit(rid)

    def give_up_late(self, now: float) -> int:
        """Time out what waited ``timeout_s``; how many."""
        gone = 0
        while self.arrived:
            rid, at = next(iter(self.arrived.items()))
            if now < at + self.timeout_s - _EPSILON_S:
                break
            del self.arrived[rid]
            self.sent_at.pop(rid, None)
            self.record.timed_out += 1
            self.record.waited_s.append(now - at)
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
                self.record.completed += 1
                self.record.latencies_s.append(now - at)
                self.record.from_send_s.append(now - sent)
            else:
                self.record.failed += 1
                where = f"instance {answer.instance}: " if answer.instance is not None else ""
                key = where + (answer.error or "failed")
                self.record.failures[key] = self.record.failures.get(key, 0) + 1
        return ended

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
        self.record.arrivals_s = self.last_arrival - self.start
        self.record.duration_s = end - self.start
        self.record.cpu_s = _cpu_s() - cpu0
        return self.record


def run_level(
    server: Server,
    load: OpenLoop | ClosedLoop,
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> LevelRecord:
    """Offer one level of ``load`` to ``server`` (see the module docstring)."""
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
    offsets = load.schedule()
    i = 0
    while i < len(offsets) or level.arrived:
        now = level.clock()
        while i < len(offsets) and level.start + offsets[i] <= now:
            level.arrive(level.start + float(offsets[i]))
            level.record.lags_s.append(now - level.last_arrival)
            i += 1
        level.dispatch()
        level.wait(level.start + float(offsets[i]) if i < len(offsets) else None)


def _closed(level: _Level, load: ClosedLoop) -> None:
    for _ in range(load.concurrency):
        level.arrive(level.start)
    while level.arrived:
        level.dispatch()
        ended = level.wait(None)
        now = level.clock()
        for _ in range(ended):
            if load.more(level.record.sent, now - level.start):
                level.arrive(now)
