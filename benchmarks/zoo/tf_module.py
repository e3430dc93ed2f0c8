"""A tabular scorer written as a plain tf.Module (no Keras): its variables drawn from
TensorFlow's global generator, two inputs of different dtypes passed positionally."""

import numpy as np
import tensorflow as tf


class Scorer(tf.Module):
    def __init__(self, features, categories, hidden):
        super().__init__()
        self.table = tf.Variable(tf.random.normal((categories, hidden)) * 0.1)
        self.w1 = tf.Variable(tf.random.normal((features, hidden)) * 0.1)
        self.b1 = tf.Variable(tf.zeros((hidden,)))
        self.w2 = tf.Variable(tf.random.normal((hidden, 1)) * 0.1)

    @tf.function
    def __call__(self, features, category):
        x = tf.nn.relu(features @ self.w1 + self.b1 + tf.gather(self.table, category))
        return tf.sigmoid(x @ self.w2)


def build(features, categories, hidden, batch):
    module = Scorer(features, categories, hidden)
    inputs = [
        np.random.rand(batch, features).astype("float32"),
        np.random.randint(0, categories, size=(batch,)).astype("int32"),
    ]
    return module, inputs


def make():
    return build(features=64, categories=1000, hidden=256, batch=1)


def make_tiny():
    return build(features=6, categories=5, hidden=8, batch=1)
