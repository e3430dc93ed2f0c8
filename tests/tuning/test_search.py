"""The search logic on a synthetic, seeded measurement function (no workers, no TensorFlow).

Each config has a true time per call; a measurement draws noisy interleaved block times for the
default, the incumbent and the candidate and feeds them to the real ``stats.paired_speedup``.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from tfperf.core.knobs import label, normalize
from tfperf.core.stats import paired_speedup
from tfperf.tuning.search import FAILED, MEASURED, Outcome, Search, cache_key
from tfperf.tuning.space import SpaceFacts, build_space

FACTS = SpaceFacts(
    cores=2,
    bf16=True,
    allocators={"tcmalloc": "/x/libtcmalloc.so", "jemalloc": None},
    allocator_packages={"jemalloc": "libjemalloc2"},
)

# Multiplicative effects on a 10 ms default; everything not listed costs nothing.
EFFECTS = {
    ("runtime", "litert"): 0.30,
    ("runtime", "litert-fp16"): 0.32,
    ("runtime", "litert-dynint8"): 0.50,
    ("runtime", "litert-int8"): 0.9,
    ("runtime_threads", 2): 0.80,
    ("allocator", "tcmalloc"): 0.90,
    ("xla", "jit"): 0.60,
    ("onednn", False): 1.5,
}


def true_time(config: dict, effects: dict) -> float:
    t = 0.010
    for key, value in normalize(config).items():
        t *= effects.get((key, value), 1.0)
    return t


class Synthetic:
    """A seeded measurement: 12 interleaved rounds with 4% log-normal noise per block."""

    def __init__(self, effects: dict, seed: int = 1, fail: set[str] | None = None) -> None:
        """``fail``: runtimes whose candidates crash."""
        self.effects = effects
        self.rng = np.random.default_rng(seed)
        self.fail = fail or set()
        self.calls: list[str] = []

    def _blocks(self, config: dict, n: int) -> np.ndarray:
        return true_time(config, self.effects) * np.exp(self.rng.normal(0, 0.04, n))

    def __call__(self, config: dict, incumbent: dict, timeout_s: float | None) -> Outcome:
        self.calls.append(cache_key(config, incumbent))
        if config.get("runtime") in self.fail:
            return Outcome(
                config, FAILED, reason="worker crashed with SIGSEGV", incumbent=incumbent
            )
        default, inc, cand = (self._blocks(c, 12) for c in ({}, incumbent, config))
        return Outcome(
            config,
            MEASURED,
            speedup=paired_speedup(default, cand),
            vs_incumbent=paired_speedup(inc, cand),
            incumbent=incumbent,
            time_ms=float(np.median(cand) * 1e3),
        )


def exhaustive_best(space, effects) -> float:
    return min(true_time(p, effects) for p in space.points())


def test_staged_search_reaches_the_best_point_of_the_space():
    space = build_space(FACTS)
    evaluate = Synthetic(EFFECTS)
    result = Search(space, evaluate).run("staged")
    assert result.stopped == "converged"
    best = exhaustive_best(space, EFFECTS)
    assert true_time(result.incumbent, EFFECTS) == pytest.approx(best)
    assert result.incumbent == {"runtime": "litert", "runtime_threads": 2, "allocator": "tcmalloc"}
    # every step taken was significant: each incumbent change came from a "faster" verdict
    assert all(
        o.vs_incumbent["verdict"] == "faster"
        for o in result.outcomes
        if normalize(o.config) == result.incumbent
    )


def test_nothing_faster_means_keep_the_default():
    space = build_space(FACTS)
    slower = {k: max(v, 1.0) * 1.2 for k, v in EFFECTS.items()}
    neutral_noise = Synthetic({k: 1.0 + (v - 1.0) * 0.0 for k, v in slower.items()})
    assert Search(space, Synthetic(slower)).run().incumbent == {}
    assert Search(space, neutral_noise).run().incumbent == {}


def test_a_tiny_gain_below_the_threshold_is_not_taken():
    space = build_space(FACTS)
    tiny = {("runtime", "litert"): 0.99}
    result = Search(space, Synthetic(tiny, seed=3)).run()
    assert result.incumbent == {}


def test_failed_candidates_are_recorded_and_the_search_goes_on():
    space = build_space(FACTS)
    evaluate = Synthetic(EFFECTS, fail={"litert"})
    result = Search(space, evaluate).run()
    failed = [o for o in result.outcomes if o.status == FAILED]
    assert failed and {o.config["runtime"] for o in failed} == {"litert"}
    assert failed[0].reason == "worker crashed with SIGSEGV"
    # a crash does not depend on the incumbent: each failing config is tried once
    tried = [key.split("|vs|")[0] for key in evaluate.calls]
    crashed = [
        name for name in tried if name.startswith("runtime=litert,") or name == "runtime=litert"
    ]
    assert len(crashed) == len(set(crashed))
    assert result.incumbent["runtime"] == "litert-fp16"


def test_max_trials_and_time_budget_stop_the_search():
    space = build_space(FACTS)
    result = Search(space, Synthetic(EFFECTS), max_trials=3).run()
    assert result.stopped == "max-trials"
    assert len(result.outcomes) == 3

    now = [0.0]

    def evaluate(config, incumbent, timeout_s):
        now[0] += 10.0
        assert timeout_s is None  # a started candidate is not cut by the budget
        return Synthetic(EFFECTS)(config, incumbent, timeout_s)

    result = Search(space, evaluate, budget_s=25.0, clock=lambda: now[0]).run()
    assert result.stopped == "budget"
    assert len(result.outcomes) == 3


def test_no_candidate_starts_once_the_time_left_is_what_the_answer_needs_after_the_search():
    # Candidates take 10 s; the caller keeps 5 s per knob of the answer for after the search
    # (pruning and confirming it) plus one candidate's 10 s.
    space = build_space(FACTS)
    now = [0.0]
    asked: list[dict] = []

    def evaluate(config, incumbent, timeout_s):
        now[0] += 10.0
        return Synthetic(EFFECTS)(config, incumbent, timeout_s)

    def reserve(incumbent):
        asked.append(incumbent)
        return 10.0 + 5.0 * len(incumbent)

    result = Search(space, evaluate, budget_s=60.0, clock=lambda: now[0], reserve=reserve).run()
    assert result.stopped == "budget"
    spent = 10.0 * len(result.outcomes)
    assert 60.0 - spent <= 10.0 + 5.0 * len(result.incumbent) < 60.0 - spent + 10.0
    assert asked[0] == {} and any(asked)  # told the answer as it grows
    unreserved = Search(space, evaluate, budget_s=60.0, clock=lambda: (now[0] - spent)).run()
    assert len(unreserved.outcomes) > len(result.outcomes)


def test_a_budget_sized_to_reach_every_knob_is_not_cut_in_the_reach_phase_a_typed_one_is():
    from tfperf.tuning.space import TRAIN_SEARCH_ORDER, TrainBaseline, fit_training_space

    facts = SpaceFacts(cores=2, bf16=True, jax=True, model_format="factory", train=True)
    space = fit_training_space(build_space(facts), TrainBaseline(), 0.002)
    now = [0.0]

    def evaluate(config, incumbent, timeout_s):
        now[0] += 10.0  # candidates took longer than the budget was sized for
        return Synthetic({})(config, incumbent, timeout_s)

    def search(**limits):
        now[0] = 0.0
        return Search(space, evaluate, clock=lambda: now[0], budget_s=30.0,
                      knob_order=TRAIN_SEARCH_ORDER, reach_first=True, **limits).run()

    sized = search(reserve=lambda incumbent: 5.0)
    assert sized.stopped == "budget" and not sized.unreached
    # every knob that acts on the answer's runtime (JAX's CPU set does not act on TensorFlow)
    reachable = {k for k in space.knobs() if space.applicable(k, sized.incumbent)}
    assert "runtime_threads" in space.knobs() and "runtime_threads" not in reachable
    assert {k for o in sized.outcomes for k in o.config} == reachable
    typed = search()
    assert typed.stopped == "budget" and len(typed.outcomes) == 3
    assert typed.unreached


def test_under_a_small_budget_runtime_first_reaches_the_runtimes():
    space = build_space(FACTS)
    tf_first = Search(space, Synthetic(EFFECTS), max_trials=6).run()
    # TensorFlow's own knobs alone use up six trials: the largest gains are never tried.
    assert all("runtime" not in o.config for o in tf_first.outcomes)
    quick = Search(space, Synthetic(EFFECTS), max_trials=6, runtime_first=True).run()
    assert [o.config.get("runtime", "tf") for o in quick.outcomes[:4]] == list(
        space.values["runtime"][1:5]
    )
    assert quick.incumbent.get("runtime") == "litert"
    assert true_time(quick.incumbent, EFFECTS) < true_time(tf_first.incumbent, EFFECTS)


def test_resume_replays_finished_trials_without_measuring_them_again():
    space = build_space(FACTS)
    stored: list[Outcome] = []
    first = Search(space, Synthetic(EFFECTS, seed=5), max_trials=6, on_outcome=stored.append).run()
    assert first.stopped == "max-trials" and len(stored) == 6
    # What the store holds after the interruption, keyed the way tune reloads it.
    cache = {cache_key(o.config, o.incumbent): Outcome.from_dict(o.to_dict()) for o in stored}
    evaluate = Synthetic(EFFECTS, seed=5)
    resumed = Search(space, evaluate, cache=cache).run()
    assert evaluate.calls and set(evaluate.calls).isdisjoint(cache)
    assert [o.label for o in resumed.outcomes[:6]] == [o.label for o in stored]
    complete = Search(space, Synthetic(EFFECTS, seed=5)).run()
    assert resumed.incumbent == complete.incumbent


def test_optuna_strategy_finds_a_near_best_config():
    space = build_space(FACTS)
    result = Search(space, Synthetic(EFFECTS), max_trials=40, seed=0).run("optuna")
    best = exhaustive_best(space, EFFECTS)
    found = true_time(result.incumbent, EFFECTS)
    assert result.incumbent, "TPE should move off the default"
    assert math.log(found / best) < math.log(1.5)
    assert len({o.label for o in result.outcomes}) == len(result.outcomes)
    assert len(result.outcomes) <= 40


def test_optuna_respects_failures_and_never_recommends_a_failed_config():
    space = build_space(FACTS)
    evaluate = Synthetic(EFFECTS, fail={"litert"})
    result = Search(space, evaluate, max_trials=25, seed=1).run("optuna")
    assert any(o.status == FAILED for o in result.outcomes)
    assert result.incumbent.get("runtime") != "litert"


def test_a_budget_that_stops_mid_knob_keeps_the_best_step_measured_so_far():
    space = build_space(FACTS)
    runtimes = space.runtime_step({})
    first = normalize(runtimes[0])
    # Only the first runtime candidate helps, and only one candidate fits in the trial budget:
    # the search stops while the runtime knob still has candidates left.
    effects = {("runtime", first["runtime"]): 0.3}
    search = Search(space, Synthetic(effects), max_trials=1, runtime_first=True)
    result = search.run("staged")
    assert result.stopped == "max-trials"
    assert len(result.outcomes) == 1
    assert normalize(result.incumbent) == first


def test_optuna_on_a_tflite_model_never_measures_the_default_as_a_candidate():
    space = build_space(FACTS.__class__(cores=2, bf16=True, model_format="tflite"))
    result = Search(space, Synthetic({("runtime_threads", 2): 0.8}), max_trials=10, seed=0).run(
        "optuna"
    )
    assert result.outcomes
    assert all(space.canonical(o.config) for o in result.outcomes)


# --runtimes litert on a Keras model: the space runs on LiteRT, the default still on TensorFlow.
LITERT_ONLY = SpaceFacts(
    cores=2, allocators={"tcmalloc": "/x/libtcmalloc.so"}, runtimes=("litert",)
)


@pytest.mark.parametrize("runtime_first", [False, True])
def test_a_space_without_tensorflow_measures_its_runtime_alone_first(runtime_first):
    space = build_space(LITERT_ONLY)
    assert space.values["runtime"] == ("litert",)
    result = Search(space, Synthetic(EFFECTS), runtime_first=runtime_first).run()
    # plain LiteRT (every knob at its default), not only LiteRT with a knob turned
    assert result.outcomes[0].label == "runtime=litert"
    assert [o.label for o in result.outcomes].count("runtime=litert") == 1
    assert result.incumbent == {"runtime": "litert", "runtime_threads": 2, "allocator": "tcmalloc"}


def test_one_trial_on_a_runtime_only_space_is_the_runtime_itself():
    # `--knobs runtime --runtimes litert`: a single runtime is no knob, yet it is the candidate.
    space = build_space(LITERT_ONLY).restrict(("runtime",))
    assert space.knobs() == []
    result = Search(space, Synthetic(EFFECTS), max_trials=1, runtime_first=True).run()
    assert [o.label for o in result.outcomes] == ["runtime=litert"]
    assert result.incumbent == {"runtime": "litert"}


def test_optuna_proposes_a_space_without_tensorflow_at_its_runtime_alone_first():
    space = build_space(LITERT_ONLY)
    result = Search(space, Synthetic(EFFECTS), max_trials=3, seed=0).run("optuna")
    assert result.outcomes[0].label == "runtime=litert"


@pytest.mark.parametrize("runtime_first", [False, True])
def test_the_runtime_knob_measures_each_runtime_alone_once(runtime_first):
    # tf,litert on a built-in: the runtime knob reaches plain LiteRT; nothing is added twice.
    space = build_space(FACTS.__class__(cores=2, runtimes=("tf", "litert")))
    search = Search(space, Synthetic(EFFECTS), runtime_first=runtime_first)
    assert search.start_point() == {}
    labels = [o.label for o in search.run().outcomes]
    assert labels.count("runtime=litert") == 1
    # and on a .tflite model the default already is plain LiteRT
    tflite = build_space(FACTS.__class__(cores=2, model_format="tflite", runtimes=("litert",)))
    assert Search(tflite, Synthetic(EFFECTS)).start_point() == {}


# ---------------------------------------------------------------- head to head among the leaders


def _ratio(median: float, low: float, high: float) -> dict:
    """A paired_speedup-like result with a verdict read off the interval (3% threshold)."""
    verdict = "faster" if low > 1.03 else "slower" if high < 1 / 1.03 else "same"
    return {"median": median, "ci95": [low, high], "verdict": verdict}


class Scripted:
    """Outcomes with fixed ratios: ``ratios[(candidate, incumbent)] = (median, low, high)``;
    a pair not listed measures as no change."""

    def __init__(self, ratios: dict) -> None:
        self.ratios = ratios
        self.calls: list[str] = []

    def __call__(self, config: dict, incumbent: dict, timeout_s: float | None) -> Outcome:
        from tfperf.core.knobs import label

        self.calls.append(cache_key(config, incumbent))
        vs_inc = _ratio(*self.ratios.get((label(config), label(incumbent)), (1.0, 0.98, 1.02)))
        vs_default = _ratio(*self.ratios.get((label(config), "default"), (1.0, 0.98, 1.02)))
        return Outcome(
            config, MEASURED, speedup=vs_default, vs_incumbent=vs_inc, incumbent=incumbent
        )


RUNTIME_ONLY = build_space(FACTS).restrict(("runtime",))
# The resnet50 case: fp16 leads the step by median, plain LiteRT is within its interval.
LEADERS = {
    ("runtime=litert-fp16", "default"): (1.48, 1.30, 1.60),
    ("runtime=litert", "default"): (1.38, 1.25, 1.50),
}


DUEL = ("runtime=litert", "runtime=litert-fp16")


@pytest.mark.parametrize(
    ("direct", "winner"),
    [((1.07, 1.04, 1.10), "litert"), ((0.96, 0.93, 0.99), "litert-fp16"),
     ((1.05, 0.98, 1.12), "litert-fp16")],
    ids=["challenger-wins", "leader-holds", "a-median-above-one-within-the-noise-holds-too"],
)
def test_overlapping_leaders_meet_head_to_head_and_the_direct_winner_is_taken(direct, winner):
    evaluate = Scripted({**LEADERS, DUEL: direct})
    result = Search(RUNTIME_ONLY, evaluate).run()
    assert "runtime=litert|vs|runtime=litert-fp16" in evaluate.calls
    assert result.incumbent == {"runtime": winner}
    # the duel is an outcome like any other: stored, counted, ranked
    assert [o.label for o in result.outcomes].count("runtime=litert") == 2


def test_leaders_whose_intervals_do_not_overlap_need_no_head_to_head():
    evaluate = Scripted(
        {
            ("runtime=litert-fp16", "default"): (1.48, 1.40, 1.60),
            ("runtime=litert", "default"): (1.20, 1.10, 1.30),
        }
    )
    result = Search(RUNTIME_ONLY, evaluate).run()
    assert not any("|vs|runtime=" in call for call in evaluate.calls)
    assert result.incumbent == {"runtime": "litert-fp16"}


def test_only_the_closest_runners_up_challenge_and_each_faces_the_current_champion():
    evaluate = Scripted(
        {
            **LEADERS,
            ("runtime=litert-dynint8", "default"): (1.35, 1.20, 1.45),
            ("runtime=litert-int8", "default"): (1.33, 1.20, 1.45),
            ("runtime=litert", "runtime=litert-fp16"): (1.06, 1.04, 1.08),
            ("runtime=litert-dynint8", "runtime=litert"): (1.06, 1.04, 1.09),
        }
    )
    result = Search(RUNTIME_ONLY, evaluate).run()
    duels = [c for c in evaluate.calls if not c.endswith("|vs|default")]
    assert duels == [
        "runtime=litert|vs|runtime=litert-fp16",
        "runtime=litert-dynint8|vs|runtime=litert",
    ]
    assert result.incumbent == {"runtime": "litert-dynint8"}


def test_out_of_trials_before_the_head_to_head_the_leader_by_median_is_kept():
    evaluate = Scripted(LEADERS)
    candidates = len(RUNTIME_ONLY.neighbours({}, "runtime"))
    result = Search(RUNTIME_ONLY, evaluate, max_trials=candidates).run()
    assert result.stopped == "max-trials"
    assert len(result.outcomes) == candidates
    assert result.incumbent == {"runtime": "litert-fp16"}


def test_a_resumed_search_replays_the_head_to_head():
    ratios = {**LEADERS, DUEL: (1.07, 1.04, 1.10)}
    stored: list[Outcome] = []
    first = Search(RUNTIME_ONLY, Scripted(ratios), on_outcome=stored.append).run()
    cache = {cache_key(o.config, o.incumbent): Outcome.from_dict(o.to_dict()) for o in stored}
    evaluate = Scripted(ratios)
    resumed = Search(RUNTIME_ONLY, evaluate, cache=cache).run()
    assert evaluate.calls == []
    assert resumed.incumbent == first.incumbent == {"runtime": "litert"}


class ThreadsMatter(Synthetic):
    """LiteRT fp32 is slow on one thread and the fastest on two; dynamic-range int8 does not
    care: a runtime compared at its default thread count would lose to the wrong one."""

    def _blocks(self, config: dict, n: int) -> np.ndarray:
        runtime, threads = config.get("runtime"), config.get("runtime_threads")
        ms = {"litert": 4.0 if threads == 2 else 12.0, "litert-dynint8": 6.0}.get(runtime, 10.0)
        return ms * 1e-3 * np.exp(self.rng.normal(0, 0.04, n))


def test_runtimes_race_at_full_parallelism_so_the_one_that_needs_threads_wins():
    space = build_space(FACTS).restrict(("runtime", "runtime_threads"))
    result = Search(space, ThreadsMatter({}), max_trials=12, runtime_first=True).run("staged")
    assert normalize(result.incumbent) == {"runtime": "litert", "runtime_threads": 2}


def test_knobs_that_do_not_apply_to_the_answer_are_not_called_left_by_the_budget():
    # Keras on JAX wins the third step; the budget then ends. Threads, oneDNN and the inter-op
    # pool have no value to try on JAX (the space says why), so only knobs the budget left
    # are "unreached".
    from tfperf.tuning.space import TRAIN_SEARCH_ORDER, TrainBaseline, fit_training_space

    facts = SpaceFacts(cores=2, bf16=True, jax=True, model_format="factory", train=True)
    space = fit_training_space(build_space(facts), TrainBaseline(), 0.002)
    now = [0.0]
    effects = {("runtime", "keras-jax"): 0.5}

    def evaluate(config, incumbent, timeout_s):
        now[0] += 10.0
        return Synthetic(effects)(config, incumbent, timeout_s)

    result = Search(space, evaluate, budget_s=25.0, clock=lambda: now[0],
                    knob_order=TRAIN_SEARCH_ORDER, reach_first=True).run()
    assert result.stopped == "budget" and result.incumbent.get("runtime") == "keras-jax"
    assert {"intra_threads", "onednn", "inter_threads"}.isdisjoint(result.unreached)
    assert {"precision", "input_pipeline"} <= set(result.unreached)
    assert set(result.unreached) <= set(space.knobs())


def test_the_knobs_of_the_runtime_the_answer_left_are_named_as_never_tried():
    # JAX wins before TensorFlow's threads and oneDNN are reached: they were measured on no
    # runtime, and the tune's document says so with why
    from tfperf.tuning.search import SearchResult
    from tfperf.tuning.space import TRAIN_SEARCH_ORDER, TrainBaseline, fit_training_space
    from tfperf.tuning.tuner import _off_runtime

    facts = SpaceFacts(cores=2, bf16=True, jax=True, model_format="factory", train=True,
                       allocators={"tcmalloc": "/x/libtcmalloc.so"})
    space = fit_training_space(build_space(facts), TrainBaseline(), 0.002)
    result = Search(space, Synthetic({("runtime", "keras-jax"): 0.5}),
                    knob_order=TRAIN_SEARCH_ORDER, reach_first=True, sweeps=0).run()
    assert result.incumbent.get("runtime") == "keras-jax"
    assert set(result.off_runtime) == {"intra_threads", "onednn", "inter_threads"}
    # a preloaded allocator acts on JAX too: tried there
    assert any(o.config.get("allocator") == "tcmalloc" and o.config.get("runtime") == "keras-jax"
               for o in result.outcomes)
    (line,) = _off_runtime(result)
    assert set(line["knob"].split("/")) == set(result.off_runtime)
    assert line["reason"].startswith("not tried: the answer runs on JAX (keras-jax), where "
                                     "these knobs do not act")
    # a search that stayed on TensorFlow leaves no such line
    stayed = Search(space, Synthetic({}), knob_order=TRAIN_SEARCH_ORDER, reach_first=True,
                    sweeps=0).run()
    assert not stayed.off_runtime and not _off_runtime(
        SearchResult(stayed.incumbent, [], "reached"))


def test_the_reach_phase_names_the_candidate_tried_now_and_the_next_ones_ahead():
    # Worker starts overlap: before each candidate is measured the evaluator is told it and
    # the next two knobs' candidates (it starts them two at a time); where a step is taken
    # the hint was for the old incumbent, and the search goes on from the new one.
    from tfperf.tuning.space import TRAIN_SEARCH_ORDER, TrainBaseline, fit_training_space

    facts = SpaceFacts(cores=2, bf16=True, jax=True, model_format="factory", train=True)
    space = fit_training_space(build_space(facts), TrainBaseline(), 0.002)
    events: list[tuple[str, str]] = []
    hinted: list[list[str]] = []

    class Ahead(Synthetic):
        def start_ahead(self, *configs):
            events.append(("ahead", cache_key(configs[0], {})))
            hinted.append([cache_key(c, {}) for c in configs])

        def __call__(self, config, incumbent, timeout_s):
            events.append(("try", cache_key(config, {})))
            return super().__call__(config, incumbent, timeout_s)

    # the first knob with a candidate here (graph, before it, has none for a graph step)
    assert next(k for k in TRAIN_SEARCH_ORDER if k in space.knobs()) == "steps_per_execution"
    Search(space, Ahead({("steps_per_execution", 128): 0.5}), max_trials=4,
           knob_order=TRAIN_SEARCH_ORDER, reach_first=True).run()
    tried = [key for what, key in events if what == "try"]
    assert events[:2] == [("ahead", tried[0]), ("try", tried[0])]
    assert "steps_per_execution=128" in tried[0]
    # the next knob's candidate was named as if the default stayed the answer
    assert hinted[0][1] == tried[1].replace("steps_per_execution=128,", "")
    # after the step, every hint keeps steps_per_execution=128, the one tried now first
    assert all("steps_per_execution=128" in key for names in hinted[1:] for key in names)
    # the one tried now and the next two knobs' candidates, none past the trial limit: no
    # worker starts for a candidate that will never be measured
    assert [names[0] for names in hinted] == tried
    assert [len(names) for names in hinted] == [3, 3, 2, 1]
    assert hinted[1][1:] == tried[2:4]


def test_the_evaluator_is_told_what_comes_next_if_the_candidate_tried_now_wins():
    # a training tune starts those workers while the winner's guard runs
    from tfperf.tuning.space import TRAIN_SEARCH_ORDER, TrainBaseline, fit_training_space

    facts = SpaceFacts(cores=2, bf16=True, jax=True, model_format="factory", train=True)
    space = fit_training_space(build_space(facts), TrainBaseline(), 0.002)
    told: dict[str, list[str]] = {}

    class Told(Synthetic):
        next_if_won = None

        def __call__(self, config, incumbent, timeout_s):
            told[label(config)] = [label(c) for c in self.next_if_won(config)]
            return super().__call__(config, incumbent, timeout_s)

    evaluate = Told({("steps_per_execution", 128): 0.5})
    Search(space, evaluate, max_trials=3, knob_order=TRAIN_SEARCH_ORDER,
           reach_first=True).run()
    # steps per call wins its step: what was named is what the search tried next
    assert told["steps_per_execution=128"] == [
        "steps_per_execution=128,xla=jit", "steps_per_execution=128,runtime=keras-jax"]
    assert list(told)[1:] == told["steps_per_execution=128"]
    # the last candidate the trial limit allows names nothing after it
    assert told[list(told)[-1]] == []
    assert evaluate.next_if_won is None  # cleared once the reach phase ends


def test_a_quick_search_names_the_prunings_removals_beside_its_last_knobs():
    # --quick's search ends with its reach: the last knob's worker starts beside the worker
    # of the pruning's first removal the search did not measure, and a last knob that wins
    # names its own answer's removals (all but the one its step measured)
    from tfperf.tuning.prune import removals_ahead
    from tfperf.tuning.space import TRAIN_SEARCH_ORDER, TrainBaseline, fit_training_space

    facts = SpaceFacts(cores=2, bf16=True, model_format="factory", train=True)
    space = fit_training_space(build_space(facts), TrainBaseline(), 0.002)
    hinted: list[list[str]] = []
    told: dict[str, list[str]] = {}

    class Ahead(Synthetic):
        next_if_won = None

        def start_ahead(self, *configs):
            hinted.append([label(c) for c in configs])

        def __call__(self, config, incumbent, timeout_s):
            told[label(config)] = [label(c) for c in self.next_if_won(config)]
            return super().__call__(config, incumbent, timeout_s)

    evaluate = Ahead({("steps_per_execution", 128): 0.5, ("intra_threads", 1): 0.9})
    result = Search(space, evaluate, knob_order=TRAIN_SEARCH_ORDER, reach_first=True,
                    sweeps=0, after=functools.partial(removals_ahead, space=space)).run()
    assert result.incumbent == {"steps_per_execution": 128, "intra_threads": 1}
    last = label({**result.incumbent, "input_pipeline": "tuned"})
    # each removal is measured in the pruning, the threads' too (the search's step that
    # added them is no measurement of their removal)
    assert hinted[-1] == [last, "intra_threads=1", "steps_per_execution=128"]
    assert told[last] == [label({"intra_threads": 1, "input_pipeline": "tuned"}),
                          label({"steps_per_execution": 128, "input_pipeline": "tuned"})]
    # before the last knobs, the hints name reach candidates only
    assert all(names[-1].startswith("steps_per_execution=") for names in hinted[1:-2])


def test_without_sweeps_a_reach_first_search_stops_once_every_knob_was_tried():
    # --quick's training search: one candidate of each knob that applies, then stop.
    from tfperf.tuning.space import TRAIN_SEARCH_ORDER, TrainBaseline, fit_training_space

    facts = SpaceFacts(cores=2, bf16=True, model_format="factory", train=True)
    space = fit_training_space(build_space(facts), TrainBaseline(), 0.002)
    evaluate = Synthetic({("steps_per_execution", 128): 0.5, ("intra_threads", 1): 0.9})
    result = Search(space, evaluate, knob_order=TRAIN_SEARCH_ORDER, reach_first=True,
                    sweeps=0).run()
    assert result.stopped == "reached" and not result.unreached
    assert len(result.outcomes) == len(space.knobs())
    assert result.incumbent == {"steps_per_execution": 128, "intra_threads": 1}


class FirstUndecided(Synthetic):
    """Synthetic, but the first candidate of ``knob`` measures undecided at ``median``
    [``median`` - 0.11, ``median`` + 0.04] against its incumbent (as a quick tune's first
    candidate in a noisy phase)."""

    def __init__(self, effects: dict, knob: str, median: float = 1.11) -> None:
        super().__init__(effects)
        self.knob, self.median, self.undecided = knob, median, False

    def __call__(self, config, incumbent, timeout_s):
        if self.knob in config and not self.undecided:
            self.undecided = True
            self.calls.append(cache_key(config, incumbent))
            vs = {"median": self.median, "ci_low": self.median - 0.11,
                  "ci_high": self.median + 0.04, "verdict": "inconclusive", "threshold": 0.03}
            return Outcome(config, MEASURED, speedup=vs, vs_incumbent=vs, incumbent=incumbent)
        return super().__call__(config, incumbent, timeout_s)


def test_a_quick_search_looks_again_at_an_undecided_knob_on_top_of_the_answer():
    from tfperf.tuning.space import TRAIN_SEARCH_ORDER, TrainBaseline, fit_training_space

    facts = SpaceFacts(cores=2, bf16=True, model_format="factory", train=True)
    space = fit_training_space(build_space(facts), TrainBaseline(), 0.002)
    effects = {("steps_per_execution", 128): 0.5, ("xla", "jit"): 0.6}
    asked: list[str] = []

    def allows(candidate: dict) -> bool:
        asked.append(label(candidate))
        return True

    evaluate = FirstUndecided(effects, "steps_per_execution")
    result = Search(space, evaluate, knob_order=TRAIN_SEARCH_ORDER, reach_first=True,
                    sweeps=0, look_again=allows).run()
    reach = result.outcomes[:len(space.knobs())]
    undecided = [o for o in reach if not o.beats_incumbent() and o.vs_incumbent["median"] > 1.03]
    # every knob that looked faster but undecided, and only those, best median first
    assert asked[0] == label({"steps_per_execution": 128, "xla": "jit"})
    assert len(asked) == len(undecided) and len(result.outcomes) == len(reach) + len(asked)
    assert result.stopped == "reached"
    assert result.incumbent == {"steps_per_execution": 128, "xla": "jit"}

    # where the time left does not allow it, the answer stays as the reach left it
    evaluate = FirstUndecided(effects, "steps_per_execution")
    result = Search(space, evaluate, knob_order=TRAIN_SEARCH_ORDER, reach_first=True,
                    sweeps=0, look_again=lambda candidate: False).run()
    assert len(result.outcomes) == len(space.knobs())
    assert result.incumbent == {"xla": "jit"}


def test_a_quick_search_looks_again_at_steps_per_call_once_the_answer_shortened_the_step():
    from tfperf.tuning.space import TRAIN_SEARCH_ORDER, TrainBaseline, fit_training_space

    facts = SpaceFacts(cores=2, bf16=True, model_format="factory", train=True)
    space = fit_training_space(build_space(facts), TrainBaseline(), 0.002)
    spe = {"steps_per_execution": 128}

    def quick(effects: dict, knob: str, order=TRAIN_SEARCH_ORDER) -> tuple[list[str], dict]:
        asked: list[str] = []

        def allows(candidate: dict) -> bool:
            asked.append(label(candidate))
            return True

        evaluate = FirstUndecided(effects, knob, median=0.98)
        result = Search(space, evaluate, knob_order=order, reach_first=True, sweeps=0,
                        look_again=allows).run()
        return asked, result.incumbent

    # measured at 0.98x against the default, then XLA made the step 1.7x shorter: the
    # overhead steps per call hides is a larger share of it, so it is tried again
    asked, answer = quick({("steps_per_execution", 128): 0.5, ("xla", "jit"): 0.6},
                          "steps_per_execution")
    assert asked == [label({**spe, "xla": "jit"})]
    assert answer == {**spe, "xla": "jit"}
    # where nothing shortened the step since, one comparison below the threshold decides it
    asked, answer = quick({("steps_per_execution", 128): 0.5}, "steps_per_execution")
    assert asked == [] and answer == {}
    # a knob that hides no fixed cost is not asked about again however the step changed
    # (steps per call, measured at 1x from the default here too, is)
    first = ("intra_threads", *(k for k in TRAIN_SEARCH_ORDER if k != "intra_threads"))
    asked, answer = quick({("intra_threads", 1): 0.5, ("xla", "jit"): 0.6}, "intra_threads",
                          order=first)
    assert asked == [label({**spe, "xla": "jit"})] and answer == {"xla": "jit"}
    # a tuned input pipeline in the answer hides a fixed cost too, but is no count to grow
    asked, answer = quick({("steps_per_execution", 128): 0.5, ("xla", "jit"): 0.6,
                           ("input_pipeline", "tuned"): 0.8}, "steps_per_execution")
    assert answer == {**spe, "xla": "jit", "input_pipeline": "tuned"}


def test_a_quick_search_past_its_110_s_still_reaches_a_knob_measured_on_a_step_since_shortened():
    # the tune is past --quick's 110 s (look_again refuses) within its grown limit
    # (reach_again allows): steps per call, measured at 0.98x on the default's step before
    # XLA shortened it, was never measured on the answer's step, so it is tried there; an
    # intra-op thread undecided at 1.11x (it hides no fixed cost) is not looked at again
    from tfperf.tuning.space import TRAIN_SEARCH_ORDER, TrainBaseline, fit_training_space

    facts = SpaceFacts(cores=2, bf16=True, model_format="factory", train=True)
    space = fit_training_space(build_space(facts), TrainBaseline(), 0.002)
    spe = {"steps_per_execution": 128}

    def search(evaluate: FirstUndecided, order=TRAIN_SEARCH_ORDER
               ) -> tuple[list[str], list[str], dict]:
        looked: list[str] = []
        reached: list[str] = []

        def refuses(candidate: dict) -> bool:
            looked.append(label(candidate))
            return False

        def allows(candidate: dict) -> bool:
            reached.append(label(candidate))
            return True

        result = Search(space, evaluate, knob_order=order, reach_first=True,
                        sweeps=0, look_again=refuses, reach_again=allows).run()
        return looked, reached, result.incumbent

    effects = {("steps_per_execution", 128): 0.5, ("xla", "jit"): 0.6}
    looked, reached, answer = search(FirstUndecided(effects, "steps_per_execution", 0.98))
    assert (looked, reached) == ([], [label({**spe, "xla": "jit"})])
    assert answer == {**spe, "xla": "jit"}

    effects = {("steps_per_execution", 128): 0.5, ("xla", "jit"): 0.6,
               ("intra_threads", 1): 0.9}
    first = ("intra_threads", *(k for k in TRAIN_SEARCH_ORDER if k != "intra_threads"))
    looked, reached, answer = search(FirstUndecided(effects, "intra_threads"), order=first)
    assert looked == [label({**spe, "xla": "jit", "intra_threads": 1})] and reached == []
    assert answer == {**spe, "xla": "jit"}


class Stepped(Synthetic):
    """:class:`Synthetic` on a 34-ms training step: each outcome says its step time, as a
    training candidate's does (``info["step_ms"]``)."""

    def __call__(self, config: dict, incumbent: dict, timeout_s: float | None) -> Outcome:
        outcome = super().__call__(config, incumbent, timeout_s)
        outcome.info["step_ms"] = true_time(config, self.effects) * 3.4e3
        return outcome


LADDER_EFFECTS = {("steps_per_execution", 4): 0.8, ("steps_per_execution", 8): 0.7,
                  ("steps_per_execution", 16): 0.55, ("xla", "jit"): 0.6}


def _ladder_search(sweeps: int, resize: bool) -> tuple[dict, list[str]]:
    from tfperf.tuning.options import TuneOptions
    from tfperf.tuning.space import TRAIN_SEARCH_ORDER, TrainBaseline, fit_training_space
    from tfperf.tuning.traintune import TrainEvaluator

    facts = SpaceFacts(cores=2, model_format="factory", train=True)
    space = fit_training_space(build_space(facts), TrainBaseline(), 0.034).restrict(
        ("steps_per_execution", "xla"))
    assert space.values["steps_per_execution"] == (None, 4, 8)  # 16 steps: a 0.54-s call
    evaluator = TrainEvaluator({"kind": "train", "path": "m.py", "batch": 8},
                               TuneOptions(quick=not sweeps))
    evaluate = Stepped(LADDER_EFFECTS)
    result = Search(space, evaluate, knob_order=TRAIN_SEARCH_ORDER, reach_first=True,
                    sweeps=sweeps, look_again=(lambda _c: True) if not sweeps else None,
                    resize=evaluator.resize_ladder if resize else None).run()
    return result.incumbent, [o.label for o in result.outcomes]


@pytest.mark.parametrize("sweeps", [0, 3])
def test_the_steps_per_call_ladder_grows_once_another_knob_shortens_the_step(sweeps):
    # steps per call wins at 8 (the most a 0.5-s call held at the default's 34-ms step); XLA
    # then cuts the step to about 14 ms, where 16 steps a call fit: they are tried on top of
    # XLA, by --quick's second look and by a sweep alike
    answer, tried = _ladder_search(sweeps, resize=True)
    assert "steps_per_execution=16,xla=jit" in tried
    assert answer == {"steps_per_execution": 16, "xla": "jit"}
    # sized once from the default's step, the ladder never reaches 16
    answer, tried = _ladder_search(sweeps, resize=False)
    assert answer == {"steps_per_execution": 8, "xla": "jit"}
    assert not any("=16" in name for name in tried)
