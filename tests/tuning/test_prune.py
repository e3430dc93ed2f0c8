"""The fewest changes that keep the speed (``tfperf.tuning.prune``), on scripted measurements.

Each removal is measured against the answer, as the evaluator does it for real; a knob stays
only where removing it makes the answer significantly slower, with that measurement in
``kept``. An undecided removal is measured again in a pair of workers of its own; still
undecided, the knob goes. Reduced precision goes first.
"""

from __future__ import annotations

import pytest

from tfperf.core.knobs import label
from tfperf.tuning.prune import prune, removals_ahead
from tfperf.tuning.search import MEASURED, REJECTED, Outcome, SearchResult
from tfperf.tuning.space import Space

SPACE = Space({"steps_per_execution": (None, 8, 32), "precision": ("fp32", "bf16"),
               "intra_threads": (None, 1), "xla": (None, "off", "jit"),
               "onednn": (None, False), "allocator": ("system", "tcmalloc")})


def verdict(median: float, low: float, high: float) -> dict:
    word = ("faster" if low > 1.0 and median >= 1.03 else
            "slower" if high < 1.0 and median <= 1 / 1.03 else
            "same" if low >= 1 / 1.03 and high <= 1.03 else "inconclusive")
    return {"median": median, "ci95": [low, high], "verdict": word, "p_value": 0.01,
            "n_pairs": 12}


class Scripted:
    """Removals measured against the answer: ``ratios[(without, answer)]``; a removal
    measured again in its own pair of workers: ``again[(without, answer)]``."""

    def __init__(self, ratios: dict, again: dict | None = None) -> None:
        self.ratios, self.again = ratios, again or {}
        self.calls: list[tuple[str, str]] = []
        self.remeasured: list[tuple[str, str]] = []

    def __call__(self, config: dict, incumbent: dict, timeout_s: float | None) -> Outcome:
        key = (label(config), label(incumbent))
        self.calls.append(key)
        return Outcome(config, MEASURED, vs_incumbent=verdict(*self.ratios[key]),
                       incumbent=incumbent)

    def remeasure(self, config: dict, incumbent: dict) -> Outcome:
        key = (label(config), label(incumbent))
        self.remeasured.append(key)
        return Outcome(config, MEASURED, vs_incumbent=verdict(*self.again[key]),
                       incumbent=incumbent, info={"measured_again": True})


class Ahead(Scripted):
    """:class:`Scripted`, also noting the configs each ``start_ahead`` is given."""

    def __init__(self, ratios: dict) -> None:
        super().__init__(ratios)
        self.ahead: list[list[str]] = []

    def start_ahead(self, *configs: dict) -> None:
        self.ahead.append([label(c) for c in configs])


ANSWER = {"steps_per_execution": 32, "precision": "bf16", "intra_threads": 1}


def pruned(answer: dict, evaluate: Scripted, outcomes: list[Outcome] | None = None,
           said: list[str] | None = None) -> SearchResult:
    result = SearchResult(dict(answer), list(outcomes or []), "reached")
    return prune(result, SPACE, evaluate, say=(said if said is not None else []).append)


def test_a_knob_whose_removal_keeps_the_speed_is_pruned_and_fp32_is_tried_first():
    evaluate = Scripted({
        # without bf16: the same speed within the noise -> pruned (fp32 preferred)
        ("steps_per_execution=32,intra_threads=1", label(ANSWER)): (0.99, 0.98, 1.02),
        # then without steps per call: much slower -> kept
        ("intra_threads=1", "steps_per_execution=32,intra_threads=1"): (0.55, 0.5, 0.6),
        # then without the thread count: slower, significantly -> kept
        ("steps_per_execution=32", "steps_per_execution=32,intra_threads=1"):
            (0.85, 0.8, 0.9),
    })
    result = pruned(ANSWER, evaluate)
    assert evaluate.calls[0][0] == "steps_per_execution=32,intra_threads=1"  # bf16 first
    assert result.incumbent == {"steps_per_execution": 32, "intra_threads": 1}
    (entry,) = result.pruned
    assert entry["knob"] == "precision" and entry["value"] == "bf16"
    assert "not slower" in entry["why"] and "0.99x" in entry["why"]
    assert [(k["knob"], k["speed_without"]["verdict"], k["speed_without"]["median"])
            for k in result.kept] == [("steps_per_execution", "slower", 0.55),
                                      ("intra_threads", "slower", 0.85)]
    assert result.kept[1]["speed_without"]["ci95"] == [0.8, 0.9]
    assert len(result.outcomes) == 3  # every removal tried is an outcome of the tune
    assert not evaluate.remeasured


def test_a_single_knob_answer_is_left_to_the_confirmation():
    evaluate = Scripted({})
    result = pruned({"steps_per_execution": 32}, evaluate)
    assert result.incumbent == {"steps_per_execution": 32} and not evaluate.calls
    assert not result.kept and not result.pruned


# The transformer's --quick answer: steps per call and XLA bought the speed; oneDNN off
# (0.59x the default alone) came in on one step of the search, the allocator on another.
TRANSFORMER = {"steps_per_execution": 8, "xla": "jit", "onednn": False,
               "allocator": "tcmalloc"}
WITHOUT_ONEDNN = {"steps_per_execution": 8, "xla": "jit", "allocator": "tcmalloc"}
SEARCH = [
    # alone, oneDNN off was significantly slower than the default
    Outcome({"onednn": False}, MEASURED, incumbent={}, speedup=verdict(0.59, 0.55, 0.63),
            vs_incumbent=verdict(0.59, 0.55, 0.63)),
    # the search's last step: oneDNN off on top of the rest, "faster" on one comparison
    Outcome(dict(TRANSFORMER), MEASURED, incumbent=dict(WITHOUT_ONEDNN),
            speedup=verdict(1.45, 1.4, 1.5), vs_incumbent=verdict(1.04, 1.01, 1.09)),
]
SLOWER_WITHOUT = {
    ("xla=jit,onednn=off,allocator=tcmalloc", label(TRANSFORMER)): (0.6, 0.55, 0.65),
    ("steps_per_execution=8,onednn=off,allocator=tcmalloc", label(TRANSFORMER)):
        (0.7, 0.65, 0.75),
}


def test_an_undecided_removal_is_measured_again_and_still_undecided_the_knob_goes():
    evaluate = Scripted({
        **SLOWER_WITHOUT,
        # without oneDNN off, measured in the pruning: 0.98x, undecided
        (label(WITHOUT_ONEDNN), label(TRANSFORMER)): (0.98, 0.93, 1.02),
        # without the allocator then: the same
        ("steps_per_execution=8,xla=jit", label(WITHOUT_ONEDNN)): (1.0, 0.98, 1.02),
    }, again={(label(WITHOUT_ONEDNN), label(TRANSFORMER)): (0.985, 0.95, 1.01)})
    said: list[str] = []
    result = pruned(TRANSFORMER, evaluate, SEARCH, said)
    # oneDNN off's removal was measured in the pruning, not read from the search's step
    assert (label(WITHOUT_ONEDNN), label(TRANSFORMER)) in evaluate.calls
    assert evaluate.remeasured == [(label(WITHOUT_ONEDNN), label(TRANSFORMER))]
    assert result.incumbent == {"steps_per_execution": 8, "xla": "jit"}
    onednn = next(p for p in result.pruned if p["knob"] == "onednn")
    assert onednn["first_measurement"]["median"] == 0.98
    assert onednn["speed_without"] == {**onednn["speed_without"], "verdict": "inconclusive",
                                       "median": 0.985}
    assert "measured again in a pair of workers of its own" in onednn["why"]
    assert "fewer changes win a tie" in onednn["why"]
    assert [k["knob"] for k in result.kept] == ["steps_per_execution", "xla"]
    assert any(line.startswith("without onednn=off the answer ran 0.98x") for line in said)


class Told(Scripted):
    """:class:`Scripted`, also noting what ``remeasure_if_undecided`` said at each call."""

    def __init__(self, ratios: dict, again: dict | None = None) -> None:
        super().__init__(ratios, again)
        self.remeasure_if_undecided = False
        self.told: list[bool] = []

    def __call__(self, config: dict, incumbent: dict, timeout_s: float | None) -> Outcome:
        self.told.append(self.remeasure_if_undecided)
        return super().__call__(config, incumbent, timeout_s)

    def remeasure(self, config: dict, incumbent: dict) -> Outcome:
        self.told.append(self.remeasure_if_undecided)
        return super().remeasure(config, incumbent)


def test_the_evaluator_is_told_a_removal_is_measured_again_if_undecided_while_it_measures_it():
    # a training tune starts the fresh pair of the second measurement during the first's guard
    evaluate = Told({
        **SLOWER_WITHOUT,
        (label(WITHOUT_ONEDNN), label(TRANSFORMER)): (0.98, 0.93, 1.02),
        ("steps_per_execution=8,xla=jit", label(WITHOUT_ONEDNN)): (1.0, 0.98, 1.02),
    }, again={(label(WITHOUT_ONEDNN), label(TRANSFORMER)): (0.985, 0.95, 1.01)})
    pruned(TRANSFORMER, evaluate, SEARCH)
    assert len(evaluate.calls) == 4 and len(evaluate.remeasured) == 1
    # every removal's first measurement was told; the second measurement and after: not
    assert evaluate.told == [True, True, True, False, True]
    assert evaluate.remeasure_if_undecided is False


def test_a_knob_significantly_slower_alone_stays_only_on_a_removal_measured_slower_now():
    # the search's step says the answer without oneDNN off is slower (1.04x its inverse); the
    # pruning measures it again and keeps it only where that removal is significantly slower
    kept_now = Scripted({
        **SLOWER_WITHOUT,
        (label(WITHOUT_ONEDNN), label(TRANSFORMER)): (0.9, 0.86, 0.94),
        ("steps_per_execution=8,xla=jit,onednn=off", label(TRANSFORMER)): (0.99, 0.98, 1.01),
    })
    result = pruned(TRANSFORMER, kept_now, SEARCH)
    onednn = next(k for k in result.kept if k["knob"] == "onednn")
    assert onednn["speed_without"]["verdict"] == "slower"
    assert "measured against" not in onednn["why"]  # measured here, not read from the search
    assert result.incumbent == {"steps_per_execution": 8, "xla": "jit", "onednn": False}
    # the same search, its removal now measured the same speed: it goes
    gone_now = Scripted({
        **SLOWER_WITHOUT,
        (label(WITHOUT_ONEDNN), label(TRANSFORMER)): (1.0, 0.98, 1.02),
        ("steps_per_execution=8,xla=jit", label(WITHOUT_ONEDNN)): (0.8, 0.75, 0.85),
    })
    assert "onednn" not in pruned(TRANSFORMER, gone_now, SEARCH).incumbent


def test_an_undecided_removal_measured_again_significantly_slower_keeps_its_knob():
    answer = {"steps_per_execution": 32, "intra_threads": 1}
    evaluate = Scripted({
        ("intra_threads=1", label(answer)): (0.5, 0.45, 0.55),
        ("steps_per_execution=32", label(answer)): (0.9, 0.7, 1.1),  # undecided
    }, again={("steps_per_execution=32", label(answer)): (0.88, 0.85, 0.92)})
    result = pruned(answer, evaluate)
    assert result.incumbent == answer and not result.pruned
    threads = result.kept[1]
    assert threads["knob"] == "intra_threads" and threads["speed_without"]["median"] == 0.88
    assert threads["first_measurement"]["verdict"] == "inconclusive"


def test_a_removal_the_guard_rejects_keeps_its_knob_and_says_why():
    answer = {"steps_per_execution": 32, "precision": "bf16"}

    class Rejecting(Scripted):
        def __call__(self, config: dict, incumbent: dict, timeout_s: float | None) -> Outcome:
            self.calls.append((label(config), label(incumbent)))
            return Outcome(config, REJECTED, reason="loss: final loss 0.9 vs 0.4",
                           incumbent=incumbent)

    result = pruned(answer, Rejecting({}))
    assert result.incumbent == answer
    assert all("rejected by the guard" in k["why"] for k in result.kept)


def test_a_removal_the_search_measured_against_the_answer_is_read_from_it():
    answer = {"steps_per_execution": 32, "precision": "bf16"}
    without_bf16 = Outcome({"steps_per_execution": 32}, MEASURED, incumbent=dict(answer),
                           vs_incumbent=verdict(1.0, 0.98, 1.02))
    evaluate = Scripted({})
    result = pruned(answer, evaluate, [without_bf16])
    assert not evaluate.calls  # bf16's was read; one knob left, for the confirmation
    assert result.incumbent == {"steps_per_execution": 32}
    assert "in the search" in result.pruned[0]["why"]


def test_the_next_removal_starts_ahead_as_if_the_answer_kept_the_knob():
    evaluate = Ahead({
        ("steps_per_execution=32,intra_threads=1", label(ANSWER)): (0.7, 0.6, 0.8),  # kept
        ("precision=bf16,intra_threads=1", label(ANSWER)): (0.6, 0.5, 0.7),  # kept
        ("steps_per_execution=32,precision=bf16", label(ANSWER)): (0.99, 0.98, 1.02),
    })
    pruned(ANSWER, evaluate)
    # bf16's removal starts beside the steps-per-call removal's worker; then threads' beside
    # nothing (it is the last)
    assert evaluate.ahead == [
        ["steps_per_execution=32,intra_threads=1", "precision=bf16,intra_threads=1"],
        ["precision=bf16,intra_threads=1", "steps_per_execution=32,precision=bf16"],
        ["steps_per_execution=32,precision=bf16"],
    ]
    assert [c[0] for c in evaluate.calls] == [names[0] for names in evaluate.ahead]


def test_the_removals_ahead_include_the_one_the_search_s_step_measured_the_other_way():
    step = Outcome(dict(ANSWER), MEASURED,
                   incumbent={"precision": "bf16", "intra_threads": 1},
                   vs_incumbent=verdict(1.6, 1.4, 1.8))
    ahead = [label(c) for c in removals_ahead(ANSWER, [step], SPACE)]
    assert ahead == ["steps_per_execution=32,intra_threads=1",
                     "precision=bf16,intra_threads=1", "steps_per_execution=32,precision=bf16"]


@pytest.mark.parametrize("answer", [{"runtime": "litert", "runtime_threads": 2}])
def test_a_removal_that_leaves_the_default_is_left_to_the_confirmation(answer):
    space = Space({"runtime": ("tf", "litert"), "runtime_threads": (None, 1, 2)},
                  implied={"litert": {"runtime_threads": 1}})
    evaluate = Scripted({("runtime=litert", label(answer)): (0.8, 0.75, 0.85)})
    result = prune(SearchResult(dict(answer), [], "converged"), space, evaluate)
    # without the runtime the threads act on nothing: the default, which the confirmation
    # measures; the threads' removal is measured here
    assert evaluate.calls == [("runtime=litert", label(answer))]
    assert result.incumbent == answer and [k["knob"] for k in result.kept] == [
        "runtime_threads"]
