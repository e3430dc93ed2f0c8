"""Training under ``tf.distribute`` strategies as users write it on one machine.

Importing this module splits the CPU into two logical devices (TensorFlow allows that only
before its runtime starts), so it is imported by worker processes only, never by a test
process: a custom loop that calls ``strategy.run`` inside its step, a Keras model built and
compiled under ``MirroredStrategy``, and strategies tfperf does not run in one process.
"""

import keras
import numpy as np
import tensorflow as tf

_CPU = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(_CPU, [tf.config.LogicalDeviceConfiguration()] * 2)
DEVICES = [d.name for d in tf.config.list_logical_devices("CPU")]


def _data(rows=512):
    x = np.random.randn(rows, 8).astype("float32")
    y = (x @ np.linspace(-1, 1, 8) + 0.3).astype("float32")[:, None]
    return x, y


def mirrored_loop():
    """The distributed custom loop of TensorFlow's guide: the model and optimizer built in the
    strategy's scope, a step that runs the replica step with ``strategy.run`` and sums the
    replicas' losses, over ``experimental_distribute_dataset``."""
    strategy = tf.distribute.MirroredStrategy(DEVICES)
    with strategy.scope():
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(1)])
        optimizer = keras.optimizers.Adam(0.01)
    x, y = _data()
    global_batch = 32

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            per_row = tf.reduce_mean(tf.square(model(x, training=True) - y), axis=-1)
            loss = tf.nn.compute_average_loss(per_row, global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train_step(x, y):
        per_replica = strategy.run(replica_step, args=(x, y))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(global_batch)
    return train_step, strategy.experimental_distribute_dataset(data)


def mirrored_keras():
    """A Keras model built and compiled under ``MirroredStrategy``, trained by ``fit``."""
    strategy = tf.distribute.MirroredStrategy(DEVICES)
    with strategy.scope():
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    x, y = _data()
    return model, tf.data.Dataset.from_tensor_slices((x, y)).batch(32)


def _replica_step(model, optimizer):
    """The step each replica runs: plain SGD on the mean squared error."""

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    return replica_step


def _linear_under(strategy):
    """A linear model and its SGD, built in the strategy's scope."""
    with strategy.scope():
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
        return model, keras.optimizers.SGD(0.05)


def one_device_loop():
    """A custom loop under ``OneDeviceStrategy``."""
    strategy = tf.distribute.OneDeviceStrategy(DEVICES[0])
    replica_step = _replica_step(*_linear_under(strategy))

    @tf.function
    def train_step(x, y):
        return strategy.run(replica_step, args=(x, y))

    data = tf.data.Dataset.from_tensor_slices(_data()).batch(32)
    return train_step, strategy.experimental_distribute_dataset(data)


def multi_worker_loop():
    """A custom loop under ``MultiWorkerMirroredStrategy`` (one worker here, without
    ``TF_CONFIG``): written for a cluster of processes."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    replica_step = _replica_step(*_linear_under(strategy))

    @tf.function
    def train_step(x, y):
        return strategy.reduce("MEAN", strategy.run(replica_step, args=(x, y)), axis=None)

    data = tf.data.Dataset.from_tensor_slices(_data()).batch(32)
    return train_step, strategy.experimental_distribute_dataset(data)
