"""The real probe against the installed TensorFlow, run the way doctor runs it."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import require
from tfperf.core import isa, perfenv
from tfperf.core.allocators import find_allocator
from tfperf.diagnosis.install import finish_probe, install_fingerprint, start_probe
from tfperf.worker import probe

pytestmark = pytest.mark.tf

HAS_TF = importlib.util.find_spec("tensorflow") is not None


def _probe(env_extra: dict[str, str]) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(perfenv.PERF_ENV_PREFIXES)}
    env.pop("LD_PRELOAD", None)
    env.update(env_extra)
    return finish_probe(start_probe(env=env), timeout=240)


@pytest.fixture(scope="module")
def default_record() -> dict:
    require(HAS_TF, "TensorFlow is not installed")
    return _probe({})


def test_probe_reads_the_installed_tensorflow(default_record: dict) -> None:
    rec = default_record
    assert rec["status"] == "ok", rec.get("error")
    import importlib.metadata as md

    dist = rec["distribution"]
    assert md.version(dist["name"]) == rec["tf_version"]
    assert dist["channel"] in ("pypi", "nightly", "intel", "conda", "local wheel", "aarch64")
    assert rec["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert isinstance(rec["onednn"]["enabled"], bool) and rec["onednn"]["why"]
    assert isinstance(rec["xla_available"], bool)
    assert rec["allocator"] == "system"
    assert set(rec["isa_missing"]) <= set(isa.TF_ORDER)
    if rec["isa_missing"]:
        assert rec["log"]["wording"] == "current" and rec["log"]["lines"]
    affinity = len(os.sched_getaffinity(0))
    assert rec["threads"]["intra_op"]["effective"] == affinity
    assert rec["threads"]["inter_op"]["effective"] == affinity
    assert "is_cuda_build" in rec["build"]
    assert len(install_fingerprint(rec)) == 12
    installed = [m for m in ("jax", "matplotlib", "sklearn") if importlib.util.find_spec(m)]
    assert [item["module"] for item in rec["optional_imports"]] == installed


def test_stock_build_links_no_openmp(default_record: dict) -> None:
    omp = default_record["openmp"]
    assert omp["libraries_checked"] > 0
    # Stock pip wheels build oneDNN with TensorFlow's own thread pool (no OpenMP runtime).
    if default_record["distribution"]["channel"] == "pypi":
        assert omp["linked"] is False


# As long as a real scikit-learn takes to import, in two parts: keras imports sklearn, then
# sklearn.base for the classes its wrappers derive from.
SLOW_SKLEARN = "import time\ntime.sleep(0.4)\n"
SLOW_SKLEARN_BASE = "import time\ntime.sleep(0.2)\n" + "".join(
    f"class {name}:\n    pass\n"
    for name in ("BaseEstimator", "ClassifierMixin", "RegressorMixin", "TransformerMixin")
)


def test_probe_honours_the_users_environment_and_times_what_keras_imports_from_it(
    tmp_path: Path,
) -> None:
    require(HAS_TF, "TensorFlow is not installed")
    jemalloc = find_allocator("jemalloc")
    require(jemalloc is not None, "libjemalloc2 is not installed")
    # A package named sklearn on the user's path: keras imports it with TensorFlow.
    (tmp_path / "sklearn").mkdir()
    (tmp_path / "sklearn" / "__init__.py").write_text(SLOW_SKLEARN)
    (tmp_path / "sklearn" / "base.py").write_text(SLOW_SKLEARN_BASE)
    rec = _probe(
        {
            "PYTHONPATH": str(tmp_path),
            "TF_NUM_INTRAOP_THREADS": "3",
            "TF_NUM_INTEROP_THREADS": "5",
            "TF_ENABLE_ONEDNN_OPTS": "0",
            "OMP_NUM_THREADS": "7",
            "LD_PRELOAD": jemalloc,
            "TF_CLI_CONFIG_FILE": "/not/tensorflow",
        }
    )
    assert rec["status"] == "ok", rec.get("error")
    assert rec["threads"]["intra_op"] == {
        "getter": 0,
        "effective": 3,
        "source": "environment",
    }
    assert rec["threads"]["inter_op"]["effective"] == 5
    # TensorFlow's inter-op pool threads are counted in the live process.
    assert rec["threads"]["inter_op"]["observed_threads"] in (None, 5)
    assert rec["onednn"] == {
        "enabled": False,
        "source": "env",
        "why": "TF_ENABLE_ONEDNN_OPTS=0 is set",
    }
    assert rec["allocator"] == "jemalloc"
    assert rec["env"]["OMP_NUM_THREADS"] == "7" and rec["env"]["LD_PRELOAD"] == jemalloc
    assert "TF_CLI_CONFIG_FILE" not in rec["env"]  # Terraform's, not TensorFlow's
    imported = {item["module"]: item for item in rec["optional_imports"]}["sklearn"]
    assert imported["distribution"] == "scikit-learn"
    assert imported["imported_by"] == "keras.wrappers"
    assert 0.6 <= imported["seconds"] < rec["import_s"]  # the package with its submodule


def test_effective_threads_rules() -> None:
    assert probe.effective_threads(4, "9", 2)["effective"] == 4
    assert probe.effective_threads(0, "9", 2) == {"effective": 9, "source": "environment"}
    assert probe.effective_threads(0, "zero", 2)["effective"] == 2
    assert probe.effective_threads(0, None, 6)["effective"] == 6


OPENMP_SOURCE = """
int total(int n) {
  int sum = 0;
#pragma omp parallel for reduction(+ : sum)
  for (int i = 0; i < n; ++i) sum += i;
  return sum;
}
"""


def test_elf_needed_finds_an_openmp_runtime_for_real(tmp_path) -> None:
    """Two shared libraries built here, one with ``-fopenmp`` (the compiler links libgomp, as
    scikit-learn's wheels do) and one without, read back through their ELF dynamic sections."""
    compiler = shutil.which(os.environ.get("CXX", "g++"))
    require(compiler is not None, "no C++ compiler: apt-get install g++")
    (tmp_path / "sum.cc").write_text(OPENMP_SOURCE)
    root = tmp_path / "lib"
    root.mkdir()
    for name, flags in (("libomp_sum.so", ["-fopenmp"]), ("libplain_sum.so", [])):
        built = subprocess.run(
            [compiler, "-shared", "-fPIC", *flags, str(tmp_path / "sum.cc"),
             "-o", str(root / name)],
            capture_output=True, text=True,
        )
        assert built.returncode == 0, built.stderr
    assert any("gomp" in lib for lib in probe.elf_needed(str(root / "libomp_sum.so")))
    runtime = "/usr/lib/x86_64-linux-gnu/libgomp.so.1"
    maps = "".join(
        f"7f00-7f01 r-xp 00000000 08:01 1 {path}\n"
        for path in (root / "libomp_sum.so", root / "libplain_sum.so", runtime)
    )
    usage = probe.openmp_usage(str(root), maps)
    assert usage["linked"] is True and usage["linked_by"] == ["libomp_sum.so"]
    assert usage["libraries_checked"] == 2 and usage["mapped"] == [runtime]
    assert probe.elf_needed(sys.executable) is not None
    assert probe.elf_needed(__file__) == []  # not an ELF file


def test_distributions_seen_side_by_side(tmp_path: Path) -> None:
    info = tmp_path / "tensorflow-2.20.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tensorflow\nVersion: 2.20.0\n")
    (info / "top_level.txt").write_text("tensorflow\n")
    (info / "INSTALLER").write_text("pip\n")
    nightly = tmp_path / "tf_nightly-2.22.0.dev20260101.dist-info"
    nightly.mkdir()
    (nightly / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tf-nightly\nVersion: 2.22.0.dev20260101\n"
    )
    (nightly / "top_level.txt").write_text("tensorflow\n")
    wheel = tmp_path / "tensorflow_cpu-2.21.0+local.dist-info"
    wheel.mkdir()
    (wheel / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tensorflow-cpu\nVersion: 2.21.0+local\n"
    )
    (wheel / "top_level.txt").write_text("tensorflow\n")
    (wheel / "direct_url.json").write_text(
        '{"url": "file:///build/tensorflow_cpu-2.21.0-cp311-linux_x86_64.whl", "archive_info": {}}'
    )
    other = tmp_path / "tensorflow_estimator-2.15.0.dist-info"
    other.mkdir()
    (other / "METADATA").write_text("Metadata-Version: 2.1\nName: tensorflow-estimator\n")
    (other / "top_level.txt").write_text("tensorflow_estimator\n")
    code = "import json, tfperf.worker.probe as p; print(json.dumps(p.tensorflow_distributions()))"
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    found = {(d["name"], d["version"]): d["channel"] for d in json.loads(out.stdout)}
    assert found[("tensorflow", "2.20.0")] == "pypi"
    assert found[("tf-nightly", "2.22.0.dev20260101")] == "nightly"
    assert found[("tensorflow-cpu", "2.21.0+local")] == "local wheel"
    assert not any(n == "tensorflow-estimator" for n, _ in found)


def test_perf_env_keeps_only_speed_variables() -> None:
    env = {
        "TF_XLA_FLAGS": "--tf_xla_auto_jit=2",
        "KMP_BLOCKTIME": "0",
        "CUDA_VISIBLE_DEVICES": "",
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "TF_VAR_region": "eu",
        "HOME": "/root",
    }
    assert perfenv.perf_env(env) == {
        "CUDA_VISIBLE_DEVICES": "",
        "KMP_BLOCKTIME": "0",
        "TF_XLA_FLAGS": "--tf_xla_auto_jit=2",
    }
