"""A configuration's memory read from real workers: the figures agree with the kernel's own
counters read independently, and a converted model is measured in a process that loads its
artifact alone (no TensorFlow), as a server of it would; a deployed process that fails or that
imported TensorFlow leaves the worker's figures, saying why."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tfperf.core.config import Config
from tfperf.core.protocol import ARTIFACT_NOTE, artifact_from_notes
from tfperf.runner.handle import Worker
from tfperf.runner.memory import deployed_argv, deployed_record, memory_of, worker_memory

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


@pytest.fixture(scope="module")
def litert_worker():
    """One LiteRT worker for the module (its conversion costs seconds), ready and timed."""
    with Worker(TINY_MLP, Config(runtime="litert"), timeout_s=300) as worker:
        worker.wait_ready()
        worker.run_block(20)
        yield worker


def test_a_litert_model_is_measured_in_a_process_that_loads_its_file_alone(litert_worker):
    artifact = artifact_from_notes(litert_worker.ready["notes"])
    record = deployed_record(litert_worker, artifact)
    memory = memory_of(litert_worker)
    assert isinstance(record, dict) and record["tensorflow_loaded"] is False
    assert record["calls"] >= 5
    assert memory.measured_in == "deployed" and memory.not_deployed is None
    # the worker imported TensorFlow and ran the converter; the deployed process did neither
    assert memory.peak_rss_mb < memory.worker_peak_rss_mb / 2, memory
    assert memory.artifact_mb == pytest.approx(Path(artifact).stat().st_size / 2**20, abs=0.06)


def test_the_deployed_steady_figure_is_the_resident_set_of_that_process(litert_worker):
    """psutil's reading of the deployed process while it runs its calls, against the figure it
    prints at their end."""
    artifact = artifact_from_notes(litert_worker.ready["notes"])
    argv = deployed_argv(litert_worker, artifact, seconds=2.0)
    proc = subprocess.Popen(argv, env=litert_worker.environment(), stdout=subprocess.PIPE,
                            text=True)
    readings = []
    try:
        watched = psutil.Process(proc.pid)
        while proc.poll() is None and len(readings) < 2000:  # about 2 s of calls, then it ends
            with contextlib.suppress(psutil.Error):
                rss = watched.memory_info().rss
                readings += [rss] if rss else []  # an exited process that is not reaped has 0
            time.sleep(0.005)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    record = json.loads(out.strip().splitlines()[-1])
    steady = record["steady_rss_bytes"]
    last = readings[-1]  # the calls' plateau: the last reading before the process ended
    assert abs(steady - last) <= 0.05 * last, (steady, readings[-5:])
    assert record["loaded_rss_bytes"] <= record["peak_rss_bytes"]


def test_an_artifact_the_deployed_process_cannot_load_leaves_the_worker_s_figures(
    litert_worker, tmp_path, monkeypatch
):
    broken = tmp_path / "model.tflite"
    broken.write_bytes(b"not a flatbuffer")  # a copy: the cached file stays whole
    failed = deployed_record(litert_worker, str(broken))
    assert isinstance(failed, str) and "did not run" in failed, failed
    notes = [n for n in litert_worker.ready["notes"] if not artifact_from_notes([n])]
    monkeypatch.setitem(litert_worker.ready, "notes", [*notes, ARTIFACT_NOTE + str(broken)])
    memory = memory_of(litert_worker)
    own = worker_memory(litert_worker)
    assert memory.measured_in == "worker" and memory.peak_rss_mb == own.peak_rss_mb
    assert memory.worker_peak_rss_mb is None
    assert "did not run" in memory.not_deployed
    as_json = json.loads(json.dumps(memory.to_dict()))
    assert as_json["artifact_mb"] == pytest.approx(0.0, abs=0.1)
    assert as_json["not_deployed"] == memory.not_deployed


def test_a_deployed_process_that_imported_tensorflow_is_not_taken_for_a_deployment(
    litert_worker, tmp_path, monkeypatch
):
    # a site hook on the path that imports TensorFlow into every process, as a user's might
    (tmp_path / "sitecustomize.py").write_text("import tensorflow\n")
    monkeypatch.setattr(litert_worker, "pythonpath", [str(tmp_path)])
    memory = memory_of(litert_worker)
    assert memory.measured_in == "worker"
    assert "imported TensorFlow" in memory.not_deployed
    assert memory.peak_rss_mb == worker_memory(litert_worker).peak_rss_mb


def test_an_openvino_layout_with_streams_or_a_hint_is_measured_deployed_as_it_serves():
    """A served OpenVINO layout with streams (or a hint) keeps as many infer requests at once
    as the compiled model asks for: its deployed process compiles it so and runs them all,
    instead of one synchronous request at batch 1."""
    import importlib.util

    from helpers import require
    from tfperf.core.serving import ServingLayout

    require(importlib.util.find_spec("openvino") is not None, "OpenVINO is not installed")
    with Worker(TINY_MLP, Config(runtime="openvino-f32"), timeout_s=300) as worker:
        worker.wait_ready()
        artifact = artifact_from_notes(worker.ready["notes"])
        two = ServingLayout(streams=2)
        assert deployed_argv(worker, artifact, layout=two)[-2:] == ["--streams", "2"]
        served = deployed_record(worker, artifact, two)
        latency = deployed_record(worker, artifact, ServingLayout(hint="LATENCY"))
        plain = deployed_record(worker, artifact)
    assert served["infer_requests"] == 2 and served["tensorflow_loaded"] is False
    assert latency["infer_requests"] == 1 and plain["infer_requests"] == 1
