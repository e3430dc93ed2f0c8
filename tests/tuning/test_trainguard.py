"""The training guard's rule on loss trajectories (numpy only), and where bf16 is not tried."""

from __future__ import annotations

import numpy as np
import pytest

from tfperf.core.errors import UserError
from tfperf.tuning.space import SpaceFacts, build_space, train_batches
from tfperf.tuning.trainguard import (
    TrainTolerance,
    default_problem,
    judge,
    parse_train_tolerance,
)
from tfperf.tuning.traintune import guard_length

STEPS = np.arange(100)
LEARNS = 2.0 * np.exp(-STEPS / 30) + 0.3  # first tenth ~1.99, last tenth ~0.38
TOL = TrainTolerance()


def outputs(losses, metrics=()):
    names = ["mae"][: len(metrics)]
    return [np.asarray(losses), np.asarray(metrics, dtype=float), np.asarray(names)]


def test_a_candidate_on_the_default_trajectory_is_accepted():
    result = judge(outputs(LEARNS), outputs(LEARNS * 1.001), False, TOL)
    assert result["accepted"] and result["guard"]["verdict"] == "accepted"
    assert result["guard"]["steps"] == 100


def test_a_candidate_that_learns_less_is_rejected_with_its_figures():
    worse = LEARNS + np.linspace(0, 0.6, 100)
    result = judge(outputs(LEARNS), outputs(worse), False, TOL)
    assert not result["accepted"]
    assert result["reason"].startswith("final loss 0.9")
    assert "of the default's drop (limit 10%)" in result["reason"]
    guard = result["guard"]
    assert guard["final_loss"] > guard["default_final_loss"]


def test_a_loss_that_becomes_nan_is_rejected():
    broken = LEARNS.copy()
    broken[60:] = np.nan
    result = judge(outputs(LEARNS), outputs(broken), False, TOL)
    assert not result["accepted"] and result["reason"] == "the loss became nan at step 61"


def test_reduced_precision_gets_the_looser_limits_but_not_an_inconclusive_verdict():
    drift = LEARNS + np.linspace(0, 0.25, 100)  # +15% of the drop: out for fp32, in for bf16
    assert not judge(outputs(LEARNS), outputs(drift), False, TOL)["accepted"]
    flat = np.full(100, 1.0) + 0.001 * np.sin(STEPS)
    fp32 = judge(outputs(flat), outputs(flat), False, TOL)
    assert fp32["accepted"] and fp32["guard"]["verdict"] == "inconclusive"
    bf16 = judge(outputs(flat), outputs(flat), True, TOL)
    assert not bf16["accepted"] and "reduced precision is not accepted" in bf16["reason"]


def test_validation_metrics_must_agree():
    result = judge(outputs(LEARNS, [0.50]), outputs(LEARNS, [0.60]), False, TOL)
    assert not result["accepted"] and result["reason"].startswith("validation mae 0.6 vs 0.5")
    # matched by name, not by place
    ours = [LEARNS, np.asarray([0.5, 0.9]), np.asarray(["mae", "acc"])]
    theirs = [LEARNS, np.asarray([0.9, 0.5]), np.asarray(["acc", "mae"])]
    assert judge(ours, theirs, False, TOL)["accepted"]


def test_a_default_that_diverges_is_the_users_problem():
    losses = LEARNS.copy()
    losses[3] = np.inf
    assert "at step 4 under the default" in default_problem(outputs(losses))


def test_training_tolerance_text():
    assert parse_train_tolerance("0.3").fp32.drop == 0.3
    assert parse_train_tolerance(None) == TOL
    tol = parse_train_tolerance("rel=0.05,reduced_rel=0.1")
    assert (tol.fp32.rel, tol.reduced.rel) == (0.05, 0.1)
    with pytest.raises(UserError, match="not a training tolerance"):
        parse_train_tolerance("top1=0.9")


def test_bf16_is_tried_for_training_where_the_cpu_has_it_but_not_on_a_keras_file():
    factory = build_space(SpaceFacts(cores=2, bf16=True, model_format="factory", train=True))
    assert "bf16" in factory.values["precision"]
    assert factory.values["steps_per_execution"][1:]
    assert factory.values["input_pipeline"] == (None, "tuned")
    saved = build_space(SpaceFacts(cores=2, bf16=True, model_format="keras", train=True))
    assert saved.values["precision"] == ("fp32",)
    (why,) = [u for u in saved.unavailable if u["knob"] == "precision"]
    assert why["reason"].startswith("not tried: a .keras file's layers keep")
    inference = build_space(SpaceFacts(cores=2, bf16=True, model_format="keras"))
    assert inference.values["steps_per_execution"] == (None,)


def test_a_larger_batch_is_judged_at_equal_samples_seen():
    # Each step of a batch twice the default's sees the samples of two default steps.
    per_sample = LEARNS[1::2]  # the same loss for the same samples seen: 50 steps
    same = judge(outputs(LEARNS), outputs(per_sample), False, TOL, ratio=2.0)
    assert same["accepted"], same["reason"]
    guard = same["guard"]
    assert (guard["steps"], guard["default_steps"], guard["batch_ratio"]) == (50, 100, 2.0)
    assert guard["default_final_loss"] == pytest.approx(LEARNS[90:].mean())
    # Half the updates for the same samples: its loss after 50 steps is the default's at 50.
    per_step = LEARNS[:50]
    fewer = judge(outputs(LEARNS), outputs(per_step), False, TOL, ratio=2.0)
    assert not fewer["accepted"] and "of the default's drop" in fewer["reason"]


def test_a_batch_whose_steps_cover_too_few_samples_is_rejected():
    result = judge(outputs(LEARNS), outputs(LEARNS[3::4]), False, TOL, ratio=4.0)
    assert not result["accepted"]
    assert result["reason"] == "the guard ran 25 steps, fewer than 50"


def test_a_throughput_tune_of_the_users_training_step_tries_larger_batches():
    own = build_space(SpaceFacts(cores=2, model_format="factory", train=True, batch=32,
                                 batches=train_batches(32)))
    assert own.values["batch"] == (None, 64, 128)
    latency = build_space(SpaceFacts(cores=2, model_format="factory", train=True, batch=32))
    assert latency.values["batch"] == (None,)


def test_the_defaults_guard_covers_the_largest_batch_for_fifty_steps():
    workload = {"batch": 32, "guard_steps": 60}
    assert guard_length(workload, ()) == 60
    assert guard_length(workload, (64,)) == 100
    assert guard_length(workload, train_batches(32)) == 200
    assert guard_length({"batch": 32}, ()) == 100


def test_every_guarded_key_is_judged_and_the_one_that_fails_is_named():
    # a GAN's d_loss and g_loss: the candidate keeps d_loss but its g_loss drifts away
    keys = np.asarray(["d_loss", "g_loss"])
    ref = np.stack([LEARNS, LEARNS + 0.5], axis=1)
    cand = np.stack([LEARNS, LEARNS + 1.5], axis=1)
    empty = np.asarray([], dtype=float)
    result = judge([ref, empty, empty, keys], [cand, empty, empty, keys], False, TOL)
    assert not result["accepted"] and result["reason"].startswith("g_loss: final loss")
    assert set(result["guard"]["keys"]) == {"d_loss", "g_loss"}
    assert result["guard"]["keys"]["d_loss"]["verdict"] == "accepted"
    same = judge([ref, empty, empty, keys], [ref.copy(), empty, empty, keys], False, TOL)
    assert same["accepted"]
    nan = ref.copy()
    nan[3, 1] = np.nan
    assert "g_loss is nan at step 4" in default_problem([nan, empty, empty, keys])


def test_each_key_is_judged_against_its_own_column_whatever_order_the_candidate_gives():
    # Keras on JAX gave a two-output model's logs as kind_loss, loss, price_loss; on
    # TensorFlow as loss, price_loss, kind_loss: the same values, other columns
    ours = np.asarray(["loss", "price_loss", "kind_loss"])
    theirs = np.asarray(["kind_loss", "loss", "price_loss"])
    ref = np.stack([LEARNS, LEARNS * 1.5, LEARNS * 0.3], axis=1)
    empty = np.asarray([], dtype=float)
    same = judge([ref, empty, empty, ours], [ref[:, [2, 0, 1]], empty, empty, theirs], False,
                 TOL)
    assert same["accepted"] and same["guard"]["verdict"] == "accepted"
    assert same["guard"]["keys"]["kind_loss"]["final_loss"] == pytest.approx(
        same["guard"]["keys"]["kind_loss"]["default_final_loss"])
    fewer = judge([ref, empty, empty, ours], [ref[:, :2], empty, empty, ours[:2]], False, TOL)
    assert not fewer["accepted"]
    assert fewer["reason"] == ("its train step returns no kind_loss (it returns loss, "
                               "price_loss), which the default's guard compares")


def test_a_default_guard_stopped_by_its_time_cap_names_the_seconds_that_would_cover_a_batch():
    empty = np.asarray([], dtype=float)
    keys = np.asarray(["loss"])
    # the default ran 60 of its 200 steps in its 60 s cap: 30 steps of a batch twice as large
    ref = [LEARNS[:60], empty, empty, keys, np.asarray([61.0, 1.0, 60.0])]
    cand = [LEARNS[:60:2], empty, empty, keys]
    result = judge(ref, cand, False, TOL, ratio=2.0)
    assert not result["accepted"]
    assert "stopped at its 60 s cap after 60 steps" in result["reason"]
    assert "--guard-seconds 122 (with --guard-steps 100 or more)" in result["reason"]
    uncapped = [LEARNS[:60], empty, empty, keys, np.asarray([20.0, 0.0, 60.0])]
    assert "fewer than 50" in judge(uncapped, cand, False, TOL, ratio=2.0)["reason"]


def test_a_rejection_says_where_the_candidate_trained_on_other_draws_of_the_augmentation():
    from tfperf.core.protocol import OTHER_DRAWS_NOTE
    from tfperf.tuning.traintune import LEARNING_RATE_NOTE, explained

    worse = LEARNS + np.linspace(0, 0.6, 100)
    notes = ["a finite dataset (3 batches) is repeated for timing", OTHER_DRAWS_NOTE]
    rejected = explained(judge(outputs(LEARNS), outputs(worse), False, TOL), 1.0, notes)
    assert rejected["reason"].startswith("final loss 0.9")
    assert rejected["reason"].endswith("; its batches differ from your pipeline's (a map that "
                                       "draws random numbers draws them in another order once "
                                       "it runs in parallel), so its guard compares training on "
                                       "other draws of your augmentation with training on yours")
    # an accepted candidate, or one whose batches were the user's, keeps the guard's words
    accepted = judge(outputs(LEARNS), outputs(LEARNS * 1.001), False, TOL)
    assert explained(dict(accepted), 1.0, notes) == accepted
    plain = judge(outputs(LEARNS), outputs(worse), False, TOL)
    assert explained(dict(plain), 1.0, notes[:1])["reason"] == plain["reason"]
    assert explained(dict(plain), 2.0, [])["reason"].endswith(LEARNING_RATE_NOTE)
