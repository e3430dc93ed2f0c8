"""``tfperf doctor`` end to end in a subprocess: schema, exit codes, and real faults.

Faults are injected for real with a ``tensorflow`` package put first on PYTHONPATH: one that
kills itself with SIGSEGV, one that raises, one that hangs, one that is absent.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from helpers import cpu_quota_cgroup, require, run_cli, run_in_cgroup

HAS_TF = importlib.util.find_spec("tensorflow") is not None

FAKES = {
    "segfault": "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
    "raises": (
        "raise ImportError('libcudart.so.12: cannot open shared object file: "
        "No such file or directory')\n"
    ),
    "hangs": "import time\ntime.sleep(600)\n",
    "absent": "raise ModuleNotFoundError(\"No module named 'tensorflow'\", name='tensorflow')\n",
}


def fake_tensorflow(tmp_path: Path, kind: str) -> dict[str, str]:
    """An environment whose ``import tensorflow`` does ``kind`` for real."""
    pkg = tmp_path / kind / "tensorflow"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(FAKES[kind])
    return {"PYTHONPATH": str(pkg.parent)}


def check_schema(doc: dict) -> None:
    assert doc["schema_version"] == 1
    machine, install = doc["machine"], doc["install"]
    assert isinstance(machine["isa"], list) and machine["isa"]
    assert set(machine["allocators_available"]) == {"tcmalloc", "jemalloc"}
    assert machine["cores"]["usable"] >= 1 and machine["fingerprint"]
    wakeup = machine["wakeup"]  # measured for real: ordered, and on two CPUs where there are
    assert 0 < wakeup["p50_ms"] <= wakeup["p99_ms"] and wakeup["samples"] >= 1
    assert wakeup["cross_cpu"] == (machine["cores"]["affinity"] > 1)
    assert isinstance(install["isa_missing"], list)
    assert install["status"] in ("ok", "not_installed", "import_failed", "crashed", "timeout")
    assert set(doc["xla_aot"]) == {"available", "missing"}
    assert doc["xla_aot"]["available"] == (not doc["xla_aot"]["missing"])
    for f in doc["findings"]:
        assert {"id", "severity", "evidence", "fix"} <= set(f)
        assert f["severity"] in ("info", "warn", "error")


@pytest.mark.tf
def test_json_report_and_fail_on_warn(tmp_path: Path) -> None:
    require(HAS_TF, "TensorFlow is not installed")
    # A second distribution claiming the tensorflow package, found by the real metadata scan.
    info = tmp_path / "tensorflow-2.20.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tensorflow\nVersion: 2.20.0\n")
    (info / "top_level.txt").write_text("tensorflow\n")
    env = {
        "PYTHONPATH": str(tmp_path),
        "OMP_NUM_THREADS": "4",
        "KMP_AFFINITY": "granularity=fine,compact,1,0",
        "TF_NUM_INTRAOP_THREADS": "64",
        "CXX": "/nonexistent/g++",  # no C++ compiler: XLA AOT cannot compile
        "KERAS_BACKEND": "jax",  # the backend the user's own processes run
    }
    res = run_cli("doctor", "--json", "--fail-on", "warn", env=env)
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    check_schema(doc)
    install = doc["install"]
    assert install["status"] == "ok"
    assert isinstance(install["onednn"]["enabled"], bool)
    assert install["allocator"] == "system"
    assert install["env"]["OMP_NUM_THREADS"] == "4"
    ids = {f["id"] for f in doc["findings"]}
    assert {"tf-duplicate-distributions", "threads-oversubscribe", "xla-aot-missing"} <= ids
    assert doc["xla_aot"]["available"] is False
    assert any("CXX=/nonexistent/g++ is not found" in m for m in doc["xla_aot"]["missing"])
    assert (doc["keras_backend"], doc["keras_backend_source"]) == ("jax", "KERAS_BACKEND")
    has_jax = importlib.util.find_spec("jax") is not None
    assert doc["jax"]["importable"] is has_jax
    assert ("keras-jax-missing" in ids) is not has_jax
    if install["openmp"]["linked"] is False:
        assert "omp-no-effect" in ids
    assert "fail-on" in res.stderr


@pytest.mark.tf
def test_human_report_passes_fail_on_error(tmp_path: Path) -> None:
    require(HAS_TF, "TensorFlow is not installed")
    res = run_cli("doctor", "--fail-on", "error")
    assert res.returncode == 0, res.stderr
    for section in ("Machine", "TensorFlow install", "XLA AOT", "Keras backend", "Findings"):
        assert section in res.stdout
    assert "Traceback" not in res.stdout + res.stderr


def test_tensorflow_that_segfaults_on_import(tmp_path: Path) -> None:
    env = fake_tensorflow(tmp_path, "segfault")
    res = run_cli("doctor", "--json", env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    check_schema(doc)
    assert doc["install"]["status"] == "crashed"
    assert doc["install"]["error"]["signal"] == "SIGSEGV"
    [f] = [f for f in doc["findings"] if f["severity"] == "error"]
    assert f["id"] == "tensorflow-crashed" and "SIGSEGV" in f["evidence"]
    assert "Traceback" not in res.stderr

    human = run_cli("doctor", "--fail-on", "error", env=env, timeout=120)
    assert human.returncode == 1
    assert "Machine" in human.stdout and "tensorflow-crashed" in human.stdout
    assert "Traceback" not in human.stdout + human.stderr


def test_tensorflow_that_raises_on_import(tmp_path: Path) -> None:
    res = run_cli("doctor", "--json", env=fake_tensorflow(tmp_path, "raises"), timeout=120)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["install"]["status"] == "import_failed"
    [f] = [f for f in doc["findings"] if f["id"] == "tensorflow-import-failed"]
    assert "libcudart.so.12" in f["evidence"]


def test_tensorflow_that_hangs_is_killed(tmp_path: Path) -> None:
    env = fake_tensorflow(tmp_path, "hangs")
    res = run_cli("doctor", "--json", "--timeout", "3", env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["install"]["status"] == "timeout"
    assert any(f["id"] == "tensorflow-timeout" for f in doc["findings"])


def test_no_tensorflow_prints_machine_then_one_sentence(tmp_path: Path) -> None:
    env = fake_tensorflow(tmp_path, "absent")
    res = run_cli("doctor", env=env, timeout=120)
    assert res.returncode == 2
    assert "Machine" in res.stdout and "Instruction sets" in res.stdout
    assert "Wake-up latency" in res.stdout and "p99" in res.stdout
    assert "pip install tensorflow-cpu" in res.stderr
    assert "Traceback" not in res.stdout + res.stderr

    as_json = run_cli("doctor", "--json", env=env, timeout=120)
    assert as_json.returncode == 2
    doc = json.loads(as_json.stdout)
    check_schema(doc)
    assert doc["install"]["status"] == "not_installed"


@pytest.mark.parametrize("value", ["warning", "info", ""])
def test_bad_fail_on_is_a_usage_error(value: str) -> None:
    res = run_cli("doctor", "--fail-on", value, timeout=60)
    assert res.returncode == 2
    assert "--fail-on" in res.stderr


def test_missing_interpreter_is_a_usage_error() -> None:
    res = run_cli("doctor", "--python", "/nonexistent/bin/python", timeout=60)
    assert res.returncode == 2
    assert "--python" in res.stderr and "Traceback" not in res.stderr


def test_interrupt_kills_the_probe(tmp_path: Path) -> None:
    env = {**os.environ, **fake_tensorflow(tmp_path, "hangs")}
    parent = subprocess.Popen(
        [sys.executable, "-m", "tfperf", "doctor"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        children: list[psutil.Process] = []
        while not children and time.monotonic() < deadline:
            time.sleep(0.2)
            children = psutil.Process(parent.pid).children(recursive=True)
        assert children, "doctor never started its probe"
        time.sleep(1.0)  # let the parent reach its wait on the probe
        parent.send_signal(signal.SIGINT)
        _, err = parent.communicate(timeout=60)
    finally:
        parent.kill()
    assert parent.returncode == 130, err
    assert b"Traceback" not in err
    for child in children:
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE


@pytest.mark.tf
def test_container_quota_makes_default_pools_oversubscribe() -> None:
    require(HAS_TF, "TensorFlow is not installed")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs at least 2 CPUs to put a 1-CPU quota under them")
    with cpu_quota_cgroup(1.0) as procs:
        res = run_in_cgroup(procs, [sys.executable, "-m", "tfperf", "doctor", "--json"])
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    cores = doc["machine"]["cores"]
    assert cores["cgroup_quota"] == 1.0 and cores["usable"] == 1
    # TensorFlow sizes its default pools from the affinity mask, not from the quota.
    assert doc["install"]["threads"]["intra_op"]["effective"] == cores["affinity"]
    [f] = [f for f in doc["findings"] if f["id"] == "threads-oversubscribe"]
    assert "cgroup CPU quota 1" in f["evidence"] and "TF_NUM_INTRAOP_THREADS=1" in f["fix"]


def test_interpreter_without_tfperf_is_a_usage_error(tmp_path: Path) -> None:
    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n')
    bare.chmod(0o755)
    res = run_cli("doctor", "--python", str(bare), timeout=60)
    assert res.returncode == 2
    assert "cannot import tfperf" in res.stderr and "Traceback" not in res.stderr
