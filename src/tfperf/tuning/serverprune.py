"""The fewest changes that keep a served layout's rate: a server tune's answer pruned.

Contract: :func:`prune_layout` ``(judge, winner, pairs, say) -> LayoutPruning`` takes the
server search's answer of two dimensions or more (:func:`dimensions`: where it differs from
the default layout, one instance of TensorFlow without batching) and tries it with each of
them set back to the default's in turn (:func:`without`), in :data:`REMOVAL_ORDER`. Each
removal is measured as the confirmation measures an answer (:func:`measure_removal`): ``pairs``
alternating SLO searches of the answer and of the answer without the dimension (trials of role
``"removal"``), their rates within the SLO compared pair by pair
(:func:`tfperf.core.stats.paired_speedup` on the inverse rates). The rule is every pruning's
(:func:`tfperf.tuning.prune.decision`): significantly slower without it, the dimension stays;
as fast, it goes; undecided, the removal is measured again (``pairs`` more pairs, fresh
instances, as every SLO search starts its own) and goes where it is still not significantly
slower. A removal that met the SLO at no rate in one of its searches, where the answer met it
in all of its, is slower. A dimension whose removal leaves the default is left to the
confirmation, which judges the whole answer. The search's single SLO searches are never the
evidence: a layout step there needs only a rate 5% above its incumbent's in one search each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from tfperf.core.knobs import label, normalize
from tfperf.core.serving import DEFAULT_LAYOUT
from tfperf.core.stats import MIN_PAIRS, inverse, paired_speedup
from tfperf.tuning.prune import AGAIN, decision, removal_entry
from tfperf.tuning.search import MEASURED, Outcome
from tfperf.tuning.server import DEFAULT_CANDIDATE, ServerCandidate, alternating_rates

REMOVAL_ORDER = ("hint", "streams", "delay", "batch", "shape", "runtime")
"""OpenVINO's ways of serving and the batcher's delay first (the finest adjustments), the
runtime last: fewer changes win ties, the largest last."""


@dataclass(frozen=True)
class LayoutPruning:
    """The pruned answer and the measurements behind each of its dimensions."""

    answer: ServerCandidate
    kept: tuple[dict, ...] = ()
    pruned: tuple[dict, ...] = ()


def dimensions(candidate: ServerCandidate) -> list[str]:
    """The dimensions in which ``candidate`` differs from the default, in removal order."""
    layout, default = candidate.layout, DEFAULT_LAYOUT
    differs = {
        "runtime": bool(normalize(dict(candidate.config))),
        "shape": (layout.instances, layout.threads, layout.pinned)
        != (default.instances, default.threads, default.pinned),
        "batch": layout.max_batch != default.max_batch,
        "delay": layout.max_delay_ms != default.max_delay_ms,
        "streams": layout.streams != default.streams,
        "hint": layout.hint != default.hint,
    }
    return [d for d in REMOVAL_ORDER if differs[d]]


def without(candidate: ServerCandidate, dimension: str) -> ServerCandidate:
    """``candidate`` with ``dimension`` at the default's value (the runtime taken away takes
    OpenVINO's streams and hint with it; the batch its delay)."""
    layout, default = candidate.layout, DEFAULT_LAYOUT
    if dimension == "runtime":
        return ServerCandidate({}, replace(layout, streams=None, hint=None))
    changes: dict[str, Any] = {
        "shape": {"instances": default.instances, "threads": default.threads,
                  "cores": default.cores},
        "batch": {"max_batch": default.max_batch, "max_delay_ms": default.max_delay_ms},
        "delay": {"max_delay_ms": default.max_delay_ms},
        "streams": {"streams": default.streams},
        "hint": {"hint": default.hint},
    }[dimension]
    return replace(candidate, layout=replace(layout, **changes))


def value_of(candidate: ServerCandidate, dimension: str) -> str:
    """How ``candidate`` sets ``dimension``, as its label writes it."""
    layout = candidate.layout
    threads = f"{layout.threads}t" if layout.threads else ""
    return {
        "runtime": label(dict(candidate.config)).removeprefix("runtime="),
        "shape": f"{layout.instances}x{threads}{' pinned' if layout.pinned else ''}",
        "batch": str(layout.max_batch),
        "delay": f"{layout.max_delay_ms:g} ms",
        "streams": str(layout.streams),
        "hint": str(layout.hint),
    }[dimension]


def measure_removal(judge: Any, answer: ServerCandidate, smaller: ServerCandidate,
                    pairs: int) -> Outcome:
    """``pairs`` alternating SLO searches of ``answer`` and ``smaller``: an outcome whose
    ``vs_incumbent`` is ``smaller``'s rate over ``answer``'s, pair by pair (module
    docstring)."""
    judge.progress.phase(f"measuring {smaller.key()} against {answer.key()}")
    rates = alternating_rates(judge, [("answer", answer), ("smaller", smaller)], pairs,
                              "removal")
    return removal_outcome(rates, judge.options.threshold)


def removal_outcome(rates: dict[str, list[float | None]], threshold: float) -> Outcome:
    """The removal's :class:`~tfperf.tuning.search.Outcome` from the rates of its searches:
    slower where the removal met the SLO at no rate in one of them and the answer did in
    all of its."""
    missed = {side: any(not q for q in values) for side, values in rates.items()}
    info = {"rates": rates}
    if missed["smaller"] and not missed["answer"]:
        n = sum(not q for q in rates["smaller"])
        vs = {"verdict": "slower", "median": 0.0, "ci95": [0.0, 0.0], "p_value": None,
              "n_pairs": len(rates["smaller"]),
              "reason": f"it met the SLO at no rate in {n} of its searches"}
        return Outcome({}, MEASURED, vs_incumbent=vs, info=info)
    times = [[1.0 / q if q else float("inf") for q in rates[s]] for s in ("answer", "smaller")]
    return Outcome({}, MEASURED, vs_incumbent=paired_speedup(*times, threshold), info=info)


def prune_layout(
    judge: Any, winner: ServerCandidate, pairs: int,
    say: Callable[[str], None] = lambda _text: None,
) -> LayoutPruning:
    """``winner`` without the dimensions it does not need (module docstring), each removal
    measured in ``pairs`` pairs, at least :data:`~tfperf.core.stats.MIN_PAIRS`: with fewer
    none could be significantly slower, and every dimension would go."""
    pairs = max(pairs, MIN_PAIRS)
    answer, kept, pruned = winner, [], []
    for dimension in dimensions(winner):
        if len(dimensions(answer)) < 2 or dimension not in dimensions(answer):
            continue  # one left: the confirmation against the default judges it
        smaller = without(answer, dimension)
        if smaller == DEFAULT_CANDIDATE:
            continue
        first = measure_removal(judge, answer, smaller, pairs)
        again = measure_removal(judge, answer, smaller, pairs) if (
            decision(first) == AGAIN) else None
        entry = removal_entry(dimension, value_of(answer, dimension), first, again,
                              without_label=smaller.key())
        say(entry["why"])
        if entry["kept"]:
            kept.append(entry)
        else:
            pruned.append(entry)
            answer = smaller
    return LayoutPruning(answer, tuple(kept), tuple(pruned))


def confirmed_entries(pruning: LayoutPruning, recommendation: dict) -> list[dict]:
    """``recommendation.kept`` of a server tune: the pruning's, and for the dimensions whose
    removal was left to it the confirmation against the default, read the other way."""
    if recommendation.get("keep_default"):
        return []
    kept = [dict(entry) for entry in pruning.kept]
    named = {entry["knob"] for entry in kept}
    ratio = (recommendation.get("confirmation") or {}).get("ratio") or {}
    for dimension in dimensions(pruning.answer):
        if dimension in named:
            continue
        confirmation = Outcome({}, MEASURED, vs_incumbent=_inverse(ratio),
                               info={"read_from": "in the confirmation against the default"})
        kept.append(removal_entry(dimension, value_of(pruning.answer, dimension),
                                  confirmation, None, without_label=DEFAULT_CANDIDATE.key()))
    return kept


def _inverse(ratio: dict) -> dict:
    """The confirmation's ratio (the answer over the default) read as the default's over the
    answer's, the same pairs."""
    return inverse(ratio) if ratio.get("median") else {"verdict": None}
