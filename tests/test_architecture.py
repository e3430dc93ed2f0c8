"""The architecture as import-linter contracts (``[tool.importlinter]`` in pyproject.toml): no
TensorFlow, LiteRT or OpenVINO outside the worker and in-process packages, nothing importing the
worker package, the worker importing only the shared core, the parent's packages layered, and
no import cycles (imports inside functions counted)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from helpers import REPO

LINT = [
    sys.executable,
    "-c",
    "from importlinter.cli import lint_imports_command; lint_imports_command()",
]


def lint(src: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the project's contracts over the package under ``src``."""
    return subprocess.run(
        [*LINT, "--config", str(REPO / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
    )


def test_every_contract_holds():
    result = lint(REPO / "src")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_a_leak_fails_naming_the_offending_import(tmp_path):
    # The parent's benchmark module importing TensorFlow, and a layer importing the one above it.
    copy = tmp_path / "src"
    shutil.copytree(REPO / "src" / "tfperf", copy / "tfperf")
    bench = copy / "tfperf" / "benchmark.py"
    bench.write_text(bench.read_text() + "\nimport tensorflow  # a leak\n")
    store = copy / "tfperf" / "store.py"
    store.write_text(store.read_text() + "\nfrom tfperf import benchmark as _upward  # a leak\n")
    result = lint(copy)
    assert result.returncode != 0
    assert "tfperf.benchmark -> tensorflow" in result.stdout
    assert "tfperf.store -> tfperf.benchmark" in result.stdout
