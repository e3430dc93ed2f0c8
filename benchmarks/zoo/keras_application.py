"""DenseNet121 from keras.applications with random weights (weights=None), as users benchmark
an architecture before they train it."""

import numpy as np
import tensorflow as tf


def make():
    model = tf.keras.applications.DenseNet121(weights=None, input_shape=(224, 224, 3))
    return model, np.random.rand(1, 224, 224, 3).astype("float32") * 255.0


def make_tiny():
    model = tf.keras.applications.DenseNet121(
        weights=None, input_shape=(32, 32, 3), classes=10, classifier_activation=None
    )
    return model, np.random.rand(1, 32, 32, 3).astype("float32") * 255.0
