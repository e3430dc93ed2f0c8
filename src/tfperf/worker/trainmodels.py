"""Worker side: the built-in training workloads, written as a user writes a training factory.

Contract: each function here takes no argument and returns ``(model, x, y)``: a Keras model
compiled with its optimizer and loss, and numpy arrays the training step cuts into batches, as
:mod:`tfperf.worker.training` takes any ``module:function`` factory. The catalog entry of the
same name in :data:`tfperf.core.workloads.BUILTINS` holds each size's parameters and its batch;
:func:`tfperf.core.workloads.builtin_workload` names the function of a size.

:func:`cnn_train` (``cnn-train``, standard) is a small VGG-style CNN with batch norm on 32x32
RGB images, compiled with Adam; :func:`cnn_train_tiny` is the same architecture on a few
hundred 8x8 images with tiny widths, for tests. The labels are computed from the images
(whether an image's red channel is brighter than its blue one), so the model can learn them
and the training guard sees a loss that falls. The images come from a generator seeded with
:data:`tfperf.core.workloads.SEED`; the weights from Keras' global seed, which the worker sets
before it calls a factory.
"""

from __future__ import annotations

from typing import Any

from tfperf.core.workloads import SEED, get_builtin


def cnn_train() -> tuple[Any, Any, Any]:
    """``cnn-train`` at its standard size."""
    return _cnn(**_sized("standard"))


def cnn_train_tiny() -> tuple[Any, Any, Any]:
    """``cnn-train`` at its tiny size (tests)."""
    return _cnn(**_sized("tiny"))


def _sized(size: str) -> dict[str, Any]:
    """The builder's parameters of ``cnn-train`` at ``size`` (its batch is the workload's)."""
    params = get_builtin("cnn-train").params(size)
    params.pop("batch")
    return params


def _cnn(samples: int, image: int, widths: list[int]) -> tuple[Any, Any, Any]:
    import keras
    import numpy as np

    rng = np.random.default_rng(SEED)
    images = rng.random((samples, image, image, 3), dtype=np.float32)
    red, blue = images[..., 0].mean(axis=(1, 2)), images[..., 2].mean(axis=(1, 2))
    labels = (red > blue).astype("int32")
    inp = keras.Input((image, image, 3))
    x = _block(keras, _block(keras, inp, widths[0]), widths[0])
    x = keras.layers.MaxPooling2D()(x)
    x = _block(keras, _block(keras, x, widths[1]), widths[1])
    x = keras.layers.GlobalAveragePooling2D()(x)
    model = keras.Model(inp, keras.layers.Dense(2)(x), name="cnn_train")
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model, images, labels


def _block(keras: Any, x: Any, filters: int) -> Any:
    x = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(x)
    x = keras.layers.BatchNormalization()(x)
    return keras.layers.ReLU()(x)
