"""The server objective's search and its confirmation rule on a scripted evaluator (no workers,
no TensorFlow): each candidate's rate within the SLO is a product of known effects."""

from __future__ import annotations

import pytest

from tfperf.core.serving import ServingLayout
from tfperf.tuning.server import (
    DEFAULT_CANDIDATE,
    MEASURED,
    REJECTED,
    ServerCandidate,
    ServerOutcome,
    ServerSearch,
    confirmation,
    server_space,
    split_cpus,
)

OPENVINO = {"runtime": "openvino-f32"}
LITERT = {"runtime": "litert"}


def scripted_rate(candidate: ServerCandidate) -> float:
    """100 requests/s for the default; two pinned instances, batching and OpenVINO's streams
    help (but its asynchronous requests take no batcher, and batching helps more here); a wait
    for a batch helps at 1 ms only."""
    layout = candidate.layout
    rate = 100.0
    if layout.instances == 2:
        rate *= 1.6 if layout.pinned else 1.3
    rate *= {1: 1.0, 2: 1.1, 4: 1.25, 8: 1.2}[layout.max_batch]
    rate *= {0.0: 1.0, 1.0: 1.1}.get(layout.max_delay_ms, 0.9)
    if candidate.config.get("runtime") == "openvino-f32":
        rate *= 1.5 * (1.2 if layout.streams == 2 else 1.0)
    return rate


class Scripted:
    """The evaluator: the scripted rate; LiteRT's outputs are beyond the tolerance; each
    evaluation takes ``seconds`` on ``clock``."""

    def __init__(self, seconds: float = 10.0) -> None:
        self.now = 0.0
        self.seconds = seconds
        self.tried: list[str] = []

    def clock(self) -> float:
        return self.now

    def __call__(self, candidate: ServerCandidate, timeout_s: float | None) -> ServerOutcome:
        self.tried.append(candidate.key())
        self.now += self.seconds
        if candidate.config.get("runtime") == "litert":
            return ServerOutcome(candidate, REJECTED, reason="max rel error 0.5", accuracy={})
        if candidate.config.get("runtime") == "litert-fp16":
            info = {"runtime_failed": True}
            return ServerOutcome(candidate, "failed", reason="conversion failed", info=info)
        return ServerOutcome(
            candidate, MEASURED, max_qps_at_slo=scripted_rate(candidate), elapsed_s=self.seconds
        )


def test_the_search_climbs_to_the_best_layout_and_runtime():
    runtimes = [{}, LITERT, {"runtime": "litert-fp16"}, OPENVINO]
    space = server_space([0, 1], slo_ms=10.0, runtimes=runtimes)
    evaluator = Scripted()
    result = ServerSearch(space, evaluator, clock=evaluator.clock).run()
    best = result.incumbent
    assert best.config == OPENVINO
    assert best.layout == ServingLayout(
        instances=2, threads=1, cores=((0,), (1,)), max_batch=4, max_delay_ms=1.0
    )
    assert result.default is not None and result.default.candidate == DEFAULT_CANDIDATE
    assert result.outcomes[0].candidate == DEFAULT_CANDIDATE
    assert result.stopped == "converged"
    # a runtime rejected, or failed before any load, is never tried under another layout
    assert sum(key.endswith("runtime=litert") for key in evaluator.tried) == 1
    assert sum(key.endswith("runtime=litert-fp16") for key in evaluator.tried) == 1
    assert len(evaluator.tried) == len(set(evaluator.tried))


def test_with_tensorflow_alone_the_gain_comes_from_the_layout():
    space = server_space([0, 1], slo_ms=10.0, runtimes=[{}])
    result = ServerSearch(space, Scripted()).run()
    assert result.incumbent.config == {}
    assert result.incumbent.layout.instances == 2 and result.incumbent.layout.batching
    assert all(o.candidate.config == {} for o in result.outcomes)


def test_the_budget_keeps_room_for_the_confirmation_and_the_best_so_far():
    space = server_space([0, 1], slo_ms=10.0, runtimes=[{}, OPENVINO])
    evaluator = Scripted(seconds=10.0)
    result = ServerSearch(space, evaluator, budget_s=75.0, reserve=4, clock=evaluator.clock).run()
    assert result.stopped == "budget"
    # each evaluation takes 10 s, and the confirmation 4 of them: none starts after 25 s
    assert len(result.outcomes) == 3
    rates = {o.candidate.key(): o.rate for o in result.outcomes}
    assert rates[result.incumbent.key()] == max(rates.values())
    limited = ServerSearch(space, Scripted(), max_trials=3).run()
    assert limited.stopped == "max-trials" and len(limited.outcomes) == 3


def _hint_scaled(throughput: float) -> Scripted:
    """The scripted evaluator with OpenVINO's THROUGHPUT hint at ``throughput`` times the
    synchronous instance's rate, and LATENCY at 0.8 times."""

    class Hinted(Scripted):
        def __call__(self, candidate, timeout_s):
            outcome = super().__call__(candidate, timeout_s)
            scale = {"THROUGHPUT": throughput, "LATENCY": 0.8}.get(candidate.layout.hint, 1.0)
            outcome.max_qps_at_slo = scale * float(outcome.max_qps_at_slo or 0.0)
            return outcome

    return Hinted(seconds=10.0)


def test_openvinos_hint_is_tried_as_soon_as_openvino_leads_on_a_short_budget():
    """A slow model's budget may hold only a few layouts: the hint an OpenVINO user serves with
    comes right after the runtime, before any shape or batch."""

    space = server_space([0, 1], slo_ms=10.0, runtimes=[{}, OPENVINO])
    evaluator = _hint_scaled(1.4)
    result = ServerSearch(space, evaluator, budget_s=35.0, clock=evaluator.clock).run()
    assert result.stopped == "budget" and len(result.outcomes) == 3
    assert result.incumbent == ServerCandidate(OPENVINO, ServingLayout(hint="THROUGHPUT"))


@pytest.mark.parametrize(
    ("throughput", "hint"), [(0.97, "THROUGHPUT"), (1.0, "THROUGHPUT"), (0.9, None)]
)
def test_a_tie_between_openvino_served_synchronously_and_its_throughput_hint_goes_to_the_hint(
    throughput, hint
):
    """One SLO search cannot tell rates 5% apart: within that the hint OpenVINO's users serve
    with is kept; slower by more, the synchronous instance stays."""
    space = server_space([0, 1], slo_ms=10.0, runtimes=[{}, OPENVINO])
    evaluator = _hint_scaled(throughput)
    result = ServerSearch(space, evaluator, budget_s=45.0, clock=evaluator.clock).run()
    assert [o.candidate.layout.hint for o in result.outcomes] == [None, None, "THROUGHPUT",
                                                                  "LATENCY"]
    assert result.incumbent == ServerCandidate(OPENVINO, ServingLayout(hint=hint))


def test_a_default_that_fails_leaves_the_default_as_the_answer():
    def broken(candidate, timeout_s):
        return ServerOutcome(candidate, "failed", reason="worker crashed")

    space = server_space([0, 1], slo_ms=10.0, runtimes=[{}])
    result = ServerSearch(space, broken).run()
    assert result.incumbent == DEFAULT_CANDIDATE


def test_the_space_follows_the_cores_the_slo_and_the_runtime():
    two = server_space([0, 1], slo_ms=20.0, runtimes=[{}])
    assert two.shapes == ((1, None, False), (1, 1, False), (2, 1, True), (2, 1, False))
    assert two.delays_ms == (1.0, 2.0, 5.0)
    four = server_space([0, 1, 2, 3], slo_ms=20.0, runtimes=[{}])
    assert (4, 1, True) in four.shapes and (2, 2, True) in four.shapes
    assert split_cpus([0, 1, 2, 3], 2) == ((0, 1), (2, 3))
    assert two.neighbours(DEFAULT_CANDIDATE, "streams") == []
    assert two.neighbours(DEFAULT_CANDIDATE, "delay") == []
    on_openvino = ServerCandidate(OPENVINO, ServingLayout(streams=2))
    back = server_space([0, 1], 20.0, [{}, OPENVINO]).neighbours(on_openvino, "runtime")
    assert back == [ServerCandidate({}, ServingLayout())]
    assert {c.layout.streams for c in two.neighbours(on_openvino, "streams")} == {None, 1}
    # OpenVINO's hints are its own dimension; its asynchronous requests take no batcher, so a
    # batch size tried from them serves synchronously
    assert {c.layout.hint for c in two.neighbours(on_openvino, "hint")} == {
        "THROUGHPUT", "LATENCY"}
    assert two.neighbours(DEFAULT_CANDIDATE, "hint") == []
    batched = two.neighbours(on_openvino, "batch")
    assert {c.layout.max_batch for c in batched} == {2, 4, 8}
    assert not any(c.layout.asynchronous for c in batched)
    batching = ServerCandidate(OPENVINO, ServingLayout(max_batch=4))
    assert two.neighbours(batching, "hint") == two.neighbours(batching, "streams") == []


SEVEN = [100.0, 104.0, 98.0, 101.0, 99.0, 103.0, 100.0]


@pytest.mark.parametrize(
    ("default", "winner", "recommend", "words"),
    [
        (SEVEN, [q * 1.2 for q in SEVEN], True, "significantly more requests"),
        # better in every one of 7 pairs, but by 1%: below the size threshold of every verdict
        (SEVEN, [q * 1.01 for q in SEVEN], False, "verdict same"),
        # better in every one of 3 pairs: too few pairs for the verdict rule to say "faster"
        ([100.0, 105.0, 98.0], [150.0, 160.0, 149.0], False, "from at least 6 pairs"),
        ([100.0] * 7, [150.0, None, 149.0, 150.0, 151.0, 148.0, 150.0], False,
         "missed the SLO in 1 of its 7"),
        (SEVEN, [q * 0.7 for q in SEVEN], False, "verdict slower"),
        ([None] * 6, [50.0, 52.0, 51.0, 50.0, 52.0, 51.0], True, "met the SLO at no rate"),
    ],
)
def test_confirmation_recommends_by_the_verdict_rule_of_every_comparison(
    default, winner, recommend, words
):
    decided = confirmation(default, winner)
    assert decided["recommend"] is recommend
    assert words in decided["reason"], decided["reason"]
    if decided["ratio"] is not None:
        expected = "faster" if recommend else decided["ratio"]["verdict"]
        assert decided["ratio"]["verdict"] == expected


def test_runtimes_without_tensorflow_keep_the_default_as_the_baseline_only():
    # OpenVINO alone is allowed: it must carry the answer even where it is slower than
    # TensorFlow's default, which is measured as the baseline and never recommended
    class SlowOpenVino(Scripted):
        def __call__(self, candidate, timeout_s):
            outcome = super().__call__(candidate, timeout_s)
            if candidate.config.get("runtime") == "openvino-f32":
                return ServerOutcome(candidate, MEASURED, max_qps_at_slo=outcome.rate * 0.5)
            return outcome

    space = server_space([0, 1], 10.0, runtimes=[{}, OPENVINO], default_runtime_allowed=False)
    evaluator = SlowOpenVino()
    result = ServerSearch(space, evaluator, clock=evaluator.clock).run()
    assert result.default is not None and result.default.candidate == DEFAULT_CANDIDATE
    assert result.incumbent.config == OPENVINO
    assert result.incumbent.layout.instances == 2  # the layout search went on from there


def test_a_server_tune_that_keeps_the_default_says_why_with_the_documented_cases_and_keys():
    from tfperf.tuning.servertune import _keep_default

    rows = [
        {"label": "runtime=litert-int8", "status": "rejected", "reason": "outputs differ",
         "max_rel_error": 0.4, "speedup": None, "config": {"runtime": "litert-int8"}},
        {"label": "instances=2", "status": "measured", "speedup": {"median": 1.3},
         "config": {}},
        {"label": "runtime=xla-aot", "status": "failed", "reason": "no compiler",
         "config": {"runtime": "xla-aot"}},
    ]
    decided = confirmation(SEVEN, [q * 1.01 for q in SEVEN])
    doc = _keep_default(decided, 100.0, rows, 20.0, 0.03)
    why = doc["keep_default_why"]
    assert set(why) == {"case", "rejected", "failed", "best_rejected", "commonest_failure",
                        "summary", "over_ceiling", "best_over_ceiling"}
    assert (why["case"], why["rejected"], why["failed"]) == ("none_faster", 1, 1)
    assert why["commonest_failure"] == "no compiler"
    assert doc["reason"] == decided["reason"] and decided["reason"] in why["summary"]
    # a rejected runtime whose rate was measured above the default's is the "rejected" case
    rows[0]["speedup"] = {"median": 2.0}
    assert _keep_default(None, 100.0, rows, 20.0, 0.03)["keep_default_why"]["case"] == "rejected"


def test_a_budget_that_holds_only_the_default_says_what_budget_would_do():
    from tfperf.tuning.servertune import _budget_starved

    space = server_space([0, 1], slo_ms=10.0, runtimes=[{}])
    evaluator = Scripted(seconds=30.0)
    result = ServerSearch(space, evaluator, budget_s=150.0, reserve=14,
                          clock=evaluator.clock).run()
    assert result.stopped == "budget" and len(result.outcomes) == 1
    said = _budget_starved(result, pairs=7)
    assert said == (
        "the budget ran out before any layout but the default was tried: one SLO search took "
        "30 s here and the confirmation needs 14 more, so give --budget 570 or more for 4 "
        "layouts"
    )
    roomy = Scripted(seconds=30.0)
    enough = ServerSearch(space, roomy, budget_s=1200.0, reserve=14, clock=roomy.clock).run()
    assert len(enough.outcomes) > 1 and _budget_starved(enough, pairs=7) is None
