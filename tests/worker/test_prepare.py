"""Worker-side loading and preparing: real model files of each format, real faults."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from tfperf.core.errors import UserError

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from tfperf.modelref import resolve_model  # noqa: E402
from tfperf.worker.prepare import Loaded, litert_prepared, load_workload, prepare  # noqa: E402


def _model():
    """Two inputs, one through an Embedding: ids (3 ints < 7) and x (4 floats)."""
    keras.utils.set_random_seed(7)
    ids = keras.Input((3,), dtype="int32", name="ids")
    x = keras.Input((4,), name="x")
    emb = keras.layers.Flatten()(keras.layers.Embedding(7, 2)(ids))
    hidden = keras.layers.Dense(8, activation="relu")(keras.layers.Concatenate()([emb, x]))
    return keras.Model([ids, x], keras.layers.Dense(2)(hidden))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("prep")
    model = _model()
    model.save(root / "m.keras")
    model.export(str(root / "exported"), verbose=False)
    (root / "m.tflite").write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    ids = np.array([[0, 1, 6], [2, 3, 4], [5, 5, 5]], np.int32)
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    np.savez(root / "in.npz", ids=ids, x=x)
    expected = model([ids, x]).numpy()
    return root, expected


def _run(workload, config=None):
    prepared = prepare(workload, config or {})
    prepared.call()
    return prepared, prepared.outputs()


@pytest.mark.parametrize("name", ["m.keras", "exported", "m.tflite"])
def test_each_format_with_inputs_from_npz(files, name):
    root, expected = files
    workload = resolve_model(str(root / name), inputs=str(root / "in.npz"))
    prepared, outputs = _run(workload)
    assert prepared.batch == 3
    assert prepared.flops_source == {"m.tflite": "unknown", "exported": "profiler"}.get(
        name, "analytic"
    )
    np.testing.assert_allclose(outputs[0], expected, rtol=1e-5, atol=1e-5)
    if name == "m.tflite":
        assert prepared.extra == {} and any("LiteRT" in n for n in prepared.notes)
    if name == "m.keras":
        assert set(prepared.extra) == {"eager", "predict"}
        assert prepared.flops_source == "analytic" and prepared.flops_per_call > 0


@pytest.mark.parametrize("name", ["m.keras", "exported", "m.tflite"])
def test_generated_inputs_stay_inside_the_embedding(files, name):
    root, _ = files
    loaded = load_workload(resolve_model(str(root / name), batch=64))
    if name == "m.tflite":
        assert (loaded.flops_per_call, loaded.flops_source) == (None, "unknown")
    else:  # Dense(8) over 3*2 + 4 features, Dense(2): matmuls and bias adds, batch 64
        hand = 64 * ((2 * 10 * 8 + 8) + (2 * 8 * 2 + 2))
        if name == "m.keras":  # every layer is known: counted from the layers
            assert (loaded.flops_per_call, loaded.flops_source) == (hand, "analytic")
        else:  # a SavedModel has no layers: the profiler counts its loop-free graph
            assert loaded.flops_source == "profiler" and loaded.flops_per_call >= hand
    assert loaded.batch == 64 and loaded.inputs["ids"].shape == (64, 3)
    assert loaded.inputs["ids"].min() >= 0 and loaded.inputs["ids"].max() < 7
    assert not loaded.notes or "LiteRT" in " ".join(loaded.notes)


def test_formats_agree_on_generated_inputs(files):
    """The same seed and names give the same inputs, so outputs of formats can be compared."""
    root, _ = files
    outs = [_run(resolve_model(str(root / n), batch=2))[1][0] for n in ("m.keras", "m.tflite")]
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5)


def test_tf_saved_model_save_and_xla(files, tmp_path):
    root, _ = files
    model = keras.models.load_model(root / "m.keras")
    tf.saved_model.save(model, str(tmp_path / "sm"))
    workload = resolve_model(str(tmp_path / "sm"), batch=5)
    prepared, outputs = _run(workload, {"xla": "jit"})
    assert outputs[0].shape == (5, 2)
    assert any("XLA" in n for n in prepared.notes)
    loaded = load_workload(workload)
    arrays = list(loaded.inputs.values())
    ids = next(v for v in arrays if v.dtype.kind == "i")
    x = next(v for v in arrays if v.dtype.kind == "f")
    np.testing.assert_allclose(outputs[0], model([ids, x]).numpy(), rtol=1e-4, atol=1e-5)


def test_lambda_layer_needs_unsafe(tmp_path):
    inp = keras.Input((4,), name="x")
    keras.Model(inp, keras.layers.Lambda(lambda t: t * 2.0)(inp)).save(tmp_path / "lam.keras")
    with pytest.raises(UserError, match="--unsafe") as err:
        load_workload(resolve_model(str(tmp_path / "lam.keras")))
    assert "\n" not in str(err.value)
    loaded = load_workload(resolve_model(str(tmp_path / "lam.keras"), unsafe=True))
    prepared = prepare(resolve_model(str(tmp_path / "lam.keras"), unsafe=True), {})
    np.testing.assert_allclose(prepared.outputs()[0], 2.0 * loaded.inputs["x"])


def _workload(path, fmt, **extra):
    return {"kind": "model", "path": str(path), "format": fmt, "inputs": None, "batch": 1, **extra}


def test_corrupt_files_of_each_format(files, tmp_path):
    root, _ = files
    blob = (root / "m.keras").read_bytes()
    (tmp_path / "bad.keras").write_bytes(blob[:-200])
    (tmp_path / "bad.tflite").write_bytes(b"\x1c\x00\x00\x00TFL3" + os.urandom(64))
    (tmp_path / "sm").mkdir()
    (tmp_path / "sm" / "saved_model.pb").write_bytes(os.urandom(64))
    cases = [
        (_workload(tmp_path / "bad.keras", "keras"), "Cannot load bad.keras"),
        (_workload(tmp_path / "bad.tflite", "tflite"), "LiteRT cannot load bad.tflite"),
        (_workload(tmp_path / "sm", "savedmodel"), "Cannot load SavedModel sm"),
    ]
    for workload, message in cases:
        with pytest.raises(UserError, match=message) as err:
            load_workload(workload)
        assert "\n" not in str(err.value)


FACTORY = """
import numpy as np
import keras

def good():
    keras.utils.set_random_seed(3)
    inp = keras.Input((5,), name="feats")
    model = keras.Model(inp, keras.layers.Dense(3)(inp))
    return model, np.ones((4, 5), np.float32)

def as_dict():
    a = keras.Input((2,), name="a")
    b = keras.Input((2,), name="b")
    model = keras.Model({"a": a, "b": b}, keras.layers.Add()([a, b]))
    return model, {"a": np.ones((2, 2), np.float32), "b": np.full((2, 2), 2, np.float32)}

def plain_callable():
    import tensorflow as tf
    return (lambda t: tf.reduce_sum(t, axis=1)), [np.arange(6, dtype=np.float32).reshape(2, 3)]

def raises():
    raise RuntimeError("weights missing")

def wrong():
    return "model"

def not_numeric():
    return (lambda t: t), ["a", "b"]
"""


@pytest.fixture
def factory_dir(tmp_path, monkeypatch):
    (tmp_path / "tp_factories.py").write_text(FACTORY)
    (tmp_path / "tp_broken.py").write_text("import nonexistent_dependency_xyz\n")
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    import sys

    for name in ("tp_factories", "tp_broken"):
        sys.modules.pop(name, None)


def test_factories(factory_dir):
    prepared, outputs = _run(resolve_model("tp_factories:good"))
    assert outputs[0].shape == (4, 3) and prepared.batch == 4
    assert set(prepared.extra) == {"eager", "predict"}
    _, outputs = _run(resolve_model("tp_factories:as_dict"))
    np.testing.assert_allclose(outputs[0], np.full((2, 2), 3.0))
    _, outputs = _run(resolve_model("tp_factories:plain_callable"))
    np.testing.assert_allclose(outputs[0], [3.0, 12.0])


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("tp_factories:raises", "raised RuntimeError: weights missing"),
        ("tp_factories:wrong", r"must return a tuple \(model, inputs\)"),
        ("tp_factories:not_numeric", "not numeric arrays"),
        ("tp_factories:absent", "has no function 'absent'"),
        ("tp_broken:build", "Importing tp_broken failed"),
    ],
)
def test_factory_faults_are_one_sentence(factory_dir, ref, message):
    with pytest.raises(UserError, match=message) as err:
        load_workload(resolve_model(ref))
    assert "\n" not in str(err.value)


def test_litert_prepared_from_bytes_with_threads_and_a_new_batch(files):
    root, _ = files
    rng = np.random.default_rng(0)
    inputs = {
        "x": rng.standard_normal((6, 4)).astype(np.float64),  # cast to the model's float32
        "ids": rng.integers(0, 7, size=(6, 3)),
    }
    prepared = litert_prepared((root / "m.tflite").read_bytes(), inputs, 1, flops_per_call=10.0)
    prepared.call()
    (out,) = prepared.outputs()
    assert out.shape == (6, 2) and prepared.batch == 6
    assert (prepared.flops_per_call, prepared.flops_source) == (10.0, "unknown")
    reference = keras.models.load_model(root / "m.keras")
    expected = reference([inputs["ids"].astype(np.int32), inputs["x"].astype(np.float32)])
    np.testing.assert_allclose(out, expected.numpy(), rtol=1e-5, atol=1e-5)


def test_tflite_runs_on_litert_under_the_default_config(files):
    root, expected = files
    workload = resolve_model(str(root / "m.tflite"), inputs=str(root / "in.npz"))
    loaded = load_workload(workload)
    assert isinstance(loaded, Loaded) and loaded.format == "tflite"
    assert loaded.model == str(root / "m.tflite") and loaded.input_names == ["ids", "x"]
    default = {"runtime": "tf", "precision": "fp32", "xla": "jit", "runtime_threads": 1}
    prepared = prepare(workload, default)
    assert "LiteRT, 1 thread(s)" in prepared.notes
    assert "xla does not apply to LiteRT" in prepared.notes
    np.testing.assert_allclose(prepared.outputs()[0], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("config", "threads_note"),
    [
        ({"intra_threads": 2, "inter_threads": 1}, "LiteRT, default threads"),
        ({"intra_threads": 2, "runtime_threads": 1}, "LiteRT, 1 thread(s)"),
    ],
)
def test_tflite_thread_count_is_runtime_threads_not_intra_threads(files, config, threads_note):
    root, expected = files
    workload = resolve_model(str(root / "m.tflite"), inputs=str(root / "in.npz"))
    prepared = prepare(workload, config)
    assert threads_note in prepared.notes
    assert not any("2 thread" in n for n in prepared.notes)
    ignored = [n for n in prepared.notes if "does not apply to LiteRT" in n]
    assert ignored == [
        f"{k} does not apply to LiteRT: LiteRT's thread count is runtime_threads"
        for k in ("intra_threads", "inter_threads")
        if k in config
    ]
    np.testing.assert_allclose(prepared.outputs()[0], expected, rtol=1e-5, atol=1e-5)


def test_unknown_workload_kind_and_format():
    with pytest.raises(UserError, match="kind"):
        load_workload({"kind": "url", "batch": 1})
    with pytest.raises(UserError, match="format"):
        load_workload({"kind": "model", "format": "onnx", "path": "/x", "batch": 1})
    with pytest.raises(UserError, match="Batch size"):
        load_workload({"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 0})
