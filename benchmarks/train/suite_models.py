"""Four user-style training models at realistic size for ``benchmarks/train_suite.py``.

Written the way users write them: unseeded, synthetic data whose labels the model can learn
(computed from the inputs), compiled with Adam, returned as ``(model, dataset)`` or
``(model, x, y)``.
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
