"""The weights a training step hands to another Keras backend (``tfperf.worker.jaxstep``), in
this process with real Keras: matched by variable path and shape, never by position."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tfperf.core.errors import UserError
from tfperf.worker.jaxstep import load_weights, write_weights

pytestmark = [pytest.mark.tf]


def _mlp(hidden: int, dropout: bool = False) -> keras.Model:
    layers = [keras.Input((4,)), keras.layers.Dense(hidden, name="hidden")]
    layers += [keras.layers.Dropout(0.5)] if dropout else []
    # named as one factory's model is in every fresh process
    return keras.Sequential([*layers, keras.layers.Dense(1, name="out")], name="net")


def test_weights_cross_by_variable_path_and_a_different_model_is_named(tmp_path):
    source = _mlp(8, dropout=True)  # its seed generator's state is not a weight
    path = str(tmp_path / "w.npz")
    write_weights(source, path)
    with np.load(path) as saved:
        assert sorted(saved.files) == sorted(w.path for w in source.weights)
    target = _mlp(8)
    assert load_weights(target, path) == 4
    for mine, theirs in zip(target.weights, source.weights, strict=True):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    with pytest.raises(UserError, match=r"weight net/hidden/kernel of shape \(4, 6\)"):
        load_weights(_mlp(6), path)
