"""Prerequisites said, not hidden: a test module that needs a Python package the environment
lacks is skipped on a user's machine, and fails under ``CI=true``, where every prerequisite is
installed (``.ci/run``). Shown on the op-profile modules with ``xprof`` hidden for real: a
package of that name on the path whose import fails, as a broken install's would. And the
packages installed without their dependencies are pinned to the versions tested."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from helpers import REPO

OPS_MODULES = (
    "tests/worker/test_opprofile.py",
    "tests/cli/test_bench_ops.py",
    "tests/api/test_api_ops.py",
    "tests/tuning/test_tune_ops.py",
)


def _collect(hidden: str, ci: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join([hidden, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-rEs", "-p", "no:cacheprovider",
         *OPS_MODULES], cwd=REPO, capture_output=True, text=True, env=env, timeout=300,
    )


def test_the_op_profile_tests_fail_under_ci_without_xprof_and_skip_elsewhere(tmp_path):
    (tmp_path / "xprof").mkdir()
    (tmp_path / "xprof" / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    in_ci = _collect(str(tmp_path), ci=True)
    assert in_ci.returncode != 0, in_ci.stdout[-2000:]
    missing = "prerequisite missing in CI: the xprof package is not installed"
    for module in OPS_MODULES:
        assert f"ERROR {module} - Failed: {missing}" in in_ci.stdout, in_ci.stdout[-3000:]
    elsewhere = _collect(str(tmp_path), ci=False)
    skipped = f"SKIPPED [{len(OPS_MODULES)}] "
    assert skipped in elsewhere.stdout and "xprof package is not installed" in elsewhere.stdout
    assert elsewhere.returncode == 5, elsewhere.stdout[-2000:]  # nothing collected, no error


def test_the_grpc_message_packages_are_pinned_to_the_versions_tested():
    """``tensorflow-serving-api`` and ``tritonclient`` are installed without their dependencies
    (they pin their own protobuf or TensorFlow), so nothing else holds their versions: the
    Makefile pins each to the version this environment was tested with, and the configuration
    file's note says the same."""
    from importlib.metadata import version

    install = next(line for line in (REPO / "Makefile").read_text().splitlines()
                   if "--no-deps" in line)
    note = (REPO / "pyproject.toml").read_text()
    for name in ("tensorflow-serving-api", "tritonclient"):
        pinned = re.search(rf"\b{name}==([\w.]+)", install)
        assert pinned, f"{name} is not pinned in: {install.strip()}"
        assert pinned.group(1) == version(name), (name, pinned.group(1), version(name))
        assert f"{name}=={version(name)}" in note
