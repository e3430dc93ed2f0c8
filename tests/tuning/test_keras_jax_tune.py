"""``tune --train`` with Keras on JAX as a runtime: real workers on both backends.

The factories are the user-style ones of ``tests/models/train_factories.py``, written for no
backend in particular (keras, NumPy and ``tf.data`` only). A JAX worker starts from the
default's initial weights (each backend draws its own from the same seed), so the same-model
check holds across backends and both first losses are one loss; a train_step written for
TensorFlow is "not tried" on JAX with its reason, and a user whose backend is JAX gets JAX as
the default, guarded as on TensorFlow, and Keras on TensorFlow (``keras-tf``) as its candidate.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from helpers import require
from tfperf.core import allocators, knobs
from tfperf.core.config import Config
from tfperf.modelref import resolve_train_target
from tfperf.runner.handle import Worker
from tfperf.tuning import traintune, tune
from tfperf.tuning.options import TuneOptions
from tfperf.tuning.space import Space

pytestmark = [pytest.mark.tf, pytest.mark.slow]

FACTORIES = Path(__file__).resolve().parent.parent / "models"
LR = "train_lr_scale"
BOTH = {"runtime": ("tf", "keras-jax")}


@pytest.fixture(autouse=True)
def with_jax(monkeypatch):
    require(importlib.util.find_spec("jax") is not None, "jax is not installed")
    # every candidate reaches its guard, whatever its speed on a shared machine (which ones
    # are guarded is tested in test_train_guarded.py): the guard on JAX is tested here
    monkeypatch.setattr(traintune, "CLEARLY_SLOWER", 0.0)
    monkeypatch.setattr(traintune, "could_answer", lambda *_: True)
    monkeypatch.chdir(FACTORIES)
    monkeypatch.delenv("KERAS_BACKEND", raising=False)


def _tune(tmp_path: Path, factory: str, space: Space | None = None,
          knobs: tuple[str, ...] | None = None) -> dict:
    """A short tune of ``factory`` over ``space``, else over the space this machine gives
    (``knobs`` of it)."""
    workload = resolve_train_target(f"train_factories:{factory}", guard_steps=50)
    options = TuneOptions(
        store_path=str(tmp_path / "s.db"), profile_out=str(tmp_path / "p.json"),
        confirm_rounds=4, min_rounds=3, max_rounds=4, candidate_timeout_s=240, knobs=knobs,
    )
    return tune(workload, options, space=space)


def test_a_keras_model_is_tuned_on_jax_or_kept_on_tensorflow_with_figures(tmp_path):
    doc = _tune(tmp_path, "cnn_batchnorm", Space(dict(BOTH)))
    (row,) = doc["candidates"]
    assert row["label"] == "runtime=keras-jax" and row["status"] in ("measured", "rejected")
    assert row["speedup"]["median"] > 0 and row["guard"]["steps"] == 50
    assert doc["train"]["default"]["backend"] == "tensorflow"
    # the same initial weights and batches: the first step's loss (before any update, no
    # dropout in this model) is the same loss on both backends
    first_jax = doc["train"]["trajectories"][row["label"]][0]
    assert first_jax == pytest.approx(doc["train"]["default_losses"][0], rel=1e-4)
    profile = json.loads((tmp_path / "p.json").read_text())
    chosen = doc["recommendation"]["label"]
    assert chosen in ("default", "runtime=keras-jax")
    assert (profile["env"].get("KERAS_BACKEND") == "jax") is (chosen == "runtime=keras-jax")


def _threads_cpus(pid: int) -> dict[str, str]:
    """Each thread of process ``pid``: the CPUs it may run on."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        status = (task / "status").read_text()
        found[task.name] = status.split("Cpus_allowed_list:")[1].split()[0]
    return found


def test_jax_s_threads_are_the_cpus_its_worker_runs_on_under_the_allocator_preloaded(
    tmp_path, monkeypatch
):
    usable = sorted(os.sched_getaffinity(0))
    require(len(usable) >= 2, "one CPU: nothing to pin")
    require(allocators.find_allocator("tcmalloc") is not None, "tcmalloc is not installed")
    monkeypatch.setenv("TFPERF_CACHE_DIR", str(tmp_path))
    workload = resolve_train_target("train_factories:tabular_mlp")
    config = Config.parse(["runtime=keras-jax", "runtime_threads=1", "allocator=tcmalloc"])
    worker = Worker(workload, config, timeout_s=120, warmup={"min_calls": 1})
    try:
        worker.start()
        ready = worker.wait_ready()
        assert ready["cpus"] == usable[:1]
        # XLA's pool, tf.data's and Python's threads alike: every one on that CPU
        threads = _threads_cpus(worker.pid)
        assert len(threads) > 4 and set(threads.values()) == {str(usable[0])}
        # a JAX process runs under the allocator tfperf preloads, as any other
        maps = Path(f"/proc/{worker.pid}/maps").read_text()
        assert allocators.allocator_in_maps(maps) == "tcmalloc"
    finally:
        worker.close()


def _model_memory(workload: dict, config: Config) -> int:
    """What a worker's model holds once ready: its RSS less its RSS before the model."""
    worker = Worker(workload, config, timeout_s=120, warmup={"min_calls": 1})
    try:
        worker.start()
        ready = worker.wait_ready()
        return ready["rss_bytes"] - ready["rss_before_model_bytes"]
    finally:
        worker.close()


def test_a_jax_worker_holds_the_memory_of_a_process_that_compiled_its_steps(
    tmp_path, monkeypatch
):
    # the second worker of the same model compiles its steps again, as the user's process
    # does: executables loaded from a cache left the model's memory at less than half
    monkeypatch.setenv("TFPERF_CACHE_DIR", str(tmp_path))
    workload = resolve_train_target("train_factories:tabular_mlp")
    config = Config.parse(["runtime=keras-jax"])
    first, second = (_model_memory(workload, config) for _ in range(2))
    assert second > 0.8 * first


def test_a_train_step_written_with_gradient_tape_is_not_tried_on_jax(tmp_path):
    doc = _tune(tmp_path, "clipped_subclass", Space(dict(BOTH)))
    (row,) = doc["candidates"]
    assert row["label"] == "runtime=keras-jax" and row["status"] == "failed"
    assert ("not tried: the model's train_step uses TensorFlow (tf.GradientTape, "
            "train_factories.py:") in row["reason"]
    assert doc["recommendation"]["keep_default"] is True


def test_a_model_that_takes_strings_is_not_tried_on_jax_with_where_the_lookup_belongs(tmp_path):
    doc = _tune(tmp_path, "string_categories", Space(dict(BOTH)))
    (row,) = doc["candidates"]
    assert row["status"] == "failed" and row["reason"].startswith(
        "not tried: the model raised on JAX")
    assert row["reason"].endswith(
        "; JAX has no string arrays: a lookup of strings (StringLookup, TextVectorization) "
        "runs on JAX in your tf.data pipeline, before the model.")


def test_on_jax_the_user_s_backend_is_the_default_and_the_guard_rejects_a_planted_change(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    knob = knobs.Knob(LR, None, float, knobs.TRAIN_RUNTIMES, "model", "code", "test only")
    monkeypatch.setitem(knobs.KNOBS, LR, knob)
    doc = _tune(tmp_path, "tabular_mlp", Space({"runtime": ("tf",), LR: (None, 400.0)}))
    assert doc["train"]["default"]["backend"] == "jax"
    (row,) = doc["candidates"]
    assert row["status"] == "rejected" and row["guard"]["verdict"] == "rejected"
    assert row["guard"]["default_final_loss"] < row["guard"]["default_first_loss"]


def test_a_user_on_jax_gets_keras_on_tensorflow_as_the_candidate_from_the_same_weights(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    doc = _tune(tmp_path, "cnn_batchnorm", knobs=("runtime",))
    assert doc["train"]["default"]["backend"] == "jax"
    (row,) = doc["candidates"]
    assert row["label"] == "runtime=keras-tf" and row["status"] in ("measured", "rejected")
    assert row["speedup"]["median"] > 0 and row["guard"]["steps"] == 50
    first_tf = doc["train"]["trajectories"][row["label"]][0]
    assert first_tf == pytest.approx(doc["train"]["default_losses"][0], rel=1e-4)
    skipped = {(u["knob"], u["value"]) for u in doc["unavailable"]}
    on_jax = "with the default (KERAS_BACKEND=jax is your backend)"
    assert ("intra_threads/inter_threads/onednn", on_jax) in skipped
    chosen = doc["recommendation"]["label"]
    profile = json.loads((tmp_path / "p.json").read_text())
    assert (profile["env"].get("KERAS_BACKEND") == "tensorflow") is (chosen == "runtime=keras-tf")


def test_a_rejection_across_backends_says_where_the_optimizer_updates_an_embedding_otherwise(
    tmp_path
):
    doc = _tune(tmp_path, "bag_of_words", Space(dict(BOTH)))
    assert doc["train"]["default"]["sparse_rows"] == "Adam"
    (row,) = doc["candidates"]
    assert row["label"] == "runtime=keras-jax" and row["status"] == "rejected", row
    assert row["reason"].endswith(
        "; the backends update your Embedding differently: on TensorFlow your Adam squares its "
        "gradient one looked-up row at a time (a row looked up twice in a batch gets another "
        "second moment), on JAX the summed gradient, so they train your model apart from the "
        "same start")


def test_a_model_of_two_outputs_is_guarded_key_by_key_on_jax(tmp_path):
    # the same steps on both backends: each loss key matches its own, in whatever order
    # either backend returns them
    doc = _tune(tmp_path, "two_heads", Space(dict(BOTH)))
    (row,) = doc["candidates"]
    assert row["label"] == "runtime=keras-jax" and row["status"] == "measured", row["reason"]
    keys = row["guard"]["keys"]
    assert set(keys) == {"loss", "price_loss", "kind_loss"}
    for figures in keys.values():
        assert figures["final_loss"] == pytest.approx(figures["default_final_loss"], rel=1e-3)


def test_a_user_on_jax_whose_step_runs_eagerly_has_it_said_and_threads_change_alone(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    doc = _tune(tmp_path, "eager_mlp", knobs=("runtime_threads",))
    baseline = doc["train"]["baseline"]
    assert baseline["jit_compile"] is False
    assert any(note.startswith("jit_compile=False: on JAX your train step runs eagerly")
               for note in baseline["notes"])
    (row,) = doc["candidates"]
    assert row["label"] == "runtime=keras-jax,runtime_threads=1"
    # the candidate changes JAX's CPUs alone: its step still runs as the user compiled it
    assert any(note.endswith("its step run eagerly (jit_compile=False, or a layer XLA does "
                             "not support)") for note in row["notes"])
    assert not any(note.startswith("XLA on JAX") for note in row["notes"])
    rec = doc["recommendation"]
    if not rec["keep_default"]:  # what it changed is all the code says: no install of jax
        assert [line.split("(")[0] for line in rec["code"]] == ["os.sched_setaffinity"]
