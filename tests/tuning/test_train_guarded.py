"""Which training candidates spend the guard's steps: only one that could become the answer
(significantly faster than its incumbent, or a removal the pruning would take), so that every
configuration recommended has passed the guard and no other pays for it."""

from __future__ import annotations

import functools

import pytest

from tfperf.core.knobs import label
from tfperf.tuning.traintune import could_answer

ANSWER = {"steps_per_execution": 32, "precision": "bf16"}


def vs(verdict: str, median: float, low: float, high: float) -> dict:
    return {"verdict": verdict, "median": median, "ci95": [low, high]}


def test_a_candidate_significantly_faster_than_its_incumbent_is_guarded():
    assert could_answer({"intra_threads": 1}, {}, vs("faster", 1.2, 1.1, 1.3))


def test_a_candidate_that_does_not_beat_its_incumbent_is_not_guarded():
    for verdict in (vs("same", 1.0, 0.99, 1.01), vs("inconclusive", 1.1, 0.9, 1.3),
                    vs("slower", 0.8, 0.7, 0.9)):
        assert not could_answer({**ANSWER, "intra_threads": 1}, ANSWER, verdict)


def test_a_removal_is_guarded_unless_it_is_significantly_slower():
    # anything but significantly slower may leave the answer without the knob (an undecided
    # removal, still undecided when measured again, goes): it must have passed the guard
    without_bf16 = {"steps_per_execution": 32}
    assert could_answer(without_bf16, ANSWER, vs("same", 1.0, 0.98, 1.02))
    assert could_answer(without_bf16, ANSWER, vs("inconclusive", 0.99, 0.9, 1.1))
    assert could_answer(without_bf16, ANSWER, vs("inconclusive", 0.8, 0.6, 1.05))
    assert not could_answer(without_bf16, ANSWER, vs("slower", 0.7, 0.6, 0.8))
    # another value of a knob is no removal: it must beat the answer
    other = {"steps_per_execution": 8, "precision": "bf16"}
    assert not could_answer(other, ANSWER, vs("same", 1.0, 0.98, 1.02))


class Blocks:
    """A member of the rounds whose blocks take the given seconds, round after round."""

    alive, unit = True, 1

    def __init__(self, seconds: list[float]) -> None:
        self.seconds, self.rounds = seconds, 0

    def block(self, round_no: int) -> list[float]:
        self.rounds += 1
        return [self.seconds[round_no % len(self.seconds)]]


def rounds_run(candidate_s: list[float], *, removal: bool, quick: bool = False) -> int:
    """The rounds a training candidate runs against a default that takes 1 s a block."""
    from tfperf.tuning.options import TuneOptions
    from tfperf.tuning.traintune import TrainEvaluator

    options = TuneOptions(min_rounds=6, max_rounds=16, quick=quick)
    evaluator = TrainEvaluator({"kind": "train", "path": "m.py", "batch": 8}, options)
    assert evaluator.usual_rounds == (10 if quick else 12)
    base, cand = Blocks([1.0]), Blocks(candidate_s)
    enough = functools.partial(evaluator.rounds_enough, removal=removal)
    evaluator.measure([base, base, cand], None, cand, limit=1e9, decide=True, enough=enough)
    return cand.rounds


# about 0.97x the default's speed, spread so that the verdict stays undecided at 6 rounds
UNDECIDED_BELOW = [1.0, 1.11, 0.98, 1.05, 1.0, 1.08]


def test_a_candidate_every_pair_of_which_is_slower_ends_at_the_fourth_round():
    # every pair below the "faster" bound from the first: it cannot win, in either tune
    assert rounds_run(UNDECIDED_BELOW, removal=False) == 4
    assert rounds_run(UNDECIDED_BELOW, removal=False, quick=True) == 4
    # one pair 1.11x among the first four: it is not called lost, and runs its usual rounds
    assert rounds_run([1.0, 0.9, 1.05, 1.05, 1.02, 1.08], removal=False, quick=True) == 10
    # a removal is never stopped for losing: as fast is what the pruning asks of it
    assert rounds_run(UNDECIDED_BELOW, removal=True, quick=True) == 10


def test_a_removal_runs_its_usual_rounds_and_a_candidate_that_may_win_runs_on():
    assert rounds_run(UNDECIDED_BELOW, removal=True) == 12  # as fast may still be its answer
    # about 1.03x, its interval reaching past 1.1: it may become the answer, so it runs on
    may_win = [0.8, 1.1, 0.85, 1.15, 0.9, 1.05]
    assert rounds_run(may_win, removal=False) == 16
    # about 0.99x, its interval reaching past 1.03 but its median below: the usual 12
    near = [1.1, 0.9, 1.05, 0.95, 1.0, 1.02, 0.97]
    assert rounds_run(near, removal=False) == 12


def test_a_removal_that_looks_significantly_slower_runs_on_until_it_is_decided():
    # about 0.92x the answer's speed, spread so that the verdict stays undecided: the knob
    # removed may yet be kept, so the rounds run on to the maximum
    looks_slower = [1.3, 0.9, 1.35, 0.85, 1.4, 0.95]
    assert rounds_run(looks_slower, removal=True) == 16


class Calls:
    """A member whose every block holds these calls' seconds."""

    alive, unit = True, 1

    def __init__(self, seconds: list[float]) -> None:
        self.seconds = seconds

    def block(self, round_no: int) -> list[float]:
        return list(self.seconds)


def test_a_training_block_counts_every_call_as_fit_pays_every_step():
    from tfperf.core.stats import paired_speedup
    from tfperf.tuning.options import TuneOptions
    from tfperf.tuning.traintune import TrainEvaluator

    evaluator = TrainEvaluator({"kind": "train", "path": "m.py", "batch": 8}, TuneOptions())
    # one-step calls, one of ten slow: 1.1 s a step on average, 1.0 s by their median; a
    # candidate whose one call runs the same steps in 1.1 s a step is as fast, not slower
    default, candidate = Calls([1.0] * 9 + [2.0]), Calls([1.1])
    times = evaluator.measure([default, default, candidate], None, candidate, limit=1e9,
                              decide=False, rounds=6)
    assert times[0] == pytest.approx([1.1] * 6) and times[2] == pytest.approx([1.1] * 6)
    assert paired_speedup(times[0], times[2], 0.03)["verdict"] == "same"


def test_the_next_candidates_workers_start_before_a_winner_is_guarded(monkeypatch):
    # those without a worker start, even where the first has one (ready: its rounds come
    # after the guard, and nothing is timed during it)
    from tfperf.tuning import traintune
    from tfperf.tuning.options import TuneOptions
    from tfperf.tuning.traintune import TrainEvaluator

    evaluator = TrainEvaluator({"kind": "train", "path": "m.py", "batch": 8}, TuneOptions())
    evaluator.reference = []  # the default's own guard ran
    events: list[str] = []
    evaluator.next_if_won = lambda winner: [{**winner, "runtime": "keras-jax"},
                                            {**winner, "intra_threads": 1}]
    monkeypatch.setattr(evaluator.workers, "started", lambda config: "runtime" in config)
    monkeypatch.setattr(evaluator.workers, "start_ahead",
                        lambda config, timeout_s: events.append(f"start {label(config)}"))
    monkeypatch.setattr(evaluator.workers, "outputs",
                        lambda cand, timeout_s=None: events.append("guard") or [])
    monkeypatch.setattr(traintune, "judge", lambda *args: {"accepted": True, "reason": ""})

    class Candidate:
        def __init__(self) -> None:
            self.ready: dict = {}

    evaluator._guard({"steps_per_execution": 32}, Candidate())
    assert events == ["start steps_per_execution=32,intra_threads=1", "guard"]
    # before a ready candidate's rounds, by contrast, nothing starts
    evaluator.start_ahead({"runtime": "keras-jax"}, {"intra_threads": 1})
    assert events == ["start steps_per_execution=32,intra_threads=1", "guard"]


def test_the_defaults_guard_runs_once_while_the_first_candidates_worker_starts(monkeypatch):
    import numpy as np

    from tfperf.tuning.options import TuneOptions
    from tfperf.tuning.traintune import TrainEvaluator

    evaluator = TrainEvaluator({"kind": "train", "path": "m.py", "batch": 8}, TuneOptions())
    events: list[str] = []
    monkeypatch.setattr(evaluator.workers, "started", lambda config: False)
    monkeypatch.setattr(evaluator.workers, "start_ahead",
                        lambda config, timeout_s: events.append(f"start {label(config)}"))
    monkeypatch.setattr(evaluator.workers, "find", lambda name: f"the {name}'s worker")
    losses = [np.linspace(1.0, 0.5, 50)[:, None], np.zeros(0), np.array([], dtype=str),
              np.array(["loss"]), np.array([1.0, 0.0, 60.0])]
    monkeypatch.setattr(evaluator.workers, "outputs",
                        lambda handle, timeout_s=None: events.append(f"guard of {handle}")
                        or losses)
    evaluator.start_ahead({"steps_per_execution": 8}, {"xla": "jit"})
    evaluator.start_ahead({"intra_threads": 1}, {"onednn": False})
    # beside the default's guard one worker starts (the guard takes the other core); once
    # the guard is taken, two at a time
    assert events == ["start steps_per_execution=8",
                      "guard of the default's worker",
                      "start intra_threads=1", "start onednn=off"]
    assert evaluator.reference is losses


class Worker(Blocks):
    """:class:`Blocks` as a tune's worker: what a candidate's measurement reads of it."""

    batch, per_call_s = 8, 1.0

    def __init__(self, seconds: list[float]) -> None:
        super().__init__(seconds)
        self.ready = {"train": {"steps_per_call": 1}}


WITHOUT_BF16 = {"steps_per_execution": 32}


@pytest.mark.parametrize("accepted", [True, False])
def test_an_undecided_removal_measured_again_starts_its_fresh_pair_during_its_guard(
    monkeypatch, accepted
):
    # the pruning measures an undecided removal again in a fresh pair of workers: they start
    # while the guard runs (nothing is timed), and close where the guard keeps the knob
    from tfperf.tuning import traintune
    from tfperf.tuning.options import TuneOptions
    from tfperf.tuning.traintune import TrainEvaluator

    evaluator = TrainEvaluator({"kind": "train", "path": "m.py", "batch": 8},
                               TuneOptions(min_rounds=6, max_rounds=16))
    workers = {label({}): Worker([1.0]), label(ANSWER): Worker([1.0]),
               label(WITHOUT_BF16): Worker(UNDECIDED_BELOW)}
    spares: list[str] = []
    dropped: list[str] = []
    monkeypatch.setattr(evaluator.workers, "get", lambda config, limit: workers[label(config)])
    monkeypatch.setattr(evaluator.workers, "outputs", lambda cand, timeout_s: [])
    monkeypatch.setattr(evaluator.workers, "start_spare",
                        lambda config, timeout_s: spares.append(label(config)))
    monkeypatch.setattr(evaluator.workers, "drop_spares", lambda: dropped.append("spares"))
    monkeypatch.setattr(evaluator, "memory_refusal", lambda *args: None)
    monkeypatch.setattr(evaluator, "take_reference", lambda: None)
    monkeypatch.setattr(traintune, "judge", lambda *args: {
        "accepted": accepted, "reason": "" if accepted else "final loss 2x the default's"})

    evaluator.remeasure_if_undecided = True  # as the pruning says while it measures a removal
    outcome = evaluator._try(WITHOUT_BF16, ANSWER, 1e9, None)
    assert outcome.vs_incumbent["verdict"] == "inconclusive"
    assert spares == [label(ANSWER), label(WITHOUT_BF16)]
    assert dropped == ([] if accepted else ["spares"])

    spares.clear()
    evaluator.remeasure_if_undecided = False  # a search's step: nobody measures it again
    evaluator._try(WITHOUT_BF16, ANSWER, 1e9, None)
    assert spares == []


def remeasure_rounds(candidate_s: list[float], monkeypatch, confirm_rounds: int) -> int:
    """The rounds an undecided removal measured again runs, against an answer taking 1 s a
    block, in a tune whose confirmation takes ``confirm_rounds``."""
    from tfperf.tuning.options import TuneOptions
    from tfperf.tuning.traintune import TrainEvaluator

    options = TuneOptions(min_rounds=6, max_rounds=16, confirm_rounds=confirm_rounds,
                          quick=confirm_rounds < 16)
    evaluator = TrainEvaluator({"kind": "train", "path": "m.py", "batch": 8}, options)
    removal = Worker(candidate_s)
    workers = {label(ANSWER): Worker([1.0]), label(WITHOUT_BF16): removal}
    monkeypatch.setattr(evaluator.workers, "get", lambda config, limit: workers[label(config)])
    monkeypatch.setattr(evaluator.workers, "renew", lambda name: None)
    monkeypatch.setattr(evaluator, "start_fresh", lambda *configs: None)
    outcome = evaluator.remeasure(WITHOUT_BF16, ANSWER)
    assert outcome.info["measured_again"] and outcome.vs_incumbent["verdict"] == "inconclusive"
    return removal.rounds


def test_a_removal_measured_again_takes_a_confirmation_s_rounds_unless_it_may_yet_be_kept(
    monkeypatch
):
    # about 0.97x, its median above the "slower" bound: more rounds cannot keep the knob
    # unless they move that median, so it ends where --quick's confirmation (10) does
    assert remeasure_rounds(UNDECIDED_BELOW, monkeypatch, confirm_rounds=10) == 10
    # about 0.92x, still undecided: the knob may yet be kept, so it runs on to max_rounds
    looks_slower = [1.3, 0.9, 1.35, 0.85, 1.4, 0.95]
    assert remeasure_rounds(looks_slower, monkeypatch, confirm_rounds=10) == 16
    # the default tune's confirmation takes 21: both run all of them
    assert remeasure_rounds(UNDECIDED_BELOW, monkeypatch, confirm_rounds=21) == 21
    assert remeasure_rounds(looks_slower, monkeypatch, confirm_rounds=21) == 21
