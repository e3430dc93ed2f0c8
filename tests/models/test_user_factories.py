"""Factories written the way users write them: unseeded, and wrong in the ways users get them.

Real CLI, real workers. A factory that draws its weights and inputs from the global generators
builds the same model in every worker; one with a private unseeded generator, or with inputs
that do not fit its model, ends the command with one sentence and exit 2, its run kept.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_cli

pytestmark = [pytest.mark.tf, pytest.mark.slow]

FACTORIES = """
import numpy as np
import tensorflow as tf


def unseeded():
    inp = tf.keras.Input((16,), name="features")
    x = tf.keras.layers.Dense(32, activation="relu")(inp)
    x = tf.keras.layers.Dropout(0.2)(x)
    model = tf.keras.Model(inp, tf.keras.layers.Dense(4)(x))
    return model, np.random.rand(2, 16).astype("float32")


def private():
    rng = np.random.default_rng()
    inp = tf.keras.Input((16,))
    model = tf.keras.Model(inp, tf.keras.layers.Dense(4)(inp))
    return model, rng.random((2, 16), dtype=np.float32)


def misfit():
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(3)])
    return model, np.random.rand(1, 7).astype("float32")
"""
QUICK = ["--no-peak", "--budget", "2"]


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("user")
    (work / "models.py").write_text(FACTORIES)
    return work


def test_an_unseeded_factory_is_the_same_model_in_every_worker(user_dir, tmp_path):
    store = tmp_path / "s.sqlite"
    res = run_cli(
        "bench", "models:unseeded", "--set", "onednn=off", "--processes", "2", *QUICK,
        "--store", str(store), "--json", cwd=user_dir,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    results = json.loads(res.stdout)["results"]
    assert [r["status"] for r in results] == ["ok", "ok"]
    models = [r["model"] for r in results]
    assert models[0] == models[1] and models[0]["weights"] and models[0]["inputs"]


def test_an_unseeded_factory_tuned_on_litert_is_accepted_by_the_guard(user_dir, tmp_path):
    # Before every worker was seeded, the default and the candidate built different random
    # weights, and the guard rejected LiteRT with a relative error near 1.
    res = run_cli(
        "tune", "models:unseeded", "--runtimes", "litert", "--knobs", "runtime",
        "--max-trials", "1", "--confirm-rounds", "6", "--json",
        "--store", str(tmp_path / "s.sqlite"), "--profile-out", str(tmp_path / "p.json"),
        cwd=user_dir,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    (candidate,) = json.loads(res.stdout)["candidates"]
    assert candidate["label"] == "runtime=litert"
    assert candidate["status"] == "measured", candidate["reason"]
    assert candidate["max_rel_error"] < 1e-4


@pytest.mark.parametrize("command", ["bench", "tune"])
def test_a_private_unseeded_generator_is_one_sentence_and_exit_2(user_dir, tmp_path, command):
    from tfperf.store import Store

    store = tmp_path / "s.sqlite"
    extra = ["--set", "onednn=off", *QUICK] if command == "bench" else ["--max-trials", "1"]
    res = run_cli(command, "models:private", *extra, "--store", str(store), cwd=user_dir)
    assert res.returncode == 2, res.stderr[-2000:]
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr[-2000:]
    assert "models:private gives different inputs in two fresh processes" in lines[0]
    assert "--inputs" in lines[0] and "Traceback" not in res.stderr
    with Store.open(store) as st:  # what was recorded stays: the run, failed, with its trials
        loaded = st.load_run("latest")
    assert loaded["run"]["status"] == "failed"
    assert loaded["trials"] and loaded["trials"][0]["role"] in ("baseline", "default")


@pytest.mark.parametrize("command", ["bench", "tune"])
def test_inputs_that_do_not_fit_the_model_name_the_mismatch(user_dir, tmp_path, command):
    extra = QUICK if command == "bench" else ["--max-trials", "1"]
    res = run_cli(
        command, "models:misfit", *extra, "--store", str(tmp_path / "s.sqlite"), cwd=user_dir
    )
    assert res.returncode == 2, res.stderr[-2000:]
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr[-2000:]
    assert "expected axis -1 of input shape to have value 4" in lines[0]
    assert "received input with shape (1, 7)" in lines[0]
    assert "in user code" not in lines[0] and "--inputs" in lines[0]
