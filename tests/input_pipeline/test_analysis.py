"""The pipeline analysis's parts on real TensorFlow datasets, models and statistics."""

from __future__ import annotations

import os
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

from tfperf.core import gpu
from tfperf.core.errors import UserError
from tfperf.core.inputbound import classify, input_share, one_line, verdict
from tfperf.input_pipeline import analyze

tf = pytest.importorskip("tensorflow")


def test_verdict_thresholds_are_the_profilers() -> None:
    assert verdict(None) is None
    assert verdict(0.0) == "not_input_bound"
    assert verdict(0.0499) == "not_input_bound"
    assert verdict(0.05) == "moderately_input_bound"
    assert verdict(0.1999) == "moderately_input_bound"
    assert verdict(0.20) == "highly_input_bound"
    assert input_share(0.010, 0.004) == pytest.approx(0.6)
    assert input_share(0.004, 0.005) == 0.0  # a replay slower than the real step: no wait
    assert "60%" in one_line(0.6, "highly_input_bound")


def test_no_nvml_module_means_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    nvml, reason = gpu.open_nvml()
    assert nvml is None and reason == "no GPU (nvidia-ml-py is not installed)"


def test_real_nvml_never_raises() -> None:
    nvml, reason = gpu.open_nvml()
    assert (nvml is None) == bool(reason)
    if nvml is None:
        assert reason.startswith("no GPU")
    else:
        nvml.close()


def test_util_sampler_thread_records_and_stops() -> None:
    calls = []

    def rates(handle: object) -> types.SimpleNamespace:
        calls.append(handle)
        return types.SimpleNamespace(gpu=40 + 10 * len(calls) % 50)

    module = types.SimpleNamespace(nvmlDeviceGetUtilizationRates=rates)
    sampler = gpu.UtilSampler(gpu.Nvml(module, ["h0"], ["test"]), interval_s=0.001)
    sampler.start()
    deadline = time.monotonic() + 30
    while len(calls) < 5 and time.monotonic() < deadline:
        time.sleep(0.001)
    sampler.stop()
    result = sampler.summary()
    count = len(calls)
    assert result["samples"] == count >= 5
    assert 40 <= result["mean_util"] <= result["max_util"] <= 90
    assert len(calls) == count  # the thread has stopped


def test_classify_and_model_checks() -> None:
    import keras

    assert classify(95.0, "not_input_bound") == "gpu_bound"
    assert classify(10.0, "moderately_input_bound") == "cpu_bound"
    assert classify(10.0, "highly_input_bound") == "input_bound"
    assert classify(None, None) is None
    model = keras.Sequential(
        [
            keras.Input((3, 8, 8)),
            keras.layers.Conv2D(4, 3, data_format="channels_first"),
            keras.layers.BatchNormalization(axis=1),
        ]
    )
    checks = gpu.model_checks(model, on_gpu=False)
    assert checks["data_formats"] == ["channels_first"]
    assert checks["batchnorm_layers"] == 1
    assert any("channels_last" in a for a in checks["advice"])
    assert gpu.model_checks(None, on_gpu=False)["advice"] == []


def _load(path: object) -> object:
    return tf.strings.length(path)


def test_stage_chain_labels_and_bounding() -> None:
    from tfperf.worker.pipeline import stages

    def slow(x: object) -> object:
        m = tf.reshape(tf.cast(tf.fill([64 * 64], x), tf.float32), [64, 64])
        for _ in range(4):
            m = tf.linalg.matmul(m, m) / 64.0
        return tf.reduce_sum(m)

    ds = tf.data.Dataset.range(100).map(slow).batch(10).prefetch(1)
    labels = [stages.label(d) for d in stages.chain(ds)]
    assert labels == ["range", "map(slow)", "batch", "prefetch"]
    rows = stages.measure_stages(ds, budget_s=0.05)
    assert [r["stage"] for r in rows] == labels
    assert sum(r["bounding"] for r in rows) == 1
    for row in rows:
        assert row["elements_per_s"] > 0 and row["added_ms_per_batch"] >= 0
    # Before the batch stage, 10 elements make one final batch.
    assert rows[1]["batches_per_s"] == pytest.approx(rows[1]["elements_per_s"] / 10)
    assert stages.rate(tf.data.Dataset.range(0), 0.01) is None


def test_a_cheap_source_never_bounds_a_batched_pipeline() -> None:
    # Counted element by element, a from_tensor_slices source pays Dataset.reduce's per-element
    # call (tens of microseconds), which the batched pipeline never pays, and looked like the
    # slowest stage of a pipeline whose per-element map is the real cost. Prefixes before the
    # batch stage are timed batched, as the pipeline runs.
    from tfperf.worker.pipeline import stages

    # The map costs an outer product per element, far above what batching adds, so which stage
    # bounds is clear even on a loaded machine.
    x = np.random.default_rng(0).normal(size=(4096, 32)).astype(np.float32)
    ds = tf.data.Dataset.from_tensor_slices(x).map(
        lambda v: tf.tanh(v) + tf.reduce_sum(tf.sin(tf.tensordot(v, v, axes=0)))
    )
    rows = stages.measure_stages(ds.batch(64), budget_s=0.2)
    assert [r["stage"] for r in rows] == ["from_tensor_slices", "map", "batch"]
    assert [r["bounding"] for r in rows] == [False, True, False]
    source, mapped = rows[0], rows[1]
    assert source["batches_per_s"] == pytest.approx(source["elements_per_s"] / 64)
    assert source["added_ms_per_batch"] < mapped["added_ms_per_batch"]


def test_unbatchable_elements_fall_back_to_element_rates() -> None:
    from tfperf.worker.pipeline import stages

    ragged = tf.data.Dataset.range(1, 50).map(lambda n: tf.range(n))
    rows = stages.measure_stages(ragged.padded_batch(4), budget_s=0.05)
    assert [r["stage"] for r in rows] == ["range", "map", "padded_batch"]
    assert all(r["batches_per_s"] and r["batches_per_s"] > 0 for r in rows)
    assert rows[1]["batches_per_s"] == pytest.approx(rows[1]["elements_per_s"] / 4)


def test_random_stages_are_detected() -> None:
    from tfperf.worker.pipeline.fixes import has_random_stage

    base = tf.data.Dataset.range(8)
    assert not has_random_stage(base.map(lambda x: x + 1))
    assert has_random_stage(base.shuffle(8))
    assert has_random_stage(base.map(lambda x: x + tf.random.uniform([], 0, 2, tf.int64)))


def test_candidates_follow_the_pipeline() -> None:
    from tfperf.worker.pipeline import fixes
    from tfperf.worker.pipeline.target import Target

    finite = tf.data.Dataset.range(64).map(lambda x: x * 2).batch(8)
    names = {f.name for f in fixes.candidates(Target("t", finite), 2, 2**33).fixes}
    assert {"prefetch", "autotune_budget", "private_threadpool", "cache"} <= names
    assert "thread_split" not in names and "nondeterministic" not in names
    endless = tf.data.Dataset.range(64).map(lambda x: x, num_parallel_calls=2).repeat()
    got = fixes.candidates(Target("t", endless.prefetch(1)), 2, 2**33)
    found, skipped = got.fixes, got.skipped
    assert "prefetch" not in {f.name for f in found}  # it already ends with prefetch
    assert "nondeterministic" in {f.name for f in found}
    reasons = {s["name"]: s["reason"] for s in skipped}
    assert "infinite" in reasons["cache"]
    assert "already ends with prefetch" in reasons["prefetch"]  # said, not silently dropped
    cached = tf.data.Dataset.range(64).batch(8).cache().repeat().prefetch(2)
    skipped = fixes.candidates(Target("t", cached), 2, 2**33).skipped
    reasons = {s["name"]: s["reason"] for s in skipped}
    assert "already caches" in reasons["cache"]  # not "infinite": the cache is there
    early = tf.data.Dataset.range(64).cache().map(lambda x: x * 2).batch(8)
    names = {f.name for f in fixes.candidates(Target("t", early), 2, 2**33).fixes}
    assert "cache" in names  # a cache before work still leaves the work to cache
    # Every wrapper really builds a working dataset with the same elements.
    for fix in fixes.candidates(Target("t", finite), 2, 2**33).fixes:
        got = [b.numpy().tolist() for b in fix.build(Target("t", finite))]
        assert got == [b.numpy().tolist() for b in finite], fix.name
    by_name = {f.name: f for f in fixes.candidates(Target("t", finite), 2, 2**33).fixes}
    combo = fixes.combine([by_name["prefetch"], by_name["autotune_budget"]])
    assert combo.name == "prefetch+autotune_budget" and "# prefetch" in combo.change


def test_structural_rebuild_through_flags(tmp_path: Path) -> None:
    from tfperf.worker.pipeline import target

    (tmp_path / "flagged.py").write_text(
        "import tensorflow as tf\n"
        "def make(*, parallel_map=False):\n"
        "    par = tf.data.AUTOTUNE if parallel_map else None\n"
        "    return tf.data.Dataset.range(8).map(lambda x: x, num_parallel_calls=par)\n"
        "make.tfperf_changes = {'parallel_map': 'use AUTOTUNE'}\n"
    )
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        loaded = target.load("flagged:make")
    finally:
        os.chdir(cwd)
    assert loaded.flags == ("parallel_map",) and loaded.changes["parallel_map"] == "use AUTOTUNE"
    assert type(loaded.rebuild(parallel_map=True)).__name__ == "_ParallelMapDataset"


def test_check_target_does_not_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "explodes_on_import.py").write_text("raise SystemExit('imported!')\n")
    monkeypatch.chdir(tmp_path)
    analyze.check_target("explodes_on_import:make")  # found, not imported
    with pytest.raises(UserError, match="cannot find module"):
        analyze.check_target("surely_missing_mod:make")
    with pytest.raises(UserError, match="module:function"):
        analyze.check_target("explodes_on_import")


def _raw(baseline: list[float], fast: list[float], slow: list[float]) -> dict:
    return {
        "schema": 1,
        "target": "t:f",
        "batch": 8,
        "has_model": True,
        "metric": "steps/s",
        "blocks": {"dataset": baseline, "compute": fast, "train": baseline},
        "stages": [{"stage": "batch", "bounding": True}],
        "fixes": [
            {"name": "a", "change": "A", "baseline": baseline, "candidate": fast},
            {"name": "b", "change": "B", "baseline": baseline, "candidate": slow},
        ],
        "combined": [],
        "skipped": [{"name": "cache", "reason": "r"}],
        "advice": [],
        "gpu": gpu.no_gpu("no GPU", gpu.model_checks(None, False)),
    }


def test_report_statistics_and_best_fix() -> None:
    rng = np.random.default_rng(3)
    baseline = list(0.020 * (1 + 0.01 * rng.standard_normal(8)))
    fast = list(0.010 * (1 + 0.01 * rng.standard_normal(8)))
    slow = list(0.030 * (1 + 0.01 * rng.standard_normal(8)))
    doc = analyze.report(_raw(baseline, fast, slow))
    assert doc["input_share"] == pytest.approx(0.5, abs=0.05)
    assert doc["verdict"] == "highly_input_bound"
    by_name = {f["name"]: f for f in doc["fixes"]}
    assert by_name["a"]["verdict"] == "faster" and by_name["b"]["verdict"] == "slower"
    assert by_name["cache"]["measured"] is False
    assert doc["best_fix"]["name"] == "a" and doc["best_fix"]["speedup"] == pytest.approx(2, 0.1)
    assert doc["bounding_stage"] == "batch"
    # a higher median whose interval still reaches below 1 does not beat a sure gain
    sure = {"name": "sure", "change": "x", "speedup": 2.0, "ci95": [1.5, 2.5], "verdict": "faster"}
    loose = {
        "name": "loose",
        "change": "y",
        "speedup": 2.9,
        "ci95": [0.9, 4.0],
        "verdict": "faster",
    }
    assert analyze.best_fix([loose, sure])["name"] == "sure"
    assert analyze.best_fix([loose])["name"] == "loose"
    none_faster = analyze.report(_raw(baseline, slow, slow))
    assert none_faster["best_fix"]["name"] is None
    assert none_faster["best_fix"]["change"].startswith("keep the pipeline")


def test_short_blocks_get_more_steps() -> None:
    from tfperf.worker.pipeline.main import MAX_STEPS, block_steps

    assert block_steps(0.05, 20, 0.2) == 20  # 1 s blocks stay as asked
    assert block_steps(0.002, 20, 0.2) == 100  # 40 ms blocks grow to 0.2 s
    assert block_steps(1e-7, 20, 0.2) == MAX_STEPS  # capped
    assert block_steps(0.002, 20, 0.0) == 20  # 0 turns it off
