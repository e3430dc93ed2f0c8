"""A server the user runs, as the load generator drives it: a :class:`~tfperf.serving.generator.
Server` whose requests go over the network.

Contract:

- :class:`RemoteServer` runs an asyncio event loop on a thread of its own with a pool of
  connections (:class:`Pool`), each held by one worker that sends one request at a time over
  one connection of the :class:`~tfperf.serving.remote.wire.Wire` (a kept-alive HTTP
  connection, or a gRPC channel). A request goes to the connection that came free last (a
  stack, as a client's pool reuses its warmest connection), so at a low rate one connection
  carries the load instead of each of them idling long enough for the server's keep-alive to
  close it. The generator's thread calls ``room``, ``submit`` (hands a request id to the loop)
  and ``poll`` (answers as they arrive, waiting at most the time given).
- Connections are opened before the clock: :meth:`RemoteServer.warm` sends one request
  (raising what it raised, for the first-request checks), :meth:`RemoteServer.warm_all` one
  more on every other connection; neither is counted in a level, and each failure on the way
  is kept (``warmup``); connections are warmed one after the other, so that opening them is
  no connection storm. Before each level, every connection idle for :data:`REWARM_IDLE_S` is
  warmed again (counted in ``warmup``): one an earlier level left unused long enough for the
  server's keep-alive to close it is made again there, outside the clock. With ``Pool.grow``
  (no ``--connections``), the pool has as many
  connections as a level's load needs -- a closed loop's concurrency, an open loop's rate
  times the median call seen so far, twice over (Little's law, with room for the bursts of
  Poisson arrivals), up to :data:`MAX_CONNECTIONS` -- opened and warmed before the level
  starts. A request that finds none free (a server falling behind the rate, or a fixed
  ``--connections``) waits in the generator's queue, recorded as ``client_queue_ms``; no
  connection is opened during a level, as that would turn a server's overload into a
  connection storm. The SLO search's capacity probe always has a connection for each request
  it keeps in flight: the client never caps the capacity.
- Each level (``begin_level`` / ``end_level``) reports a
  :class:`~tfperf.serving.levels.ServerSide`: ``retried`` (requests the wire sent again),
  ``reconnects`` (connections the level's requests had to make: one the server had closed, or
  one more for the load) and ``server_ms``, the server's own queue and compute time per
  request from its statistics read before and after the level
  (:mod:`tfperf.serving.remote.stats`); a server that keeps none is said so once, in
  ``faults``. An answer of a request sent in an earlier level (request ids start again at 0
  each level) is not handed to the generator, which gave it up already.
- Every call is bounded by ``call_timeout_s`` from its send; the generator gives the request
  up ``timeout_s`` after its arrival (no later), so a stalled server ends a level by itself
  and its connections come free again when their calls time out.
- An error answer is a failed :class:`~tfperf.serving.generator.Answer` whose error is its
  status and the **first** message that status came with (``"HTTP 500: ..."``), so failures
  are counted by status and the first message is kept.
- :meth:`RemoteServer.close` cancels every call and closes every connection; a wait for the
  loop cut short (its timeout, Ctrl-C) cancels what it waited for first. Nothing here
  contacts any address but the wire's target.
"""

from __future__ import annotations

import asyncio
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfperf.core.config import Config
from tfperf.core.serving import ServingLayout
from tfperf.serving.generator import Answer, ClosedLoop, OpenLoop
from tfperf.serving.levels import ServerSide
from tfperf.serving.remote.stats import Counters, per_request
from tfperf.serving.remote.wire import CallFailed, Sent, Wire, short

MAX_CONNECTIONS = 1024
"""The most connections a pool grows to (a probe's doubled concurrency, a level's load)."""
HEADROOM = 2.0
"""An open level's connections: its rate times the median call seen, this many times over."""
STATS_TIMEOUT_S = 10.0
REWARM_IDLE_S = 1.0
"""A connection idle this long is warmed again before a level: well under the keep-alive of
the servers in use (uvicorn 5 s, nginx 75 s), so none is closed between levels unseen."""


@dataclass(frozen=True)
class Pool:
    """The client's connections: ``connections`` opened and warmed before the first level;
    ``grow``: as many more as each level's load needs (module docstring)."""

    connections: int = 16
    grow: bool = True


@dataclass
class _Conn:
    conn: Any
    inbox: asyncio.Queue[tuple[int, int]] = field(default_factory=asyncio.Queue)
    used: float = field(default_factory=time.monotonic)
    """When its last request ended (the event loop's clock)."""


@dataclass
class _LevelCount:
    resent: int = 0
    connects: int = 0


class RemoteServer:
    """The server under test behind ``--url`` (module docstring)."""

    config = Config()
    """Nothing of a remote server is tfperf's to configure: the default config, recorded as such."""
    layout = ServingLayout()
    client_queue = True
    """A request with no free connection waits in tfperf's client."""
    saturation_known = False
    """How many requests at once saturate it is the server's secret: the probe doubles."""

    def __init__(
        self,
        wire: Wire,
        body: Any,
        pool: Pool | int,
        call_timeout_s: float,
        target: Mapping[str, Any] | None = None,
        info: Mapping[str, Any] | None = None,
    ) -> None:
        self.target = {**(target or {}), "label": (target or {}).get("label", "remote")}
        self.info = dict(info or {})
        self.wire = wire
        self.body = body
        self.pool = pool if isinstance(pool, Pool) else Pool(pool, grow=False)
        self.call_timeout_s = call_timeout_s
        self.faults: list[str] = []
        self.in_flight = 0
        self.cap = self.pool.connections
        self.first_message: dict[str, str] = {}
        self.warmup: dict[str, Any] = {"requests": 0, "retries": [], "seconds": 0.0}
        self._generation = 0
        self._counts: dict[int, _LevelCount] = {}
        self._answers: queue.SimpleQueue[tuple[int, Answer]] = queue.SimpleQueue()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._conns: list[_Conn] = []
        self._idle: list[_Conn] = []
        self._backlog: deque[tuple[int, int]] = deque()
        self._tasks: list[asyncio.Task[None]] = []
        self._runs: set[asyncio.Task[Any]] = set()
        """What :meth:`_run` has running on the loop (a warm-up, a statistics read)."""
        self._calls_s: deque[float] = deque(maxlen=2000)
        self._stats_conn: Any = None
        self._stats_before: Counters | str | None = None

    def _run(self, coro: Any, timeout_s: float) -> Any:
        """``coro`` run on the loop, waited for at most ``timeout_s``. A wait cut short (its
        timeout, Ctrl-C) cancels it: left running, it would send on connections that
        :meth:`close` closes under it, and its error be printed as the process ends
        (:meth:`_stop` also waits for what is still running)."""
        future = asyncio.run_coroutine_threadsafe(self._tracked(coro), self._loop)
        try:
            return future.result(timeout_s)
        except BaseException:
            future.cancel()
            raise

    async def _tracked(self, coro: Any) -> Any:
        """``coro``, in :attr:`_runs` while it runs."""
        task = asyncio.current_task()
        assert task is not None
        self._runs.add(task)
        try:
            return await coro
        finally:
            self._runs.discard(task)

    # -- life -----------------------------------------------------------------------------

    def start(self) -> RemoteServer:
        self._thread.start()
        self._run(self._open(self.pool.connections), 60.0)
        return self

    async def _open(self, count: int) -> list[_Conn]:
        """``count`` more connections, each with its worker, idle."""
        added = []
        for _ in range(count):
            held = _Conn(await self.wire.open())
            self._conns.append(held)
            self._tasks.append(asyncio.ensure_future(self._serve(held)))
            added.append(held)
        self._idle.extend(reversed(added))  # the first opened is the first used
        return added

    async def _serve(self, held: _Conn) -> None:
        while True:
            item: tuple[int, int] | None = await held.inbox.get()
            while item is not None:
                answer = await self._one(held.conn, *item)
                held.used = time.monotonic()
                item = self._backlog.popleft() if self._backlog else None
                if item is None:
                    self._idle.append(held)  # before the answer: the next submit finds it free
                self._answers.put(answer)

    async def _one(self, conn: Any, generation: int, rid: int) -> tuple[int, Answer]:
        count = self._counts.setdefault(generation, _LevelCount())
        began = time.monotonic()
        try:
            sent = await self.wire.call(conn, self.body, self.call_timeout_s)
            answer = Answer(rid, True)
        except CallFailed as exc:
            sent = Sent(exc.resent, exc.connects)
            first = self.first_message.setdefault(exc.status, exc.message)
            answer = Answer(rid, False, error=f"{exc.status}: {first}")
        except Exception as exc:  # a client library's own failure is an answer too
            sent = Sent()
            answer = Answer(rid, False, error=f"client error: {short(repr(exc))}")
        self._calls_s.append(time.monotonic() - began)
        count.resent += sent.resent  # counted on the loop's thread, read between levels
        count.connects += sent.connects
        return generation, answer

    # -- connections opened before the clock ----------------------------------------------

    async def probe(self, timeout_s: float) -> None:
        """One request, raising :class:`CallFailed` as a worker would count it."""
        await self.wire.call(self._conns[0].conn, self.body, timeout_s)

    def warm(self, timeout_s: float) -> float:
        """Send one request before any level; its seconds. Raises what the call raised, and
        keeps it in ``warmup``."""
        start = time.monotonic()
        try:
            self._run(self.probe(timeout_s), timeout_s + 5.0)
        except CallFailed as exc:
            self._kept(exc)
            raise
        finally:
            self._took(time.monotonic() - start, 1)
        return time.monotonic() - start

    def warm_all(self, timeout_s: float) -> None:
        """One request on every connection not warmed yet (the first is), before the clock;
        a failure is kept in ``warmup`` and that connection tried once more."""
        self._run(self._warm_each(self._conns[1:], timeout_s), 2 * timeout_s + 30.0)

    async def _warm_each(self, conns: list[_Conn], timeout_s: float) -> None:
        start = time.monotonic()

        async def one(held: _Conn) -> None:
            for _ in range(2):
                self._took(0.0, 1)
                try:
                    await self.wire.call(held.conn, self.body, timeout_s)
                    return
                except CallFailed as exc:
                    self._kept(exc)
                finally:
                    held.used = time.monotonic()

        for held in conns:  # one after the other: no burst of handshakes at the server
            await one(held)
        self._took(time.monotonic() - start, 0)

    def _kept(self, exc: CallFailed) -> None:
        self.warmup["retries"].append({"status": exc.status, "message": exc.message})

    def _took(self, seconds: float, requests: int) -> None:
        """Warm-up requests sent (each attempt counts) and the time they took."""
        self.warmup["requests"] += requests
        self.warmup["seconds"] += seconds

    def _needed(self, load: OpenLoop | ClosedLoop) -> int:
        """The connections ``load`` needs so that no request waits for one (module
        docstring)."""
        if isinstance(load, ClosedLoop):
            return load.concurrency
        typical = float(np.median(self._calls_s)) if self._calls_s else 0.0
        return max(1, math.ceil(load.rate * typical * HEADROOM))

    # -- what the load sweep asks of a server under test (tfperf.serving.load.UnderTest) --

    def label(self) -> str:
        return str(self.target["label"])

    def opened(self) -> int:
        """The connections the pool holds now."""
        return len(self._conns)

    def sweep_info(self) -> dict[str, Any]:
        return {
            "layout_label": self.label(),
            "target": self.target,
            **self.info,
            "connections": self.opened() or self.pool.connections,
            "connections_grow": self.pool.grow,
            "warmup": dict(self.warmup),
        }

    def memory(self) -> None:
        """A remote server's processes are not tfperf's to read."""
        return None

    def saturating_concurrency(self) -> int:
        """Every connection busy: where the SLO search's capacity probe starts."""
        return self.pool.connections

    def restart_dead(self) -> int:
        """Nothing of a remote server is ever restarted: 0."""
        return 0

    def begin_level(self, load: OpenLoop | ClosedLoop | None = None, probe: bool = False) -> None:
        """A new level: its counts start at 0, its connections are opened and warmed now
        (outside the clock), those idle since :data:`REWARM_IDLE_S` warmed again, and the
        server's statistics are read."""
        self._generation += 1
        self._run(self._rewarm(), 2 * self.call_timeout_s * max(1, len(self._conns)) + 60.0)
        if load is not None and (self.pool.grow or probe):
            need = min(self._needed(load), MAX_CONNECTIONS)
            missing = need - len(self._conns)
            if missing > 0:
                self._run(self._open_warmed(missing), 2 * self.call_timeout_s + 60.0)
        # a fixed pool's size is the user's, but for a probe: it gets a connection per request
        self.cap = len(self._conns) if self.pool.grow or probe else self.pool.connections
        self._stats_before = self._stats()

    async def _rewarm(self) -> None:
        """One request on every connection idle since :data:`REWARM_IDLE_S`: a connection the
        server closed while an earlier level left it unused is made again here, not by the
        level's first burst (a request that waits in the level's latency)."""
        now = time.monotonic()  # a connection still busy with a late answer is left alone
        idle = [held for held in self._idle if now - held.used > REWARM_IDLE_S]
        if idle:
            await self._warm_each(idle, self.call_timeout_s)

    async def _open_warmed(self, count: int) -> None:
        await self._warm_each(await self._open(count), self.call_timeout_s)

    def end_level(self) -> ServerSide:
        """What the client and the server saw of the level (module docstring)."""
        count = self._counts.pop(self._generation, _LevelCount())
        before, after = self._stats_before, self._stats()
        server_ms = None
        if isinstance(before, Counters) and isinstance(after, Counters):
            server_ms = per_request(before, after)
        return ServerSide(retried=count.resent, reconnects=count.connects, server_ms=server_ms)

    def _stats(self) -> Counters | str:
        """The server's statistics now, or why there are none (said once, in ``faults``)."""
        if isinstance(self._stats_before, str):
            return self._stats_before  # a server that keeps none is not asked again
        got = self._run(self._read_stats(), STATS_TIMEOUT_S + 5.0)
        if isinstance(got, str):
            self.faults.append(
                f"the server reports no time of its own ({got}): each level shows the "
                "client's latency alone, with no server queue or compute time beside it"
            )
        return got

    async def _read_stats(self) -> Counters | str:
        if self._stats_conn is None:
            self._stats_conn = await self.wire.open()
        return await self.wire.stats(self._stats_conn, STATS_TIMEOUT_S)

    # -- the generator's side (tfperf.serving.generator.Server) ---------------------------

    def room(self) -> bool:
        return self.in_flight < self.cap

    def submit(self, request_id: int) -> None:
        self.in_flight += 1
        self._loop.call_soon_threadsafe(self._assign, (self._generation, request_id))

    def _assign(self, item: tuple[int, int]) -> None:
        """On the loop: the request to the connection that came free last, else to the
        backlog the workers drain (``room`` keeps it empty but for a moment's race)."""
        if self._idle:
            self._idle.pop().inbox.put_nowait(item)
        else:
            self._backlog.append(item)

    def poll(self, timeout_s: float) -> list[Answer]:
        got: list[tuple[int, Answer]] = []
        try:
            got.append(
                self._answers.get(timeout=max(timeout_s, 0.0))
                if timeout_s > 0
                else self._answers.get_nowait()
            )
        except queue.Empty:
            return []
        while True:
            try:
                got.append(self._answers.get_nowait())
            except queue.Empty:
                break
        self.in_flight -= len(got)
        return [answer for generation, answer in got if generation == self._generation]

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        try:
            self._run(self._stop(), 30.0)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10.0)

    async def _stop(self) -> None:
        """Every task on the loop cancelled, and ended, before the connections close: a
        warm-up cut short by a Ctrl-C was seen sending on a connection closed under it (its
        error printed after the run's last sentence), so one that runs on past its
        cancellation is waited for rather than closed under."""
        running = [*self._tasks, *(t for t in self._runs if t is not asyncio.current_task())]
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        for held in self._conns:
            await self.wire.close(held.conn)
        if self._stats_conn is not None:
            await self.wire.close(self._stats_conn)

    def __enter__(self) -> RemoteServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
