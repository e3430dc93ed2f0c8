"""User-style training factories, unseeded, with labels computed from the inputs (the loss drops).

Each returns what a user would hand ``tfperf bench --train module:function``; they are kept
tiny so that a worker trains one in a second or two.
"""

import time

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


def bag_of_words():
    """(model, dataset): averaged embeddings of a small vocabulary, trained with Adam; the
    label says whether low ids dominate. Every batch looks each id up many times."""
    tokens = np.random.randint(0, 10, size=(1024, 40))
    labels = ((tokens < 5).sum(axis=1) > 20).astype("float32")
    model = keras.Sequential([
        keras.Input((40,), dtype="int32"),
        keras.layers.Embedding(10, 8),
        keras.layers.GlobalAveragePooling1D(),
        keras.layers.Dense(1, activation="sigmoid"),
    ])
    model.compile(keras.optimizers.Adam(0.01), "binary_crossentropy")
    return model, tf.data.Dataset.from_tensor_slices((tokens, labels)).batch(32)


def two_heads():
    """(model, x, y): a price and a kind from one trunk, each output with its own loss,
    weight and metric (labels as a dict of arrays)."""
    x = np.random.randn(512, 12).astype("float32")
    inputs = keras.Input((12,))
    trunk = keras.layers.Dense(32, activation="relu")(inputs)
    price = keras.layers.Dense(1, name="price")(trunk)
    kind = keras.layers.Dense(2, activation="softmax", name="kind")(trunk)
    model = keras.Model(inputs, {"price": price, "kind": kind})
    model.compile(keras.optimizers.Adam(3e-3),
                  loss={"price": "mse", "kind": "sparse_categorical_crossentropy"},
                  loss_weights={"price": 0.5, "kind": 1.0}, metrics={"kind": ["accuracy"]})
    labels = {"price": x[:, :3].sum(axis=1, keepdims=True), "kind": (x[:, 3] > 0).astype("int32")}
    return model, x, labels


def string_categories():
    """(model, dataset): colour names looked up inside the model, a user's categorical
    column fed as raw strings."""
    colours = np.array(["red", "green", "blue", "black", "white"])
    picked = np.random.randint(0, 5, size=(256, 3))
    inputs = keras.Input((3,), dtype="string")
    ids = keras.layers.StringLookup(vocabulary=list(colours))(inputs)
    hidden = keras.layers.Flatten()(keras.layers.Embedding(7, 4)(ids))
    model = keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(hidden))
    model.compile("adam", "binary_crossentropy")
    labels = (picked[:, 0] == 2).astype("float32")
    return model, tf.data.Dataset.from_tensor_slices((colours[picked], labels)).batch(32)


class RowBatches(keras.utils.PyDataset):
    """Batches of rows by index, the Keras 3 way of feeding ``fit`` from Python."""

    def __init__(self, x, y, batch_size=32, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y, self.batch_size = x, y, batch_size

    def __len__(self):
        return len(self.x) // self.batch_size

    def __getitem__(self, index):
        rows = slice(index * self.batch_size, (index + 1) * self.batch_size)
        return self.x[rows], self.y[rows]


def py_dataset_mlp():
    """(model, PyDataset): an MLP fed by a ``keras.utils.PyDataset``."""
    x = np.random.randn(320, 10).astype("float32")
    y = (x[:, :3].sum(axis=1) > 0).astype("float32")
    model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(1, activation="sigmoid")])
    model.compile("adam", "binary_crossentropy")
    return model, RowBatches(x, y)


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


def compiled_by_user():
    """(model, x, y): the MLP as a user who already tuned it compiles it: XLA and 8 steps a call."""
    model, x, y = tabular_mlp()
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse", jit_compile=True,
                  steps_per_execution=8)
    return model, x, y


def eager_mlp():
    """(model, x, y): the tabular MLP compiled with jit_compile=False, which on JAX runs the
    train step eagerly."""
    model, x, y = tabular_mlp()
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse", jit_compile=False)
    return model, x, y


def own_policy():
    """(model, x, y): a factory that sets its own mixed_bfloat16 policy before building."""
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    return tabular_mlp()


def own_layer_policy():
    """(model, dataset): a layer given its own mixed_bfloat16 policy in its dtype argument,
    the output layer float32 as Keras' mixed precision guide says."""
    from keras import mixed_precision as mp

    mp.set_global_policy("mixed_bfloat16")
    rng = np.random.default_rng(3)
    x = rng.normal(size=(128, 6)).astype("float32")
    y = x.sum(axis=1, keepdims=True).astype("float32")
    model = keras.Sequential([
        keras.Input((6,)), keras.layers.Dense(16, activation="relu", dtype="mixed_bfloat16"),
        keras.layers.Dense(1, dtype="float32")])
    model.compile(optimizer="adam", loss="mse")
    return model, tf.data.Dataset.from_tensor_slices((x, y)).batch(16)


class TinyGAN(keras.Model):
    """A GAN as Keras' guide writes one: two optimizers, a train_step returning d_loss and
    g_loss, compile() with no optimizer of its own (model.optimizer never steps)."""

    def __init__(self, noise=4):
        super().__init__()
        self.noise = noise
        self.generator = keras.Sequential([keras.Input((noise,)), keras.layers.Dense(8)])
        self.discriminator = keras.Sequential(
            [keras.Input((8,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)]
        )
        self.seeds = keras.random.SeedGenerator(1)
        self.d_loss_tracker = keras.metrics.Mean(name="d_loss")
        self.g_loss_tracker = keras.metrics.Mean(name="g_loss")

    def compile(self, d_optimizer, g_optimizer):
        super().compile()
        self.d_optimizer, self.g_optimizer = d_optimizer, g_optimizer
        self.loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)

    def call(self, x):
        return self.discriminator(x)

    @property
    def metrics(self):
        return [self.d_loss_tracker, self.g_loss_tracker]

    def train_step(self, data):
        real = data[0] if isinstance(data, tuple) else data
        n = tf.shape(real)[0]
        fake = self.generator(keras.random.normal((n, self.noise), seed=self.seeds))
        both = tf.concat([fake, real], axis=0)
        labels = tf.concat([tf.ones((n, 1)), tf.zeros((n, 1))], axis=0)
        with tf.GradientTape() as tape:
            d_loss = self.loss_fn(labels, self.discriminator(both))
        grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
        self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights,
                                             strict=True))
        with tf.GradientTape() as tape:
            noise = keras.random.normal((n, self.noise), seed=self.seeds)
            g_loss = self.loss_fn(tf.zeros((n, 1)), self.discriminator(self.generator(noise)))
        grads = tape.gradient(g_loss, self.generator.trainable_weights)
        self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights,
                                             strict=True))
        self.d_loss_tracker.update_state(d_loss)
        self.g_loss_tracker.update_state(g_loss)
        return {"d_loss": self.d_loss_tracker.result(), "g_loss": self.g_loss_tracker.result()}


def tiny_gan():
    """(model, dataset): the GAN on points of a shifted Gaussian."""
    real = (np.random.randn(512, 8) * 0.5 + 2.0).astype("float32")
    gan = TinyGAN()
    gan.compile(keras.optimizers.Adam(0.005), keras.optimizers.Adam(0.005))
    labels = np.zeros((512, 1), "float32")
    return gan, tf.data.Dataset.from_tensor_slices((real, labels)).batch(32)


class HostClip(keras.layers.Layer):
    """A layer that clips on the host through tf.numpy_function: fine in a graph, not in XLA."""

    def call(self, x):
        out = tf.numpy_function(lambda a: np.clip(a, -5, 5), [x], tf.float32)
        return tf.reshape(out, tf.shape(x))


def xla_fails_at_first_step():
    """(model, x, y): compiled with jit_compile=True, which Keras accepts and XLA cannot run."""
    x = np.random.randn(256, 6).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    model = keras.Sequential([keras.Input((6,)), HostClip(), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse", jit_compile=True)
    return model, x, y


def augmented_mlp():
    """(model, dataset): tabular_mlp fed by a finite tf.data pipeline of 3 batches whose map
    adds random noise to every batch (an augmentation, as image pipelines flip and crop)."""
    import tensorflow as tf

    model, x, y = tabular_mlp()

    def jitter(features, target):
        return features + tf.random.normal(tf.shape(features), stddev=0.05), target

    dataset = tf.data.Dataset.from_tensor_slices((x[:96], y[:96])).batch(32).map(jitter)
    return model, dataset


class SlowStep(keras.Model):
    """A regression whose every training step takes half a second more: a model of slow
    steps, made slow on purpose (the sleep runs inside the step, in TensorFlow's graph)."""

    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(8, activation="relu")
        self.out = keras.layers.Dense(1)

    def call(self, x, training=False):
        return self.out(self.hidden(x))

    def train_step(self, data):
        tf.py_function(lambda: time.sleep(0.5), [], [])
        return super().train_step(data)


def slow_step():
    """(model, dataset): a step of about half a second."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(256, 4)).astype("float32")
    y = (x @ np.array([1.0, -2.0, 0.5, 3.0], dtype="float32"))[:, None]
    model = SlowStep()
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", jit_compile=False)
    return model, tf.data.Dataset.from_tensor_slices((x, y)).batch(32)


def slow_build():
    """(model, x, y): the tabular MLP, from a factory that takes ten seconds to build it."""
    time.sleep(10)
    return tabular_mlp()


def eager_compiled():
    """(model, x, y): the MLP compiled with run_eagerly=True, left on after debugging."""
    model, x, y = tabular_mlp()
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse", run_eagerly=True)
    return model, x, y
