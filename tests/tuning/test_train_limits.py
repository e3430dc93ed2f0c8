"""A training search's limits: ``--quick`` grows to one guarded candidate per knob and says so;
a budget the user typed stays as typed."""

from __future__ import annotations

from types import SimpleNamespace

from tfperf.tuning.evaluate import Progress
from tfperf.tuning.options import options_from_args
from tfperf.tuning.space import SpaceFacts, build_space
from tfperf.tuning.traintune import train_limits


class Said(Progress):
    def __init__(self) -> None:
        self.lines: list[str] = []

    def phase(self, text: str) -> None:
        self.lines.append(text)


def slow_step_evaluator(options):
    # a default that took 40 s to start and guard (a slow step), blocks of 0.8 s
    return SimpleNamespace(default_cost_s=40.0, options=options,
                           workers=SimpleNamespace(block_s=0.8))


SPACE = build_space(SpaceFacts(cores=2, bf16=True, model_format="factory", train=True,
                               allocators={"tcmalloc": "/lib/libtcmalloc.so.4"}))


def test_quick_grows_its_budget_to_one_guarded_candidate_per_knob_and_says_so(tmp_path):
    options = options_from_args(quick=True, store=str(tmp_path / "s.db"))
    said = Said()
    trials, budget = train_limits(slow_step_evaluator(options), SPACE, options, said)
    knobs = len(SPACE.knobs())
    assert trials >= knobs and budget > options.budget_s
    assert budget >= knobs * 40
    (line,) = said.lines
    assert line.startswith("--quick's budget grows from 120 s to") and "at least 50 steps" in line


def test_a_typed_budget_is_kept_even_with_quick(tmp_path):
    options = options_from_args(quick=True, budget=30.0, store=str(tmp_path / "s.db"))
    said = Said()
    assert train_limits(slow_step_evaluator(options), SPACE, options, said) == (8, 30.0)
    assert not said.lines


def test_a_timed_fit_runs_whole_calls_on_both_sides_for_about_a_second():
    from tfperf.tuning.traintune import fit_steps

    assert fit_steps(0.004, 1, 32) == 256  # 250 steps of 4 ms, in calls of 32
    assert fit_steps(0.2, 1, 4) == 16  # never fewer than 16 steps
    assert fit_steps(0.05, 8, 3) == 24


def test_an_undecided_confirmation_says_what_more_rounds_would_decide():
    from tfperf.tuning.traintune import fit_sentence, more_time_sentence

    rec = {"keep_default": True, "reason": "not significantly faster",
           "speedup": {"median": 1.25, "ci95": [0.93, 1.62]}}
    more_time_sentence(rec, 21)
    assert rec["more_time"]["confirm_rounds"] > 21
    assert "1.25x [0.93-1.62] in 21 rounds: --confirm-rounds" in rec["reason"]
    answer = {"keep_default": False, "speedup": {"median": 2.0, "ci95": [1.8, 2.2]}}
    fit_sentence(answer, {"median": 1.1, "ci95": [1.0, 1.2]})
    assert "model.fit gave 1.10x" in answer["notes"][0]
    assert answer["fit_speedup"]["median"] == 1.1


def test_a_training_search_without_limits_gets_a_budget_that_reaches_every_knob(tmp_path):
    from tfperf.tuning.traintune import TRAIN_SEARCH_S

    options = options_from_args(store=str(tmp_path / "s.db"))
    said = Said()
    fast = SimpleNamespace(default_cost_s=5.0, options=options,
                           workers=SimpleNamespace(block_s=0.3))
    assert train_limits(fast, SPACE, options, said) == (None, TRAIN_SEARCH_S)
    _, slow = train_limits(slow_step_evaluator(options), SPACE, options, said)
    assert slow >= len(SPACE.knobs()) * 40 > TRAIN_SEARCH_S
    assert said.lines[0].startswith(f"searching for {TRAIN_SEARCH_S:.0f} s (--budget sets another")
