"""The fewest changes that keep the speed: each knob of a search's answer removed in turn.

Contract: :func:`prune` ``(result, space, evaluate) -> SearchResult`` takes a search's answer of
two knobs or more and tries it without each of them, measured against the answer, interleaved
(``evaluate(smaller, answer, None)``: the same evaluator, guard and verdict rule as every step
of the search). What each removal's measurement decides (:func:`decision`):

- verdict ``"slower"`` (significant and beyond the size threshold): the knob stays, and
  ``kept`` holds that measurement (its verdict, median and interval);
- ``"same"`` or ``"faster"``: the knob goes, and ``pruned`` holds the measurement;
- ``"inconclusive"``: the removal is measured again in a pair of workers of its own
  (``evaluate.remeasure(smaller, answer)``, up to the rounds a confirmation may take); still
  not significantly slower, the knob goes (fewer changes win ties) and ``pruned`` says so
  with both measurements' figures;
- rejected by the guard, or failed: the knob stays (the answer without it cannot be taken),
  and ``kept`` says why.

A knob is never kept on the search's step that added it: that step was one comparison among
the many the search made, stopped as soon as it was decided, and a tune that tries ten knobs
takes a knob that buys nothing on such a step now and then (a transformer's answer kept
``onednn=off``, which alone ran 0.59x the default, on one). Its removal is measured here. A
removal the search measured itself, against this very answer (a sweep tried the knob back at
its default), is read from that measurement. A removal that leaves the default (the answer's
runtime taken away with the knobs that act on it alone) is left to the confirmation against
the default, which judges the whole answer.

Reduced precision is tried first, then the changes to the user's code, then the
environment's: when two answers are within the threshold, fp32 and fewer code changes win.
The result's outcomes include every removal measured. :func:`removals_ahead` names the configs
a pruning would measure, for a search that starts their workers before it ends.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from tfperf.core.knobs import KNOBS, label, show_value
from tfperf.tuning.search import MEASURED, Evaluate, Outcome, SearchResult
from tfperf.tuning.space import Space

REMOVAL_ORDER = ("precision", "batch", "steps_per_execution", "xla", "input_pipeline")
"""Knobs tried for removal first (the rest follow in the table's order): reduced precision
changes what the model learns; the others are lines of the user's code."""

KEEP, REMOVE, AGAIN = "keep", "remove", "again"


def removal_order(answer: dict) -> list[str]:
    """The answer's knobs in the order their removal is tried."""
    first = [k for k in REMOVAL_ORDER if k in answer]
    return first + [k for k in KNOBS if k in answer and k not in first]


def without(answer: dict, knob: str, space: Space) -> dict:
    """``answer`` with ``knob`` removed (left at its default), canonical in ``space``."""
    return space.canonical({k: v for k, v in answer.items() if k != knob})


def decision(outcome: Outcome) -> str:
    """What a removal's measurement decides: :data:`KEEP` the knob (significantly slower
    without it, or the answer without it cannot be taken), :data:`REMOVE` it (as fast or
    faster without it), or measure it :data:`AGAIN` (undecided)."""
    verdict = (outcome.vs_incumbent or {}).get("verdict")
    if outcome.status != MEASURED or verdict == "slower":
        return KEEP
    return AGAIN if verdict in (None, "inconclusive") else REMOVE


def prune(
    result: SearchResult, space: Space, evaluate: Evaluate,
    say: Callable[[str], None] = lambda _text: None,
) -> SearchResult:
    """``result`` with the knobs its answer does not need removed (module docstring); ``say``
    tells each removal's figures as they are decided."""
    answer = space.canonical(result.incumbent)
    outcomes = list(result.outcomes)
    pruned: list[dict[str, Any]] = []
    kept: list[dict[str, Any]] = []
    order = removal_order(answer)
    for at, knob in enumerate(order):
        if len(answer) < 2 or knob not in answer:
            continue  # one knob left: the confirmation against the default judges it
        smaller = without(answer, knob, space)
        if not smaller:
            continue  # without it nothing is left: the confirmation judges the answer
        with _measured_again_if_undecided(evaluate):
            first = _measured(evaluate, smaller, answer, order[at + 1:], space, outcomes)
        again = None
        if decision(first) == AGAIN:
            again = _again(evaluate, smaller, answer)
            if again is not None:
                outcomes.append(again)
        entry = removal_entry(knob, answer[knob], first, again)
        say(entry["why"])
        if entry["kept"]:
            kept.append(entry)
        else:
            pruned.append(entry)
            answer = smaller
    return replace(result, incumbent=answer, outcomes=outcomes, pruned=tuple(pruned),
                   kept=tuple(kept))


def _measured(
    evaluate: Evaluate, smaller: dict, answer: dict, rest: list[str], space: Space,
    outcomes: list[Outcome],
) -> Outcome:
    """The removal's measurement against ``answer``: the search's own, where it measured this
    very pair, else one made now (appended to ``outcomes``)."""
    outcome = measured_removal(outcomes, smaller, answer, space)
    if outcome is None:
        _start_ahead(evaluate, smaller, answer, rest, space, outcomes)
        outcome = evaluate(smaller, dict(answer), None)
        outcomes.append(outcome)
    return outcome


@contextlib.contextmanager
def _measured_again_if_undecided(evaluate: Evaluate) -> Iterator[None]:
    """Tell an evaluator that can prepare for it (``remeasure_if_undecided``) that the removal
    it measures now is measured again should it end undecided (:func:`_again`): a training
    tune starts that fresh pair while the first measurement's guard runs."""
    if not hasattr(evaluate, "remeasure_if_undecided"):
        yield
        return
    evaluate.remeasure_if_undecided = True
    try:
        yield
    finally:
        evaluate.remeasure_if_undecided = False


def _again(evaluate: Evaluate, smaller: dict, answer: dict) -> Outcome | None:
    """An undecided removal measured again in a pair of workers of its own, where the
    evaluator can (``remeasure``); ``None`` where it cannot (then it stays undecided)."""
    remeasure = getattr(evaluate, "remeasure", None)
    return None if remeasure is None else remeasure(smaller, dict(answer))


def measured_removal(
    outcomes: list[Outcome], smaller: dict, answer: dict, space: Space
) -> Outcome | None:
    """The search's own measurement of ``smaller`` against ``answer`` (that pair, in that
    direction: not the step that reached the answer from ``smaller``, read the other way);
    ``None`` where it made none."""
    want, have = label(smaller), label(answer)
    for outcome in reversed(outcomes):
        if outcome.status != MEASURED or not outcome.vs_incumbent:
            continue
        config, incumbent = label(space.canonical(outcome.config)), label(
            space.canonical(outcome.incumbent))
        if (config, incumbent) == (want, have):
            read = f"measured in the search, against {incumbent}"
            return replace(outcome, info={**outcome.info, "read_from": read})
    return None


def removals_ahead(answer: dict, outcomes: list[Outcome], space: Space) -> list[dict]:
    """The configs :func:`prune` measures from ``answer``, in order, as if each removal keeps
    its knob: ``answer`` without each of its knobs, those the search did not measure (for a
    search that starts their workers ahead of the pruning)."""
    answer = space.canonical(answer)
    if len(answer) < 2:
        return []
    smaller = (without(answer, knob, space) for knob in removal_order(answer))
    return [c for c in smaller
            if c and measured_removal(outcomes, c, answer, space) is None]


def _start_ahead(
    evaluate: Evaluate, smaller: dict, answer: dict, rest: list[str], space: Space,
    outcomes: list[Outcome],
) -> None:
    """Start this removal's worker (``smaller``) and the next one to measure's, as if this
    removal keeps the knob, together (see :meth:`tfperf.tuning.search.Search._start_ahead`):
    the next knob of the answer whose removal the search did not measure (on a transformer's
    ``--quick``, looking at the next knob only left the allocator's removal to start alone,
    10 s, after the threads' removal read from the search)."""
    start_ahead = getattr(evaluate, "start_ahead", None)
    if start_ahead is None:
        return
    later = (without(answer, knob, space) for knob in rest if knob in answer)
    unmeasured = (c for c in later if c and measured_removal(outcomes, c, answer, space) is None)
    start_ahead(smaller, *itertools.islice(unmeasured, 1))


def speed_without(vs: dict | None, source: str | None = None) -> str:
    """The answer's speed without a knob, against its speed with it: "ran 0.83x [0.80-0.86]
    its speed with it (slower, 12 pairs)", and where that was measured when ``source``
    says; a measurement decided without a ratio says why (``reason``)."""
    vs = vs or {}
    if vs.get("reason"):
        return f"was slower: {vs['reason']} ({vs.get('verdict')})"
    low, high = (vs.get("ci95") or [None, None])[:2]
    interval = "" if low is None else f" [{low:.3g}-{high:.3g}]"
    median = vs.get("median")
    pairs = f", {vs['n_pairs']} pairs" if vs.get("n_pairs") else ""
    where = f", {source}" if source else ""
    return (f"ran {float('nan') if median is None else median:.3g}x"
            f"{interval} its speed with it ({vs.get('verdict')}{pairs}{where})")


def _figures(vs: dict | None) -> dict[str, Any]:
    """The figures of a removal's measurement a reader checks: verdict, median, interval,
    p-value and pairs."""
    vs = vs or {}
    return {k: vs.get(k) for k in ("verdict", "median", "ci95", "p_value", "n_pairs")}


def removal_entry(knob: str, value: Any, first: Outcome, again: Outcome | None,
                  without_label: str | None = None) -> dict:
    """One line of ``recommendation.kept`` or ``recommendation.pruned``: the knob, the answer
    without it (``without_label``, else its config's label), the measurement that decided
    (``speed_without``; an undecided first one in ``first_measurement``) and the sentence
    that says so."""
    decided = again or first
    shown = f"{knob}={show_value(value)}"
    read = first.info.get("read_from")
    if decided.status != MEASURED:
        what = "rejected by the guard" if decided.status == "rejected" else "failed"
        why = (f"kept {shown}: the answer without it was {what} ({decided.reason}), so it "
               "cannot be taken out")
        kept = True
    elif again is not None:
        kept = decision(again) == KEEP
        why = (f"without {shown} the answer {speed_without(first.vs_incumbent, read)}, "
               f"undecided; measured again in a pair of workers of its own it "
               f"{speed_without(again.vs_incumbent)}: "
               + ("significantly slower, so it is kept" if kept else
                  "not significantly slower, so it goes (fewer changes win a tie)"))
    else:
        kept = decision(first) == KEEP
        verdict = (first.vs_incumbent or {}).get("verdict")
        why = f"without {shown} the answer {speed_without(first.vs_incumbent, read)}: " + (
            "significantly slower, so it is kept" if kept else
            "not significantly slower, so it goes (fewer changes win a tie)"
            if verdict == "inconclusive" else "not slower, so it is not needed")
    entry = {
        "knob": knob,
        "value": show_value(value),
        "without": without_label or label(decided.config),
        "kept": kept,
        "speed_without": _figures(decided.vs_incumbent),
        "why": why,
    }
    if again is not None:
        entry["first_measurement"] = _figures(first.vs_incumbent)
    return entry
