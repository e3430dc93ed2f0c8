"""The worker's training step (``tfperf.worker.training``), in this process with real Keras.

The guard restarts from the same state every time (weights, optimizer, dropout seeds), runs
one step per call whatever ``steps_per_execution`` is, and evaluates the validation data; the
timed steps match the optimizer's own count (``outputs`` checks it first).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tfperf.worker.training import train_prepared

pytestmark = [pytest.mark.tf]

FACTORIES = str(Path(__file__).resolve().parent.parent / "models")


def workload(tmp_path: Path, **extra) -> dict:
    return {"kind": "train", "path": "train_factories:tabular_mlp", "format": "factory",
            "search_path": FACTORIES, "guard_steps": 50, **extra}


def test_the_guard_repeats_itself_and_ignores_steps_per_execution(tmp_path):
    x = np.random.default_rng(2).normal(size=(64, 10)).astype("float32")
    np.savez(tmp_path / "val.npz", x=x, y=x[:, :1])
    one = train_prepared(workload(tmp_path, validation=str(tmp_path / "val.npz")), {})
    first = one.outputs()
    many = train_prepared(workload(tmp_path), {"steps_per_execution": 4})
    for _ in range(3):
        many.call()
    again = many.outputs()
    assert many.batch == 4 * 32 and many.train["steps_per_call"] == 4
    np.testing.assert_array_equal(first[0], again[0])  # the same 50 per-step losses
    assert first[0].shape == (50,) and first[0][-5:].mean() < first[0][:5].mean()
    assert list(first[2]) == ["loss"] and np.isfinite(first[1]).all()
    for _ in range(2):
        many.call()
    np.testing.assert_array_equal(many.outputs()[0], again[0])



def test_a_batch_knob_recuts_the_same_samples_and_guards_them_at_equal_samples(tmp_path):
    default = train_prepared(workload(tmp_path, guard_steps=100), {})
    doubled = train_prepared(workload(tmp_path, guard_steps=100, tile_to=64), {})
    assert (default.batch, doubled.batch) == (32, 64)
    assert doubled.train["batch"] == 64
    assert doubled.fingerprint == default.fingerprint  # the batches as the user gave them
    assert any("re-cut to 64 rows" in note for note in doubled.notes)
    ours, theirs = default.outputs()[0], doubled.outputs()[0]
    assert (ours.size, theirs.size) == (100, 50)  # 3200 samples each
    assert np.isfinite(theirs).all() and theirs[-5:].mean() < theirs[:5].mean()
