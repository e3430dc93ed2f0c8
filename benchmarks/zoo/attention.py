"""A small transformer encoder over a sequence of feature vectors: multi-head attention,
LayerNormalization, a GELU feed-forward, a classification head."""

import numpy as np
import tensorflow as tf


def encoder_block(x, dim, heads):
    attended = tf.keras.layers.MultiHeadAttention(heads, dim // heads)(x, x)
    x = tf.keras.layers.LayerNormalization()(x + attended)
    hidden = tf.keras.layers.Dense(dim * 4, activation="gelu")(x)
    return tf.keras.layers.LayerNormalization()(x + tf.keras.layers.Dense(dim)(hidden))


def build(length, dim, heads, blocks, batch):
    seq = tf.keras.Input((length, dim), name="sequence")
    x = seq
    for _ in range(blocks):
        x = encoder_block(x, dim, heads)
    x = tf.keras.layers.GlobalAveragePooling1D()(x)
    model = tf.keras.Model(seq, tf.keras.layers.Dense(10)(x))
    return model, np.random.randn(batch, length, dim).astype("float32")


def make():
    return build(length=64, dim=128, heads=4, blocks=2, batch=1)


def make_tiny():
    return build(length=8, dim=16, heads=2, blocks=1, batch=1)
