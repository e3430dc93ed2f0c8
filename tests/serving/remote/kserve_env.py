"""The virtual environment the KServe tests serve from: made once, cached, shared.

KServe pins its own protobuf and psutil, older than this environment's: it is installed into a
virtual environment of its own (with the same TensorFlow), cached under ``TFPERF_TEST_CACHE``
(default ``~/.cache/tfperf-tests``), so later runs reuse it. A lock file makes one process
install it while the others wait for it. ``python tests/serving/remote/kserve_env.py`` makes it
ahead of the tests (``.ci/run`` does, beside the test run's start: the install mostly waits on
downloads).
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

KSERVE = "0.21.0"
SERVED = "import keras, kserve, numpy, tensorflow"
"""What the test server (``servers/kserve_keras.py``) imports."""


class NotMade(RuntimeError):
    """The environment could not be made here (pip failed)."""


class NoTensorFlow(NotMade):
    """No TensorFlow here to serve with."""


def tf_version() -> str:
    """The installed TensorFlow's version (the KServe environment gets the same)."""
    for dist in ("tensorflow-cpu", "tensorflow"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    raise NoTensorFlow("TensorFlow is not installed")


def cache() -> Path:
    root = os.environ.get("TFPERF_TEST_CACHE") or Path.home() / ".cache" / "tfperf-tests"
    return Path(root)


def installer(python: Path) -> list[str]:
    """``uv pip install`` into ``python``'s environment when this environment has uv (the
    Makefile installs it: half pip's time, and the install runs beside the first tests), else
    that environment's pip. Not byte-compiled whole: compiling all of it took 34 s of CPU from
    the tests it runs beside (24 s against 7 s to install, uv's cache warm); :data:`SERVED`
    compiles what the server imports, once (:func:`kserve_python`)."""
    beside = Path(sys.executable).parent / "uv"
    uv = str(beside) if beside.exists() else shutil.which("uv")
    if uv:
        return [uv, "pip", "install", "--python", str(python)]
    return [str(python), "-m", "pip", "install"]


def kserve_python() -> Path:
    """The Python of the cached environment with kserve and TensorFlow, made if missing."""
    tf = tf_version()
    folder = cache() / f"kserve-{KSERVE}-tf{tf}-py{sys.version_info[0]}{sys.version_info[1]}"
    python = folder / "bin" / "python"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / ".kserve.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one process installs; the others wait for it
        if not (folder / ".ready").exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(folder)], check=True)
            done = subprocess.run(
                [*installer(python), "--quiet", f"kserve=={KSERVE}", f"tensorflow-cpu=={tf}"],
                capture_output=True, text=True, timeout=900,
            )
            if done.returncode != 0:
                raise NotMade(f"kserve could not be installed: {done.stderr[-500:]}")
            # bytecode written even where PYTHONDONTWRITEBYTECODE is set: every server start
            # reads it (5.6 s to import them, 11.7 s without it)
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            subprocess.run([str(python), "-c", SERVED], env=env, capture_output=True,
                           timeout=300, check=True)
            (folder / ".ready").touch()
    return python


if __name__ == "__main__":
    print(kserve_python())
