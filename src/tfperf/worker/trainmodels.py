"""Worker side: the built-in training workloads, written as a user writes a training factory.

Contract: each function here takes no argument and returns what a user's training factory
returns, as :mod:`tfperf.worker.training` takes any ``module:function`` factory: ``cnn-train``
returns ``(model, x, y)``, a Keras model compiled with its optimizer and loss and numpy arrays
the training step cuts into batches; ``gan-train`` returns ``(step, dataset)``, a custom
training loop (:mod:`tfperf.worker.customloop`). The catalog entry of the
same name in :data:`tfperf.core.workloads.BUILTINS` holds each size's parameters and its batch;
:func:`tfperf.core.workloads.builtin_workload` names the function of a size.

:func:`cnn_train` (``cnn-train``, standard) is a small VGG-style CNN with batch norm on 32x32
RGB images, compiled with Adam; :func:`cnn_train_tiny` is the same architecture on a few
hundred 8x8 images with tiny widths, for tests. The labels are computed from the images
(whether an image's red channel is brighter than its blue one), so the model can learn them
and the training guard sees a loss that falls. The images come from a generator seeded with
:data:`tfperf.core.workloads.SEED`; the weights from Keras' global seed, which the worker sets
before it calls a factory.

:func:`gan_train` (``gan-train``, standard) is a GAN written as TensorFlow's DCGAN tutorial
writes one, with dense layers: a generator from ``latent`` noise to ``image`` x ``image``
images and a discriminator, each with its own Adam optimizer, trained by a ``@tf.function``
step that draws its noise with ``tf.random.normal`` and applies both tapes' gradients,
returning ``{"d_loss", "g_loss"}``. The real images are smooth blobs (a Gaussian bump at a
random place), so the discriminator's loss falls as it learns them. :func:`gan_train_tiny` is
the same at tiny widths.
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


def gan_train() -> tuple[Any, Any]:
    """``gan-train`` at its standard size."""
    return _gan(**_sized("standard", "gan-train"))


def gan_train_tiny() -> tuple[Any, Any]:
    """``gan-train`` at its tiny size (tests)."""
    return _gan(**_sized("tiny", "gan-train"))


def _sized(size: str, name: str = "cnn-train") -> dict[str, Any]:
    """The builder's parameters of ``name`` at ``size``, and its batch."""
    return get_builtin(name).params(size)


def _cnn(samples: int, image: int, widths: list[int], batch: int) -> tuple[Any, Any, Any]:
    del batch  # the workload's batch cuts the arrays (its size's, unless --batch says)
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


def _blobs(samples: int, image: int) -> Any:
    """``samples`` flattened images of a Gaussian bump at a random place."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    grid = np.arange(image, dtype=np.float32)
    centres = rng.uniform(0, image - 1, size=(samples, 2)).astype(np.float32)
    rows = np.exp(-((grid[None, :] - centres[:, :1]) ** 2) / 2.0)
    cols = np.exp(-((grid[None, :] - centres[:, 1:]) ** 2) / 2.0)
    return (rows[:, :, None] * cols[:, None, :]).reshape(samples, image * image) * 2.0 - 1.0


def _gan(samples: int, image: int, latent: int, hidden: int, batch: int) -> tuple[Any, Any]:
    import keras
    import tensorflow as tf

    pixels = image * image
    generator = keras.Sequential([
        keras.Input((latent,)), keras.layers.Dense(hidden, activation="relu"),
        keras.layers.Dense(pixels, activation="tanh")], name="generator")
    discriminator = keras.Sequential([
        keras.Input((pixels,)), keras.layers.Dense(hidden), keras.layers.LeakyReLU(0.2),
        keras.layers.Dense(1)], name="discriminator")
    cross_entropy = keras.losses.BinaryCrossentropy(from_logits=True)
    g_opt, d_opt = keras.optimizers.Adam(1e-3), keras.optimizers.Adam(1e-3)

    @tf.function
    def train_step(images: Any) -> dict[str, Any]:
        noise = tf.random.normal([tf.shape(images)[0], latent])
        with tf.GradientTape() as g_tape, tf.GradientTape() as d_tape:
            fake = generator(noise, training=True)
            real_out = discriminator(images, training=True)
            fake_out = discriminator(fake, training=True)
            g_loss = cross_entropy(tf.ones_like(fake_out), fake_out)
            d_loss = (cross_entropy(tf.ones_like(real_out), real_out)
                      + cross_entropy(tf.zeros_like(fake_out), fake_out))
        g_grads = g_tape.gradient(g_loss, generator.trainable_variables)
        d_grads = d_tape.gradient(d_loss, discriminator.trainable_variables)
        g_opt.apply_gradients(zip(g_grads, generator.trainable_variables, strict=True))
        d_opt.apply_gradients(zip(d_grads, discriminator.trainable_variables, strict=True))
        return {"d_loss": d_loss, "g_loss": g_loss}

    data = tf.data.Dataset.from_tensor_slices(_blobs(samples, image)).shuffle(samples)
    return train_step, data.batch(batch, drop_remainder=True)
