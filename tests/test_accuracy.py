"""The accuracy guard on a small classifier trained here on digit-like data.

Random-weight models give near-uniform outputs that hide any error, so the model is trained
for real (about a second) and the candidates are real variants of it: a LiteRT fp16 model
(accepted) and a crude 1-bit weight quantization that really loses accuracy (rejected).
"""

from __future__ import annotations

import numpy as np
import pytest

from tfperf.accuracy import (
    DEFAULT_TOLERANCE,
    Tolerance,
    compare_outputs,
    guard,
    load_labels,
    load_outputs,
    parse_tolerance,
)
from tfperf.core.errors import UserError

pytestmark = pytest.mark.tf


def _digit_like_rows(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Ten classes, each a fixed 8x8 pattern drawn with noise and clipped to [0, 1]; noisy
    enough that the small network below gets about 96% of the held-out rows right."""
    patterns = (rng.random((10, 64)) < 0.35).astype("float32")
    y = rng.integers(0, 10, count)
    x = np.clip(patterns[y] + rng.normal(0, 0.9, (count, 64)), 0, 1).astype("float32")
    return x, y


@pytest.fixture(scope="module")
def digits_model():
    import keras

    keras.utils.set_random_seed(0)
    x, y = _digit_like_rows(np.random.default_rng(0), 1800)
    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile("adam", "sparse_categorical_crossentropy")
    model.fit(x[:1400], y[:1400], epochs=30, batch_size=64, verbose=0)
    x_test, y_test = x[1400:], y[1400:].astype("int64")
    reference = [model(x_test).numpy()]
    assert np.mean(reference[0].argmax(1) == y_test) > 0.9, "the model did not learn"
    return model, x_test, y_test, reference


def _crude_quantized_outputs(model, x):
    """The same network with every weight matrix reduced to its sign times its mean |w|."""
    import keras

    clone = keras.models.clone_model(model)
    clone.set_weights(
        [np.sign(w) * np.abs(w).mean() if w.ndim == 2 else w for w in model.get_weights()]
    )
    return [clone(x).numpy()]


def test_guard_rejects_a_crude_quantization_that_loses_accuracy(digits_model):
    model, x, y, reference = digits_model
    candidate = _crude_quantized_outputs(model, x)
    result = guard(reference, candidate, DEFAULT_TOLERANCE, labels=y)
    assert not result["accepted"]
    assert result["max_abs_error"] > 0.05
    assert result["top1_agreement"] < 0.99
    assert result["metric"]["name"] == "accuracy"
    assert result["metric"]["candidate"] < result["metric"]["reference"] - 0.01
    # judged on the task metric alone, it is still rejected
    only_metric = Tolerance(rel=None, abs=None, top1=None, metric=0.01)
    accepted, reason = only_metric.check(result)
    assert not accepted and "accuracy" in reason


def test_guard_accepts_a_real_litert_fp16_variant(digits_model):
    from ai_edge_litert.interpreter import Interpreter

    from tfperf.worker.convert import convert_litert
    from tfperf.worker.prepare import Loaded

    model, x, y, reference = digits_model
    notes: list[str] = []
    loaded = Loaded(model, {"x": x}, ["x"], "keras", None, "unknown", len(x), "digits")
    flatbuffer = convert_litert(loaded, "litert-fp16", notes)
    interpreter = Interpreter(model_content=flatbuffer)
    detail = interpreter.get_input_details()[0]
    interpreter.resize_tensor_input(detail["index"], x.shape)
    interpreter.allocate_tensors()
    interpreter.set_tensor(detail["index"], x)
    interpreter.invoke()
    candidate = [interpreter.get_tensor(interpreter.get_output_details()[0]["index"])]
    result = guard(reference, candidate, DEFAULT_TOLERANCE, labels=y)
    assert result["accepted"], result["reason"]
    assert 0 < result["max_abs_error"] < 0.01
    assert result["top1_agreement"] >= 0.99


def test_identical_outputs_have_no_error_and_shape_changes_are_caught():
    ref = [np.array([[0.1, 0.9], [0.8, 0.2]], dtype=np.float32)]
    same = compare_outputs(ref, [ref[0].copy()])
    assert same["max_abs_error"] == 0 and same["top1_agreement"] == 1.0
    assert DEFAULT_TOLERANCE.check(same) == (True, "")
    swapped = compare_outputs(ref, [ref[0][:, ::-1]])
    assert swapped["top1_agreement"] == 0.0
    assert not DEFAULT_TOLERANCE.check(swapped)[0]
    wrong = compare_outputs(ref, [np.zeros((3, 2))])
    assert wrong["shape_mismatch"] and not DEFAULT_TOLERANCE.check(wrong)[0]
    nan = compare_outputs(ref, [np.full((2, 2), np.nan)])
    assert not DEFAULT_TOLERANCE.check(nan)[0]


def test_regression_labels_use_mean_absolute_error():
    ref = [np.array([[1.0], [2.0], [3.0]])]
    labels = np.array([[1.0], [2.0], [3.0]])
    worse = compare_outputs(ref, [ref[0] + 0.5], labels)
    assert worse["metric"] == {"name": "mae", "reference": 0.0, "candidate": 0.5}
    with pytest.raises(UserError):
        compare_outputs(ref, [ref[0]], np.zeros(7))


def test_parse_tolerance():
    assert parse_tolerance(None) == DEFAULT_TOLERANCE
    assert parse_tolerance("0.1").rel == 0.1
    tol = parse_tolerance("abs=1e-3, top1=none")
    assert tol.abs == 1e-3 and tol.top1 is None and tol.rel == DEFAULT_TOLERANCE.rel
    for bad in ("fast", "rel=-1", "speed=2"):
        with pytest.raises(UserError):
            parse_tolerance(bad)
    # top1 is a share: 2 would reject every classifier candidate and silently keep the default.
    assert parse_tolerance("top1=1").top1 == 1.0
    with pytest.raises(UserError, match="from 0 to 1"):
        parse_tolerance("top1=2")


def test_outputs_and_labels_files_round_trip(tmp_path):
    arrays = {f"output_{i}": np.full((1, 2), i, dtype=np.float32) for i in range(12)}
    np.savez(tmp_path / "out.npz", **arrays)
    loaded = load_outputs(tmp_path / "out.npz")
    assert [int(a[0, 0]) for a in loaded] == list(range(12))
    np.save(tmp_path / "labels.npy", np.arange(3))
    assert load_labels(tmp_path / "labels.npy").tolist() == [0, 1, 2]
    with pytest.raises(UserError):
        load_labels(tmp_path / "missing.npy")
    (tmp_path / "junk.npy").write_text("not numpy")
    with pytest.raises(UserError, match="not a numpy array file"):
        load_labels(tmp_path / "junk.npy")
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object))
    with pytest.raises(UserError, match=r"^--labels \S+ is not a numpy array file; save"):
        load_labels(tmp_path / "objects.npy")
