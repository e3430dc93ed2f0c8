"""``tfperf tune --ops``: the default and the answer profiled op by op, and the answer's text
naming the op families that account for most of the gain (or, when no candidate beat the default,
for most of the best candidate's loss).

Contract: :func:`profile_answer` runs after the confirmation, on the live workers of the default
and of the profiled candidate (the winner, else the best measured candidate), each profiling
about :data:`tfperf.benchmark.OPS_SECONDS` of calls under its runtime's own profiler
(``docs/ops.md``); it sets ``recommendation["ops"]`` to ``{"candidate", "default", "answer",
"families", "moved"}`` and appends ``moved`` to the recommendation's ``reason``. Each profile is
read against this machine's measured peak at its config's precision, as ``bench --ops`` reads
its own (:func:`tfperf.report.ops.read_roofline`, :func:`tfperf.peak.get_peak`). A worker that
fails while profiling leaves ``{"error"}`` there and the answer as it was.
"""

from __future__ import annotations

from typing import Any

from tfperf.core.config import Config
from tfperf.core.knobs import label
from tfperf.peak import get_peak
from tfperf.report.ops import OPS_SECONDS, align_types, moved_text, read_roofline
from tfperf.runner.handle import WorkerFailed
from tfperf.tuning.search import MEASURED


def _profiled_config(result: Any, winner: dict, candidates: list[dict]) -> dict | None:
    """The winner, or the best measured candidate when the default stays."""
    if winner:
        return winner
    best = next((c for c in candidates if c["status"] == MEASURED), None)
    if best is None:
        return None
    return next((o.config for o in result.outcomes if o.label == best["label"]), None)


def profile_answer(evaluator: Any, result: Any, winner: dict, candidates: list[dict],
                   recommendation: dict, peak: dict | None = None) -> None:
    """Profile the default and the answer (see the module docstring); ``peak`` is this
    machine's (:func:`tfperf.peak.get_peak`'s, probed when not given)."""
    config = _profiled_config(result, winner, candidates)
    if config is None:
        return
    timeout = evaluator.options.candidate_timeout_s
    try:
        default = evaluator.workers.get({}, timeout).worker.profile(OPS_SECONDS)
        answer = evaluator.workers.get(config, timeout).worker.profile(OPS_SECONDS)
    except WorkerFailed as exc:
        recommendation["ops"] = {"candidate": label(config), "error": exc.reason}
        return
    moved = moved_text(default, answer)
    peak = peak if peak is not None else get_peak()
    recommendation["ops"] = {
        "candidate": label(config),
        "default": read_roofline(default, peak, Config().precision),
        "answer": read_roofline(answer, peak, Config.from_dict(config).precision),
        "families": align_types(default, answer),
        "moved": moved,
    }
    if moved:
        whose = "" if winner else f" ({label(config)}, the best candidate)"
        recommendation["reason"] = f"{recommendation['reason']}; op profile{whose}: {moved}"
