"""``tfperf.bench(..., train=True)``: a compiled Keras model and arrays from the caller's memory."""

from __future__ import annotations

import numpy as np
import pytest

import tfperf
from tfperf.core.errors import UserError

pytestmark = [pytest.mark.tf, pytest.mark.slow]


def test_bench_trains_a_compiled_model_given_with_its_arrays(tmp_path):
    import keras

    x = np.random.default_rng(1).normal(size=(96, 4)).astype("float32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    result = tfperf.bench(model, inputs=x, labels=x[:, :1] * 2, train=True, batch=16,
                          budget=1, no_peak=True, processes=1, store=tmp_path / "s.db",
                          progress=False)
    (row,) = result.to_dict()["results"]
    assert row["train"]["batch"] == 16 and row["train"]["steps_per_s"] > 0


def test_a_dataset_object_cannot_cross_into_a_worker(tmp_path):
    import tensorflow as tf

    data = tf.data.Dataset.from_tensor_slices((np.zeros((4, 2)), np.zeros(4))).batch(2)
    with pytest.raises(UserError, match="cannot cross into tfperf's worker processes"):
        tfperf.tune("m:f", inputs=data, train=True, store=tmp_path / "s.db", progress=False)
