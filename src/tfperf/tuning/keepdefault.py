"""Why a tune keeps the default, in a form a program can read and a person can trust.

Contract: :func:`keep_default_why` ``(candidates, default_ms, ...) -> dict`` classifies a
"keep the default" answer from tune's ranked candidate rows (:func:`tfperf.tuning.tuner.rank`)::

    {"case": "none_faster" | "over_ceiling" | "rejected" | "failed",
     "rejected": int, "over_ceiling": int, "failed": int,
     "best_rejected": {"label", "speedup", "max_rel_error", "guard_reason"?} | None,
     "best_over_ceiling": {"label", "speedup", "reason"} | None,
     "commonest_failure": str | None,
     "summary": str}

- ``"over_ceiling"``: a candidate faster than the default was rejected because its peak memory
  exceeds ``--max-memory-mb`` (its row has ``over_ceiling``; its ``reason`` gives both figures).
  ``best_over_ceiling`` is the fastest of them, its speedup estimated like a rejected one's.
  These are not counted in ``rejected``, which is the accuracy guard's.

- ``"rejected"``: a candidate faster than the default (by more than the threshold) was
  rejected by the accuracy guard. ``best_rejected`` is the fastest of them; its ``speedup`` is
  estimated from its warm-up (a rejected candidate is not timed further), per sample in a
  throughput tune; in a server tune (rows without ``time_ms``) it is the row's ratio of
  requests per second within the SLO, where one was measured.
- ``"failed"``: no candidate was both accepted and measured, and some failed (a conversion
  that fails, a worker that crashes or times out): ``commonest_failure`` names the reason most
  of them share.
- ``"none_faster"``: candidates were measured and none was significantly faster in the end.

``best_rejected`` is the fastest rejected candidate in every case (``None`` when none was
rejected), and ``commonest_failure`` the commonest reason whenever one failed.

:func:`rejection_advice` says what it usually means when every candidate of one family
(LiteRT, OpenVINO, reduced precision, XLA) was rejected by a wide margin.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

WIDE_MARGIN = 10.0
"""Rejected "by a wide margin": the smallest error of a family is this many times the limit."""

FAMILIES: dict[str, str] = {
    "litert": "LiteRT",
    "openvino": "OpenVINO",
    "precision": "reduced precision",
    "xla": "XLA",
    "xla-aot": "XLA AOT",
}

_MEANING = {
    "LiteRT": "the converter changed what the model computes (an op it replaced or dropped, "
    "a layer that behaves differently outside Keras) rather than its precision",
    "OpenVINO": "OpenVINO's conversion changed what the model computes rather than its "
    "precision",
    "reduced precision": "the model's outputs are too sensitive for 16-bit arithmetic "
    "(large activations, long sums)",
    "XLA": "XLA's fused kernels change the results (the model may compute with random ops, "
    "which XLA draws differently)",
    "XLA AOT": "the model compiled ahead of time computes something else than TensorFlow "
    "(random ops drawn differently, or an op whose XLA kernel differs), not a rounding "
    "difference",
}
_EVERYWHERE = (
    "every candidate was rejected by a wide margin: this usually means the outputs change "
    "from one call to the next (a layer that draws random numbers when called, Dropout run "
    "in training mode) or sit near zero, where a relative error means little (untrained "
    "weights: tune with the real weights and --inputs, or give --tolerance abs=...)"
)


def family(config: Mapping[str, Any]) -> str | None:
    """The family a candidate config belongs to (:data:`FAMILIES` values), or ``None``."""
    runtime = str(config.get("runtime") or "tf")
    if runtime.startswith("litert"):
        return FAMILIES["litert"]
    if runtime.startswith("openvino"):
        return FAMILIES["openvino"]
    if runtime == "xla-aot":
        return FAMILIES["xla-aot"]
    if (config.get("precision") or "fp32") != "fp32":
        return FAMILIES["precision"]
    if (config.get("xla") or "off") != "off":
        return FAMILIES["xla"]
    return None


def _per_unit(time_ms: float | None, batch: int | None, per_sample: bool) -> float | None:
    if not time_ms:
        return None
    return time_ms / (batch or 1) if per_sample else time_ms


def _best_rejected(
    rows: Sequence[Mapping[str, Any]], default_unit: float | None, per_sample: bool
) -> dict[str, Any] | None:
    best: dict[str, Any] | None = None
    for row in rows:
        unit = _per_unit(row.get("time_ms"), row.get("batch"), per_sample)
        # a server tune's rows carry the ratio of their rates within the SLO instead of a time
        speedup = default_unit / unit if default_unit and unit else _ratio(row)
        if best is None or (speedup or 0.0) > (best["speedup"] or 0.0):
            best = {
                "label": row["label"],
                "speedup": speedup,
                "max_rel_error": row.get("max_rel_error"),
                **({"guard_reason": row.get("reason")} if row.get("guard") else {}),
            }
    return best


def _ratio(row: Mapping[str, Any]) -> float | None:
    speedup = row.get("speedup")
    return speedup.get("median") if isinstance(speedup, Mapping) else None


def keep_default_why(
    candidates: Sequence[Mapping[str, Any]],
    default_ms: float | None,
    default_batch: int = 1,
    *,
    per_sample: bool = False,
    threshold: float = 0.03,
) -> dict[str, Any]:
    """The ``keep_default_why`` record of the module docstring."""
    refused = [c for c in candidates if c.get("status") == "rejected"]
    over = [c for c in refused if c.get("over_ceiling")]
    rejected = [c for c in refused if not c.get("over_ceiling")]
    failed = [c for c in candidates if c.get("status") == "failed"]
    measured = [c for c in candidates if c.get("status") == "measured"]
    default_unit = _per_unit(default_ms, default_batch, per_sample)
    best = _best_rejected(rejected, default_unit, per_sample)
    best_over = _best_rejected(over, default_unit, per_sample)
    if best_over:
        reason = next(c["reason"] for c in over if c["label"] == best_over["label"])
        best_over = {"label": best_over["label"], "speedup": best_over["speedup"],
                     "reason": reason}
    reasons = Counter(str(c.get("reason") or "failed") for c in failed)
    commonest = reasons.most_common(1)[0][0] if reasons else None
    if best_over and (best_over["speedup"] or 0.0) > 1.0 + threshold:
        case = "over_ceiling"
    elif best and (best["speedup"] or 0.0) > 1.0 + threshold:
        case = "rejected"
    elif failed and not measured:
        case = "failed"
    else:
        case = "none_faster"
    why = {
        "case": case,
        "rejected": len(rejected),
        "over_ceiling": len(over),
        "failed": len(failed),
        "best_rejected": best,
        "best_over_ceiling": best_over,
        "commonest_failure": commonest,
    }
    why["summary"] = summary(why, len(candidates))
    return why


def summary(why: Mapping[str, Any], tried: int) -> str:
    """One sentence for people: which case it is and the figures behind it."""
    best, case = why.get("best_rejected"), why["case"]
    over = why.get("best_over_ceiling")
    if case == "over_ceiling" and over:
        return (
            f"faster candidates need more memory than the ceiling: the fastest, "
            f"{over['label']}, ran about {over['speedup']:.2f}x the default's speed in its "
            f"warm-up but its {over['reason']}; {why['over_ceiling']} of {tried} candidates "
            "were over the ceiling"
        )
    if case == "rejected" and best and best.get("guard_reason"):
        return (
            f"faster candidates were rejected by the training guard: the fastest, "
            f"{best['label']}, ran about {best['speedup']:.2f}x the default's speed but did "
            f"not learn the same ({best['guard_reason']}); {why['rejected']} of {tried} "
            "candidates were rejected"
        )
    if case == "rejected" and best:
        error = best.get("max_rel_error")
        err = f" (max relative error {error:.3g})" if error is not None else ""
        return (
            f"faster candidates were rejected by the accuracy guard: the fastest, "
            f"{best['label']}, ran about {best['speedup']:.2f}x the default's speed in its "
            f"warm-up but changed the outputs too much{err}; {why['rejected']} of {tried} "
            "candidates were rejected"
        )
    if case == "failed":
        return (
            f"no candidate could be measured: {why['failed']} of {tried} failed, most often "
            f"with: {str(why['commonest_failure']).rstrip('.')}"
        )
    if not tried:
        return "no candidate was tried"
    return (
        f"no candidate was significantly faster than the default ({tried} tried, "
        f"{why['rejected']} rejected, {why['failed']} failed"
        + (f", {why['over_ceiling']} over the memory ceiling)" if why.get("over_ceiling") else ")")
    )


def rejection_advice(
    candidates: Sequence[Mapping[str, Any]], rel_limit: float | None
) -> list[str]:
    """What it usually means when every candidate of a family was rejected by a wide margin."""
    if not rel_limit:
        return []
    by_family: dict[str, list[Mapping[str, Any]]] = {}
    for row in candidates:
        name = family(row.get("config") or {})
        if name is not None:
            by_family.setdefault(name, []).append(row)

    def wide(rows: list[Mapping[str, Any]]) -> bool:
        errors = [r.get("max_rel_error") for r in rows]
        return all(r.get("status") == "rejected" for r in rows) and all(
            e is not None and e > WIDE_MARGIN * rel_limit for e in errors
        )

    hit = [name for name, rows in by_family.items() if wide(rows)]
    if len(hit) >= 2 and len(hit) == len(by_family):
        return [_EVERYWHERE]
    return [
        f"every {name} candidate was rejected by a wide margin (errors over "
        f"{WIDE_MARGIN:g}x the {rel_limit:g} limit): this usually means {_MEANING[name]}"
        for name in hit
    ]
