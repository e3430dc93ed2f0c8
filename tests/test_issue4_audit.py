"""Audit of `tfperf tune` / `apply` / `run` as a user meets them: real workers, tiny workloads."""

from __future__ import annotations

import pytest

from conftest import require
from tfperf.allocators import find_allocator
from tfperf.config import Config
from tfperf.convert import openvino_available
from tfperf.tune import _failure_reason
from tfperf.workerproc import Worker, WorkerFailed

TINY_MLP = {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1}


@pytest.mark.tf
def test_openvino_under_a_preloaded_allocator_fails_with_the_reason(tmp_path, monkeypatch):
    require(openvino_available(), "the openvino package is not installed")
    allocator = next((a for a in ("tcmalloc", "jemalloc") if find_allocator(a)), None)
    require(allocator is not None, "neither tcmalloc nor jemalloc is installed")
    monkeypatch.setenv("TFPERF_CACHE_DIR", str(tmp_path / "cache"))
    config = {"runtime": "openvino-f32", "allocator": allocator}
    worker = Worker(TINY_MLP, Config.from_dict(config), timeout_s=180)
    try:
        worker.start()
        worker.wait_ready()
        worker.run_block(5)
    except WorkerFailed as exc:
        failure = exc
    else:  # an OpenVINO build that tolerates the preload: nothing to explain
        pytest.skip("this OpenVINO runs with a preloaded allocator")
    finally:
        worker.close()
    assert failure.signal, failure.reason
    assert f"OpenVINO aborts with {allocator} preloaded" in _failure_reason(failure, config)
