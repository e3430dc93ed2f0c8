"""User-style training at realistic size for ``benchmarks/train_suite.py``: four Keras models and
two custom training loops.

Written the way users write them: unseeded, synthetic data whose labels the model can learn
(computed from the inputs), Adam; a model compiled and returned as ``(model, dataset)`` or
``(model, x, y)``, a loop as ``(step, dataset)``.
"""

import keras
import numpy as np
import tensorflow as tf


def rnn():
    """A GRU text classifier: 50 tokens of a 5000-word vocabulary, batch 64."""
    tokens = np.random.randint(0, 5000, size=(4096, 50))
    labels = ((tokens < 2500).sum(axis=1) > 25).astype("int32")
    model = keras.Sequential([
        keras.Input((50,), dtype="int32"),
        keras.layers.Embedding(5000, 64),
        keras.layers.GRU(64),
        keras.layers.Dense(2),
    ])
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    data = tf.data.Dataset.from_tensor_slices((tokens, labels)).shuffle(4096).batch(64)
    return model, data.prefetch(2)


def _block(x, filters):
    x = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(x)
    x = keras.layers.BatchNormalization()(x)
    return keras.layers.ReLU()(x)


def cnn():
    """A small VGG-style CNN with batch norm on 32x32 RGB images, batch 64."""
    images = np.random.rand(2048, 32, 32, 3).astype("float32")
    labels = (images[..., 0].mean(axis=(1, 2)) > images[..., 2].mean(axis=(1, 2))).astype("int32")
    inp = keras.Input((32, 32, 3))
    x = _block(_block(inp, 16), 16)
    x = keras.layers.MaxPooling2D()(x)
    x = _block(_block(x, 32), 32)
    x = keras.layers.GlobalAveragePooling2D()(x)
    model = keras.Model(inp, keras.layers.Dense(2)(x))
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model, images, labels


def transformer():
    """A 2-layer transformer encoder (d=128, 4 heads, sequence 32) classifying sequences."""
    tokens = np.random.randint(0, 1000, size=(2048, 32))
    labels = (tokens[:, :16].mean(axis=1) > tokens[:, 16:].mean(axis=1)).astype("int32")
    inp = keras.Input((32,), dtype="int32")
    x = keras.layers.Embedding(1000, 128)(inp)
    for _ in range(2):
        att = keras.layers.MultiHeadAttention(4, 32)(x, x)
        x = keras.layers.LayerNormalization()(x + att)
        ff = keras.layers.Dense(128)(keras.layers.Dense(256, activation="gelu")(x))
        x = keras.layers.LayerNormalization()(x + ff)
    x = keras.layers.GlobalAveragePooling1D()(x)
    model = keras.Model(inp, keras.layers.Dense(2)(x))
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    data = tf.data.Dataset.from_tensor_slices((tokens, labels)).batch(32)
    return model, data


def mlp():
    """A tabular MLP with dropout regressing a nonlinear target: 64 features, batch 256."""
    x = np.random.randn(16384, 64).astype("float32")
    y = (np.tanh(x[:, :8]).sum(axis=1) + 0.5 * x[:, 8]).astype("float32")[:, None]
    model = keras.Sequential([
        keras.Input((64,)),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dropout(0.2),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dropout(0.2),
        keras.layers.Dense(1),
    ])
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
    return model, x, y


# Custom training loops (no fit): (step, dataset), written as TensorFlow's guides write them.
# The suite's GAN loop is the built-in gan-train workload (tfperf.worker.trainmodels).


def eager_mlp():
    """The guide's loop from scratch without its ``@tf.function``: a plain Python step
    training a regression MLP (64 features, two hidden layers of 128), batch 64."""
    x = np.random.randn(8192, 64).astype("float32")
    y = (np.tanh(x[:, :8]).sum(axis=1) + 0.5 * x[:, 8]).astype("float32")[:, None]
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation="relu"),
                              keras.layers.Dense(128, activation="relu"), keras.layers.Dense(1)])
    optimizer = keras.optimizers.Adam(1e-3)
    loss_fn = keras.losses.MeanSquaredError()

    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    return train_step, tf.data.Dataset.from_tensor_slices((x, y)).shuffle(8192).batch(64)


def contrastive():
    """A SimCLR-style loop: two noisy views of each row of 128 features, an encoder (256, 64)
    trained so that a row's views agree, batch 256; its step returns a dict of the loss and
    the views' alignment."""
    x = np.random.randn(8192, 128).astype("float32")
    encoder = keras.Sequential([keras.Input((128,)), keras.layers.Dense(256, activation="relu"),
                                keras.layers.Dense(64)])
    optimizer = keras.optimizers.Adam(1e-3)

    @tf.function
    def train_step(batch):
        a = batch + tf.random.normal(tf.shape(batch), stddev=0.3)
        b = batch + tf.random.normal(tf.shape(batch), stddev=0.3)
        with tf.GradientTape() as tape:
            za = tf.math.l2_normalize(encoder(a, training=True), axis=1)
            zb = tf.math.l2_normalize(encoder(b, training=True), axis=1)
            logits = tf.matmul(za, zb, transpose_b=True) / 0.1
            labels = tf.range(tf.shape(batch)[0])
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        grads = tape.gradient(loss, encoder.trainable_variables)
        optimizer.apply_gradients(zip(grads, encoder.trainable_variables, strict=True))
        return {"loss": loss, "alignment": tf.reduce_mean(tf.reduce_sum(za * zb, axis=1))}

    return train_step, tf.data.Dataset.from_tensor_slices(x).batch(256)
