"""A multi-task ranking model: user and item embeddings, the user's recent items, dense
features; several inputs of different dtypes and shapes passed as a dict, and two outputs by
name (the chance of a click, the expected watch time)."""

import numpy as np
import tensorflow as tf


def build(users, items, dim, history, hidden, batch):
    user = tf.keras.Input((), dtype="int32", name="user_id")
    item = tf.keras.Input((), dtype="int64", name="item_id")
    recent = tf.keras.Input((history,), dtype="int32", name="recent_items")
    dense = tf.keras.Input((13,), dtype="float32", name="dense_features")
    item_table = tf.keras.layers.Embedding(items, dim)
    u = tf.keras.layers.Embedding(users, dim)(user)
    i = item_table(item)
    r = tf.keras.layers.GlobalAveragePooling1D()(item_table(recent))
    d = tf.keras.layers.Dense(dim, activation="relu")(dense)
    x = tf.keras.layers.Concatenate()([u, i, r, d, u * i])
    for width in hidden:
        x = tf.keras.layers.Dense(width, activation="relu")(x)
    click = tf.keras.layers.Dense(1, activation="sigmoid", name="click")(x)
    watch = tf.keras.layers.Dense(1, activation="softplus", name="watch_seconds")(x)
    model = tf.keras.Model(
        [user, item, recent, dense], {"watch_seconds": watch, "click": click}
    )
    inputs = {
        "user_id": np.random.randint(0, users, size=(batch,)).astype("int32"),
        "item_id": np.random.randint(0, items, size=(batch,)).astype("int64"),
        "recent_items": np.random.randint(0, items, size=(batch, history)).astype("int32"),
        "dense_features": np.random.rand(batch, 13).astype("float32"),
    }
    return model, inputs


def make():
    return build(users=100_000, items=50_000, dim=32, history=20, hidden=(256, 128, 64), batch=1)


def make_tiny():
    return build(users=50, items=40, dim=4, history=3, hidden=(8,), batch=1)
