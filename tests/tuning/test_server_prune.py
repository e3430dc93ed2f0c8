"""A server tune's answer pruned (``tfperf.tuning.serverprune``), on scripted SLO searches.

Each dimension of the layout is set back to the default's in turn and measured against the
answer in alternating SLO searches; it stays only where the layout is significantly slower
without it, by the rule of every pruning."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tfperf.core.serving import ServingLayout
from tfperf.core.stats import MIN_PAIRS
from tfperf.serving import LoadScenario
from tfperf.tuning.evaluate import Evaluator, Progress
from tfperf.tuning.options import TuneOptions
from tfperf.tuning.server import DEFAULT_CANDIDATE, MEASURED, ServerCandidate, ServerOutcome
from tfperf.tuning.serverprune import (
    confirmed_entries,
    dimensions,
    measure_removal,
    prune_layout,
    removal_outcome,
    without,
)
from tfperf.tuning.servertune import ServerEvaluator

LITERT = {"runtime": "litert"}
WINNER = ServerCandidate(LITERT, ServingLayout(instances=2, threads=1, cores=((0,), (1,)),
                                               max_batch=4, max_delay_ms=1.0))


class Searches:
    """SLO searches whose rate is ``rates[key]`` give or take a little, alternating sides."""

    def __init__(self, rates: dict[str, float | None]) -> None:
        self.rates, self.asked = rates, []
        self.progress = Progress()
        self.evaluator = SimpleNamespace(run=None)
        self.options = SimpleNamespace(threshold=0.03)

    def measure(self, candidate: ServerCandidate, run: object, role: str) -> ServerOutcome:
        assert role == "removal"
        self.asked.append(candidate.key())
        rate = self.rates[candidate.key()]
        wobble = 1.0 + 0.002 * (len(self.asked) % 3)
        return ServerOutcome(candidate, MEASURED, max_qps_at_slo=rate and rate * wobble)


def test_a_layout_is_pruned_to_the_dimensions_it_needs():
    assert dimensions(WINNER) == ["delay", "batch", "shape", "runtime"]
    batch_no_delay = without(WINNER, "delay")
    pinned = without(batch_no_delay, "batch")
    searches = Searches({
        WINNER.key(): 1000.0,
        batch_no_delay.key(): 1000.0,  # the delay buys nothing: it goes
        pinned.key(): 995.0,  # nor does the batcher: it goes
        without(pinned, "shape").key(): 600.0,  # one instance: much slower, kept
        without(pinned, "runtime").key(): 300.0,  # TensorFlow: much slower, kept
    })
    said: list[str] = []
    pruning = prune_layout(searches, WINNER, 6, say=said.append)
    assert pruning.answer == pinned
    assert [p["knob"] for p in pruning.pruned] == ["delay", "batch"]
    assert [(k["knob"], k["speed_without"]["verdict"]) for k in pruning.kept] == [
        ("shape", "slower"), ("runtime", "slower")]
    assert pruning.kept[1]["without"] == "2x1t pinned"  # the layout on TensorFlow
    assert pruning.kept[0]["why"].startswith("without shape=2x1t pinned the answer ran 0.6")
    assert pruning.kept[1]["why"].startswith("without runtime=litert the answer ran 0.3")
    assert len(searches.asked) == 4 * 12 and len(said) == 4
    # each removal alternates with the answer, pair by pair
    assert searches.asked[:4] == [WINNER.key(), batch_no_delay.key(), batch_no_delay.key(),
                                  WINNER.key()]


def test_a_removal_that_misses_the_slo_keeps_its_dimension():
    rates = {"answer": [900.0] * 6, "smaller": [850.0, None, 860.0, 870.0, 840.0, 855.0]}
    outcome = removal_outcome(rates, 0.03)
    assert outcome.vs_incumbent["verdict"] == "slower"
    assert "met the SLO at no rate in 1 of its searches" in outcome.vs_incumbent["reason"]


def test_an_undecided_removal_is_measured_again_and_goes_where_still_undecided():
    answer = ServerCandidate(LITERT, ServingLayout(instances=2, threads=1, cores=((0,), (1,))))
    one = without(answer, "shape")

    swings = iter([1.1, 0.9, 1.05, 0.93, 1.08, 0.95] * 2)  # the one instance, search by search

    class Noisy(Searches):
        def measure(self, candidate, run, role):
            self.asked.append(candidate.key())
            rate = 1000.0 * (next(swings) if candidate == one else 1.0)
            return ServerOutcome(candidate, MEASURED, max_qps_at_slo=rate)

    searches = Noisy({})
    pruning = prune_layout(searches, answer, 6)
    (entry,) = pruning.pruned
    assert entry["knob"] == "shape" and "first_measurement" in entry
    assert "measured again" in entry["why"] and len(searches.asked) == 24
    assert pruning.answer == one


def test_the_one_dimension_left_is_kept_by_the_confirmation():
    pruning = prune_layout(Searches({}), ServerCandidate(LITERT, ServingLayout()), 6)
    assert pruning.answer.config == LITERT and not pruning.kept
    rec = {"keep_default": False, "confirmation": {"ratio": {
        "median": 2.0, "ci95": [1.9, 2.1], "p_value": 0.01, "n_pairs": 6, "threshold": 0.03,
        "verdict": "faster"}}}
    (kept,) = confirmed_entries(pruning, rec)
    assert kept["knob"] == "runtime" and kept["without"] == DEFAULT_CANDIDATE.key()
    assert kept["speed_without"]["verdict"] == "slower"
    assert "in the confirmation against the default" in kept["why"]



def test_a_removal_is_measured_on_real_servers_in_alternating_searches():
    """A removal as a tune measures it: real instances behind the harness, the answer's and
    the smaller layout's SLO searches alternating, each rate kept beside the comparison."""
    mlp = {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1}
    options = TuneOptions(objective="server", slo_ms=50.0, runtimes=("tf",))
    evaluator = Evaluator(mlp, options)
    scenario = LoadScenario(requests=40, seconds=0.2, tail=1, precision=None, floor=False)
    answer = ServerCandidate({}, ServingLayout(max_batch=4, max_delay_ms=0.5))
    smaller = without(answer, "delay")
    asked: list[tuple[str, str]] = []
    try:
        evaluator.start_default()
        judge = ServerEvaluator(evaluator, options, scenario)
        measure = judge.measure
        judge.measure = lambda c, run, role: asked.append((c.key(), role)) or measure(c, run, role)
        outcome = measure_removal(judge, answer, smaller, 1)
    finally:
        evaluator.close()
    assert asked == [(answer.key(), "removal"), (smaller.key(), "removal")]
    rates = outcome.info["rates"]
    assert len(rates["answer"]) == len(rates["smaller"]) == 1
    assert all(q > 0 for side in rates.values() for q in side), rates
    vs = outcome.vs_incumbent
    assert vs["n_pairs"] == 1 and vs["verdict"] == "inconclusive"  # one pair decides nothing
    # the speed without the delay, as a share of the answer's
    assert vs["median"] == pytest.approx(rates["smaller"][0] / rates["answer"][0])


def test_a_pruning_given_too_few_pairs_to_decide_measures_the_fewest_that_can():
    """Under six pairs no removal can be significantly slower, so every dimension would go:
    the pruning measures at least the pairs a verdict needs."""
    answer = ServerCandidate({}, ServingLayout(max_batch=4, max_delay_ms=1.0))
    searches = Searches({answer.key(): 1000.0, without(answer, "delay").key(): 300.0})
    pruning = prune_layout(searches, answer, 2)
    (kept,) = pruning.kept
    assert kept["knob"] == "delay" and kept["speed_without"]["n_pairs"] == MIN_PAIRS
    assert len(searches.asked) == 2 * MIN_PAIRS
