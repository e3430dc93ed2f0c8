"""Shared test helpers.

``run_cli`` runs the real ``tfperf`` CLI in a subprocess (the way a user does).
``require`` skips a test whose system prerequisite is missing on a user's machine, but fails it
under ``CI=true``, where .ci/run installs every prerequisite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# A shell without job control starts background commands (`make test &`) with SIGINT ignored,
# and every child inherits that: the Ctrl-C tests' SIGINT would then never reach tfperf. A
# handler here is reset to the default in each child at exec, so children take Ctrl-C as a user's.
signal.signal(signal.SIGINT, signal.default_int_handler)

# Every command records its run in a store; a test that names none must not write into the
# user's own: each test process gets a store of its own.
os.environ.setdefault(
    "TFPERF_STORE", os.path.join(tempfile.mkdtemp(prefix="tfperf-tests-"), "store.sqlite")
)


@dataclass
class CliResult:
    """What one ``tfperf`` invocation produced."""

    returncode: int
    stdout: str
    stderr: str


def run_cli(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 300,
    cwd: str | Path | None = None,
) -> CliResult:
    """Run ``python -m tfperf ARGS`` with ``env`` layered over the current environment."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "tfperf", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=cwd,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def require(condition: bool, reason: str) -> None:
    """Skip when ``condition`` is false on a user's machine; fail under ``CI=true``."""
    if condition:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"prerequisite missing in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture
def cli():
    """The :func:`run_cli` helper as a fixture."""
    return run_cli


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """A fresh store path for one test."""
    return tmp_path / "store.sqlite"
