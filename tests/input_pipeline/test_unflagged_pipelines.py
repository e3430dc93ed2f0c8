"""``tfperf pipeline`` on training pipelines written the common way, with no tfperf flags in
their functions: a per-image augment in Python through ``tf.py_function``, a pure-TensorFlow
augment, ``Dataset.from_generator``, and TFRecord files read with ``interleave``.

Each pipeline is made to bound training by a wide margin (a tiny model, a slow stage), so the
verdict and the bounding stage do not depend on the machine's speed.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from helpers import run_cli

pytestmark = pytest.mark.tf
pytest.importorskip("tensorflow")

USER = """
import os
import time

import keras
import numpy as np
import tensorflow as tf

N, SIDE, BATCH = 64, 8, 8
RECORDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "records")


def _data():
    rng = np.random.default_rng(0)
    return rng.random((N, SIDE, SIDE, 3), dtype=np.float32), rng.integers(0, 4, N)


def _model():
    model = keras.Sequential(
        [keras.Input((SIDE, SIDE, 3)), keras.layers.Flatten(), keras.layers.Dense(4)]
    )
    model.compile(
        optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    return model


def augment(image):
    time.sleep(0.004)  # the per-image Python work of a real augment
    image = image.numpy()
    return image[:, ::-1] if np.random.random() < 0.5 else image


def _slices():
    return tf.data.Dataset.from_tensor_slices(_data()).shuffle(N)


def _train(ds):
    return {"dataset": ds.batch(BATCH), "model": _model()}


def python_augment():
    return _train(_slices().map(lambda x, y: (tf.py_function(augment, [x], tf.float32), y)))


def tf_augment(image, label):
    big = tf.image.resize(image, (192, 192))
    big = tf.image.hsv_to_rgb(tf.image.rgb_to_hsv(big))
    big = tf.image.per_image_standardization(big)
    return tf.image.resize(big, (SIDE, SIDE), antialias=True), label


def tf_ops():
    return _train(_slices().map(tf_augment))


def samples():
    x, y = _data()
    for i in range(N):
        time.sleep(0.004)  # reading and decoding one sample in Python
        yield x[i], y[i]


def generator():
    spec = (tf.TensorSpec((SIDE, SIDE, 3), tf.float32), tf.TensorSpec((), tf.int64))
    return _train(tf.data.Dataset.from_generator(samples, output_signature=spec))


def parse(record):
    parsed = tf.io.parse_single_example(
        record,
        {"png": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)},
    )
    image = tf.cast(tf.io.decode_png(parsed["png"], channels=3), tf.float32) / 255.0
    big = tf.image.hsv_to_rgb(tf.image.rgb_to_hsv(tf.image.resize(image, (192, 192))))
    return tf.image.resize(big, (SIDE, SIDE), antialias=True), parsed["label"]


def tfrecords():
    files = tf.data.Dataset.list_files(os.path.join(RECORDS, "*.tfrecord"), shuffle=False)
    return _train(files.interleave(tf.data.TFRecordDataset, cycle_length=2).map(parse))
"""

ARGS = ("--steps", "2", "--rounds", "2", "--stage-seconds", "0.1", "--min-block-seconds", "0")


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("userstyle")
    (d / "userstyle.py").write_text(textwrap.dedent(USER))
    _write_records(d / "records")
    sys.path.insert(0, str(d))
    try:
        yield d
    finally:
        sys.path.remove(str(d))
        sys.modules.pop("userstyle", None)


def _write_records(folder: Path, shards: int = 4, per_shard: int = 16) -> None:
    """TFRecord files of PNG-encoded 8x8 images and labels, as a dataset on disk holds them."""
    tf = pytest.importorskip("tensorflow")
    rng = np.random.default_rng(0)
    folder.mkdir()
    for shard in range(shards):
        with tf.io.TFRecordWriter(str(folder / f"part-{shard}.tfrecord")) as writer:
            for _ in range(per_shard):
                pixels = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
                writer.write(_example(tf.io.encode_png(pixels).numpy(), int(rng.integers(4))))


def _example(png: bytes, label: int) -> bytes:
    tf = pytest.importorskip("tensorflow")
    bytes_feature = tf.train.Feature(bytes_list=tf.train.BytesList(value=[png]))
    int_feature = tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))
    features = tf.train.Features(feature={"png": bytes_feature, "label": int_feature})
    return tf.train.Example(features=features).SerializeToString()


@pytest.fixture(scope="module")
def analysed(user_dir: Path) -> Callable[[str], dict]:
    """The report of ``userstyle:NAME``, analysed once per pipeline in this process (the
    worker's own measurement, then the parent's report): starting TensorFlow in a worker for
    each would cost more than the analysis. The command line runs one of them end to end."""
    from tfperf.input_pipeline.analyze import report
    from tfperf.worker.pipeline import main, target

    done: dict[str, dict] = {}

    def get(name: str) -> dict:
        if name not in done:
            loaded = target.load(f"userstyle:{name}")
            raw = main.measure(loaded, 2, 2, main.Progress(None), stage_seconds=0.1)
            done[name] = report(json.loads(json.dumps(raw)))
        return done[name]

    return get


def _stage(doc: dict, name: str) -> dict:
    return next(s for s in doc["stages"] if s["stage"] == name)


def _measured(doc: dict) -> dict[str, dict]:
    return {f["name"]: f for f in doc["fixes"] if f["measured"]}


def _check_answer(doc: dict) -> None:
    """The answer never keeps the pipeline while a fix went unmeasured, and says what was."""
    best = doc["best_fix"]
    unmeasured = best["unmeasured"]
    for item in unmeasured:
        assert set(item) >= {"name", "change", "why_not_measured"} and item["why_not_measured"]
    if best["name"] is None and unmeasured:
        assert "keep the pipeline" not in best["change"].lower()
        assert "keep the pipeline" not in best["headline"].lower()
        assert unmeasured[0]["name"] in best["change"]
    for item in unmeasured:
        assert item["name"] in best["headline"]
    assert doc["bounding_stage"] in best["headline"]


def test_python_augment_is_found_and_its_fixes_listed(analysed: Callable[[str], dict]) -> None:
    doc = analysed("python_augment")
    assert doc["verdict"] == "highly_input_bound"
    assert doc["bounding_stage"] == "map(augment)"
    assert _stage(doc, "map(augment)")["python_code"] is True
    assert _stage(doc, "from_tensor_slices")["python_code"] is False
    measured = _measured(doc)
    assert {"prefetch", "autotune_budget"} <= set(measured)
    # Python is never called on batches it was not written for, nor from several threads.
    assert "batch_before_map" not in measured and "parallel_map" not in measured
    assert "cache" not in measured  # Python may draw random numbers: caching could freeze them
    ranked = [u["name"] for u in doc["best_fix"]["unmeasured"]]
    assert ranked[:3] == ["batch_before_map", "tf_ops", "parallel_map"]
    gil = doc["best_fix"]["unmeasured"][2]["why_not_measured"]
    assert "GIL" in gil
    assert "runs Python" in doc["best_fix"]["headline"]
    _check_answer(doc)


def test_pure_tf_augment_gets_structural_fixes_measured(analysed: Callable[[str], dict]) -> None:
    doc = analysed("tf_ops")
    assert doc["verdict"] == "highly_input_bound"
    assert doc["bounding_stage"] == "map(tf_augment)"
    assert not any(s["python_code"] for s in doc["stages"])
    measured = _measured(doc)
    # rebuilt from the user's own dataset: no flags in their function
    assert {"parallel_map", "batch_before_map", "prefetch"} <= set(measured)
    assert "num_parallel_calls=tf.data.AUTOTUNE" in measured["parallel_map"]["change"]
    assert "ds.batch(n).map(tf_augment)" in measured["batch_before_map"]["change"]
    _check_answer(doc)


def test_generator_is_python_and_cannot_be_parallelised(analysed: Callable[[str], dict]) -> None:
    doc = analysed("generator")
    assert doc["verdict"] == "highly_input_bound"
    assert doc["bounding_stage"] == "from_generator(samples)"
    assert _stage(doc, "from_generator(samples)")["python_code"] is True
    ranked = [u["name"] for u in doc["best_fix"]["unmeasured"]]
    assert ranked[:2] == ["generator_to_tf", "parallel_generators"]
    _check_answer(doc)


def test_tfrecords_read_with_interleave(user_dir: Path) -> None:
    # end to end: the command line, its worker process, the stored run and its HTML report
    res = run_cli("pipeline", "userstyle:tfrecords", *ARGS, "--json", cwd=user_dir)
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert doc["verdict"] == "highly_input_bound"
    assert doc["bounding_stage"] == "map(parse)"
    assert not any(s["python_code"] for s in doc["stages"])
    measured = _measured(doc)
    assert {"parallel_map", "interleave"} <= set(measured)
    assert "ds.interleave(TFRecordDatasetV2" in measured["interleave"]["change"]
    # decode_png takes one image: the check on sample elements refuses batch-before-map
    unmeasured = {u["name"]: u for u in doc["best_fix"]["unmeasured"]}
    assert "batch" in unmeasured["batch_before_map"]["why_not_measured"]
    assert "batch_before_map" not in measured
    _check_answer(doc)
    html = user_dir / "report.html"
    res = run_cli("report", str(doc["run_id"]), "--html", str(html), cwd=user_dir)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "answer: map(parse) bounds throughput" in " ".join(res.stdout.split())
    page = html.read_text()
    assert "Not measured: these need your code" in page and "batch_before_map" in page
