"""The fewest changes that keep the speed (``tfperf.tuning.prune``), on scripted measurements.

Each removal is measured against the answer, as the evaluator does it for real; a knob stays
only where removing it makes the answer significantly slower. Reduced precision goes first.
"""

from __future__ import annotations

from tfperf.core.knobs import label
from tfperf.tuning.prune import prune
from tfperf.tuning.search import MEASURED, Outcome, SearchResult
from tfperf.tuning.space import Space

SPACE = Space({"steps_per_execution": (None, 32), "precision": ("fp32", "bf16"),
               "intra_threads": (None, 1)})


def verdict(median: float, low: float, high: float) -> dict:
    word = "faster" if low > 1.03 else "slower" if high < 1 / 1.03 else "same"
    return {"median": median, "ci95": [low, high], "verdict": word}


class Scripted:
    """Removals measured against the answer: ``ratios[(without, answer)]``."""

    def __init__(self, ratios: dict) -> None:
        self.ratios, self.calls = ratios, []

    def __call__(self, config: dict, incumbent: dict, timeout_s: float | None) -> Outcome:
        key = (label(config), label(incumbent))
        self.calls.append(key)
        return Outcome(config, MEASURED, vs_incumbent=verdict(*self.ratios[key]),
                       incumbent=incumbent)


class Ahead(Scripted):
    """:class:`Scripted`, also noting the configs each ``start_ahead`` is given."""

    def __init__(self, ratios: dict) -> None:
        super().__init__(ratios)
        self.ahead: list[list[str]] = []

    def start_ahead(self, *configs: dict) -> None:
        self.ahead.append([label(c) for c in configs])


ANSWER = {"steps_per_execution": 32, "precision": "bf16", "intra_threads": 1}


def test_a_knob_whose_removal_keeps_the_speed_is_pruned_and_fp32_is_tried_first():
    evaluate = Scripted({
        # without bf16: the same speed within the noise -> pruned (fp32 preferred)
        ("steps_per_execution=32,intra_threads=1", label(ANSWER)): (0.99, 0.95, 1.03),
        # then without steps per call: much slower -> kept
        ("intra_threads=1", "steps_per_execution=32,intra_threads=1"): (0.55, 0.5, 0.6),
        # then without the thread count: slower, significantly -> kept
        ("steps_per_execution=32", "steps_per_execution=32,intra_threads=1"):
            (0.85, 0.8, 0.9),
    })
    result = prune(SearchResult(dict(ANSWER), [], "converged"), SPACE, evaluate)
    assert evaluate.calls[0][0] == "steps_per_execution=32,intra_threads=1"  # bf16 first
    assert result.incumbent == {"steps_per_execution": 32, "intra_threads": 1}
    (entry,) = result.pruned
    assert entry["knob"] == "precision" and entry["value"] == "bf16"
    assert "not significantly slower" in entry["why"] and "0.99x" in entry["why"]
    assert len(result.outcomes) == 3  # every removal tried is an outcome of the tune


def test_a_single_knob_answer_is_left_to_the_confirmation():
    evaluate = Scripted({})
    result = prune(SearchResult({"steps_per_execution": 32}, [], "converged"), SPACE, evaluate)
    assert result.incumbent == {"steps_per_execution": 32} and not evaluate.calls


def test_an_undecided_removal_prunes_only_within_the_threshold():
    from tfperf.tuning.prune import removable

    def undecided(median: float) -> Outcome:
        vs = {"median": median, "ci95": [0.5, 1.14], "verdict": "inconclusive"}
        return Outcome({}, MEASURED, vs_incumbent=vs)

    assert not removable(undecided(0.71))  # no evidence the knob is not needed
    assert removable(undecided(0.99))


def test_the_next_removal_starts_ahead_as_if_the_answer_kept_the_knob():
    evaluate = Ahead({
        ("steps_per_execution=32,intra_threads=1", label(ANSWER)): (0.7, 0.6, 0.8),  # kept
        ("precision=bf16,intra_threads=1", label(ANSWER)): (0.6, 0.5, 0.7),  # kept
        ("steps_per_execution=32,precision=bf16", label(ANSWER)): (0.99, 0.95, 1.03),
    })
    prune(SearchResult(dict(ANSWER), [], "converged"), SPACE, evaluate)
    # bf16's removal starts beside the steps-per-call removal's worker; then threads' beside
    # nothing (it is the last)
    assert evaluate.ahead == [
        ["steps_per_execution=32,intra_threads=1", "precision=bf16,intra_threads=1"],
        ["precision=bf16,intra_threads=1", "steps_per_execution=32,precision=bf16"],
        ["steps_per_execution=32,precision=bf16"],
    ]
    assert [c[0] for c in evaluate.calls] == [names[0] for names in evaluate.ahead]


def test_a_removal_the_search_measured_is_read_from_it_not_measured_again():
    # the search reached the answer from intra_threads=1 by a significant step (the answer
    # against the smaller config), and measured bf16's removal against the answer itself
    answer = {"steps_per_execution": 32, "intra_threads": 1}
    step = Outcome(dict(answer), MEASURED, incumbent={"intra_threads": 1},
                   vs_incumbent={**verdict(1.4, 1.3, 1.5), "p_value": 0.001, "n_pairs": 9,
                                 "threshold": 0.03})
    evaluate = Scripted({
        ("steps_per_execution=32", label(answer)): (0.99, 0.95, 1.03),  # threads: pruned
    })
    said: list[str] = []
    result = prune(SearchResult(dict(answer), [step], "reached"), SPACE, evaluate,
                   say=said.append)
    # only the thread count's removal ran; steps per call's was the search's step, inverted
    assert evaluate.calls == [("steps_per_execution=32", label(answer))]
    assert result.incumbent == {"steps_per_execution": 32}
    assert [p["knob"] for p in result.pruned] == ["intra_threads"]
    (line,) = said
    assert line.startswith("steps_per_execution=32: without it the answer ran 0.71x")
    assert "(slower)" in line and "measured against intra_threads=1 in the search" in line
    assert len(result.outcomes) == 2  # the search's step and the one removal measured


def test_a_removal_measured_in_the_search_against_the_answer_is_reused_as_it_is():
    answer = {"steps_per_execution": 32, "precision": "bf16"}
    without_bf16 = Outcome({"steps_per_execution": 32}, MEASURED, incumbent=dict(answer),
                           vs_incumbent=verdict(1.0, 0.98, 1.02))
    evaluate = Scripted({})
    result = prune(SearchResult(dict(answer), [without_bf16], "reached"), SPACE, evaluate)
    assert not evaluate.calls
    assert result.incumbent == {"steps_per_execution": 32}
    assert result.pruned[0]["knob"] == "precision"


def test_the_removal_started_ahead_skips_those_the_search_measured():
    # the search reached the answer from it without steps per call (a significant step):
    # that removal is read, so the thread count's starts beside bf16's
    step = Outcome(dict(ANSWER), MEASURED,
                   incumbent={"precision": "bf16", "intra_threads": 1},
                   vs_incumbent=verdict(1.6, 1.4, 1.8))
    evaluate = Ahead({
        ("steps_per_execution=32,intra_threads=1", label(ANSWER)): (0.8, 0.7, 0.9),  # kept
        ("steps_per_execution=32,precision=bf16", label(ANSWER)): (0.8, 0.7, 0.9),  # kept
    })
    result = prune(SearchResult(dict(ANSWER), [step], "reached"), SPACE, evaluate)
    assert evaluate.ahead == [
        ["steps_per_execution=32,intra_threads=1", "steps_per_execution=32,precision=bf16"],
        ["steps_per_execution=32,precision=bf16"],
    ]
    assert result.incumbent == ANSWER
