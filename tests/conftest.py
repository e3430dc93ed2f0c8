"""Fixtures and the process-wide setup every test shares (helpers live in ``helpers.py``)."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from helpers import require, run_cli

# A shell without job control starts background commands (`make test &`) with SIGINT ignored,
# and every child inherits that: the Ctrl-C tests' SIGINT would then never reach tfperf. A
# handler here is reset to the default in each child at exec, so children take Ctrl-C as a user's.
signal.signal(signal.SIGINT, signal.default_int_handler)

# Every command records its run in a store; a test that names none must not write into the
# user's own: each test process gets a store of its own.
if "TFPERF_STORE" not in os.environ:
    _STORE_FOLDER = tempfile.mkdtemp(prefix="tfperf-tests-")
    atexit.register(shutil.rmtree, _STORE_FOLDER, ignore_errors=True)
    os.environ["TFPERF_STORE"] = os.path.join(_STORE_FOLDER, "store.sqlite")


@pytest.fixture
def cli():
    """The :func:`run_cli` helper as a fixture."""
    return run_cli


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """A fresh store path for one test."""
    return tmp_path / "store.sqlite"


@pytest.fixture(scope="session")
def aot_runtime() -> Path:
    """The XLA AOT runtime archive, built once per install into tfperf's cache (minutes the
    first time: every later session finds it there). A test that may be the first to need it
    gives itself a timeout of minutes (``pytest.mark.timeout``)."""
    from tfperf.core.aot import xla_aot_facts

    facts = xla_aot_facts()
    require(facts["available"], "XLA AOT needs " + "; ".join(facts["missing"]))
    done = subprocess.run(
        [sys.executable, "-m", "tfperf.worker.aot"], capture_output=True, text=True, timeout=3700
    )
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    return Path(done.stdout.strip().splitlines()[-1])
