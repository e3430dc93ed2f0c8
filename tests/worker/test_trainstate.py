"""What the user's model and optimizer already do (``tfperf.worker.trainstate``), in this
process with real Keras on TensorFlow."""

from __future__ import annotations

import keras
import pytest

from tfperf.worker.trainstate import sparse_rows_optimizer

pytestmark = [pytest.mark.tf]


def _bag_of_tokens(optimizer, embedding: bool = True) -> keras.Model:
    lookup = [keras.layers.Embedding(20, 4)] if embedding else [keras.layers.Reshape((6, 1))]
    model = keras.Sequential([keras.Input((6,), dtype="int32" if embedding else "float32"), *lookup,
                              keras.layers.GlobalAveragePooling1D(), keras.layers.Dense(1)])
    model.compile(optimizer, "mse")
    return model


@pytest.mark.parametrize("optimizer", ["adam", "rmsprop", "adagrad"])
def test_an_optimizer_that_squares_an_embeddings_rows_apart_is_named(optimizer):
    model = _bag_of_tokens(optimizer)
    assert sparse_rows_optimizer(model) == type(model.optimizer).__name__


def test_an_optimizer_that_sums_them_first_or_a_model_without_a_lookup_is_not():
    # SGD and Lion are linear in the gradient (Lion takes its sign after the sum)
    assert sparse_rows_optimizer(_bag_of_tokens(keras.optimizers.SGD(0.1))) is None
    assert sparse_rows_optimizer(_bag_of_tokens("lion")) is None
    assert sparse_rows_optimizer(_bag_of_tokens("adam", embedding=False)) is None
