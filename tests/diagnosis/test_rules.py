"""Each doctor rule on constructed machine and install facts (shapes as collect_machine/probe)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tfperf.diagnosis import rules

MACHINE: dict[str, Any] = {
    "cpu": {
        "model": "Intel(R) Xeon(R) Platinum 8480+",
        "vendor": "GenuineIntel",
        "machine": "x86_64",
        "microarchitecture": "sapphirerapids",
        "compiler_flags": {"gcc": "-march=sapphirerapids -mtune=sapphirerapids"},
    },
    "isa": ["SSE4_2", "AVX", "AVX2", "FMA", "AVX512F", "AVX512_VNNI", "AVX512_BF16", "AMX_TILE"],
    "cores": {"physical": 8, "logical": 16, "affinity": 16, "cgroup_quota": None, "usable": 16},
    "gpus": [],
    "allocators_available": {"tcmalloc": "/usr/lib/libtcmalloc_minimal.so.4", "jemalloc": None},
}

INSTALL: dict[str, Any] = {
    "status": "ok",
    "tf_version": "2.21.0",
    "distribution": {"name": "tensorflow-cpu", "version": "2.21.0", "channel": "pypi"},
    "distributions": [{"name": "tensorflow-cpu", "version": "2.21.0", "channel": "pypi"}],
    "python": {"executable": "/venv/bin/python", "version": "3.11.7"},
    "build": {"is_cuda_build": False},
    "isa_missing": [],
    "log": {"isa_missing": [], "onednn_bad_value": False, "isa_required_missing": []},
    "onednn": {"enabled": True, "source": "build default", "why": "build default"},
    "allocator": "tcmalloc",
    "threads": {
        "intra_op": {"effective": 16, "source": "default"},
        "inter_op": {"effective": 16, "source": "default"},
    },
    "openmp": {"linked": False, "linked_by": [], "libraries_checked": 50, "mapped": []},
    "env": {},
    "gpus_visible": [],
}


def facts(machine: dict | None = None, install: dict | None = None) -> tuple[dict, dict]:
    """Deep copies of the healthy facts with ``machine``/``install`` keys overlaid."""
    m, i = copy.deepcopy(MACHINE), copy.deepcopy(INSTALL)
    m.update(machine or {})
    i.update(install or {})
    return m, i


def ids(machine: dict, install: dict) -> list[str]:
    found = rules.evaluate(machine, install)
    for f in found:
        assert set(f) >= {"id", "severity", "evidence", "fix"}
        assert f["severity"] in rules.SEVERITIES and f["evidence"] and f["fix"]
    return [f["id"] for f in found]


def test_healthy_install_has_no_findings() -> None:
    assert ids(*facts()) == []


def test_isa_gap_names_both_ways_out() -> None:
    m, i = facts(install={"isa_missing": ["AVX2", "AVX512F", "AMX_TILE", "AVX512_FP16"]})
    [f] = rules.rule_isa_gap(m, i)
    assert f["id"] == "isa-gap" and f["severity"] == "warn"
    assert "AMX_TILE" in f["evidence"] and "AVX512_FP16" not in f["evidence"]  # CPU lacks FP16
    assert "tf_xla_cpu_global_jit" in f["fix"] and "--copt=-march=sapphirerapids" in f["fix"]
    i["xla_available"] = False
    [f] = rules.rule_isa_gap(m, i)
    assert "XLA" not in f["fix"].replace("has no XLA", "") and "bazel build" in f["fix"]


def test_onednn_off_by_env_and_by_default() -> None:
    m, i = facts(install={"onednn": {"enabled": False, "source": "env", "why": "env=0"}})
    [f] = rules.rule_onednn(m, i)
    assert f["id"] == "onednn-off" and "unset TF_ENABLE_ONEDNN_OPTS" in f["fix"]
    m, i = facts(install={"onednn": {"enabled": False, "source": "build default", "why": "x"}})
    assert rules.rule_onednn(m, i)[0]["fix"].startswith("export TF_ENABLE_ONEDNN_OPTS=1")
    m, i = facts(
        install={
            "env": {"TF_ENABLE_ONEDNN_OPTS": "yes"},
            "log": {"onednn_bad_value": True},
        }
    )
    assert [f["id"] for f in rules.rule_onednn(m, i)] == ["onednn-env-invalid"]


def test_allocator_missing_and_not_loaded() -> None:
    m, i = facts(machine={"allocators_available": {"tcmalloc": None, "jemalloc": None}})
    [f] = rules.rule_allocator(m, i)
    assert f["id"] == "allocator-missing" and "libtcmalloc-minimal4" in f["fix"]
    m, i = facts(install={"allocator": "system"})
    [f] = rules.rule_allocator(m, i)
    assert f["id"] == "allocator-not-loaded" and f["severity"] == "info"
    assert "LD_PRELOAD=/usr/lib/libtcmalloc_minimal.so.4" in f["fix"]


def test_threads_oversubscribe_under_a_cgroup_quota() -> None:
    cores = {"physical": 8, "logical": 16, "affinity": 16, "cgroup_quota": 2.0, "usable": 2}
    m, i = facts(machine={"cores": cores})
    [f] = rules.rule_threads(m, i)
    assert f["id"] == "threads-oversubscribe"
    assert "cgroup CPU quota 2" in f["evidence"] and "TF_NUM_INTRAOP_THREADS=2" in f["fix"]


def test_threads_within_usable_cpus_are_fine() -> None:
    threads = {"intra_op": {"effective": 4}, "inter_op": {"effective": 2}}
    m, i = facts(install={"threads": threads})
    assert rules.rule_threads(m, i) == []


def test_omp_variables_without_openmp_in_tensorflow() -> None:
    env = {"OMP_NUM_THREADS": "4", "KMP_AFFINITY": "granularity=fine,compact"}
    m, i = facts(install={"env": env})
    [f] = rules.rule_omp_no_effect(m, i)
    assert "KMP_AFFINITY" in f["evidence"] and "TF_NUM_INTRAOP_THREADS" in f["fix"]
    assert "unset KMP_AFFINITY" in f["fix"] and "keep OMP_NUM_THREADS only if" in f["fix"]
    linked = {"linked": True, "linked_by": ["libtensorflow_framework.so.2"], "mapped": []}
    m, i = facts(install={"env": env, "openmp": linked})
    assert rules.rule_omp_no_effect(m, i) == []


def test_gpu_with_cpu_only_build() -> None:
    gpu = {"name": "NVIDIA A10G", "cuda_driver": "12.4", "driver": "550.54"}
    m, i = facts(machine={"gpus": [gpu]})
    [f] = rules.rule_gpu(m, i)
    assert f["id"] == "gpu-cpu-only-build" and "tensorflow[and-cuda]" in f["fix"]


def test_cuda_newer_than_driver_and_gpu_not_visible() -> None:
    gpu = {"name": "NVIDIA T4", "cuda_driver": "11.8", "driver": "520.61"}
    build = {"is_cuda_build": True, "cuda_version": "12.5.1", "cudnn_version": "9"}
    m, i = facts(machine={"gpus": [gpu]}, install={"build": build, "gpus_visible": []})
    assert [f["id"] for f in rules.rule_gpu(m, i)] == ["cuda-mismatch", "gpu-not-visible"]
    gpu_ok = {**gpu, "cuda_driver": "12.6"}
    m, i = facts(
        machine={"gpus": [gpu_ok]},
        install={"build": build, "gpus_visible": ["/physical_device:GPU:0"]},
    )
    assert rules.rule_gpu(m, i) == []


def test_cudnn_wheel_of_another_major() -> None:
    gpu = {"name": "NVIDIA L4", "cuda_driver": "12.8", "driver": "570.1"}
    build = {"is_cuda_build": True, "cuda_version": "12.5.1", "cudnn_version": "9"}
    m, i = facts(
        machine={"gpus": [gpu]},
        install={
            "build": build,
            "gpus_visible": ["/physical_device:GPU:0"],
            "cuda_wheels": {"cudnn": "8.9.7.29", "cuda_runtime": "12.5.82"},
        },
    )
    [f] = rules.rule_gpu(m, i)
    assert f["id"] == "cudnn-mismatch" and "8.9.7.29" in f["evidence"]
    i["cuda_wheels"]["cudnn"] = "9.3.0.75"
    assert rules.rule_gpu(m, i) == []


def test_two_distributions() -> None:
    dists = [
        {"name": "tensorflow", "version": "2.20.0"},
        {"name": "tensorflow-cpu", "version": "2.21.0"},
    ]
    m, i = facts(install={"distributions": dists})
    [f] = rules.rule_duplicate_distributions(m, i)
    assert (
        "tensorflow 2.20.0" in f["evidence"]
        and "uninstall -y tensorflow tensorflow-cpu" in f["fix"]
    )


@pytest.mark.parametrize(
    ("version", "old"),
    [
        ("2.21.0", False),
        ("2.18.1", False),
        ("2.17.0", True),
        ("2.8.4", True),
        ("2.17.0rc1", True),
        ("2.22.0-dev20250101", False),  # a nightly's version, as tf.__version__ spells it
        ("not-a-version", False),
    ],
)
def test_old_release(version: str, old: bool) -> None:
    m, i = facts(install={"tf_version": version})
    found = rules.rule_old_release(m, i)
    assert bool(found) == old
    if version == "2.8.4":
        assert "oneDNN was off by default" in found[0]["evidence"]


@pytest.mark.parametrize(
    ("status", "rule_id"),
    [
        ("not_installed", "tensorflow-missing"),
        ("import_failed", "tensorflow-import-failed"),
        ("crashed", "tensorflow-crashed"),
        ("timeout", "tensorflow-timeout"),
    ],
)
def test_probe_failures_are_error_findings(status: str, rule_id: str) -> None:
    err = {"message": "boom", "stderr_tail": "line 1\nline 2", "signal": None}
    m, i = facts(install={"status": status, "error": err})
    found = rules.evaluate(m, i)
    assert found[0]["id"] == rule_id and found[0]["severity"] == "error"
    assert "line 2" in found[0]["evidence"]
    # Rules about a working install stay silent when there is none.
    assert {f["id"] for f in found} <= {rule_id, "allocator-missing"}


def test_sigill_points_at_the_instruction_set() -> None:
    err = {"message": "died by SIGILL", "signal": "SIGILL"}
    m, i = facts(install={"status": "crashed", "error": err, "log": {}})
    [f] = rules.rule_probe_failed(m, i)
    assert "needs CPU instructions this machine lacks" in f["fix"]


def test_findings_are_sorted_errors_first() -> None:
    gpu = {"name": "NVIDIA T4", "cuda_driver": "11.8", "driver": "520.61"}
    build = {"is_cuda_build": True, "cuda_version": "12.5.1", "cudnn_version": "9"}
    m, i = facts(
        machine={"gpus": [gpu]},
        install={"tf_version": "2.10.0", "allocator": "system", "build": build},
    )
    severities = [f["severity"] for f in rules.evaluate(m, i)]
    assert severities == sorted(severities, key=["error", "warn", "info"].index)
    assert set(severities) == {"error", "warn", "info"}


def test_xla_aot_missing_pieces_are_one_information_with_their_fixes():
    install = copy.deepcopy(INSTALL)
    install["xla_aot"] = {"available": False, "missing": ["cmake (apt-get install cmake)"]}
    (found,) = rules.rule_xla_aot(MACHINE, install)
    assert found["id"] == "xla-aot-missing" and found["severity"] == "info"
    assert "apt-get install cmake" in found["evidence"]
    install["xla_aot"] = {"available": True, "missing": []}
    assert rules.rule_xla_aot(MACHINE, install) == []


def test_jax_missing_is_one_information_with_the_install_line():
    install = copy.deepcopy(INSTALL)
    install["jax"] = {"importable": False, "version": None, "error": "jax and jaxlib not "
                      "installed", "install": "pip install 'tfperf[jax]'"}
    (found,) = rules.rule_keras_jax(MACHINE, install)
    assert found["id"] == "keras-jax-missing" and found["severity"] == "info"
    assert "jax and jaxlib not installed" in found["evidence"]
    assert "'jax[cpu]'" in found["fix"] and "tfperf[jax]" in found["fix"]
    install["jax"] = {"importable": True, "version": "0.10.2", "error": None, "install": ""}
    assert rules.rule_keras_jax(MACHINE, install) == []


def test_what_keras_imports_for_nothing_is_one_information_with_its_seconds() -> None:
    found_by_probe = [
        {"module": "jax", "distribution": "jax", "imported_by": "tensorflow.lite",
         "seconds": 1.95},
        {"module": "sklearn", "distribution": "scikit-learn", "imported_by": "keras.wrappers",
         "seconds": 0.84},
    ]
    (found,) = rules.rule_optional_imports(
        *facts(install={"import_s": 6.1, "optional_imports": found_by_probe})
    )
    assert found["id"] == "optional-imports" and found["severity"] == "info"
    assert found["title"] == (
        "TensorFlow imports jax and scikit-learn in every process here, for no model"
    )
    assert ("took 6.10 s, of which jax 1.95 s (by tensorflow.lite), scikit-learn 0.84 s "
            "(by keras.wrappers)") in found["evidence"]
    assert found["fix"].startswith("/venv/bin/python -m pip uninstall jax scikit-learn")
    assert "only where keras runs on JAX" in found["fix"]
    # a few milliseconds is not worth a line, and a failed probe has nothing to say of it
    small = [dict(found_by_probe[0], seconds=0.04)]
    assert rules.rule_optional_imports(*facts(install={"optional_imports": small})) == []
    failed = {"status": "import_failed", "optional_imports": found_by_probe}
    assert rules.rule_optional_imports(*facts(install=failed)) == []
