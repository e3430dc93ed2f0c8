"""Bad input and worker faults through the real CLI: one sentence, exit 2, no traceback."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from helpers import run_cli

pytestmark = pytest.mark.tf

BAD = """
import ctypes
import time

import numpy as np
import tensorflow as tf


def not_a_dataset():
    return [1, 2, 3]


def dict_without_dataset():
    return {"data": tf.data.Dataset.range(4), "model": None}


def model_and_arrays():
    import keras
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    return model, np.zeros((8, 4), "float32"), np.zeros((8, 1), "float32")


def fails_at_37():
    def check(i):
        tf.debugging.assert_less(i, tf.constant(37, tf.int64), message="element 37 is bad")
        return i

    return tf.data.Dataset.range(100).map(check).batch(4)


def empty():
    return tf.data.Dataset.range(10).filter(lambda x: x > 100).batch(2)


def corrupt_files(tmp=__import__("os").path.dirname(__file__)):
    good = tf.io.encode_jpeg(tf.zeros([8, 8, 3], tf.uint8)).numpy()
    paths = []
    for i in range(4):
        path = f"{tmp}/img{i}.jpg"
        with open(path, "wb") as fh:
            fh.write(good if i != 2 else b"this is not a jpeg")
        paths.append(path)
    ds = tf.data.Dataset.from_tensor_slices(paths)
    return ds.map(lambda p: tf.io.decode_jpeg(tf.io.read_file(p))).batch(1)


def crashes():
    ctypes.string_at(0)


def hangs():
    time.sleep(600)


def model_mismatch():
    import keras
    x = np.zeros((8, 5), np.float32)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(4), model
"""


@pytest.fixture(scope="module")
def bad_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("badpipes")
    (d / "badpipes.py").write_text(textwrap.dedent(BAD))
    (d / "broken_import.py").write_text("import tensorflow as tf\nraise RuntimeError('boom')\n")
    return d


def _fails(bad_dir: Path, *args: str) -> str:
    res = run_cli(
        "pipeline",
        *args,
        "--steps",
        "2",
        "--rounds",
        "1",
        "--min-block-seconds",
        "0",
        cwd=bad_dir,
        timeout=240,
    )
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout
    assert res.stdout == ""
    return " ".join(res.stderr.split())


@pytest.mark.parametrize(
    ("target", "sentence"),
    [
        ("badpipes:not_a_dataset", "returned list, not a tf.data.Dataset"),
        ("badpipes:empty", "the dataset is empty"),
        ("badpipes:dict_without_dataset", "returned a dict without a 'dataset' key (its keys: "),
        # what `tune --train` takes: arrays have no tf.data pipeline of the user's
        ("badpipes:model_and_arrays", "returned a model and arrays: Keras' fit builds their "
         "pipeline itself, so there is no tf.data pipeline of yours to analyze"),
        # raised while timing the stages: the user's message, not tf.data's iterator path
        ("badpipes:fails_at_37", "while timing its stages: assertion failed: [element 37 is bad]"),
        ("badpipes:corrupt_files", "the dataset raised InvalidArgumentError after 2 elements"),
        ("no_such_module_here:make", "cannot find module no_such_module_here"),  # no worker
        ("badpipes.not_a_dataset", "is not module:function"),
        ("broken_import:make", "importing broken_import failed with RuntimeError: boom"),
        ("badpipes:model_mismatch", "the training step failed"),
        ("badpipes:crashes", "killed by SIGSEGV"),
    ],
)
def test_bad_input_is_one_sentence(bad_dir: Path, target: str, sentence: str) -> None:
    assert sentence in _fails(bad_dir, target)


def test_worker_timeout(bad_dir: Path) -> None:
    err = _fails(bad_dir, "badpipes:hangs", "--timeout", "8")
    assert "did not finish within 8 s" in err


def test_tensorflow_missing(tmp_path: Path) -> None:
    # A tensorflow module in the working directory that fails to import, as a missing or broken
    # install does; the worker imports from the working directory first.
    (tmp_path / "tensorflow.py").write_text("raise ImportError('No module named tensorflow')\n")
    (tmp_path / "pipe.py").write_text("def make():\n    return None\n")
    err = _fails(tmp_path, "pipe:make")
    assert "TensorFlow cannot be imported" in err and "pip install tensorflow" in err
