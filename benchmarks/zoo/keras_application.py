"""A keras.applications model with random weights (weights=None), as users benchmark an
architecture before they train it: DenseNet121 at its realistic size; MobileNetV3Small, the
smallest application, for tests (DenseNet121's 121 layers took 74 s to convert to every runtime
even at 32x32, MobileNetV3Small 26 s; its depthwise convolutions, squeeze-and-excitation blocks,
hard-swish and built-in rescaling are what a converter meets in the mobile applications)."""

import numpy as np
import tensorflow as tf


def make():
    model = tf.keras.applications.DenseNet121(weights=None, input_shape=(224, 224, 3))
    return model, np.random.rand(1, 224, 224, 3).astype("float32") * 255.0


def make_tiny():
    model = tf.keras.applications.MobileNetV3Small(
        weights=None, input_shape=(32, 32, 3), classes=10, classifier_activation=None
    )
    return model, np.random.rand(1, 32, 32, 3).astype("float32") * 255.0
