"""The fewest changes that keep the speed: each knob of a search's answer removed in turn.

Contract: :func:`prune` ``(result, space, evaluate) -> SearchResult`` takes a search's answer of
two knobs or more and tries it without each of them, measured against the answer, interleaved
(``evaluate(smaller, answer, None)``: the same evaluator, guard and verdict rule as every step
of the search). A knob stays where removing it makes the answer *significantly* slower
(verdict ``"slower"``: significant and beyond the size threshold) or leaves it undecided below
the threshold (:func:`removable`); otherwise it goes, and the smaller answer is the one the
next removal starts from. Reduced precision is tried first, then
the changes to the user's code, then the environment's: when two answers are within the
threshold, fp32 and fewer code changes win. A removal the search already measured (the answer
was reached from the smaller config by a significant step, or the smaller one was measured
against the answer) is read from that measurement, the same pairs read the other way
(:func:`tfperf.core.stats.inverse`), not measured again. The result's ``pruned`` lists each
knob removed with the measurement that allowed it; its outcomes include every removal measured.
:func:`removals_ahead` names the configs a pruning would measure, for a search that starts
their workers before it ends.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tfperf.core.knobs import KNOBS, label, show_value
from tfperf.core.stats import DEFAULT_THRESHOLD, inverse
from tfperf.tuning.search import MEASURED, Evaluate, Outcome, SearchResult
from tfperf.tuning.space import Space

REMOVAL_ORDER = ("precision", "batch", "steps_per_execution", "xla", "input_pipeline")
"""Knobs tried for removal first (the rest follow in the table's order): reduced precision
changes what the model learns; the others are lines of the user's code."""


def removal_order(answer: dict) -> list[str]:
    """The answer's knobs in the order their removal is tried."""
    first = [k for k in REMOVAL_ORDER if k in answer]
    return first + [k for k in KNOBS if k in answer and k not in first]


def without(answer: dict, knob: str, space: Space) -> dict:
    """``answer`` with ``knob`` removed (left at its default), canonical in ``space``."""
    return space.canonical({k: v for k, v in answer.items() if k != knob})


def prune(
    result: SearchResult, space: Space, evaluate: Evaluate,
    say: Callable[[str], None] = lambda _text: None,
) -> SearchResult:
    """``result`` with the knobs its answer does not need removed (module docstring); ``say``
    tells where a removal was read from the search's measurements."""
    answer = space.canonical(result.incumbent)
    outcomes = list(result.outcomes)
    pruned: list[dict[str, Any]] = []
    order = removal_order(answer)
    for at, knob in enumerate(order):
        if len(answer) < 2 or knob not in answer:
            continue  # one knob left: the confirmation against the default judges it
        smaller = without(answer, knob, space)
        outcome = measured_removal(outcomes, smaller, answer, space)
        if outcome is not None:
            say(f"{knob}={show_value(answer[knob])}: without it the answer "
                f"{_speed_without(outcome)} ({outcome.info['read_from']})")
        else:
            _start_ahead(evaluate, smaller, answer, order[at + 1:], space, outcomes)
            outcome = evaluate(smaller, dict(answer), None)
            outcomes.append(outcome)
        if removable(outcome):
            pruned.append(_entry(knob, answer[knob], outcome))
            answer = smaller
    return replace(result, incumbent=answer, outcomes=outcomes, pruned=tuple(pruned))


def measured_removal(
    outcomes: list[Outcome], smaller: dict, answer: dict, space: Space
) -> Outcome | None:
    """The search's own measurement of ``smaller`` against ``answer``: an outcome of that
    pair, or of the answer measured against the smaller config, read the other way; ``None``
    where neither was measured."""
    want, have = label(smaller), label(answer)
    for outcome in reversed(outcomes):
        if outcome.status != MEASURED or not outcome.vs_incumbent:
            continue
        config, incumbent = label(space.canonical(outcome.config)), label(
            space.canonical(outcome.incumbent))
        read = f"{config} measured against {incumbent} in the search"
        if (config, incumbent) == (want, have):
            return replace(outcome, info={**outcome.info, "read_from": read})
        if (config, incumbent) == (have, want):
            return Outcome(smaller, MEASURED, incumbent=dict(answer),
                           vs_incumbent=inverse(outcome.vs_incumbent), info={"read_from": read})
    return None


def removals_ahead(answer: dict, outcomes: list[Outcome], space: Space) -> list[dict]:
    """The configs :func:`prune` measures from ``answer``, in order, as if each removal keeps
    its knob: ``answer`` without each of its knobs, those the search did not measure (for a
    search that starts their workers ahead of the pruning)."""
    answer = space.canonical(answer)
    if len(answer) < 2:
        return []
    smaller = (without(answer, knob, space) for knob in removal_order(answer))
    return [c for c in smaller if measured_removal(outcomes, c, answer, space) is None]


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
    unmeasured = (c for c in later if measured_removal(outcomes, c, answer, space) is None)
    start_ahead(smaller, *itertools.islice(unmeasured, 1))


def removable(outcome: Outcome, threshold: float = DEFAULT_THRESHOLD) -> bool:
    """Measured without the knob and not slower than the answer with it: the verdict is
    "same" or "faster", or undecided with a median within the size threshold (an undecided
    0.7x is no evidence that the knob is not needed: the search took it on a significant
    step)."""
    vs = outcome.vs_incumbent or {}
    verdict, median = vs.get("verdict"), vs.get("median")
    if outcome.status != MEASURED or verdict in (None, "slower"):
        return False
    if verdict == "inconclusive":
        return median is not None and median >= 1.0 / (1.0 + threshold)
    return True


def _speed_without(outcome: Outcome) -> str:
    """The answer's speed without a knob, against its speed with it: "ran 0.83x [0.80-0.86]
    its speed with it (slower)"."""
    vs = outcome.vs_incumbent or {}
    low, high = (vs.get("ci95") or [None, None])[:2]
    interval = "" if low is None else f" [{low:.2f}-{high:.2f}]"
    median = vs.get("median")
    return (f"ran {float('nan') if median is None else median:.2f}x"
            f"{interval} its speed with it ({vs.get('verdict')})")


def _entry(knob: str, value: Any, outcome: Outcome) -> dict[str, Any]:
    vs = outcome.vs_incumbent or {}
    read = outcome.info.get("read_from")
    return {
        "knob": knob,
        "value": show_value(value),
        "without": outcome.label,
        "speed_without": vs,
        "why": (f"without {knob}={show_value(value)} the answer {_speed_without(outcome)}"
                f"{f' ({read})' if read else ''}: not significantly slower, so it is not "
                "needed"),
    }
