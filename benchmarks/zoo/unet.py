"""A small U-Net for segmentation: image in, per-pixel class probabilities out."""

import numpy as np
import tensorflow as tf


def conv_block(x, width):
    x = tf.keras.layers.Conv2D(width, 3, padding="same", activation="relu")(x)
    return tf.keras.layers.Conv2D(width, 3, padding="same", activation="relu")(x)


def build(size, width, levels, batch):
    image = tf.keras.Input((size, size, 3), name="image")
    skips, x = [], image
    for k in range(levels):
        x = conv_block(x, width * 2**k)
        skips.append(x)
        x = tf.keras.layers.MaxPooling2D()(x)
    x = conv_block(x, width * 2**levels)
    for k in reversed(range(levels)):
        x = tf.keras.layers.Conv2DTranspose(width * 2**k, 2, strides=2, padding="same")(x)
        x = conv_block(tf.keras.layers.Concatenate()([x, skips[k]]), width * 2**k)
    out = tf.keras.layers.Conv2D(2, 1, activation="softmax")(x)
    model = tf.keras.Model(image, out)
    return model, np.random.rand(batch, size, size, 3).astype("float32")


def make():
    return build(size=128, width=16, levels=3, batch=1)


def make_tiny():
    return build(size=16, width=4, levels=2, batch=1)
