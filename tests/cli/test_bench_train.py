"""``tfperf bench --train``: the user's own training step, measured in real workers.

User-style factories (``tests/models/train_factories.py``: unseeded, labels computed from the
inputs) and a ``.keras`` file saved after compile, trained at tiny sizes. Each run measures
the default and one training knob side by side; bad input ends with one sentence and exit 2.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from helpers import run_cli
from tfperf.tuning.traintune import NOT_FASTER, SLOWER

pytestmark = [pytest.mark.tf, pytest.mark.slow]

FACTORIES = Path(__file__).resolve().parent.parent / "models"
QUICK = ["--no-peak", "--budget", "1", "--processes", "1", "--guard-steps", "50"]


def bench_train(target: str, *args: str, store: Path, cwd: Path = FACTORIES):
    return run_cli("bench", "--train", target, *QUICK, *args, "--store", str(store), "--json",
                   cwd=cwd)


@pytest.fixture(scope="module")
def keras_file(tmp_path_factory) -> Path:
    """A compiled model saved with its optimizer and loss, with inputs and targets."""
    import keras

    root = tmp_path_factory.mktemp("kerasfile")
    x = np.random.default_rng(0).normal(size=(128, 5)).astype("float32")
    np.savez(root / "x.npz", x=x)
    np.savez(root / "y.npz", y=x.sum(axis=1, keepdims=True))
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(8, activation="tanh"),
                              keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    model.save(root / "reg.keras")
    return root


@pytest.mark.parametrize(
    ("target", "knob", "steps_per_call"),
    [
        ("train_factories:gru_text", "input_pipeline=tuned", 1),
        ("train_factories:cnn_batchnorm", "xla=jit", 1),
        ("train_factories:clipped_subclass", "steps_per_execution=4", 4),
    ],
)
def test_bench_train_times_the_models_own_train_step(target, knob, steps_per_call, tmp_path):
    res = bench_train(target, "--set", knob, store=tmp_path / "s.db")
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    base, cand = doc["results"]
    assert base["model"] == cand["model"]  # the same weights and batches in both workers
    for result, steps in ((base, 1), (cand, steps_per_call)):
        train = result["train"]
        assert train["steps_per_call"] == steps
        assert train["batch"] == 32
        assert result["batch"] == 32 * steps  # samples of one timed call
        assert train["steps_per_s"] > 0 and train["samples_per_s"] == pytest.approx(
            train["steps_per_s"] * 32
        )
        low, high = train["steps_per_s_ci95"]
        assert low <= train["steps_per_s"] <= high
        assert train["first_steps_s"] > 0
        assert 0.0 <= train["input_wait_share"] <= 1.0
        assert any("repeated for timing" in n for n in result["notes"])
    speed = doc["comparisons"][0]["speedup"]
    assert speed["n_pairs"] >= 1 and speed["median"] > 0


def test_bench_train_on_a_keras_file_with_its_compile_config(keras_file, tmp_path):
    res = bench_train(
        str(keras_file / "reg.keras"), "--inputs", str(keras_file / "x.npz"),
        "--labels", str(keras_file / "y.npz"), "--batch", "16", store=tmp_path / "s.db",
    )
    assert res.returncode == 0, res.stderr[-2000:]
    (result,) = json.loads(res.stdout)["results"]
    assert result["train"]["batch"] == 16 and result["train"]["steps_per_s"] > 0
    assert any("batched at 16" in n for n in result["notes"])


@pytest.mark.parametrize(
    ("factory", "words"),
    [
        ("not_a_pair", "must return (model, dataset)"),
        ("uncompiled", "model.compile"),
        ("wrong_labels", "labels"),
        ("nan_loss", "nan at the first training step"),
        ("empty_dataset", "empty"),
        ("underscore_subclass", "rename the class"),
    ],
)
def test_bad_training_input_is_one_sentence_and_exit_2(factory, words, tmp_path):
    res = bench_train(f"train_factories:{factory}", store=tmp_path / "s.db")
    assert res.returncode == 2, res.stdout[-1000:] + res.stderr[-2000:]
    assert words.lower() in res.stderr.lower()
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize(
    ("target", "what"),
    [("train_factories:bag_of_words", "returns a dataset"),
     ("train_factories:py_dataset_mlp", "returns a dataset"),
     ("loop_factories:eager_regression", "returns a training loop's dataset")],
)
def test_batch_typed_for_data_batched_already_is_one_sentence_and_exit_2(target, what, tmp_path):
    res = bench_train(target, "--batch", "64", store=tmp_path / "s.db")
    assert res.returncode == 2, res.stdout[-1000:] + res.stderr[-2000:]
    assert f"--batch 64 re-cuts the arrays a factory returns; {target} {what}" in res.stderr
    assert "dataset.rebatch(64)" in res.stderr and "Traceback" not in res.stderr


def test_a_factory_whose_data_differs_between_workers_stops_the_run(tmp_path):
    res = bench_train("train_factories:differs_each_process", "--set", "onednn=off",
                      store=tmp_path / "s.db")
    assert res.returncode == 2, res.stderr[-2000:]
    assert "inputs" in res.stderr and "Traceback" not in res.stderr


def test_training_options_need_train(tmp_path):
    res = run_cli("bench", "train_factories:tabular_mlp", "--guard-steps", "60", "--store",
                  str(tmp_path / "s.db"), cwd=FACTORIES)
    assert res.returncode == 2
    assert "--guard-steps applies with --train only" in res.stderr


def test_a_keras_file_needs_inputs_and_labels_to_train(keras_file, tmp_path):
    res = run_cli("bench", "--train", str(keras_file / "reg.keras"), "--store",
                  str(tmp_path / "s.db"))
    assert res.returncode == 2
    assert "--inputs X.npz and --labels Y.npz" in res.stderr


def test_tune_train_starts_from_the_users_compile_and_adds_only_what_changes(tmp_path):
    # the MLP as a user who already compiles it with jit_compile=True, steps_per_execution=8
    profile = tmp_path / "p.json"
    res = run_cli(
        "tune", "--train", "train_factories:compiled_by_user", "--knobs",
        "steps_per_execution,xla", "--max-trials", "2", "--confirm-rounds", "6",
        "--guard-steps", "50", "--profile-out", str(profile), "--store", str(tmp_path / "s.db"),
        "--json", cwd=FACTORIES,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert doc["train"]["baseline"]["jit_compile"] is True
    assert doc["train"]["baseline"]["steps_per_execution"] == 8
    labels = [row["label"] for row in doc["candidates"]]
    # a knob's candidates are its other values: XLA turned off, other steps per call
    assert any("xla=off" in x for x in labels) and not any("xla=jit" in x for x in labels)
    assert not any("steps_per_execution=8" in x.split(",") for x in labels)
    spe = next(row for row in doc["candidates"] if row["label"].startswith("steps_per"))
    # guarded, or (the machine's timing decides) dropped before its guard, saying why
    assert spe["guard"]["verdict"] in ("accepted", "inconclusive", "rejected", SLOWER, NOT_FASTER)
    assert spe["step_ms"] > 0 and spe["time_ms"] > spe["step_ms"]  # a call of several steps
    rec = doc["recommendation"]
    assert "pruned" in rec and rec["step_ms"] > 0
    fit = rec["fit_speedup"]  # the search found a winner: it was confirmed by model.fit too
    assert fit is None or (fit["steps"] % 8 == 0 and fit["default_step_ms"] > 0)
    assert fit is None or 0 <= fit["return_wait_ms"]["median"] <= fit["return_wait_ms"]["max"]
    if doc["train"]["chosen"]:
        assert fit is not None and fit["median"] > 0
    code = " ".join(rec["code"])
    assert "jit_compile=True" not in code and "steps_per_execution=8" not in code
    if not rec["keep_default"]:  # the machine decides the speed; the lines follow from it
        assert len(rec["code"]) == 1 and "model.compile(..., " in rec["code"][0]
    applied = run_cli("apply", str(profile), "--format", "python")
    assert applied.returncode == 0
    assert "jit_compile=True" not in applied.stdout


def test_a_budget_that_ends_before_a_knob_lists_it_with_the_budget_that_would_reach_it(
    tmp_path,
):
    res = run_cli(
        "tune", "--train", "train_factories:tabular_mlp", "--knobs", "steps_per_execution,xla",
        # 3 s: past the start of the first candidate on a busy machine (1 s was not: the
        # workers started ahead of it took that), short of the ~10 s a candidate takes
        "--budget", "3", "--confirm-rounds", "6", "--guard-steps", "50",
        "--store", str(tmp_path / "s.db"),
        "--profile-out", str(tmp_path / "p.json"), cwd=FACTORIES,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert "your model: jit_compile=False, steps_per_execution=1, float32" in res.stdout
    # the budget ends during the first candidate (steps per call, first in the search order):
    # XLA is listed with the budget that would reach it
    assert "not tried: xla=any (not tried: budget; --budget" in res.stdout
    assert "not tried: steps_per_execution=any" not in res.stdout


def test_tune_train_for_throughput_tries_a_larger_batch_guarded_at_equal_samples(tmp_path):
    res = run_cli(
        "tune", "--train", "train_factories:tabular_mlp", "--objective", "throughput",
        "--knobs", "batch", "--max-trials", "1", "--confirm-rounds", "6", "--guard-steps", "50",
        "--store", str(tmp_path / "s.db"), "--profile-out", str(tmp_path / "p.json"), "--json",
        cwd=FACTORIES,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert doc["objective"] == "throughput"
    (row,) = doc["candidates"]
    assert row["label"] == "batch=64" and row["status"] in ("measured", "rejected")
    guard = row["guard"]
    # 50 steps of the largest batch (128 rows) over the default's samples: 200 of 32 rows;
    # a batch of 64 sees them in 100 steps.
    assert len(doc["train"]["default_losses"]) == 200
    assert (guard["steps"], guard["default_steps"], guard["batch_ratio"]) == (100, 200, 2.0)
    if row["status"] == "rejected":
        assert "may need another learning rate" in row["reason"]
    rec = doc["recommendation"]
    if not rec["keep_default"]:
        assert any("may need another learning rate" in n for n in rec["notes"])
        assert rec["code"][0].startswith("dataset = dataset.rebatch(64)")
    assert not [u for u in doc["unavailable"] if u["knob"] == "batch"]


def test_more_cpus_for_jax_than_the_process_may_use_is_one_sentence_and_exit_2(tmp_path):
    more = len(os.sched_getaffinity(0)) + 1
    res = bench_train("train_factories:tabular_mlp", "--set", "runtime=keras-jax", "--set",
                      f"runtime_threads={more}", store=tmp_path / "s.db")
    assert res.returncode == 2
    assert f"runtime_threads={more} on keras-jax pins the process to {more} CPUs" in res.stderr
    assert "Traceback" not in res.stderr


def test_a_training_answer_with_an_environment_says_what_to_set_beside_the_code(capsys):
    from tfperf.cli.train import render_train_tune
    from tfperf.core.knobs import adoption_text

    config = {"steps_per_execution": 32, "onednn": False}
    doc = {
        "train": {"default": {"first_steps_s": 0.5, "batch": 32}, "note": "a finite one"},
        "recommendation": {"config": config, "keep_default": False,
                           "code": ["model.compile(..., steps_per_execution=32)"]},
        "candidates": [],
        "profile": "/p/answer.json",
    }
    render_train_tune(doc)
    out = capsys.readouterr().out
    assert "  model.compile(..., steps_per_execution=32)" in out
    assert "and start it with (tfperf run --profile /p/answer.json -- python train.py" in out
    assert "  TF_ENABLE_ONEDNN_OPTS=0" in out.splitlines()
    assert adoption_text(config) == "one line of code and its environment"
    # an answer of code alone says nothing more
    render_train_tune({**doc, "recommendation": {**doc["recommendation"],
                                                 "config": {"steps_per_execution": 32}}})
    assert "start it with" not in capsys.readouterr().out
    assert adoption_text({"steps_per_execution": 32}) == "one line of code"
