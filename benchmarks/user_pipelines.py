"""Benchmark: ``tfperf pipeline`` on training pipelines written the common way, with no tfperf
flags in their functions.

Writes a module of user-style pipelines into a temporary directory (each feeding a small Keras
CNN on 64x64 images) and runs the library call :func:`analyze_pipeline` on each, one worker per
pipeline, baseline and fixes interleaved round by round:

- ``python_augment`` -- a per-image augment in NumPy through ``tf.py_function``, mapped
  without ``num_parallel_calls``, batched after the map, no prefetch;
- ``tf_augment`` -- the same augment in TensorFlow ops (random flip, brightness, contrast);
- ``tf_preprocess`` -- deterministic TensorFlow preprocessing (resize, standardise);
- ``generator`` -- ``Dataset.from_generator`` over a Python generator that decodes samples;
- ``tfrecords`` -- PNG images in TFRecord files read with ``interleave``, parsed and decoded.

Prints, per pipeline: the verdict and input share, the bounding stage (and whether it runs
Python), every measured fix with its paired speedup, 95% interval and verdict, what went
unmeasured, and the headline.

    .venv/bin/python benchmarks/user_pipelines.py [--steps 10] [--rounds 6] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import textwrap
from pathlib import Path

from tfperf.input_pipeline.analyze import PipelineOptions, analyze_pipeline

PIPELINES = ("python_augment", "tf_augment", "tf_preprocess", "generator", "tfrecords")

USER = """
import os
import time

import keras
import numpy as np
import tensorflow as tf

N, SIDE, BATCH, CLASSES = 512, 64, 32, 10
HERE = os.path.dirname(os.path.abspath(__file__))


def _data():
    rng = np.random.default_rng(0)
    x = rng.random((N, SIDE + 8, SIDE + 8, 3), dtype=np.float32)
    return x, rng.integers(0, CLASSES, N)


def _model():
    model = keras.Sequential([
        keras.Input((SIDE, SIDE, 3)),
        keras.layers.Conv2D(16, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(CLASSES),
    ])
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def augment(image):
    image = image.numpy()
    top, left = np.random.randint(0, 9, size=2)
    image = image[top:top + SIDE, left:left + SIDE]
    if np.random.random() < 0.5:
        image = image[:, ::-1]
    image = image * np.random.uniform(0.8, 1.2) + np.random.normal(0, 0.02, image.shape)
    return np.clip(image, 0.0, 1.0).astype(np.float32)


def python_augment():
    x, y = _data()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(N)
    ds = ds.map(lambda img, lab: (tf.py_function(augment, [img], tf.float32), lab))
    return {"dataset": ds.batch(BATCH), "model": _model()}


def tf_random_augment(image, label):
    image = tf.image.random_crop(image, (SIDE, SIDE, 3))
    image = tf.image.random_flip_left_right(image)
    image = tf.image.random_brightness(image, 0.2)
    image = tf.image.random_contrast(image, 0.8, 1.2)
    return tf.clip_by_value(image, 0.0, 1.0), label


def tf_augment():
    x, y = _data()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(N).map(tf_random_augment)
    return {"dataset": ds.batch(BATCH), "model": _model()}


def preprocess(image, label):
    image = tf.image.resize(image, (SIDE * 2, SIDE * 2))
    image = tf.image.per_image_standardization(image)
    return tf.image.resize(image, (SIDE, SIDE), antialias=True), label


def tf_preprocess():
    x, y = _data()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(N).map(preprocess)
    return {"dataset": ds.batch(BATCH), "model": _model()}


def samples():
    x, y = _data()
    for i in np.random.permutation(N):
        image = x[i, 4:4 + SIDE, 4:4 + SIDE]
        yield (image - image.mean()) / (image.std() + 1e-6), y[i]


def generator():
    spec = (tf.TensorSpec((SIDE, SIDE, 3), tf.float32), tf.TensorSpec((), tf.int64))
    ds = tf.data.Dataset.from_generator(samples, output_signature=spec)
    return {"dataset": ds.batch(BATCH), "model": _model()}


def parse(record):
    feats = {"png": tf.io.FixedLenFeature([], tf.string),
             "label": tf.io.FixedLenFeature([], tf.int64)}
    parsed = tf.io.parse_single_example(record, feats)
    image = tf.cast(tf.io.decode_png(parsed["png"], channels=3), tf.float32) / 255.0
    image = tf.image.random_crop(image, (SIDE, SIDE, 3))
    return tf.image.random_flip_left_right(image), parsed["label"]


def tfrecords():
    files = tf.data.Dataset.list_files(os.path.join(HERE, "records", "*.tfrecord"), shuffle=True)
    ds = files.interleave(tf.data.TFRecordDataset, cycle_length=4)
    return {"dataset": ds.map(parse).shuffle(256).batch(BATCH), "model": _model()}


def write_records(shards=8):
    os.makedirs(os.path.join(HERE, "records"), exist_ok=True)
    x, y = _data()
    for shard in range(shards):
        path = os.path.join(HERE, "records", f"part-{shard}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for i in range(shard, N, shards):
                png = tf.io.encode_png(tf.cast(x[i] * 255, tf.uint8)).numpy()
                feature = {
                    "png": tf.train.Feature(bytes_list=tf.train.BytesList(value=[png])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(y[i])])),
                }
                example = tf.train.Example(features=tf.train.Features(feature=feature))
                writer.write(example.SerializeToString())


if __name__ == "__main__":
    write_records()
"""


def _print(name: str, doc: dict) -> None:
    share = doc["input_share"]
    shown = "-" if share is None else f"{share:.0%}"
    print(
        f"\n=== {name} ({doc['target']}, batch {doc['batch']}, {doc['steps']} steps x "
        f"{doc['rounds']} rounds)"
    )
    print(f"verdict: {doc['verdict']} (input share {shown})")
    row = next((s for s in doc["stages"] if s["bounding"]), {})
    print(
        f"bounding stage: {doc['bounding_stage']} (adds {row.get('added_ms_per_batch', 0):.1f}"
        f" ms/batch; python_code={row.get('python_code')})"
    )
    print(
        f"train: {doc['train']['steps_per_s']:.1f} steps/s; step alone "
        f"{doc['compute']['steps_per_s']:.1f} steps/s; dataset alone "
        f"{doc['dataset']['batches_per_s']:.1f} batches/s"
    )
    print(f"  {'fix':44s} {'steps/s':>8s} {'speedup':>8s}  95% CI        verdict")
    for fix in doc["fixes"]:
        if fix["measured"]:
            low, high = fix["ci95"]
            print(
                f"  {fix['name'][:44]:44s} {fix['per_s']:8.1f} {fix['speedup']:7.2f}x  "
                f"{low:.2f}..{high:.2f}  {fix['verdict']}"
            )
    for i, item in enumerate(doc["best_fix"]["unmeasured"], 1):
        print(f"  not measured {i}. {item['name']} ({item['stage']}): {item['why_not_measured']}")
    print(f"best fix: {doc['best_fix']['name']}")
    print("headline: " + textwrap.fill(doc["best_fix"]["headline"], 100, subsequent_indent="  "))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--only", nargs="*", choices=PIPELINES, default=list(PIPELINES))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tfperf-userpipes-") as tmp:
        (Path(tmp) / "userpipes.py").write_text(textwrap.dedent(USER))
        os.chdir(tmp)  # the worker imports userpipes from the current directory
        if "tfrecords" in args.only:
            import subprocess

            subprocess.run([sys.executable, "userpipes.py"], check=True, capture_output=True)
        options = PipelineOptions(
            steps=args.steps, rounds=args.rounds, store=str(Path(tmp) / "store.sqlite")
        )
        for name in args.only:
            doc = analyze_pipeline(
                f"userpipes:{name}",
                options=options,
                on_progress=lambda line: print(f"  .. {line}", file=sys.stderr),
            )
            _print(name, doc)
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
