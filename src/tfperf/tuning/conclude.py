"""The end of a tune: the candidates ranked, the winner confirmed against the default, the
recommendation (or the reason to keep the default) and the converted model written out.

Contract: :func:`rank` turns the search's outcomes into one row per candidate, best first.
:func:`conclude` confirms the search's winner against the default
(:meth:`tfperf.tuning.evaluate.Evaluator.confirm`) and returns the core of tune's document:
``{"default", "recommendation", "candidates", "warnings"}``. A candidate is recommended only
when its confirmation verdict is "faster" and its whole 95% interval lies above 1; otherwise the
recommendation is to keep the default, and ``keep_default_why`` says which case it is
(:mod:`tfperf.tuning.keepdefault`). :func:`export_artifact` copies the winner's converted model
and its snippet to the folder the user named.
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
from pathlib import Path
from typing import Any

from tfperf.core.errors import UserError
from tfperf.core.knobs import adoption, adoption_text, label, normalize
from tfperf.core.memory import cost, over_ceiling
from tfperf.core.stats import inverse
from tfperf.runner.handle import WorkerFailed
from tfperf.tuning.evaluate import Evaluator, samples_per_s
from tfperf.tuning.keepdefault import keep_default_why, rejection_advice
from tfperf.tuning.opsanswer import profile_answer
from tfperf.tuning.prune import removal_entry
from tfperf.tuning.search import FAILED, MEASURED, REJECTED, Outcome, SearchResult
from tfperf.tuning.space import to_config_dict


def _candidate_row(outcome: Outcome) -> dict:
    acc = outcome.accuracy or {}
    batch = outcome.info.get("batch")
    return {
        "label": outcome.label,
        "config": to_config_dict(outcome.config),
        "status": outcome.status,
        "reason": outcome.reason,
        "speedup": outcome.speedup,
        "time_ms": outcome.time_ms,
        "batch": batch,
        "samples_per_s": samples_per_s(outcome.time_ms, batch),
        "max_abs_error": acc.get("max_abs_error"),
        "max_rel_error": acc.get("max_rel_error"),
        "top1_agreement": acc.get("top1_agreement"),
        "metric": acc.get("metric"),
        "adoption": adoption(outcome.config),
        "artifact": outcome.info.get("artifact"),
        "notes": outcome.info.get("notes", []),
        "memory": outcome.info.get("memory"),
        **({"over_ceiling": True} if outcome.info.get("over_ceiling") else {}),
        **({"guard": acc["guard"]} if acc.get("guard") else {}),
    }


def rank(outcomes: list[Outcome]) -> list[dict]:
    """One row per distinct candidate (its latest measurement), best first.

    Measured candidates by speedup over the default (highest first), then rejected, then
    failed ones.
    """
    latest: dict[str, Outcome] = {}
    for o in outcomes:
        if o.status != MEASURED and o.label in latest and latest[o.label].status == MEASURED:
            continue
        if o.info.get("measured_again") and o.label in latest:
            continue  # a removal measured against the answer alone: no figure of the default
        latest[o.label] = o
    order = {MEASURED: 0, REJECTED: 1, FAILED: 2}

    def key(o: Outcome) -> tuple:
        median = (o.speedup or {}).get("median") or 0.0
        return (order[o.status], -median)

    return [_candidate_row(o) for o in sorted(latest.values(), key=key)]


def _keep_default(default_ms: float | None, batch: int) -> dict:
    return {
        "label": "default",
        "config": to_config_dict({}),
        "keep_default": True,
        "speedup": None,
        "adoption": "env",
        "adoption_text": "nothing to change",
        "artifact": None,
        "max_abs_error": 0.0,
        "max_rel_error": 0.0,
        "top1_agreement": None,
        "time_ms": default_ms,
        "batch": batch,
        "samples_per_s": samples_per_s(default_ms, batch),
        "notes": [],
        "reason": "no candidate was significantly faster than the default",
    }


def _recommend(winner: dict, row: dict, confirmed: dict) -> dict:
    keys = ("max_abs_error", "max_rel_error", "top1_agreement", "adoption", "artifact", "notes",
            "memory")
    return {
        "label": label(winner),
        "config": to_config_dict(winner),
        "keep_default": False,
        "reason": "significantly faster than the default in the confirmation round",
        "speedup": confirmed,
        "time_ms": confirmed["candidate_ms"],
        "batch": confirmed["candidate_batch"],
        "samples_per_s": confirmed["candidate_samples_per_s"],
        **{k: row[k] for k in keys},
        "adoption_text": adoption_text(winner),
        **({"guard": row["guard"]} if row.get("guard") else {}),
    }


def _not_confirmed(winner: dict, confirmed: dict) -> str:
    low = (confirmed.get("ci95") or [None])[0]
    return (
        f"the best candidate ({label(winner)}) was not significantly faster in the "
        f"confirmation round (verdict {confirmed['verdict']}, 95% CI from "
        f"{low if low is None else format(low, '.2f')})"
    )


def conclude(evaluator: Evaluator, result: Any, confirm_rounds: int, ready: dict) -> dict:
    """Confirm the winner against the default and build the document's core."""
    candidates = rank(result.outcomes)
    tail = (ready.get("warmup") or {}).get("samples_s", [])[-5:]
    default_ms = statistics.median(tail) * 1e3 if tail else None
    default_batch = evaluator.default_batch
    winner = normalize(result.incumbent)
    warnings: list[str] = []
    recommendation = _keep_default(default_ms, default_batch)
    if winner:
        try:
            confirmed = evaluator.confirm(winner, confirm_rounds)
        except WorkerFailed as exc:
            confirmed = None
            warnings.append(f"the winner failed during confirmation: {exc.reason}")
        row = next(c for c in candidates if c["label"] == label(winner))
        if confirmed and significantly_faster(confirmed):
            recommendation = _recommend(winner, row, confirmed)
            default_ms = confirmed["default_ms"]
        elif confirmed:
            recommendation["reason"] = _not_confirmed(winner, confirmed)
            recommendation["speedup"] = confirmed
    _explain_keep_default(recommendation, candidates, evaluator, default_ms, bool(winner))
    if evaluator.options.ops:
        profile_answer(evaluator, result, winner, candidates, recommendation)
    warnings += rejection_advice(candidates, evaluator.options.tolerance.rel)
    default = {
        "time_ms": default_ms,
        "batch": default_batch,
        "samples_per_s": samples_per_s(default_ms, default_batch),
        "memory": evaluator.default_memory.to_dict() if evaluator.default_memory else None,
    }
    if recommendation["keep_default"]:
        recommendation["memory"] = default["memory"]
    default_over = over_ceiling(evaluator.default_memory, evaluator.options.max_memory_mb)
    if default_over:
        warnings.append(f"the default itself is over the memory ceiling: its {default_over}")
    _costs(evaluator, default, recommendation)
    return {
        "default": default,
        "recommendation": recommendation,
        "candidates": candidates,
        "warnings": warnings,
    }


def _costs(evaluator: Evaluator, default: dict, recommendation: dict) -> None:
    """``cost`` for the default and the answer with ``--price-per-hour`` (``docs/memory.md``):
    a latency tune's throughput is one stream of calls, a training tune's samples trained, and
    the record says which."""
    options = evaluator.options
    if evaluator.workload.get("kind") == "train":
        basis = "samples trained"
    else:
        basis = "throughput" if options.goal == "throughput" else "one stream of calls"
    for entry in (default, recommendation):
        priced = cost(options.price_per_hour, entry.get("samples_per_s"))
        entry["cost"] = dict(priced, basis=basis) if priced else None


def _explain_keep_default(
    recommendation: dict,
    candidates: list[dict],
    evaluator: Evaluator,
    default_ms: float | None,
    confirmed: bool,
) -> None:
    """Say which case a "keep the default" is (:mod:`tfperf.tuning.keepdefault`); ``None``
    otherwise. A winner that failed its confirmation keeps that sentence unless faster
    candidates were rejected, which the user must hear first."""
    if not recommendation["keep_default"]:
        recommendation["keep_default_why"] = None
        return
    why = keep_default_why(
        candidates,
        default_ms,
        evaluator.default_batch,
        per_sample=evaluator.per_sample,
        threshold=evaluator.threshold,
    )
    recommendation["keep_default_why"] = why
    if not confirmed or why["case"] != "none_faster":
        recommendation["reason"] = why["summary"]


def significantly_faster(speedup: dict) -> bool:
    """The confirmation's verdict is "faster" and its whole 95% interval lies above 1."""
    low = (speedup.get("ci95") or [None])[0]
    return speedup.get("verdict") == "faster" and low is not None and low > 1.0


ARTIFACT_SUFFIXES = (
    ".tflite", ".xml", ".bin", ".py", ".so", ".h", ".o", ".cc", ".json", ".a", ".sh",
)
"""The files of a variant's folder an adopter needs: the model (LiteRT, OpenVINO, or the
xla-aot library with its header, objects, runtime archive, metadata, C++ sources and build
script) and its Python snippet."""


def export_artifact(recommendation: dict, out_dir: str | Path | None) -> str | None:
    """Copy the winner's converted model and its snippet to ``out_dir``; the folder or None."""
    artifact = recommendation.get("artifact")
    if not artifact or out_dir is None:
        return None
    source = Path(artifact).parent
    target = Path(out_dir).expanduser()
    try:
        target.mkdir(parents=True, exist_ok=True)
        for item in source.iterdir():
            if item.suffix in ARTIFACT_SUFFIXES:
                shutil.copy2(item, target / item.name)
    except OSError as exc:
        raise UserError(
            f"cannot write the converted model to {target} ({exc}); pass a writable --out-dir."
        ) from None
    snippet = target / "run_model.py"
    with contextlib.suppress(OSError):
        snippet.write_text(snippet.read_text().replace(str(source), str(target)))
    recommendation["artifact"] = str(target / Path(artifact).name)
    return str(target)


def kept_lines(result: SearchResult, recommendation: dict) -> list[dict]:
    """``recommendation.kept``: each knob of the answer with the measurement of the answer
    without it that keeps it, so that a reader can check every line: the pruning's
    (:mod:`tfperf.tuning.prune`), and for the knobs whose removal leaves the default (a
    one-knob answer, or a runtime with the knobs that act on it alone) the confirmation
    against the default, read the other way. Empty where the default is kept."""
    if recommendation.get("keep_default"):
        return []
    kept = [dict(entry) for entry in result.kept]
    named = {entry["knob"] for entry in kept}
    config = normalize(recommendation.get("config") or {})
    rest = {k: v for k, v in config.items() if k not in named}
    if not rest:
        return kept
    confirmation = Outcome({}, MEASURED, incumbent=config,
                           vs_incumbent=inverse(recommendation.get("speedup") or {}),
                           info={"read_from": "in the confirmation against the default"})
    for knob, value in rest.items():
        entry = removal_entry(knob, value, confirmation, None)
        entry["why"] = entry["why"].replace(
            f"without {knob}={entry['value']} the answer",
            f"without {label(rest)} (the default) the answer", 1)
        kept.append(entry)
    return kept
