"""Faults injected for real: a worker that segfaults, hangs, exhausts memory, exits, or fails
to load a corrupt model becomes a WorkerFailed with one reason, and leaves no process behind."""

from __future__ import annotations

import psutil
import pytest

from tfperf.core.config import Config
from tfperf.runner.handle import Worker, WorkerFailed

TINY_MLP = {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1}
MEMORY_LIMIT = int(1.5 * 2**30)
RUN_TIMEOUT_S = 3.0
OOM_TIMEOUT_S = 60.0
"""Touching 1.5 GiB page by page took more than 3 s on a loaded 2-core machine: the worker
that exhausts memory has time to reach the limit it is to be stopped at."""


def _gone(pid: int) -> bool:
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    """One worker per fault, all started at once so their TensorFlow imports overlap."""
    corrupt = tmp_path_factory.mktemp("corrupt") / "model.keras"
    corrupt.write_bytes(b"PK\x03\x04 this is not a keras archive")
    specs = {
        fault: (TINY_MLP, Config.parse([], [f"TFPERF_INJECT_FAULT={fault}"]))
        for fault in ("segfault-on-run", "hang-on-run", "exit-on-init")
    }
    # The cap reaches the worker through the config (its environment is an allowlist): should
    # the memory watch miss, the worker stops growing at 6 GiB on a shared machine.
    specs["oom-on-run"] = (
        TINY_MLP,
        Config.parse([], ["TFPERF_INJECT_FAULT=oom-on-run", "TFPERF_INJECT_OOM_CAP_GIB=6"]),
    )
    specs["corrupt-model"] = (
        {
            "kind": "model",
            "path": str(corrupt),
            "format": "keras",
            "inputs": None,
            "unsafe": False,
            "batch": 1,
        },
        Config(),
    )
    started = {}
    for name, (workload, config) in specs.items():
        worker = Worker(
            workload,
            config,
            timeout_s=OOM_TIMEOUT_S if name == "oom-on-run" else RUN_TIMEOUT_S,
            init_timeout_s=300,
            memory_limit_bytes=MEMORY_LIMIT,
            environ={"PATH": "/usr/bin:/bin"},
        )
        worker.start()
        started[name] = worker
    yield started
    for worker in started.values():
        worker.close()


def _fail_on_run(worker: Worker) -> WorkerFailed:
    worker.wait_ready()
    pid = worker.pid
    with pytest.raises(WorkerFailed) as err:
        worker.run_block(3)
    assert _gone(pid)
    return err.value


def test_segfault(workers):
    err = _fail_on_run(workers["segfault-on-run"])
    assert err.reason == "worker crashed with SIGSEGV"
    assert err.signal == "SIGSEGV" and err.exit_code is None
    assert not err.user_error and err.message is None
    assert "Segmentation fault" in err.stderr_tail or "Fatal Python error" in err.stderr_tail


def test_hang_past_the_timeout(workers):
    err = _fail_on_run(workers["hang-on-run"])
    assert err.reason == f"worker exceeded the {RUN_TIMEOUT_S:g} s timeout"
    assert err.signal == "SIGKILL"


def test_memory_limit(workers):
    worker = workers["oom-on-run"]
    err = _fail_on_run(worker)
    assert err.reason.startswith("worker exceeded the memory limit of 1.5 GiB (RSS ")
    assert MEMORY_LIMIT < worker.peak_rss_bytes < MEMORY_LIMIT + 2**30


def test_exit_on_init(workers):
    worker = workers["exit-on-init"]
    with pytest.raises(WorkerFailed) as err:
        worker.wait_ready()
    assert err.value.reason == "worker exited with code 17 before answering"
    assert err.value.exit_code == 17


def test_corrupt_model_is_reported_by_the_worker(workers):
    worker = workers["corrupt-model"]
    with pytest.raises(WorkerFailed) as err:
        worker.wait_ready()
    assert err.value.reason.startswith("worker reported: ")
    assert len(err.value.reason) > len("worker reported: ") + 10
    assert err.value.exit_code == 3
    assert "Traceback" in err.value.stderr_tail
    # The user's file caused it: the worker says so, with the sentence to show them.
    assert err.value.user_error and err.value.kind == "user"
    assert err.value.message.startswith("Cannot load model.keras as a Keras model")
    assert err.value.reason == f"worker reported: {err.value.message}"
    assert err.value.to_dict()["message"] == err.value.message


def test_a_failed_worker_refuses_further_requests(workers):
    worker = workers["exit-on-init"]
    with pytest.raises(WorkerFailed):  # it fails here, or failed in test_exit_on_init
        worker.wait_ready()
    with pytest.raises(WorkerFailed, match="closed"):
        worker.run_block(1)


def test_missing_python_is_a_failure_not_a_crash():
    worker = Worker(TINY_MLP, Config(), python="/nonexistent/python", timeout_s=5)
    with pytest.raises(WorkerFailed, match="could not be started"):
        worker.start()
    worker.close()
