"""A training search's limits: without a typed limit the whole tune is to end within its time,
keeping what the answer needs after the search; ``--quick`` and the default grow to one guarded
candidate per knob and say so; a budget the user typed stays as typed."""

from __future__ import annotations

from tfperf.tuning.evaluate import Progress
from tfperf.tuning.options import options_from_args
from tfperf.tuning.space import SpaceFacts, build_space
from tfperf.tuning.traintune import train_limits


class Said(Progress):
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.notices: list[str] = []

    def phase(self, text: str) -> None:
        self.lines.append(text)

    def notice(self, text: str) -> None:
        self.notices.append(text)
        self.lines.append(text)


def evaluator_after_default(options, cost_s: float, block_s: float):
    """A training evaluator whose default took ``cost_s`` to start and guard (no worker runs:
    the limits are computed from these figures alone)."""
    from tfperf.tuning.traintune import TrainEvaluator

    evaluator = TrainEvaluator({"kind": "train", "path": "m.py", "batch": 8}, options)
    evaluator.default_cost_s = cost_s
    evaluator.workers.block_s = block_s
    return evaluator


def slow_step_evaluator(options):
    # a default that took 40 s to start and guard (a slow step), blocks of 0.8 s
    return evaluator_after_default(options, 40.0, 0.8)


SPACE = build_space(SpaceFacts(cores=2, bf16=True, model_format="factory", train=True,
                               allocators={"tcmalloc": "/lib/libtcmalloc.so.4"}))


def test_quick_grows_its_budget_to_one_guarded_candidate_per_knob_and_says_so(tmp_path):
    options = options_from_args(quick=True, store=str(tmp_path / "s.db"))
    said = Said()
    limits = train_limits(slow_step_evaluator(options), SPACE, options, said)
    knobs = len(SPACE.knobs())
    assert limits.max_trials >= knobs and limits.budget_s > options.budget_s
    assert limits.budget_s >= knobs * 40
    (line,) = said.lines
    assert line.startswith("--quick's time limit grows from 110 s to")
    assert "at least 50 steps" in line
    assert said.notices == [line]  # shown whatever the display, not only with -v
    # the progress counts one candidate per knob; second looks may follow
    assert limits.planned == knobs and limits.max_trials > knobs


def test_quick_counts_one_candidate_per_knob_where_there_are_fewer_knobs_than_its_trials(
    tmp_path,
):
    # a model given as arrays has no input pipeline to tune: six knobs, fewer than the eight
    # trials --quick gives an inference tune; the progress said "trial 6/8" and the tune ended
    from tfperf.tuning.traintune import QUICK_SECOND_LOOKS

    options = options_from_args(quick=True, store=str(tmp_path / "s.db"))
    few = SPACE.restrict(("steps_per_execution", "xla", "onednn", "intra_threads",
                          "inter_threads", "allocator"))
    assert few.most_knobs() == 6 < options.max_trials
    limits = train_limits(slow_step_evaluator(options), few, options, Said())
    assert limits.planned == 6 and limits.max_trials == 6 + QUICK_SECOND_LOOKS


def test_quick_looks_again_only_where_the_tune_still_ends_within_its_own_time(tmp_path):
    from tfperf.tuning.traintune import QUICK_TRAIN_TUNE_S

    options = options_from_args(quick=True, store=str(tmp_path / "s.db"))
    fast = evaluator_after_default(options, 5.0, 0.2)
    limits = train_limits(fast, SPACE, options, Said())
    assert limits.look_again({"steps_per_execution": 8})
    after = fast.candidate_cost_s() + fast.tail_s({"steps_per_execution": 8})
    fast.started -= QUICK_TRAIN_TUNE_S - after + 1  # a second later than it fits
    assert not limits.look_again({"steps_per_execution": 8})
    # where the limit grew, a second look still has only --quick's own time
    slow = slow_step_evaluator(options)
    grown = train_limits(slow, SPACE, options, Said())
    slow.started -= QUICK_TRAIN_TUNE_S - 1
    assert grown.budget_s > QUICK_TRAIN_TUNE_S and not grown.look_again({"xla": "jit"})
    # a full tune sweeps again instead
    full = options_from_args(store=str(tmp_path / "s.db"))
    assert train_limits(evaluator_after_default(full, 5.0, 0.2), SPACE, full,
                        Said()).look_again is None


def test_quick_reaches_a_knob_again_within_its_grown_limit_and_no_later(tmp_path):
    # a knob measured on a step the answer has since shortened may take the time the grown
    # limit gave to reach every knob, where an undecided one has only --quick's 110 s
    from tfperf.tuning.traintune import QUICK_TRAIN_TUNE_S

    options = options_from_args(quick=True, store=str(tmp_path / "s.db"))
    slow = evaluator_after_default(options, 15.0, 0.3)
    limits = train_limits(slow, SPACE, options, Said())
    ends = slow.tune_limit_s
    assert ends > QUICK_TRAIN_TUNE_S + 60  # grown: one candidate per knob costs more here
    after = slow.candidate_cost_s() + slow.tail_s({"steps_per_execution": 8, "xla": "jit"})
    slow.started -= ends - after - 1  # past 110 s, and a second before the grown limit
    assert slow.elapsed_s() > QUICK_TRAIN_TUNE_S
    assert limits.reach_again({"steps_per_execution": 8, "xla": "jit"})
    assert not limits.look_again({"steps_per_execution": 8, "xla": "jit"})
    slow.started -= 2  # a second after it
    assert not limits.reach_again({"steps_per_execution": 8, "xla": "jit"})


def test_a_typed_budget_is_kept_even_with_quick(tmp_path):
    options = options_from_args(quick=True, budget=30.0, store=str(tmp_path / "s.db"))
    said = Said()
    limits = train_limits(slow_step_evaluator(options), SPACE, options, said)
    assert (limits.max_trials, limits.budget_s, limits.reserve) == (8, 30.0, None)
    assert not said.lines


def test_limits_typed_beside_quick_are_kept_as_typed(tmp_path):
    store = str(tmp_path / "s.db")
    typed = options_from_args(quick=True, max_trials=3, confirm_rounds=30, store=store)
    assert typed.confirm_rounds == 30 and not typed.quick_trials
    limits = train_limits(slow_step_evaluator(typed), SPACE, typed, Said())
    assert limits.max_trials == 3  # not raised to one candidate per knob
    own = options_from_args(quick=True, store=store)
    assert own.confirm_rounds == 10 and own.quick_trials
    assert options_from_args(store=store).confirm_rounds == 21
    assert options_from_args(quick=True, confirm_rounds=6, store=store).confirm_rounds == 6


def test_limits_typed_beside_quick_on_the_command_line_reach_the_tune(tmp_path, monkeypatch):
    # the command line hands what the user typed through, and nothing else
    from click.testing import CliRunner

    import tfperf.tuning
    from tfperf.cli import app

    seen = []

    class Seen(Exception):
        pass

    def tune(workload, options, **_):
        seen.append(options)
        raise Seen

    monkeypatch.setattr(tfperf.tuning, "tune", tune)
    monkeypatch.chdir(tmp_path)  # no configuration file
    (tmp_path / "usermod.py").write_text("def make():\n    pass\n")
    for args in (["--confirm-rounds", "30", "--max-trials", "3"], []):
        result = CliRunner().invoke(app, ["tune", "--train", "usermod:make", "--quick",
                                          "--store", str(tmp_path / "s.db"), *args])
        assert isinstance(result.exception, Seen), result.output
    assert [(o.confirm_rounds, o.max_trials, o.quick_trials) for o in seen] == [
        (30, 3, False), (10, 8, True)]


def test_a_timed_fit_runs_whole_calls_on_both_sides_for_about_a_second():
    from tfperf.tuning.traintune import fit_steps

    assert fit_steps(0.004, 1, 32) == 256  # 250 steps of 4 ms, in calls of 32
    assert fit_steps(0.2, 1, 4) == 16  # never fewer than 16 steps
    assert fit_steps(0.05, 8, 3) == 24
    assert fit_steps(0.03, 1, 32) == 32  # 33 steps wanted: the nearest whole call, not two


def test_an_undecided_confirmation_says_what_more_rounds_would_decide():
    from tfperf.tuning.traintune import fit_sentence, more_time_sentence

    rec = {"keep_default": True, "reason": "not significantly faster",
           "speedup": {"median": 1.25, "ci95": [0.93, 1.62], "n_pairs": 21}}
    more_time_sentence(rec)
    assert rec["more_time"]["confirm_rounds"] > 21
    assert "1.25x [0.93-1.62] in 21 rounds: --confirm-rounds" in rec["reason"]
    # --quick's confirmation of 10 rounds ran on to 16: the sentence counts the 16 it ran,
    # and never suggests fewer rounds than were run
    quick = {"keep_default": True, "reason": "not significantly faster",
             "speedup": {"median": 1.05, "ci95": [0.99, 1.12], "n_pairs": 16}}
    more_time_sentence(quick)
    assert "in 16 rounds" in quick["reason"] and quick["more_time"]["confirm_rounds"] > 16
    answer = {"keep_default": False, "speedup": {"median": 2.0, "ci95": [1.8, 2.2]}}
    fit_sentence(answer, {"median": 1.1, "ci95": [1.0, 1.2]})
    assert "model.fit gave 1.10x" in answer["notes"][0]
    assert answer["fit_speedup"]["median"] == 1.1


def test_a_fit_that_could_not_be_timed_keeps_the_confirmed_answer_and_says_why():
    from tfperf.tuning.traintune import fit_sentence

    answer = {"keep_default": False, "speedup": {"median": 2.0, "ci95": [1.8, 2.2]}}
    fit_sentence(answer, None, "worker crashed with SIGSEGV")
    assert answer["keep_default"] is False and answer["fit_speedup"] is None
    assert answer["notes"] == ["fit not timed: worker crashed with SIGSEGV"]


def test_a_fit_that_returns_long_after_its_steps_says_so_apart_from_the_speedup():
    from tfperf.tuning.traintune import fit_sentence

    fit = {"median": 1.4, "ci95": [1.3, 1.5], "steps": 19, "default_step_ms": 20.0,
           "return_wait_ms": {"median": 190.0, "max": 800.0}}
    answer = {"keep_default": False, "speedup": {"median": 1.4, "ci95": [1.3, 1.5]}}
    fit_sentence(answer, fit)
    assert len(answer["notes"]) == 1
    assert "returned a median 190 ms (at most 800 ms) after its 19 steps" in answer["notes"][0]
    quick = {"keep_default": False, "speedup": {"median": 1.4, "ci95": [1.3, 1.5]}}
    fit_sentence(quick, {**fit, "return_wait_ms": {"median": 30.0, "max": 40.0}})
    assert not quick.get("notes")  # under a tenth of the default's 380 ms of steps


def test_a_training_tune_without_limits_ends_within_its_time_or_grows_to_reach_every_knob(
    tmp_path,
):
    from tfperf.tuning.traintune import TRAIN_TUNE_S

    options = options_from_args(store=str(tmp_path / "s.db"))
    said = Said()
    fast = evaluator_after_default(options, 5.0, 0.3)
    limits = train_limits(fast, SPACE, options, said)
    assert limits.max_trials is None
    assert TRAIN_TUNE_S - 5 < limits.budget_s <= TRAIN_TUNE_S
    assert said.lines[0].startswith(
        f"searching so that the tune ends in about {TRAIN_TUNE_S:.0f} s")
    # the search keeps what its answer needs after it: more for an answer to prune
    one = limits.reserve({"precision": "bf16"})
    two = limits.reserve({"precision": "bf16", "xla": "jit"})
    assert 0 < limits.reserve({}) < one < two
    slow = train_limits(slow_step_evaluator(options), SPACE, options, said)
    assert slow.budget_s >= len(SPACE.knobs()) * 40 > TRAIN_TUNE_S
    assert said.lines[1].startswith(f"the tune's time limit grows from {TRAIN_TUNE_S:.0f} s to")


def test_a_candidate_costs_what_the_candidates_took_once_two_were_tried(tmp_path):
    options = options_from_args(store=str(tmp_path / "s.db"))
    evaluator = evaluator_after_default(options, 20.0, 0.3)
    assert evaluator.candidate_cost_s() == 20.0 + options.min_rounds * 3 * 0.3
    evaluator.spent_s += [9.0, 11.0, 30.0]
    assert evaluator.candidate_cost_s() == 11.0


def test_quick_candidates_get_fewer_and_shorter_rounds_and_warm_ups_than_the_default_tune(tmp_path):
    from tfperf.tuning.traintune import (
        QUICK_BLOCK_S,
        QUICK_MAX_ROUNDS,
        TRAIN_BLOCK_S,
        TRAIN_MAX_ROUNDS,
        TrainEvaluator,
    )

    workload = {"kind": "train", "path": "m.py", "batch": 8}
    store = str(tmp_path / "s.db")
    quick = TrainEvaluator(workload, options_from_args(quick=True, store=store))
    full = TrainEvaluator(workload, options_from_args(store=store))
    assert (quick.usual_rounds, quick.options.block_s) == (QUICK_MAX_ROUNDS, QUICK_BLOCK_S)
    assert (full.usual_rounds, full.options.block_s) == (TRAIN_MAX_ROUNDS, TRAIN_BLOCK_S)
    assert quick.options.min_rounds <= quick.usual_rounds < full.usual_rounds
    assert full.usual_rounds < full.options.max_rounds  # a candidate that may win runs on
    # and warm up for a second, not two
    assert quick.workers.candidates.warmup == {"min_calls": 1, "max_seconds": 1.0}
    assert full.workers.candidates.warmup == {"min_calls": 1, "max_seconds": 2.0}


def test_an_undecided_confirmation_that_may_still_win_runs_on_to_the_most_rounds(
    tmp_path, monkeypatch
):
    from tfperf.core.stats import paired_speedup

    options = options_from_args(quick=True, store=str(tmp_path / "s.db"))
    evaluator = evaluator_after_default(options, 5.0, 0.3)

    class Pair:
        unit, batch = 1, 8

    # the candidate's calls: 1.08x the default's by their median, too spread to decide in 10
    spread = [0.80, 1.05, 0.85, 1.02, 0.90, 0.95, 0.88, 1.10, 0.86, 0.93]
    asked: list[int] = []

    def measure(handles, trial_id, cand, *, limit, decide, rounds, first_round, process):
        asked.append(rounds)
        candidate = (spread * 2)[first_round:first_round + rounds]
        return [[1.0] * rounds, [1.0] * rounds, [c * 0.97 for c in candidate]
                if first_round else candidate]

    monkeypatch.setattr(evaluator, "measure", measure)
    monkeypatch.setattr(evaluator.workers, "get", lambda config, timeout_s: Pair())
    monkeypatch.setattr(evaluator, "confirm_processes", lambda rounds: 1)
    monkeypatch.setattr(evaluator, "confirm_fit", lambda config: None)  # model.fit: not here
    first = paired_speedup([1.0] * 10, spread, evaluator.threshold)
    assert first["verdict"] == "inconclusive" and first["median"] >= 1 + evaluator.threshold
    result = evaluator.confirm({"steps_per_execution": 8}, options.confirm_rounds)
    assert asked == [10, options.max_rounds - 10]
    assert result["n_pairs"] == options.max_rounds
    # one that cannot change the answer by more rounds ends where it was asked to
    asked.clear()
    spread = [1.0] * 10
    assert evaluator.confirm({"steps_per_execution": 8}, 10)["verdict"] == "same"
    assert asked == [10]
