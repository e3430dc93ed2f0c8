"""The built-in, honestly input-bound pipeline behind ``tfperf pipeline --demo`` (worker side).

:func:`make` writes a few hundred small JPEG files into a temporary directory (once per
process), then returns the classic per-element pipeline: list the files, read and decode each
one, resize it, augment it (random flip, brightness and contrast), batch, and a small
convolutional model to train on it. Every stage runs per element on one thread, so the CPU
spends most of each step decoding and augmenting, not training.

Its keyword flags rebuild the pipeline with the honest fixes, so tfperf can measure each one:

- ``parallel_map``: ``num_parallel_calls=tf.data.AUTOTUNE`` on the per-element maps;
- ``interleave``: read files with a parallel ``interleave`` instead of one ``map``;
- ``cache_decoded``: ``cache()`` the decoded, resized images (before the random augmentation,
  so every epoch still sees fresh augmentations);
- ``batch_before_map``: batch first and augment whole batches with one vectorised call.

:data:`CHANGES` holds the code change for each flag (shown for the winner). The augmentation
is written once for rank-4 tensors, so the per-element and the vectorised paths compute the
same thing. No ``py_function``: everything is TensorFlow ops.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any

N_FILES = 256
"""Images written for the demo (one epoch)."""
FILE_SIZE = 160
"""Side of the JPEG files in pixels."""
SIDE = 64
"""Side of the images the model sees."""
BATCH = 32
CLASSES = 10

CHANGES = {
    "parallel_map": "ds = ds.map(load, num_parallel_calls=tf.data.AUTOTUNE)  # was: ds.map(load)",
    "interleave": (
        "ds = files.interleave(lambda f: tf.data.Dataset.from_tensors(tf.io.read_file(f)),\n"
        "                      cycle_length=4, num_parallel_calls=tf.data.AUTOTUNE)"
    ),
    "cache_decoded": "ds = ds.map(load).cache()  # cache decoded images; augment after the cache",
    "batch_before_map": (
        "ds = ds.batch(BATCH).map(augment_batch)  # was: ds.map(augment_one).batch(BATCH)"
    ),
}

_files_dir: Path | None = None


def write_images(directory: Path, n: int = N_FILES, side: int = FILE_SIZE) -> list[str]:
    """Write ``n`` random-texture JPEG files of ``side`` x ``side`` pixels; return their paths."""
    import tensorflow as tf

    directory.mkdir(parents=True, exist_ok=True)
    gen = tf.random.Generator.from_seed(7)
    paths = []
    for i in range(n):
        low = gen.uniform([side // 8, side // 8, 3], 0, 255)
        img = tf.image.resize(low, [side, side], method="bicubic")
        img = tf.cast(tf.clip_by_value(img, 0, 255), tf.uint8)
        path = directory / f"img_{i:04d}.jpg"
        tf.io.write_file(str(path), tf.io.encode_jpeg(img, quality=90))
        paths.append(str(path))
    return paths


def _files() -> list[str]:
    """The demo's image files, written on first use into a directory removed at exit."""
    global _files_dir
    if _files_dir is None:
        _files_dir = Path(tempfile.mkdtemp(prefix="tfperf-pipeline-demo-"))
        atexit.register(shutil.rmtree, _files_dir, True)
        write_images(_files_dir)
    return sorted(str(p) for p in _files_dir.glob("*.jpg"))


def augment_batch(images: Any, labels: Any) -> tuple[Any, Any]:
    """Random flip, brightness and contrast per image of a rank-4 uint8 batch -> float32."""
    import tensorflow as tf

    x = tf.cast(images, tf.float32) / 255.0
    n = tf.shape(x)[0]
    flip = tf.random.uniform([n, 1, 1, 1]) < 0.5
    x = tf.where(flip, tf.reverse(x, axis=[2]), x)
    x = x + tf.random.uniform([n, 1, 1, 1], -0.2, 0.2)
    mean = tf.reduce_mean(x, axis=[1, 2, 3], keepdims=True)
    x = (x - mean) * tf.random.uniform([n, 1, 1, 1], 0.8, 1.2) + mean
    x = tf.image.adjust_saturation(x, 1.1)
    return tf.clip_by_value(x, 0.0, 1.0), labels


def _augment_one(image: Any, label: Any) -> tuple[Any, Any]:
    """:func:`augment_batch` on one image (the per-element path)."""
    import tensorflow as tf

    x, y = augment_batch(image[tf.newaxis], label)
    return x[0], y


def _load(contents: Any, label: Any) -> tuple[Any, Any]:
    import tensorflow as tf

    img = tf.io.decode_jpeg(contents, channels=3)
    img = tf.image.resize(img, [SIDE, SIDE], antialias=True)
    return tf.cast(img, tf.uint8), label


def make_model() -> Any:
    """A small CNN: cheap enough that the per-element pipeline is the bottleneck."""
    import keras

    model = keras.Sequential(
        [
            keras.Input((SIDE, SIDE, 3)),
            keras.layers.Conv2D(8, 3, strides=2, activation="relu"),
            keras.layers.Conv2D(16, 3, strides=2, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(CLASSES),
        ]
    )
    model.compile(
        optimizer="sgd",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def make_dataset(**flags: bool) -> Any:
    """The demo's ``tf.data`` pipeline, as the flags of :func:`make` say (none = the slow
    original)."""
    import tensorflow as tf

    unknown = set(flags) - set(CHANGES)
    if unknown:
        raise TypeError(f"unknown demo flags: {sorted(unknown)}")
    files = _files()
    labels = [i % CLASSES for i in range(len(files))]
    par = tf.data.AUTOTUNE if flags.get("parallel_map", False) else None
    names = tf.data.Dataset.from_tensor_slices((files, labels))
    if flags.get("interleave", False):
        ds = names.interleave(
            lambda f, y: tf.data.Dataset.from_tensors((tf.io.read_file(f), y)),
            cycle_length=4,
            num_parallel_calls=tf.data.AUTOTUNE,
        )
    else:
        ds = names.map(lambda f, y: (tf.io.read_file(f), y))
    ds = ds.map(_load, num_parallel_calls=par)
    if flags.get("cache_decoded", False):
        ds = ds.cache()
    if flags.get("batch_before_map", False):
        ds = ds.batch(BATCH).map(augment_batch, num_parallel_calls=par)
    else:
        ds = ds.map(_augment_one, num_parallel_calls=par).batch(BATCH)
    return ds


def make(
    *,
    parallel_map: bool = False,
    interleave: bool = False,
    cache_decoded: bool = False,
    batch_before_map: bool = False,
) -> dict[str, Any]:
    """``{"dataset", "model"}`` for ``tfperf pipeline``; the flags rebuild the pipeline."""
    return {
        "dataset": make_dataset(
            parallel_map=parallel_map,
            interleave=interleave,
            cache_decoded=cache_decoded,
            batch_before_map=batch_before_map,
        ),
        "model": make_model(),
    }


make.tfperf_changes = CHANGES  # type: ignore[attr-defined]
