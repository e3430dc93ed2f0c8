"""The parent process never imports TensorFlow: proven with a ``tensorflow`` that raises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run_cli
from tfperf.cli import app

POISON = "raise RuntimeError('the tfperf parent process imported tensorflow')\n"


@pytest.fixture
def poisoned(tmp_path: Path) -> dict[str, str]:
    """An environment where importing tensorflow (or a submodule) raises."""
    pkg = tmp_path / "tensorflow"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(POISON)
    return {"PYTHONPATH": str(tmp_path)}


def test_help_never_imports_tensorflow(poisoned: dict[str, str]) -> None:
    res = run_cli("--help", env=poisoned, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "doctor" in res.stdout
    assert "imported tensorflow" not in res.stderr


@pytest.mark.parametrize("command", sorted(app.commands))
def test_command_help_never_imports_tensorflow(poisoned: dict[str, str], command: str) -> None:
    res = run_cli(command, "--help", env=poisoned, timeout=60)
    assert "imported tensorflow" not in res.stdout + res.stderr
    assert res.returncode == 0, res.stderr


def test_doctor_library_modules_do_not_import_tensorflow() -> None:
    code = (
        "import sys\n"
        "import tfperf.cli, tfperf.diagnosis.audit, tfperf.diagnosis.install\n"
        "import tfperf.diagnosis.rules\n"
        "import tfperf.machine.facts\n"
        "import tfperf.worker.probe, tfperf.core.tflog, tfperf.core.allocators, tfperf.core.isa\n"
        "heavy = [m for m in ('tensorflow', 'numpy', 'scipy', 'plotly') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_reading_a_store_starts_without_scipy(tmp_path: Path) -> None:
    # scipy.stats costs half a second at start; only a statistical test or interval needs it
    code = (
        "import sys\n"
        "from tfperf.cli import app\n"
        f"app(['history', '--store', {str(tmp_path / 's.sqlite')!r}], standalone_mode=False)\n"
        "print('scipy' in sys.modules, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip().splitlines()[-1] == "False"
