"""Real model servers on 127.0.0.1 for the ``--url`` tests, started and stopped here.

KServe pins its own protobuf and psutil, older than this environment's: it is installed into a
virtual environment of its own (with the same TensorFlow), created once and cached under
``TFPERF_TEST_CACHE`` (default ``~/.cache/tfperf-tests``), so later runs reuse it. A server is
a separate process either way. Every server listens on a free port of this machine, and the
tests send traffic to 127.0.0.1 only.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import require
from serving.remote.loopback import SERVERS, free_port, start_kserve, stop, wait_line

KSERVE = "0.21.0"


def _tf_version() -> str:
    for dist in ("tensorflow-cpu", "tensorflow"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    pytest.skip("TensorFlow is not installed")


def _cache() -> Path:
    root = os.environ.get("TFPERF_TEST_CACHE") or Path.home() / ".cache" / "tfperf-tests"
    return Path(root)


@pytest.fixture(scope="session")
def kserve_python() -> Path:
    """The Python of a cached virtual environment with kserve and TensorFlow (made once)."""
    tf = _tf_version()
    folder = _cache() / f"kserve-{KSERVE}-tf{tf}-py{sys.version_info[0]}{sys.version_info[1]}"
    python = folder / "bin" / "python"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / ".kserve.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one test process installs; the others wait for it
        if not (folder / ".ready").exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(folder)], check=True)
            done = subprocess.run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    f"kserve=={KSERVE}",
                    f"tensorflow-cpu=={tf}",
                ],
                capture_output=True,
                text=True,
                timeout=900,
            )
            require(done.returncode == 0, f"kserve could not be installed: {done.stderr[-500:]}")
            (folder / ".ready").touch()
    return python


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


@pytest.fixture(scope="module")
def kserve(kserve_python, two_input_model) -> Iterator[tuple[int, int]]:
    yield from start_kserve(kserve_python, two_input_model)


@pytest.fixture(scope="module")
def tfserving_grpc(two_input_model) -> Iterator[int]:
    """The loopback PredictionService of ``servers/tfserving_grpc.py``: yields its port."""
    pytest.importorskip("tensorflow_serving")
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            str(SERVERS / "tfserving_grpc.py"),
            str(two_input_model),
            "two",
            str(port),
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
