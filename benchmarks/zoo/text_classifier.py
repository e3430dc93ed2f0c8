"""A sentiment classifier over token ids: embedding, bidirectional GRU, dense head."""

import numpy as np
import tensorflow as tf


def build(vocab, length, units, batch):
    tokens = tf.keras.Input((length,), dtype="int32", name="tokens")
    x = tf.keras.layers.Embedding(vocab, 64)(tokens)
    x = tf.keras.layers.Bidirectional(tf.keras.layers.GRU(units))(x)
    x = tf.keras.layers.Dense(units, activation="relu")(x)
    out = tf.keras.layers.Dense(3, activation="softmax")(x)
    model = tf.keras.Model(tokens, out)
    return model, np.random.randint(0, vocab, size=(batch, length)).astype("int32")


def make():
    return build(vocab=20000, length=128, units=64, batch=1)


def make_tiny():
    return build(vocab=200, length=12, units=8, batch=1)
