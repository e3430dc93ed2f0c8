"""Worker side of serving under load: requests answered as they come, by a real server's parts.

Contract (the ``request`` op of the worker protocol, ``docs/ARCHITECTURE.md``):

- A worker started with a ``serving`` section in its ``init`` message (``max_batch``,
  ``max_delay_ms``, ``executors``) answers ``{"op": "request", "id": N}`` messages
  asynchronously: the main loop only queues the request, and each of ``executors`` threads
  takes requests from that queue and answers ``{"op": "response", "ids": [N, ...],
  "service_s": float, "error": null | "one sentence"}`` once the model call that served them
  returned (one message per call: a dynamic batch answers all its requests at once). (Serving
  each request on the main thread instead, without the executor's wake-up, was measured at
  200 requests per second: the floor did not fall and the model's calls took longer,
  ``docs/serving.md``.)
- The dynamic batcher (``max_batch`` > 1): an executor that took a request waits at most
  ``max_delay_ms`` for more, up to ``max_batch`` in all, and serves them with one call. A call
  of more than one request runs the model prepared at ``max_batch`` times the workload's batch
  (its sample rows repeated, as ``tile_to`` does), the way TensorFlow Serving pads a batch to
  its ``allowed_batch_sizes`` of ``[1, max_batch]``; a lone request runs the model at its own
  batch.
- A model call that raises answers its requests with ``error`` and the worker goes on serving;
  a crash ends the process and the parent counts what it had not answered as failed.
- ``executors`` > 1 serves that many calls at once, one executor thread each, sharing one
  model (TensorFlow and LiteRT release the GIL while they compute).
- OpenVINO with a performance hint or streams is served the way OpenVINO serves
  (:class:`AsyncServer`): one dispatcher thread hands each request to an ``AsyncInferQueue``
  of as many infer requests as the compiled model asks for (``OPTIMAL_NUMBER_OF_INFER_REQUESTS``;
  ``start_async`` waits while all are busy), and each request's callback reads its outputs
  back to host arrays (the timed-call contract, ``docs/timed-call.md``) and answers. One request
  per call: no dynamic batcher.
- A request with ``"null": true`` goes the same way (queue, batcher, executor) and is
  answered the same way, but its call (and the testing hook before it) is skipped; a batch
  calls the model unless every request in it is null. That is the harness's own floor
  (``docs/serving.md``), measured on the instance as it serves.
- With ``trace`` in the section, each response also carries ``"trace": {"read": [t, ...],
  "taken", "call": [t0, t1]}``: ``time.monotonic()`` (the clock the parent's load generator
  reads, the same in every process on Linux) when the main loop had read each request, when
  an executor took the batch, and around the call (whose end is just before the answer is
  written).
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
    trace: bool = False

    @classmethod
    def from_message(cls, section: dict[str, Any]) -> Batching:
        return cls(
            max_batch=max(1, int(section.get("max_batch") or 1)),
            max_delay_s=max(0.0, float(section.get("max_delay_ms") or 0.0)) / 1000.0,
            executors=max(1, int(section.get("executors") or 1)),
            trace=bool(section.get("trace")),
        )


Queued = tuple[int, bool, float]
"""A request waiting for an executor: its id, whether it is null, when it was read."""


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
        self._queue: queue.Queue[Queued] = queue.Queue()
        for _ in range(batching.executors):
            threading.Thread(target=self._serve, daemon=True).start()

    def submit(self, request_id: int, null: bool = False, read_at: float = 0.0) -> None:
        self._queue.put((int(request_id), null, read_at))

    def _take_batch(self) -> list[Queued]:
        taken = [self._queue.get()]
        deadline = time.perf_counter() + self.batching.max_delay_s
        while len(taken) < self.batching.max_batch:
            left = deadline - time.perf_counter()
            try:
                taken.append(
                    self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
                )
            except queue.Empty:
                break
        return taken

    def _serve(self) -> None:
        own = {size: make() for size, make in self.calls.items()}
        while True:
            self._answer(self._take_batch(), own)

    def _answer(self, taken: list[Queued], own: dict[int, Callable[[], Any]]) -> None:
        """Serve ``taken`` with one call of ``own`` model calls and answer them."""
        taken_at = time.monotonic() if self.batching.trace else 0.0
        call = own[1] if len(taken) == 1 else own[self.batching.max_batch]
        error = None
        t0 = time.perf_counter()
        try:
            if not all(null for _, null, _ in taken):
                self.before_call()
                call()
        except Exception as exc:  # answered as failed requests; the worker serves on
            error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        t1 = time.perf_counter()
        answer = {"op": "response", "ids": [rid for rid, _, _ in taken],
                  "service_s": t1 - t0, "error": error}
        if self.batching.trace:
            answer["trace"] = _trace(taken, taken_at, t1 - t0)
        self.send(answer)


def _trace(taken: list[Queued], taken_at: float, call_s: float) -> dict[str, Any]:
    """The ``trace`` of a response (module docstring); the call ended ``call_s`` after it began,
    just before this."""
    now = time.monotonic()
    return {"read": [at for _, _, at in taken], "taken": taken_at, "call": [now - call_s, now]}


class AsyncServer:
    """OpenVINO's asynchronous requests serving one worker's requests (module docstring)."""

    def __init__(
        self,
        make_queue: Callable[[], tuple[Any, Any]],
        send: Callable[[dict[str, Any]], None],
        before_call: Callable[[], None] = lambda: None,
        trace: bool = False,
    ) -> None:
        self.queue, self.inputs = make_queue()
        self.trace = trace
        self.jobs = len(self.queue)
        """The infer requests in flight at most (what the compiled model asked for)."""
        self.send = send
        self.before_call = before_call
        self.queue.set_callback(self._done)
        self._pending: queue.Queue[Queued] = queue.Queue()
        threading.Thread(target=self._dispatch, daemon=True).start()

    def submit(self, request_id: int, null: bool = False, read_at: float = 0.0) -> None:
        self._pending.put((int(request_id), null, read_at))

    def _dispatch(self) -> None:
        while True:
            queued = self._pending.get()
            t0 = time.perf_counter()
            userdata = (queued, t0, time.monotonic())
            if queued[1]:  # a null request: answered without an infer request
                self._answer(userdata, None)
                continue
            try:
                self.before_call()
                self.queue.start_async(self.inputs, userdata=userdata)
            except Exception as exc:  # answered as a failed request; the worker serves on
                self._answer(userdata, f"{type(exc).__name__}: {exc}")

    def _done(self, request: Any, userdata: tuple[Queued, float, float]) -> None:
        error = None
        try:
            for index in range(len(request.model_outputs)):
                request.get_output_tensor(index).data.copy()  # host arrays out, as timed
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        self._answer(userdata, error)

    def _answer(self, userdata: tuple[Queued, float, float], error: str | None) -> None:
        queued, t0, taken_at = userdata
        service_s = time.perf_counter() - t0
        answer = {
            "op": "response",
            "ids": [queued[0]],
            "service_s": service_s,
            "error": None if error is None else error.splitlines()[0][:300],
        }
        if self.trace:
            answer["trace"] = _trace([queued], taken_at, service_s)
        self.send(answer)
