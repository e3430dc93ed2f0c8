"""``tfperf pipeline`` end to end: the demo and user pipelines through the real CLI."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from helpers import run_cli
from tfperf.core.inputbound import verdict

pytestmark = pytest.mark.tf

VERDICTS = {"highly_input_bound", "moderately_input_bound", "not_input_bound"}

USER = """
import numpy as np
import tensorflow as tf


def plain():
    x = np.arange(64 * 4, dtype=np.float32).reshape(64, 4)
    return tf.data.Dataset.from_tensor_slices(x).map(lambda v: v * 2.0).batch(8)


def with_model():
    import keras
    x = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    y = x.sum(axis=1, keepdims=True)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(64).batch(8)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    return {"dataset": ds, "model": model, "loss": "mse"}


def as_for_training():
    found = with_model()
    found["model"].compile("sgd", "mse")
    return found["model"], found["dataset"]
"""


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("userpipes")
    (d / "userpipes.py").write_text(textwrap.dedent(USER))
    return d


# Blocks of a twentieth of a second: enough for every fix to be measured and the lengthening of
# short blocks to run, at a quarter of the default's cost.
SHORT_BLOCKS = ("--min-block-seconds", "0.05")


def _json(*args: str, cwd: Path | None = None) -> dict:
    res = run_cli("pipeline", *args, *SHORT_BLOCKS, "--json", cwd=cwd, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)


def _check_measured(fix: dict) -> None:
    assert fix["per_s"] > 0 and fix["baseline_per_s"] > 0
    assert fix["speedup"] > 0
    low, high = fix["ci95"]
    assert low <= fix["speedup"] <= high
    assert fix["verdict"] in {"faster", "slower", "same", "inconclusive"}


def _check_best(doc: dict) -> None:
    measured = [f for f in doc["fixes"] if f["measured"]]
    faster = [f for f in measured if f["verdict"] == "faster"]
    best = doc["best_fix"]
    if faster:
        sure = [f for f in faster if f["ci95"][0] > 1.0]
        top = max(sure or faster, key=lambda f: f["speedup"])
        assert (best["name"], best["speedup"]) == (top["name"], top["speedup"])
        assert best["change"] == top["change"]
    else:
        assert best["name"] is None and best["speedup"] is None


def test_demo_json(tmp_path: Path) -> None:
    doc = _json("--demo", "--steps", "1", "--rounds", "6", "--stage-seconds", "0.05", cwd=tmp_path)
    assert doc["verdict"] in VERDICTS
    assert 0.0 <= doc["input_share"] <= 1.0
    assert doc["verdict"] == verdict(doc["input_share"])
    assert doc["metric"] == "steps/s" and doc["batch"] == 32
    assert doc["dataset"]["batches_per_s"] > 0 and doc["compute"]["steps_per_s"] > 0
    names = [s["stage"] for s in doc["stages"]]
    assert names[0] == "from_tensor_slices" and "map(_load)" in names and names[-1] == "batch"
    assert sum(s["bounding"] for s in doc["stages"]) == 1
    assert doc["bounding_stage"] in names
    measured = {f["name"]: f for f in doc["fixes"] if f["measured"]}
    for name in (
        "parallel_map",
        "interleave",
        "cache_decoded",
        "batch_before_map",
        "prefetch",
        "autotune_budget",
        "private_threadpool",
        "thread_split",
    ):
        _check_measured(measured[name])
    assert measured["cache_decoded"]["change"].startswith("ds = ds.map(load).cache()")
    skipped = {f["name"]: f for f in doc["fixes"] if not f["measured"]}
    assert "random" in skipped["cache"]["reason"]
    _check_best(doc)
    assert doc["gpu"]["available"] is False and doc["gpu"]["reason"].startswith("no GPU")


def test_user_dataset_without_model(user_dir: Path) -> None:
    doc = _json(
        "userpipes:plain", "--steps", "3", "--rounds", "2", "--stage-seconds", "0.05", cwd=user_dir
    )
    assert doc["verdict"] is None and doc["input_share"] is None
    assert doc["metric"] == "batches/s" and doc["batch"] == 8
    fixes = {f["name"]: f for f in doc["fixes"]}
    assert fixes["cache"]["measured"] is True  # finite, no random stage: cache is applied
    _check_measured(fixes["cache"])
    # no flags in the function: the pipeline is rebuilt from its own stages
    assert fixes["parallel_map"]["measured"] is True
    assert "num_parallel_calls=tf.data.AUTOTUNE" in fixes["parallel_map"]["change"]
    assert fixes["batch_before_map"]["measured"] is True  # x * 2.0 checked on a batch
    assert "thread_split" not in fixes  # no model, no thread split to try
    assert any("2 rounds: at least 6" in n for n in doc["notes"])
    _check_best(doc)


def test_user_model_from_dict_is_compiled(user_dir: Path) -> None:
    doc = _json(
        "userpipes:with_model",
        "--steps",
        "3",
        "--rounds",
        "2",
        "--stage-seconds",
        "0.05",
        cwd=user_dir,
    )
    assert doc["verdict"] in VERDICTS and doc["verdict"] == verdict(doc["input_share"])
    assert doc["train"]["steps_per_s"] > 0
    fixes = {f["name"]: f for f in doc["fixes"]}
    assert "shuffles" in fixes["cache"]["reason"]


def test_the_model_and_dataset_a_training_tune_takes_are_analyzed_as_they_are(
    user_dir: Path,
) -> None:
    doc = _json("userpipes:as_for_training", "--steps", "3", "--rounds", "2",
                "--stage-seconds", "0.05", cwd=user_dir)
    assert doc["verdict"] in VERDICTS and doc["train"]["steps_per_s"] > 0


def test_human_output(user_dir: Path) -> None:
    res = run_cli(
        "pipeline",
        "userpipes:plain",
        "--steps",
        "2",
        "--rounds",
        "1",
        "--stage-seconds",
        "0.05",
        *SHORT_BLOCKS,
        cwd=user_dir,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    text = " ".join(res.stdout.split())
    assert "dataset alone:" in text and "batches/s" in text
    assert "the stage that bounds throughput" in text
    assert "input share unknown" in text
    assert "no GPU" in text
