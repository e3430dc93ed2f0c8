"""The server's own time per request, where the server keeps it: the statistics extension of the
Open Inference Protocol, as Triton serves it (``GET v2/models/NAME[/versions/V]/stats`` over
REST, ``ModelStatistics`` over gRPC).

Contract:

- :class:`Counters` (frozen) is one model's cumulative figures as the extension reports them
  (since the server started): ``inference_stats``' ``success``, ``queue``, ``compute_input``,
  ``compute_infer`` and ``compute_output``, each a request count and a total in nanoseconds.
  :func:`from_json` reads the REST answer (``{"model_stats": [...]}``) and :func:`from_proto`
  gRPC's ``ModelStatisticsResponse``; where the server reports several versions of the model
  and none was asked for, their figures are summed. A document without the model's entry (or
  not of that form) is the sentence saying so.
- :func:`per_request` ``(before, after)`` is the server's own time per request over a level:
  ``{"queue_ms", "compute_ms", "compute_infer_ms", "requests"}``, each the change of a total
  over the change of its count (the extension keeps sums, not distributions: these are means),
  ``compute_ms`` the input, infer and output stages together; ``None`` when no request
  succeeded in between.
- :data:`NONE_GIVEN` is the sentence for a protocol with no such extension (TensorFlow
  Serving's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

STAGES = ("success", "queue", "compute_input", "compute_infer", "compute_output")
NONE_GIVEN = "TensorFlow Serving's protocols have no statistics of the server's own time"


@dataclass(frozen=True)
class Duration:
    """A count and its total duration in nanoseconds (the extension's ``$duration_stat``)."""

    count: int = 0
    ns: int = 0

    def __add__(self, other: Duration) -> Duration:
        return Duration(self.count + other.count, self.ns + other.ns)

    def __sub__(self, other: Duration) -> Duration:
        return Duration(self.count - other.count, self.ns - other.ns)


@dataclass(frozen=True)
class Counters:
    """One model's cumulative statistics (module docstring)."""

    success: Duration = Duration()
    queue: Duration = Duration()
    compute_input: Duration = Duration()
    compute_infer: Duration = Duration()
    compute_output: Duration = Duration()

    def __add__(self, other: Counters) -> Counters:
        return Counters(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


def _duration(entry: Any) -> Duration:
    entry = entry if isinstance(entry, Mapping) else {}
    return Duration(int(entry.get("count") or 0), int(entry.get("ns") or 0))


def _mine(name: str, version: str | None, stat_name: str, stat_version: str) -> bool:
    return stat_name == name and (not version or stat_version == version)


def from_json(doc: Any, name: str, version: str | None) -> Counters | str:
    """The counters of ``name`` (``version``) in a REST statistics answer, or why not."""
    stats = doc.get("model_stats") if isinstance(doc, Mapping) else None
    if not isinstance(stats, list):
        return "its statistics answer has no model_stats"
    total: Counters | None = None
    for stat in stats:
        if not isinstance(stat, Mapping) or not _mine(
            name, version, str(stat.get("name")), str(stat.get("version") or "")
        ):
            continue
        inference = stat.get("inference_stats") or {}
        counters = Counters(*(_duration(inference.get(stage)) for stage in STAGES))
        total = counters if total is None else total + counters
    return total if total is not None else f"its statistics name no model {name!r}"


def from_proto(answer: Any, name: str, version: str | None) -> Counters | str:
    """The counters of ``name`` (``version``) in a gRPC ``ModelStatisticsResponse``."""
    total: Counters | None = None
    for stat in answer.model_stats:
        if not _mine(name, version, stat.name, stat.version):
            continue
        inference = stat.inference_stats
        counters = Counters(*(
            Duration(getattr(inference, s).count, getattr(inference, s).ns) for s in STAGES
        ))
        total = counters if total is None else total + counters
    return total if total is not None else f"its statistics name no model {name!r}"


def _mean_ms(change: Duration) -> float | None:
    return change.ns / change.count / 1e6 if change.count > 0 else None


def per_request(before: Counters, after: Counters) -> dict[str, Any] | None:
    """The server's own time per request between two readings (module docstring)."""
    served = after.success.count - before.success.count
    if served <= 0:
        return None
    compute = (after.compute_input - before.compute_input) + (
        after.compute_infer - before.compute_infer) + (
        after.compute_output - before.compute_output)
    infer = after.compute_infer - before.compute_infer
    # each stage's total over the requests it counted; the three compute stages each count
    # every request they saw, so their sum over the infer stage's count is the per-request time
    per = Duration(infer.count, compute.ns)
    return {
        "queue_ms": _mean_ms(after.queue - before.queue),
        "compute_ms": _mean_ms(per),
        "compute_infer_ms": _mean_ms(infer),
        "requests": served,
    }
