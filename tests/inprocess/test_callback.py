"""``tfperf.inprocess.callback.BottleneckCallback`` inside a real ``model.fit``."""

from __future__ import annotations

import numpy as np
import pytest

from tfperf.core.inputbound import verdict

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from tfperf.inprocess.callback import BottleneckCallback  # noqa: E402

VERDICTS = {"highly_input_bound", "moderately_input_bound", "not_input_bound"}


def _data() -> tuple[object, object]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(96, 8)).astype(np.float32)
    y = (x.sum(axis=1) > 0).astype(np.int32)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (tf.sin(a), b)).batch(8)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16), keras.layers.Dense(2)])
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return ds, model


class _Snapshot(keras.callbacks.Callback):
    """Records the weights and optimizer step when training ends (before the replay)."""

    def on_train_end(self, logs: dict | None = None) -> None:
        self.weights = self.model.get_weights()
        self.iterations = int(self.model.optimizer.iterations.numpy())


def test_report_after_fit_and_training_untouched(capsys: pytest.CaptureFixture[str]) -> None:
    ds, model = _data()
    snap = _Snapshot()
    cb = BottleneckCallback(ds, replay_steps=5)
    history = model.fit(ds, epochs=2, callbacks=[snap, cb], verbose=0)
    assert len(history.history["loss"]) == 2  # the replay's own fit did not replace it
    report = cb.report
    assert report is not None
    assert report["verdict"] in VERDICTS and report["verdict"] == verdict(report["input_share"])
    assert 0.0 <= report["input_share"] <= 1.0
    low, high = report["input_share_ci95"]
    assert low <= report["input_share"] <= high
    assert len(cb.pairs) == 2 and len(cb.compute_s) == 2 * 5  # one replay after each epoch
    assert len(cb.step_s) == 2 * (12 - 2)  # 12 steps per epoch, 2 of them warm-up
    assert report["train"]["steps_per_s"] > 0 and report["compute"]["steps_per_s"] > 0
    assert report["gpu"]["available"] is False and report["gpu"]["reason"].startswith("no GPU")
    assert report["stages"] == [] and report["fixes"] == [] and report["best_fix"] is None
    # The replay restored the model and optimizer exactly.
    for before, after in zip(snap.weights, model.get_weights(), strict=True):
        np.testing.assert_array_equal(before, after)
    assert int(model.optimizer.iterations.numpy()) == snap.iterations
    line = capsys.readouterr().out
    assert line.startswith("tfperf: ") and "of step time waits for input" in line


def test_replay_after_chosen_epoch_with_one_batch() -> None:
    ds, model = _data()
    batch = next(iter(ds))
    cb = BottleneckCallback(batch, replay_steps=3, replay=0, verbose=False)
    model.fit(ds, epochs=3, callbacks=[cb], verbose=0)
    assert cb.report is not None and len(cb.compute_s) == 3
    assert cb.report["input_share_ci95"] is None
    assert any("one replay" in note for note in cb.report["notes"])
    assert len(cb.step_s) == 12 - 2  # steps after the replay are not recorded


def test_too_short_training_is_reported_not_raised() -> None:
    ds, model = _data()
    cb = BottleneckCallback(ds.take(2), replay_steps=2, verbose=False)
    model.fit(ds.take(2), epochs=1, callbacks=[cb], verbose=0)
    assert cb.report["input_share"] is None and cb.report["verdict"] is None
    assert any("no steady-state steps" in note for note in cb.report["notes"])
