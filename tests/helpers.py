"""What several test modules share: the CLI run as a user runs it, prerequisites, and a few
real-world fixtures (a store filled with known samples, a writer killed mid-run, a cgroup with a
CPU quota, a tune's JSON).

``run_cli`` runs the real ``tfperf`` CLI in a subprocess (the way a user does). ``require``
skips a test whose system prerequisite is missing on a user's machine, but fails it under
``CI=true``, where .ci/run installs every prerequisite; ``require_package`` does the same for
a Python package a whole test module needs. ``mlflow_tracking`` makes a real local
MLflow tracking store the current one, and ``mlflow_files`` lists what a run of it holds.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tfperf.core.stats import paired_speedup
from tfperf.machine import facts as machine
from tfperf.store import Store

REPO = Path(__file__).resolve().parent.parent
SEGFAULT = {"reason": "worker killed by signal 11 (SIGSEGV)", "stderr_tail": "Segmentation fault"}
"""The error record of a trial whose worker crashed, as the store keeps it."""


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


def require_package(name: str, install: str) -> None:
    """:func:`require` for a Python package a whole test module needs, at its top: the module
    is skipped on a user's machine without it, and fails under ``CI=true``."""
    try:
        importlib.import_module(name)
    except ImportError:
        reason = f"the {name} package is not installed: {install}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"prerequisite missing in CI: {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)


def tune_json(tmp_path, *args, env=None, cwd=None):
    result = run_cli(
        "tune",
        *args,
        "--json",
        "--store",
        str(tmp_path / "store.sqlite"),
        "--profile-out",
        str(tmp_path / "profile.json"),
        env=env,
        cwd=cwd,
        timeout=500,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


WRITER = textwrap.dedent(
    """
    import sys
    from tfperf.store import Store
    store = Store.open(sys.argv[1])
    run = store.new_run("bench", "killed", {"name": "mlp"}, {}, {})
    trial = store.new_trial(run, "default", {}, "baseline")
    i = 0
    while True:
        store.add_block(trial, [0.001 * (i + 1)] * 3, "steady")
        i += 1
        print(i, flush=True)
    """
)


def kill_writer_after(script: str, store_path: Path, count: int) -> int:
    """Run ``script`` (which prints a growing count after each commit) and SIGKILL it once it
    has printed ``count``; returns the last count it printed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(store_path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    reported = 0
    while reported < count:
        line = proc.stdout.readline()
        assert line, "the writer died early"
        reported = int(line)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    return reported


def fill_store(path: Path, seed: int = 0, compare: bool = True) -> dict[str, int]:
    """A compare run (baseline, 1.5x faster, equal, segfaulted) and a bench run, with real
    samples drawn from a seeded generator; block medians feed ``paired_speedup``."""
    rng = np.random.default_rng(seed)
    ids: dict[str, int] = {}
    with Store.open(path) as store:
        run = store.new_run(
            "compare",
            "tfperf compare --workload mlp --set xla=jit",
            {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 4},
            {"cpu": "test cpu"},
            {"threshold": 0.03},
        )
        ids["run"] = run
        plan = {
            "default": (1.0, "baseline"),
            "xla=jit": (1.5, "candidate"),
            "threads=2": (1.0, "candidate"),
        }
        medians: dict[str, list[float]] = {}
        for label, (_, role) in plan.items():
            ids[label] = store.new_trial(run, label, {"label": label}, role)
            store.add_block(ids[label], [0.05, 0.01, 0.004], "warmup")
        for _ in range(10):
            drift = rng.uniform(0.9, 1.1)  # a machine whose speed wanders between rounds
            for label, (speedup, _) in plan.items():
                block = 0.002 / speedup * drift * rng.lognormal(0.0, 0.02, 15)
                store.add_block(ids[label], block.tolist(), "steady")
                medians.setdefault(label, []).append(float(np.median(block)))
        for label, (speedup, _) in plan.items():
            store.finish_trial(
                ids[label], "ok", {"batch": 4, "gflops": 3.0 * speedup, "peak_gflops": 60.0}, None
            )
        ids["segv"] = store.new_trial(run, "allocator=broken", {}, "candidate")
        store.finish_trial(ids["segv"], "failed", {}, SEGFAULT)
        if compare:
            for label in ("xla=jit", "threads=2"):
                result = paired_speedup(medians["default"], medians[label])
                store.add_comparison(run, ids["default"], ids[label], result)
        store.finish_run(run, "ok", {})
        ids["bench"] = store.new_run(
            "bench",
            "tfperf bench m.keras",
            {"kind": "model", "path": "/x/m.keras", "format": "keras"},
            {},
            {},
        )
        trial = store.new_trial(ids["bench"], "default", {}, "baseline")
        store.add_block(trial, (0.01 * rng.lognormal(0, 0.02, 30)).tolist(), "steady")
        store.finish_trial(trial, "ok", {"batch": 1}, None)
        store.finish_run(ids["bench"], "ok", {})
    return ids


def load(path: Path, run: int | str) -> dict:
    with Store.open(path) as store:
        return store.load_run(run)


@contextlib.contextmanager
def cpu_quota_cgroup(cpus: float) -> Iterator[Path]:
    """A real cgroup (v1 or v2) with a CFS quota of ``cpus`` CPUs; yields its cgroup.procs.

    Skips where cgroups cannot be created (not root, or a read-only cgroup filesystem).
    """
    root = Path(machine.CGROUP_ROOT)
    v2 = (root / "cgroup.controllers").exists()
    path = (root if v2 else root / "cpu") / f"tfperf-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        path.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot create a cgroup here ({exc.strerror}): needs root")
    try:
        quota = int(cpus * 100_000)
        try:
            if v2:
                (path / "cpu.max").write_text(f"{quota} 100000\n")
            else:
                (path / "cpu.cfs_period_us").write_text("100000\n")
                (path / "cpu.cfs_quota_us").write_text(f"{quota}\n")
        except OSError as exc:
            pytest.skip(f"cannot set a CPU quota here ({exc.strerror})")
        yield path / "cgroup.procs"
    finally:
        for _ in range(50):  # the child may take a moment to leave
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def run_in_cgroup(
    procs: Path, argv: list[str], timeout: float = 300
) -> subprocess.CompletedProcess:
    """Run ``argv`` (a Python command line) as a process that first joins ``procs``'s cgroup."""
    join = (
        "import os, sys; "
        f"open({str(procs)!r}, 'w').write(str(os.getpid())); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    return subprocess.run(
        [sys.executable, "-c", join, *argv], capture_output=True, text=True, timeout=timeout
    )


@contextlib.contextmanager
def mlflow_tracking(folder: Path) -> Iterator[str]:
    """A real local MLflow tracking store (SQLite) in ``folder``, MLflow's tracking URI for this
    process and its children, with ``folder`` as the working directory (MLflow keeps a local
    store's artifacts under ``./mlruns``); yields the URI. Skips where MLflow is missing."""
    require(
        importlib.util.find_spec("mlflow") is not None,
        'MLflow is not installed: pip install "tfperf[mlflow]"',
    )
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        for name in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID"):
            patch.delenv(name, raising=False)
        yield uri


def mlflow_files(client, run_id: str, folder: str | None = None) -> list[str]:
    """Every file of MLflow run ``run_id`` (below ``folder``), as MLflow's ``client`` lists them."""
    found = []
    for item in client.list_artifacts(run_id, folder):
        found += mlflow_files(client, run_id, item.path) if item.is_dir else [item.path]
    return sorted(found)


def assert_load_interrupted(args: list[str], store: Path, first_line: str) -> None:
    """Run ``tfperf ARGS``, send it SIGINT once a stderr line starts with ``first_line`` (a
    level's progress line), and check what a Ctrl-C of a load run must leave: exit 130, one
    sentence naming the run and the levels it keeps, and the run stored as ``interrupted``
    with those levels."""
    import re

    proc = subprocess.Popen(
        [sys.executable, "-m", "tfperf", *args, "--store", str(store)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    before = []
    try:
        for line in proc.stderr:
            before.append(line)
            if line.startswith(first_line):
                break
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    seen = f"before the signal:\n{''.join(before)[-2000:]}\nafter it:\n{err[-2000:]}"
    assert proc.returncode == 130, seen
    said = re.search(r"Interrupted: run (\d+) keeps the (\d+) levels? measured so far", err)
    assert said and "Traceback" not in err, seen
    with Store.open(store) as opened:
        loaded = opened.load_run(int(said.group(1)))
    assert loaded["run"]["status"] == "interrupted"
    blocks = [b for b in loaded["trials"][0]["blocks"] if b["phase"] == "load"]
    assert len(blocks) == int(said.group(2)) >= 1
