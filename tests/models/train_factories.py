"""User-style training factories, unseeded, with labels computed from the inputs (the loss drops).

Each returns what a user would hand ``tfperf bench --train module:function``; they are kept
tiny so that a worker trains one in a second or two.
"""

import keras
import numpy as np
import tensorflow as tf


def gru_text():
    """(model, dataset): a GRU over token ids; the label says whether low ids dominate."""
    tokens = np.random.randint(0, 50, size=(512, 12))
    labels = ((tokens < 25).sum(axis=1) > 6).astype("int32")
    model = keras.Sequential(
        [
            keras.Input((12,), dtype="int32"),
            keras.layers.Embedding(50, 8),
            keras.layers.GRU(8),
            keras.layers.Dense(2),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    data = tf.data.Dataset.from_tensor_slices((tokens, labels)).shuffle(512)
    data = data.map(lambda t, label: (tf.cast(t, "int32"), label))
    return model, data.batch(32)


def cnn_batchnorm():
    """(model, x, y): a small CNN with batch norm; the label is the brighter half."""
    images = np.random.rand(256, 8, 8, 1).astype("float32")
    labels = (images[:, :, :4].mean(axis=(1, 2, 3)) > images[:, :, 4:].mean(axis=(1, 2, 3)))
    model = keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            keras.layers.Conv2D(4, 3, padding="same"),
            keras.layers.BatchNormalization(),
            keras.layers.ReLU(),
            keras.layers.Flatten(),
            keras.layers.Dense(2),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model, images, labels.astype("int32")


def tabular_mlp():
    """(model, x, y): an MLP with dropout regressing a linear target."""
    x = np.random.randn(512, 10).astype("float32")
    y = (x @ np.linspace(-1, 1, 10) + 0.5).astype("float32")[:, None]
    model = keras.Sequential(
        [
            keras.Input((10,)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(1),
        ]
    )
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    return model, x, y


class ClippedNet(keras.Model):
    """A subclassed model whose own train_step clips the gradients."""

    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(16, activation="relu")
        self.out = keras.layers.Dense(1)

    def call(self, x, training=False):
        return self.out(self.hidden(x))

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            pred = self(x, training=True)
            loss = self.compute_loss(x=x, y=y, y_pred=pred)
        grads = tape.gradient(loss, self.trainable_variables)
        grads = [tf.clip_by_norm(g, 1.0) for g in grads]
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables, strict=True))
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
        return {"loss": loss}


def clipped_subclass():
    """(model, dataset): the subclassed model with its own train_step."""
    x = np.random.randn(256, 6).astype("float32")
    y = np.abs(x).sum(axis=1, keepdims=True).astype("float32")
    model = ClippedNet()
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    return model, tf.data.Dataset.from_tensor_slices((x, y)).batch(32)


class _Custom(ClippedNet):
    """The same model under a class name Keras refuses as a name scope."""


def underscore_subclass():
    model = _Custom()
    model.compile(optimizer="adam", loss="mse")
    x = np.random.randn(64, 6).astype("float32")
    return model, x, x[:, :1]


def not_a_pair():
    return "a model"


def uncompiled():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    return model, np.zeros((8, 4), "float32"), np.zeros((8, 1), "float32")


def wrong_labels():
    model, x, _ = tabular_mlp()
    return model, x, np.zeros((512, 3, 2), "float32")


def nan_loss():
    model, x, y = tabular_mlp()
    y[0, 0] = np.nan
    return model, x, y


def empty_dataset():
    model, x, y = tabular_mlp()
    return model, tf.data.Dataset.from_tensor_slices((x, y)).take(0).batch(8)


def differs_each_process():
    """Unseedable data: a private generator from the OS's entropy."""
    model, x, y = tabular_mlp()
    return model, np.random.default_rng().normal(size=x.shape).astype("float32"), y
