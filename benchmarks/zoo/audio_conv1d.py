"""A keyword-spotting model on the raw waveform (M5-style): 1-D convolutions with
BatchNormalization, pooling, a dense head."""

import numpy as np
import tensorflow as tf


def build(samples, width, blocks, batch):
    wave = tf.keras.Input((samples, 1), name="waveform")
    x = tf.keras.layers.Conv1D(width, 80, strides=4, padding="same")(wave)
    x = tf.keras.layers.BatchNormalization()(x)
    x = tf.keras.layers.ReLU()(x)
    x = tf.keras.layers.MaxPooling1D(4)(x)
    for k in range(blocks):
        x = tf.keras.layers.Conv1D(width * 2 ** min(k, 2), 3, padding="same")(x)
        x = tf.keras.layers.BatchNormalization()(x)
        x = tf.keras.layers.ReLU()(x)
        x = tf.keras.layers.MaxPooling1D(4 if k < blocks - 1 else 2)(x)
    x = tf.keras.layers.GlobalAveragePooling1D()(x)
    out = tf.keras.layers.Dense(35)(x)
    model = tf.keras.Model(wave, out)
    return model, np.random.randn(batch, samples, 1).astype("float32") * 0.1


def make():
    return build(samples=16000, width=32, blocks=3, batch=1)


def make_tiny():
    return build(samples=512, width=4, blocks=2, batch=1)
