"""The harness's own floor: what tfperf and this machine add to every request, apart from the model.

Contract:

- :func:`measure_floor` offers a short level of the same load (the same concurrency, or the
  same rate with the same seeded arrivals) to the same instances, every request sent as
  ``null``: each instance reads it, queues it, hands it to its executor and answers it as it
  answers any request, but skips the model call (:mod:`tfperf.worker.requests`). Its latency
  (from the scheduled arrival, as a level's) is the harness's floor at that load: the
  generator, the pipes, the worker's threads and this machine's wake-ups (and, where the
  layout batches, the batcher's wait for a batch to fill: the floor keeps that delay, so that
  its note can name it). It returns a :class:`tfperf.serving.levels.HarnessFloor`, or
  ``None`` when no null request was answered.
- A floor level is short -- at least :data:`FLOOR_REQUESTS` requests and :data:`FLOOR_S`
  seconds, never past :data:`FLOOR_MAX_S` (fewer requests at a low rate) -- so that the floor
  of every level costs a load run a fraction of a second per level. Its p50 is shown; its p99
  only where it stands on enough requests, as a level's (:mod:`tfperf.serving.tail`).
- :class:`NullCalls` is the harness seen by the generator with every request sent ``null``.
- :func:`breakdown` splits traced requests (:attr:`tfperf.serving.harness.Harness.traced`)
  into the stages of :data:`STAGES`, each stage's p50 and p99 in ms.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tfperf.serving.generator import Answer, ClosedLoop, OpenLoop, run_level
from tfperf.serving.harness import Harness
from tfperf.serving.levels import HarnessFloor
from tfperf.serving.tail import LevelLength, stands

FLOOR_REQUESTS = 200
FLOOR_S = 0.2
FLOOR_MAX_S = 0.4
FLOOR_LENGTH = LevelLength(FLOOR_REQUESTS, FLOOR_S, FLOOR_MAX_S)
"""A floor level stops at its minimums: its figures are a share, not an answer."""


class NullCalls:
    """``harness`` as a :class:`tfperf.serving.generator.Server` whose requests are all null."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness

    def room(self) -> bool:
        return self.harness.room()

    def submit(self, request_id: int) -> None:
        self.harness.submit(request_id, null=True)

    def poll(self, timeout_s: float) -> list[Answer]:
        return self.harness.poll(timeout_s)


def floor_load(load: OpenLoop | ClosedLoop) -> OpenLoop | ClosedLoop:
    """The floor's level of ``load``: the same concurrency or rate (and seed), short."""
    if isinstance(load, OpenLoop):
        return OpenLoop(load.rate, FLOOR_LENGTH, seed=load.seed)
    return ClosedLoop(load.concurrency, FLOOR_LENGTH)


def measure_floor(
    harness: Harness, load: OpenLoop | ClosedLoop, timeout_s: float
) -> HarnessFloor | None:
    """The harness's floor at ``load`` (module docstring)."""
    record = run_level(NullCalls(harness), floor_load(load), timeout_s)
    if not record.completed:
        return None
    lat = np.asarray(record.latencies_s + record.waited_s, dtype=float) * 1000.0
    layout = harness.layout
    return HarnessFloor(
        p50_ms=float(np.quantile(lat, 0.5)),
        p99_ms=float(np.quantile(lat, 0.99)) if stands(lat.size, 0.99) else None,
        requests=record.completed,
        batch_delay_ms=layout.max_delay_ms if layout.max_batch > 1 else 0.0,
    )


STAGES = (
    ("to worker", "submit", "received",
     "sent, through the pipe; the instance's main thread wakes and reads it"),
    ("to executor", "received", "taken", "queued; the executor thread wakes and takes it"),
    ("model call", "call0", "call1", "the model call"),
    ("answer", "call1", "woke", "the answer written, through the pipe; the generator wakes"),
    ("read", "woke", "read", "the generator reads and parses the answer"),
)
"""Each stage: its name, the stamps it runs between, and what it holds. Every boundary is
stamped after what came before it happened (a stamp taken after the parent's write returned
could come after the instance had already read the request)."""


def breakdown(traced: Mapping[int, Mapping[str, Any]]) -> dict[str, tuple[float, float]]:
    """Per stage of :data:`STAGES` (and ``"total"``, submit to read), its p50 and p99 in ms
    over the fully traced requests of ``traced``."""
    rows = [_stamps(t) for t in traced.values()]
    rows = [r for r in rows if r is not None]
    if not rows:
        return {}
    out = {}
    for name, start, end, _ in (*STAGES, ("total", "submit", "read", "")):
        ms = np.asarray([r[end] - r[start] for r in rows]) * 1000.0
        out[name] = (float(np.quantile(ms, 0.5)), float(np.quantile(ms, 0.99)))
    return out


def _stamps(trace: Mapping[str, Any]) -> dict[str, float] | None:
    if trace.get("received") is None or "submit" not in trace:
        return None
    call0, call1 = trace["call"]
    return {**{k: float(v) for k, v in trace.items() if k != "call"}, "call0": call0,
            "call1": call1}
