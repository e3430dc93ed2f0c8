"""Custom training loops as users write them (no ``fit``), unseeded, tiny.

Each factory returns what a user hands ``tfperf bench --train module:function``: ``(step,
dataset)`` or ``(step, dataset, variables)``, where ``step`` takes one element of the dataset
and returns its loss. Labels are computed from the inputs, so each loss falls.
"""

import keras
import numpy as np
import tensorflow as tf


def _regression_data(rows=512, features=8):
    x = np.random.randn(rows, features).astype("float32")
    y = (x @ np.linspace(-1, 1, features) + 0.3).astype("float32")[:, None]
    return x, y


def eager_regression():
    """A plain Python step, run eagerly as written: the TensorFlow guide's loop without its
    ``@tf.function``."""
    x, y = _regression_data()
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(1)])
    optimizer = keras.optimizers.Adam(0.01)
    loss_fn = keras.losses.MeanSquaredError()

    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    return train_step, tf.data.Dataset.from_tensor_slices((x, y)).batch(32)


def weighted_step():
    """A ``tf.function`` step taking ``(x, y, sample_weight)``, the dataset's three parts."""
    x, y = _regression_data()
    weights = np.where(x[:, 0] > 0, 2.0, 0.5).astype("float32")
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD(0.05)

    @tf.function
    def train_step(x, y, sample_weight):
        with tf.GradientTape() as tape:
            per_row = tf.reduce_mean(tf.square(model(x, training=True) - y), axis=-1)
            loss = tf.reduce_sum(per_row * sample_weight) / tf.reduce_sum(sample_weight)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    return train_step, tf.data.Dataset.from_tensor_slices((x, y, weights)).batch(32)


def dcgan():
    """A DCGAN-style loop, as TensorFlow's tutorial writes it: a generator and a
    discriminator, two Adam optimizers, noise drawn with ``tf.random.normal`` in the step,
    which returns both losses."""
    real = (np.random.randn(512, 8, 8, 1) * 0.3 + 0.5).astype("float32")
    generator = keras.Sequential([
        keras.Input((4,)), keras.layers.Dense(4 * 4 * 8, use_bias=False),
        keras.layers.Reshape((4, 4, 8)),
        keras.layers.Conv2DTranspose(1, 3, strides=2, padding="same", activation="tanh"),
    ])
    discriminator = keras.Sequential([
        keras.Input((8, 8, 1)), keras.layers.Conv2D(8, 3, strides=2, padding="same"),
        keras.layers.LeakyReLU(0.2), keras.layers.Flatten(), keras.layers.Dense(1),
    ])
    cross_entropy = keras.losses.BinaryCrossentropy(from_logits=True)
    g_opt, d_opt = keras.optimizers.Adam(2e-3), keras.optimizers.Adam(2e-3)

    @tf.function
    def train_step(images):
        noise = tf.random.normal([tf.shape(images)[0], 4])
        with tf.GradientTape() as g_tape, tf.GradientTape() as d_tape:
            fake = generator(noise, training=True)
            real_out = discriminator(images, training=True)
            fake_out = discriminator(fake, training=True)
            g_loss = cross_entropy(tf.ones_like(fake_out), fake_out)
            d_loss = (cross_entropy(tf.ones_like(real_out), real_out)
                      + cross_entropy(tf.zeros_like(fake_out), fake_out))
        g_opt.apply_gradients(zip(g_tape.gradient(g_loss, generator.trainable_variables),
                                  generator.trainable_variables, strict=True))
        d_opt.apply_gradients(zip(d_tape.gradient(d_loss, discriminator.trainable_variables),
                                  discriminator.trainable_variables, strict=True))
        return {"d_loss": d_loss, "g_loss": g_loss}

    return train_step, tf.data.Dataset.from_tensor_slices(real).shuffle(512).batch(32)


def contrastive():
    """A SimCLR-style loop: two noisy views of each row, an encoder trained so that a row's
    views agree; the step returns a dict of its loss and the views' agreement."""
    x = np.random.randn(512, 16).astype("float32")
    encoder = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"),
                                keras.layers.Dense(8)])
    optimizer = keras.optimizers.Adam(3e-3)

    @tf.function
    def train_step(batch):
        a = batch + tf.random.normal(tf.shape(batch), stddev=0.1)
        b = batch + tf.random.normal(tf.shape(batch), stddev=0.1)
        with tf.GradientTape() as tape:
            za = tf.math.l2_normalize(encoder(a, training=True), axis=1)
            zb = tf.math.l2_normalize(encoder(b, training=True), axis=1)
            logits = tf.matmul(za, zb, transpose_b=True) / 0.2
            labels = tf.range(tf.shape(batch)[0])
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        grads = tape.gradient(loss, encoder.trainable_variables)
        optimizer.apply_gradients(zip(grads, encoder.trainable_variables, strict=True))
        return {"contrastive_loss": loss, "alignment": tf.reduce_mean(za * zb) * 8.0}

    return train_step, tf.data.Dataset.from_tensor_slices(x).batch(64)


def unseeded_weights():
    """The plain step of :func:`eager_regression` on weights drawn from a private generator
    with no seed (``np.random.default_rng()``), which seeding cannot reach: a different model
    in every process, made the same by handing the default's initial values over."""
    x, y = _regression_data()
    rng = np.random.default_rng()
    kernel = tf.Variable(rng.normal(size=(8, 1)).astype("float32"))
    bias = tf.Variable(np.zeros(1, "float32"))
    optimizer = keras.optimizers.SGD(0.05)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(x @ kernel + bias - y))
        grads = tape.gradient(loss, [kernel, bias])
        optimizer.apply_gradients(zip(grads, [kernel, bias], strict=True))
        return loss

    return train_step, tf.data.Dataset.from_tensor_slices((x, y)).batch(32)


def returns_none():
    step, data = eager_regression()
    return (lambda x, y: (step(x, y), None)[1]), data


def raises():
    x, y = _regression_data()
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])

    def train_step(x, y):
        return tf.reduce_mean(model(x) - tf.reshape(y, [-1, 2]))  # y has one column

    return train_step, tf.data.Dataset.from_tensor_slices((x, y)).batch(32)


def not_iterable():
    step, _ = eager_regression()
    return step, 42


def nan_loss():
    x, y = _regression_data()
    y[:40] = np.nan
    step, _ = eager_regression()
    return step, tf.data.Dataset.from_tensor_slices((x, y)).batch(32)


def trains_nothing():
    x, _ = _regression_data()
    return (lambda batch: tf.reduce_mean(batch)), tf.data.Dataset.from_tensor_slices(x).batch(32)


def bf16_subtract():
    """A step that subtracts the model's output from a float32 label: under mixed_bfloat16
    the output is bfloat16 and the subtraction raises."""
    x, y = _regression_data()
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD(0.05)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                      model.trainable_variables, strict=True))
        return loss

    return train_step, tf.data.Dataset.from_tensor_slices((x, y)).batch(32)


def generator_data():
    """Batches from a Python generator, which can be read once."""
    step, _ = eager_regression()
    x, y = _regression_data()
    return step, ((x[i:i + 32], y[i:i + 32]) for i in range(0, 512, 32))


def list_of_batches():
    """Batches as a list of (x, y) arrays, as a user who batched by hand hands them over."""
    step, _ = eager_regression()
    x, y = _regression_data()
    return step, [(x[i:i + 32], y[i:i + 32]) for i in range(0, 512, 32)]


def _prebuilt_step():
    import prebuilt  # built at its first import, wherever that was

    x, y = _regression_data()

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(prebuilt.model(x, training=True) - y))
        grads = tape.gradient(loss, prebuilt.model.trainable_variables)
        prebuilt.optimizer.apply_gradients(zip(grads, prebuilt.model.trainable_variables,
                                               strict=True))
        return loss

    return train_step, tf.data.Dataset.from_tensor_slices((x, y)).batch(32), prebuilt


def prebuilt_loop():
    """A step training a model built before the factory ran."""
    step, data, _ = _prebuilt_step()
    return step, data


def prebuilt_loop_with_variables():
    """The same, with the variables it trains returned as the third element."""
    step, data, prebuilt = _prebuilt_step()
    return step, data, [*prebuilt.model.variables, *prebuilt.optimizer.variables]
