"""Sample inputs: generated from a signature (inside embedding ranges) or read from .npz."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from tfperf.core.errors import UserError
from tfperf.worker.inputs import InputSpec, generate, keras_input_specs, load_npz

SPECS = [
    InputSpec("ids", (None, 5), "int32", (0, 7)),
    InputSpec("x", (None, 3), "float32"),
    InputSpec("mask", (None, 5), "bool"),
    InputSpec("free", (None, 2), "int64"),
]


def test_generate_shapes_dtypes_ranges_and_seed():
    a = generate(SPECS, batch=4, seed=1)
    assert list(a) == ["ids", "x", "mask", "free"]
    assert {k: (v.shape, v.dtype.name) for k, v in a.items()} == {
        "ids": ((4, 5), "int32"),
        "x": ((4, 3), "float32"),
        "mask": ((4, 5), "bool"),
        "free": ((4, 2), "int64"),
    }
    big = generate(SPECS, batch=500, seed=1)
    assert big["ids"].min() >= 0 and big["ids"].max() == 6
    assert set(np.unique(big["free"])) == {0, 1}
    b = generate(SPECS, batch=4, seed=1)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    c = generate(SPECS, batch=4, seed=2)
    assert not np.array_equal(a["x"], c["x"])


def test_generate_refuses_what_it_cannot_guess():
    with pytest.raises(UserError, match=r"unknown size.*--inputs"):
        generate([InputSpec("seq", (None, None, 8), "float32")], 1, 0)
    with pytest.raises(UserError, match="--inputs"):
        generate([InputSpec("text", (None,), "object")], 1, 0)


def _npz(tmp_path, **arrays):
    path = tmp_path / "in.npz"
    np.savez(path, **arrays)
    return str(path)


def test_load_npz_matches_names_and_casts_within_a_kind(tmp_path):
    ids = np.array([[1, 2, 3, 4, 5], [0, 0, 0, 0, 6]], dtype=np.int64)
    x = np.ones((2, 3), dtype=np.float64)
    specs = SPECS[:2]
    got = load_npz(_npz(tmp_path, x=x, ids=ids), specs)
    assert list(got) == ["ids", "x"]
    assert got["ids"].dtype == np.int32 and got["x"].dtype == np.float32
    np.testing.assert_array_equal(got["ids"], ids)
    single = load_npz(_npz(tmp_path, anything=x), [SPECS[1]])
    assert single["x"].shape == (2, 3)


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"x": np.ones((2, 3), np.float32)}, r"lacks input.*ids"),
        ({"ids": np.ones((2, 5), np.float32), "x": np.ones((2, 3), np.float32)}, "dtype"),
        ({"ids": np.ones((2, 4), np.int32), "x": np.ones((2, 3), np.float32)}, "shape"),
        ({"ids": np.full((2, 5), 7, np.int32), "x": np.ones((2, 3), np.float32)}, "outside"),
        ({"ids": np.ones((2, 5), np.int32), "x": np.ones((3, 3), np.float32)}, "batch size"),
    ],
)
def test_load_npz_mismatch_is_one_sentence(tmp_path, arrays, message):
    with pytest.raises(UserError, match=message) as err:
        load_npz(_npz(tmp_path, **arrays), SPECS[:2])
    assert "\n" not in str(err.value)


def test_load_npz_corrupt_file(tmp_path):
    path = tmp_path / "bad.npz"
    path.write_bytes(b"PK\x03\x04 definitely not a zip")
    with pytest.raises(UserError, match="Cannot read inputs file"):
        load_npz(str(path), SPECS[:1])


keras = pytest.importorskip("keras")


def test_keras_specs_find_embeddings_through_other_layers():
    keras.utils.set_random_seed(0)
    a = keras.Input((4,), dtype="int32", name="a")
    b = keras.Input((2, 3), dtype="int32", name="b")
    plain = keras.Input((2,), dtype="int32", name="plain")
    ea = keras.layers.Embedding(100, 2)(a)
    ea2 = keras.layers.Embedding(30, 2)(keras.layers.Reshape((4,))(a))  # smaller table, same a
    eb = keras.layers.Embedding(9, 2)(keras.layers.Reshape((6,))(b))
    merged = keras.layers.Concatenate(axis=1)([ea, ea2, eb])
    out = keras.layers.Dense(1)(keras.layers.Flatten()(merged))
    pf = keras.layers.Dense(1)(keras.layers.Activation("linear")(plain))
    model = keras.Model([a, b, plain], keras.layers.Add()([out, pf]))
    specs = {s.name: s for s in keras_input_specs(model)}
    assert specs["a"].int_range == (0, 30)
    assert specs["b"].int_range == (0, 9) and specs["b"].shape == (None, 2, 3)
    assert specs["plain"].int_range is None
    inputs = generate(list(specs.values()), 64, 0)
    assert inputs["a"].max() < 30 and inputs["b"].max() < 9
    model([inputs["a"], inputs["b"], inputs["plain"]])  # every index is inside its table


def test_subclassed_model_falls_back_to_the_smallest_table():
    class Tower(keras.Model):
        def __init__(self):
            super().__init__()
            self.big = keras.layers.Embedding(50, 2)
            self.small = keras.layers.Embedding(5, 2)

        def call(self, ids):
            return self.big(ids) + self.small(ids)

    inp = keras.Input((3,), dtype="int32", name="ids")
    model = keras.Model(inp, Tower()(inp))
    (spec,) = keras_input_specs(model)
    assert spec.int_range == (0, 5)


def test_savedmodel_and_tflite_signatures_find_the_embedding_table(tmp_path):
    tf = pytest.importorskip("tensorflow")
    from ai_edge_litert.interpreter import Interpreter

    from tfperf.worker.inputs import signature_input_specs, tflite_input_specs

    keras.utils.set_random_seed(0)
    ids = keras.Input((3,), dtype="int32", name="ids")
    x = keras.Input((2,), name="x")
    emb = keras.layers.Flatten()(keras.layers.Embedding(11, 2)(ids))
    model = keras.Model([ids, x], keras.layers.Concatenate()([emb, x]))
    model.export(str(tmp_path / "sm"), verbose=False)
    loaded = tf.saved_model.load(str(tmp_path / "sm"))  # owns the variables: keep it alive
    signature = loaded.signatures["serving_default"]
    specs = {s.name: s for s in signature_input_specs(signature)}
    assert specs["ids"].int_range == (0, 11) and specs["x"].int_range is None
    flat = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    interpreter = Interpreter(model_content=flat)
    specs = {s.name: s for s in tflite_input_specs(interpreter)}
    assert specs["ids"].int_range == (0, 11)
    assert specs["ids"].shape == (None, 3) and specs["x"].dtype == "float32"
