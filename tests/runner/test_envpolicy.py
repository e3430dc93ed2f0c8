"""The worker's deliberate environment: an allowlist, speed-relevant variables reported."""

from __future__ import annotations

from tfperf.runner.envpolicy import DELIBERATE, is_speed_relevant, worker_base_env


def test_allowlist_kept_speed_variables_reported_the_rest_dropped():
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "LC_ALL": "C.UTF-8",
        "VIRTUAL_ENV": "/venv",
        "TF_ENABLE_ONEDNN_OPTS": "0",
        "OMP_NUM_THREADS": "4",
        "LD_PRELOAD": "/usr/lib/libtcmalloc.so",
        "XLA_FLAGS": "--xla_cpu_use_thunk_runtime=false",
        "MALLOC_CONF": "background_thread:true",
        "AWS_SECRET": "s3cr3t",
        "RANDOM_APP_SETTING": "1",
        "TF_CLI_CONFIG_FILE": "/etc/terraformrc",
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    base, reported = worker_base_env(environ)
    assert base["PATH"] == "/usr/bin" and base["LC_ALL"] == "C.UTF-8"
    assert base["VIRTUAL_ENV"] == "/venv"
    assert set(reported) == {
        "TF_ENABLE_ONEDNN_OPTS",
        "OMP_NUM_THREADS",
        "LD_PRELOAD",
        "XLA_FLAGS",
        "MALLOC_CONF",
    }
    for name in [*reported, "AWS_SECRET", "RANDOM_APP_SETTING", "TF_CLI_CONFIG_FILE"]:
        assert name not in base
    assert base["TF_CPP_MIN_LOG_LEVEL"] == DELIBERATE["TF_CPP_MIN_LOG_LEVEL"]
    assert list(reported) == sorted(reported)


def test_fault_injection_hook_passes_through():
    base, reported = worker_base_env({"TFPERF_INJECT_FAULT": "hang-on-run"})
    assert base["TFPERF_INJECT_FAULT"] == "hang-on-run" and not reported


def test_the_cache_dir_passes_through_so_workers_write_where_the_parent_reads():
    environ = {"TFPERF_CACHE_DIR": "/tmp/tfperf-cache", "TFPERF_STORE": "/tmp/s.sqlite"}
    base, reported = worker_base_env(environ)
    assert base["TFPERF_CACHE_DIR"] == "/tmp/tfperf-cache"
    assert "TFPERF_STORE" not in base and not reported


def test_compiling_xla_aot_for_the_level_passes_through_to_the_worker():
    base, reported = worker_base_env({"TFPERF_AOT_TARGET": "level"})
    assert base["TFPERF_AOT_TARGET"] == "level" and not reported


def test_speed_relevance():
    assert is_speed_relevant("TF_NUM_INTRAOP_THREADS")
    assert is_speed_relevant("KMP_AFFINITY")
    assert not is_speed_relevant("TF_CPP_VMODULE")
    assert not is_speed_relevant("TF_VAR_region")
    assert not is_speed_relevant("EDITOR")


def test_an_empty_speed_variable_is_neither_inherited_nor_reported():
    # `LD_PRELOAD=` (set but empty) preloads nothing: there is no user setting to report
    environ = {"LD_PRELOAD": "", "OMP_NUM_THREADS": " ", "TF_XLA_FLAGS": "--tf_xla_auto_jit=2"}
    base, reported = worker_base_env(environ)
    assert reported == {"TF_XLA_FLAGS": "--tf_xla_auto_jit=2"}
    assert not set(environ) & set(base)
    # an allowlisted variable keeps its empty value: CUDA_VISIBLE_DEVICES= hides every GPU
    assert worker_base_env({"CUDA_VISIBLE_DEVICES": ""})[0]["CUDA_VISIBLE_DEVICES"] == ""
