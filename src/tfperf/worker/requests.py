"""Worker side of serving under load: requests answered as they come, by a real server's parts.

Contract (the ``request`` op of the worker protocol, ``docs/ARCHITECTURE.md``):

- A worker started with a ``serving`` section in its ``init`` message (``max_batch``,
  ``max_delay_ms``, ``executors``) answers ``{"op": "request", "id": N}`` messages
  asynchronously: the main loop only queues the request, and each of ``executors`` threads
  takes requests from that queue and answers ``{"op": "response", "ids": [N, ...],
  "service_s": float, "error": null | "one sentence"}`` once the model call that served them
  returned (one message per call: a dynamic batch answers all its requests at once).
- The dynamic batcher (``max_batch`` > 1): an executor that took a request waits at most
  ``max_delay_ms`` for more, up to ``max_batch`` in all, and serves them with one call. A call
  of more than one request runs the model prepared at ``max_batch`` times the workload's batch
  (its sample rows repeated, as ``tile_to`` does), the way TensorFlow Serving pads a batch to
  its ``allowed_batch_sizes`` of ``[1, max_batch]``; a lone request runs the model at its own
  batch.
- A model call that raises answers its requests with ``error`` and the worker goes on serving;
  a crash ends the process and the parent counts what it had not answered as failed.
- ``executors`` > 1 serves that many calls at once, one executor thread each: for OpenVINO,
  its streams, each thread with an infer request of its own (``Prepared.new_call``), so that
  ``executors`` requests are in flight at once; for any other runtime, threads sharing one
  model (TensorFlow and LiteRT release the GIL while they compute).
- ``send`` (the worker's one writer of its result pipe) must be safe to call from any thread.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Batching:
    """The ``serving`` section of ``init`` (see the module docstring)."""

    max_batch: int = 1
    max_delay_s: float = 0.0
    executors: int = 1

    @classmethod
    def from_message(cls, section: dict[str, Any]) -> Batching:
        return cls(
            max_batch=max(1, int(section.get("max_batch") or 1)),
            max_delay_s=max(0.0, float(section.get("max_delay_ms") or 0.0)) / 1000.0,
            executors=max(1, int(section.get("executors") or 1)),
        )


class RequestServer:
    """The queue, the batcher and the executors of one worker (module docstring)."""

    def __init__(
        self,
        calls: dict[int, Callable[[], Callable[[], Any]]],
        batching: Batching,
        send: Callable[[dict[str, Any]], None],
        before_call: Callable[[], None] = lambda: None,
    ) -> None:
        self.calls = calls
        """By batch size (``1`` and, with batching, ``max_batch``): what makes an executor's
        model call (called once in each executor thread)."""
        self.batching = batching
        self.send = send
        self.before_call = before_call
        self._queue: queue.Queue[int] = queue.Queue()
        for _ in range(batching.executors):
            threading.Thread(target=self._serve, daemon=True).start()

    def submit(self, request_id: int) -> None:
        self._queue.put(int(request_id))

    def _take_batch(self) -> list[int]:
        ids = [self._queue.get()]
        deadline = time.perf_counter() + self.batching.max_delay_s
        while len(ids) < self.batching.max_batch:
            left = deadline - time.perf_counter()
            try:
                ids.append(self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait())
            except queue.Empty:
                break
        return ids

    def _serve(self) -> None:
        own = {size: make() for size, make in self.calls.items()}
        while True:
            ids = self._take_batch()
            call = own[1] if len(ids) == 1 else own[self.batching.max_batch]
            error = None
            t0 = time.perf_counter()
            try:
                self.before_call()
                call()
            except Exception as exc:  # answered as failed requests; the worker serves on
                error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            self.send(
                {
                    "op": "response",
                    "ids": ids,
                    "service_s": time.perf_counter() - t0,
                    "error": error,
                }
            )
