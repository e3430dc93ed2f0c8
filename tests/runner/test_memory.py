"""A configuration's memory read from real workers: the figures agree with the kernel's own
counters read independently, and a converted model is measured in a process that loads its
artifact alone (no TensorFlow), as a server of it would."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from tfperf.core.config import Config
from tfperf.core.protocol import ARTIFACT_NOTE, artifact_from_notes
from tfperf.runner.handle import Worker
from tfperf.runner.memory import deployed_record, memory_of, worker_memory

pytestmark = pytest.mark.tf

TINY_MLP = {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 2}


def _high_water_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/PID/status")


def test_peak_and_steady_agree_with_an_independent_read_of_the_worker():
    with Worker(TINY_MLP, Config(), timeout_s=120) as worker:
        worker.wait_ready()
        for _ in range(3):
            worker.run_block(20)
        high_water = _high_water_mb(worker.pid)
        resident = psutil.Process(worker.pid).memory_info().rss / 2**20
        memory = memory_of(worker)
    assert memory.measured_in == "worker"
    assert abs(memory.peak_rss_mb - high_water) <= 0.1 * high_water, (memory, high_water)
    assert abs(memory.steady_rss_mb - resident) <= 0.1 * resident, (memory, resident)
    assert 0 < memory.model_mb < memory.peak_rss_mb
    assert memory.artifact_mb is None  # TensorFlow runs the model as it is


def test_a_litert_model_is_measured_in_a_process_that_loads_its_file_alone():
    with Worker(TINY_MLP, Config(runtime="litert"), timeout_s=300) as worker:
        worker.wait_ready()
        worker.run_block(20)
        artifact = artifact_from_notes(worker.ready["notes"])
        record = deployed_record(worker, artifact)
        memory = memory_of(worker)
    assert record is not None and record["tensorflow_loaded"] is False
    assert record["calls"] >= 5
    assert memory.measured_in == "deployed"
    # the worker imported TensorFlow and ran the converter; the deployed process did neither
    assert memory.peak_rss_mb < memory.worker_peak_rss_mb / 2, memory
    assert memory.artifact_mb == pytest.approx(Path(artifact).stat().st_size / 2**20, abs=0.06)


def test_an_artifact_the_deployed_process_cannot_load_leaves_the_worker_s_figures(tmp_path):
    with Worker(TINY_MLP, Config(runtime="litert"), timeout_s=300) as worker:
        worker.wait_ready()
        broken = tmp_path / "model.tflite"
        broken.write_bytes(b"not a flatbuffer")  # a copy: the cached file stays whole
        assert deployed_record(worker, str(broken)) is None
        notes = worker.ready["notes"]
        worker.ready["notes"] = [n for n in notes if not artifact_from_notes([n])]
        worker.ready["notes"].append(ARTIFACT_NOTE + str(broken))
        memory = memory_of(worker)
        own = worker_memory(worker)
    assert memory.measured_in == "worker" and memory.peak_rss_mb == own.peak_rss_mb
    assert memory.worker_peak_rss_mb is None
    assert json.loads(json.dumps(memory.to_dict()))["artifact_mb"] == pytest.approx(0.0, abs=0.1)
