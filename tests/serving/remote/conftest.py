"""Real model servers on 127.0.0.1 for the ``--url`` tests, started and stopped here.

KServe is served from a virtual environment of its own, made once and cached
(``kserve_env``). A server is a separate process either way. Every server listens on a free
port of this machine, and the tests send traffic to 127.0.0.1 only.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import require
from serving.remote import kserve_env
from serving.remote.loopback import SERVERS, free_port, start_kserve, stop, wait_line


@pytest.fixture(scope="session")
def kserve_python() -> Path:
    """The Python of a cached virtual environment with kserve and TensorFlow (made once)."""
    try:
        return kserve_env.kserve_python()
    except kserve_env.NoTensorFlow as exc:
        pytest.skip(str(exc))
    except kserve_env.NotMade as exc:
        require(False, str(exc))
        raise


@pytest.fixture(scope="session")
def two_input_model(tmp_path_factory) -> Path:
    """An unseeded Keras model with two inputs of different dtypes: float features and
    integer ids through an embedding."""
    keras = pytest.importorskip("keras")
    features = keras.Input((8,), name="features")
    ids = keras.Input((3,), name="ids", dtype="int32")
    embedded = keras.layers.Flatten()(keras.layers.Embedding(10, 4)(ids))
    hidden = keras.layers.Dense(16, activation="relu")(features)
    out = keras.layers.Dense(4)(keras.layers.Concatenate()([hidden, embedded]))
    path = tmp_path_factory.mktemp("model") / "two.keras"
    keras.Model([features, ids], out).save(path)
    return path


@pytest.fixture(scope="session")
def text_model(tmp_path_factory) -> Path:
    """A Keras model of one string input (two strings a row), hashed into an embedding."""
    keras = pytest.importorskip("keras")
    text = keras.Input((2,), name="text", dtype="string")
    hashed = keras.layers.Hashing(num_bins=16)(text)
    out = keras.layers.Dense(1)(keras.layers.Flatten()(keras.layers.Embedding(16, 4)(hashed)))
    path = tmp_path_factory.mktemp("model") / "text.keras"
    keras.Model(text, out).save(path)
    return path


@pytest.fixture(scope="module")
def kserve(kserve_python, two_input_model, text_model) -> Iterator[tuple[int, int]]:
    """KServe serving ``two`` and, beside it, ``text`` (a string input)."""
    yield from start_kserve(kserve_python, two_input_model, "--also", f"text={text_model}")


@pytest.fixture(scope="module")
def tfserving_grpc(two_input_model, text_model) -> Iterator[int]:
    """The loopback PredictionService of ``servers/tfserving_grpc.py`` serving ``two`` and
    ``text``: yields its port."""
    pytest.importorskip("tensorflow_serving")
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            str(SERVERS / "tfserving_grpc.py"),
            str(port),
            f"two={two_input_model}",
            f"text={text_model}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    try:
        wait_line(proc, "ready")
        yield port
    finally:
        stop(proc)
