"""A server the user runs, as the load generator drives it: a :class:`~tfperf.serving.generator.
Server` whose requests go over the network.

Contract:

- :class:`RemoteServer` runs an asyncio event loop on a thread of its own with ``connections``
  workers, each holding one connection of the :class:`~tfperf.serving.remote.wire.Wire` (a
  kept-alive HTTP connection, or a gRPC channel) and sending one request at a time. The
  generator's thread calls ``room`` (fewer than ``connections`` requests in flight), ``submit``
  (hands a request id to the loop) and ``poll`` (answers as they arrive, waiting at most the
  time given): the generator's own queue holds what finds no free connection, and the latency
  still counts from the scheduled arrival.
- Every call is bounded by ``call_timeout_s`` from its send; the generator gives the request
  up ``timeout_s`` after its arrival (no later), so a stalled server ends a level by itself
  and its connections come free again when their calls time out.
- An error answer is a failed :class:`~tfperf.serving.generator.Answer` whose error is its
  status and the **first** message that status came with (``"HTTP 500: ..."``), so failures
  are counted by status and the first message is kept.
- ``restart_dead`` (called by the sweep before each level) starts a new level: an answer of a
  request sent in an earlier level (request ids start again at 0 each level) is not handed to
  the generator, which gave it up already. ``retried()`` is how many times the wire sent a
  request of the current level again (answered or failed), for the level's ``retried``.
- :meth:`RemoteServer.close` cancels every call and closes every connection. Nothing here
  contacts any address but the wire's target.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Mapping
from typing import Any

from tfperf.core.config import Config
from tfperf.core.serving import ServingLayout
from tfperf.serving.generator import Answer
from tfperf.serving.remote.wire import CallFailed, Wire, short


class RemoteServer:
    """The server under test behind ``--url`` (module docstring)."""

    config = Config()
    """Nothing of a remote server is tfperf's to configure: the default config, recorded as such."""
    layout = ServingLayout()

    def __init__(
        self,
        wire: Wire,
        body: Any,
        connections: int,
        call_timeout_s: float,
        target: Mapping[str, Any] | None = None,
        info: Mapping[str, Any] | None = None,
    ) -> None:
        self.target = {**(target or {}), "label": (target or {}).get("label", "remote")}
        self.info = dict(info or {})
        self.wire = wire
        self.body = body
        self.connections = connections
        self.call_timeout_s = call_timeout_s
        self.faults: list[str] = []
        self.in_flight = 0
        self.first_message: dict[str, str] = {}
        self._generation = 0
        self._resent: dict[int, int] = {}
        self._answers: queue.SimpleQueue[tuple[int, Answer]] = queue.SimpleQueue()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._pending: asyncio.Queue[tuple[int, int]] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._conns: list[Any] = []

    def _run(self, coro: Any, timeout_s: float) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    def start(self) -> RemoteServer:
        self._thread.start()
        self._run(self._start(), 60.0)
        return self

    async def _start(self) -> None:
        self._pending = asyncio.Queue()
        self._conns = [await self.wire.open() for _ in range(self.connections)]
        self._tasks = [asyncio.ensure_future(self._worker(conn)) for conn in self._conns]

    async def _worker(self, conn: Any) -> None:
        assert self._pending is not None
        while True:
            generation, rid = await self._pending.get()
            resent = 0
            try:
                resent = await self.wire.call(conn, self.body, self.call_timeout_s)
                answer = Answer(rid, True)
            except CallFailed as exc:
                resent = exc.resent
                first = self.first_message.setdefault(exc.status, exc.message)
                answer = Answer(rid, False, error=f"{exc.status}: {first}")
            except Exception as exc:  # a client library's own failure is an answer too
                answer = Answer(rid, False, error=f"client error: {short(repr(exc))}")
            if resent:  # counted on the loop's thread; read after the level, on the other
                self._resent[generation] = self._resent.get(generation, 0) + resent
            self._answers.put((generation, answer))

    async def probe(self, timeout_s: float) -> None:
        """One request, raising :class:`CallFailed` as a worker would count it."""
        await self.wire.call(self._conns[0], self.body, timeout_s)

    def warm(self, timeout_s: float) -> float:
        """Send one request before any level; its seconds. Raises what the call raised."""
        start = time.monotonic()
        self._run(self.probe(timeout_s), timeout_s + 5.0)
        return time.monotonic() - start

    # what the load sweep asks of a server under test (tfperf.serving.load.UnderTest)
    def label(self) -> str:
        return str(self.target["label"])

    def sweep_info(self) -> dict[str, Any]:
        return {
            "layout_label": self.label(),
            "target": self.target,
            **self.info,
            "connections": self.connections,
        }

    def memory(self) -> None:
        """A remote server's processes are not tfperf's to read."""
        return None

    def saturating_concurrency(self) -> int:
        """Every connection busy: the closed-loop probe of the SLO search."""
        return self.connections

    # the generator's side (tfperf.serving.generator.Server)
    def room(self) -> bool:
        return self.in_flight < self.connections

    def submit(self, request_id: int) -> None:
        self.in_flight += 1
        assert self._pending is not None
        item = (self._generation, request_id)
        self._loop.call_soon_threadsafe(self._pending.put_nowait, item)

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

    def retried(self) -> int:
        """Requests of the current level sent again (module docstring)."""
        return self._resent.get(self._generation, 0)

    def restart_dead(self) -> int:
        """A new level begins (module docstring); nothing is ever restarted: 0."""
        self._generation += 1
        return 0

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        try:
            self._run(self._stop(), 30.0)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10.0)

    async def _stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for conn in self._conns:
            await self.wire.close(conn)

    def __enter__(self) -> RemoteServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
