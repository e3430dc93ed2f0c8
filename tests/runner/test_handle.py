"""A real worker process: protocol, knobs applied, outputs, other call styles, clean exit."""

from __future__ import annotations

import importlib.util
import os
import sys
import textwrap
from pathlib import Path

import numpy as np
import psutil
import pytest

from tfperf.core.config import Config
from tfperf.runner.handle import Worker
from tfperf.worker.tfimport import hidden_note

TINY_MLP = {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1}

PREPARE_HOOK = textwrap.dedent(
    '''
    from types import SimpleNamespace

    import tensorflow as tf


    def prepare(workload, config):
        """A workload built by the test: two matmuls, and the thread pools it saw."""
        w = tf.constant(tf.ones([8, 8]))
        x = tf.ones([workload["batch"], 8])
        fn = tf.function(lambda v: tf.matmul(tf.matmul(v, w), w))
        seen = tf.config.threading.get_intra_op_parallelism_threads()
        return SimpleNamespace(
            call=lambda: fn(x).numpy(),
            outputs=lambda: [fn(x).numpy()],
            batch=workload["batch"],
            flops_per_call=2 * 2 * 8 * 8 * workload["batch"],
            flops_source="analytic",
            extra={},
            notes=[f"intra_threads={seen}"],
        )
    '''
)


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    """Two workers started side by side: a built-in, and a workload built by this test."""
    hook_dir = tmp_path_factory.mktemp("hook")
    (hook_dir / "tfperf_test_hook.py").write_text(PREPARE_HOOK)
    environ = dict(os.environ, OMP_NUM_THREADS="3")
    builtin = Worker(TINY_MLP, Config.parse(["onednn=off"], []), timeout_s=120, environ=environ)
    hooked = Worker(
        {"kind": "test", "batch": 4},
        Config.parse(["intra_threads=1"], ["TFPERF_PREPARE=tfperf_test_hook:prepare"]),
        python=sys.executable,
        pythonpath=[str(hook_dir)],
        timeout_s=120,
    )
    builtin.start()
    hooked.start()
    yield builtin, hooked
    builtin.close()
    hooked.close()


def test_ready_reports_startup_phases_and_install(workers):
    worker, _ = workers
    ready = worker.wait_ready()
    assert worker.wait_ready() is ready  # asking again gives the same message
    for key in ("import_s", "load_s", "first_call_s", "startup_s"):
        assert ready[key] > 0, key
    assert ready["startup_s"] >= ready["import_s"] + ready["load_s"] + ready["first_call_s"]
    assert len(ready["warmup"]["samples_s"]) >= 5
    install = ready["install"]
    assert install["tf_version"] and install["keras_version"]
    assert install["TF_ENABLE_ONEDNN_OPTS"] == "0"
    # the install as tfperf.worker.probe describes it, seen from inside the worker
    assert install["onednn"]["enabled"] is False and install["onednn"]["source"] == "env"
    assert install["python"]["executable"] == install["executable"] == sys.executable
    assert install["distribution"]["version"].split("-")[0] in install["tf_version"]
    assert install["allocator"] == "system" and "describe_error" not in install
    assert ready["flops"]["source"] in ("analytic", "profiler", "unknown")
    assert ready["batch"] == 1
    assert ready["rss_bytes"] > 0 and worker.peak_rss_bytes >= ready["rss_bytes"]


def test_user_speed_variables_are_reported_not_inherited(workers):
    worker, _ = workers
    worker.wait_ready()
    assert worker.not_inherited.get("OMP_NUM_THREADS") == "3"
    environ = psutil.Process(worker.pid).environ()
    assert "OMP_NUM_THREADS" not in environ
    assert environ["TF_ENABLE_ONEDNN_OPTS"] == "0"


def test_blocks_outputs_and_call_styles(workers, tmp_path):
    worker, _ = workers
    worker.wait_ready()
    samples = worker.run_block(7)
    assert len(samples) == 7 and all(s > 0 for s in samples)
    path = worker.outputs(tmp_path / "out.npz")
    with np.load(path) as data:
        arrays = [data[k] for k in data.files]
    assert arrays and arrays[0].shape[0] == 1
    eager = worker.extra("eager", 3)
    assert eager is not None and len(eager) == 3
    assert worker.extra("no-such-style", 2) is None


def test_call_level_knobs_reach_a_workload_on_the_given_pythonpath(workers):
    _, worker = workers
    ready = worker.wait_ready()
    # TensorFlow is imported without jax, which it would import for nothing, and says so
    hidden = [hidden_note("jax")] if importlib.util.find_spec("jax") else []
    assert ready["notes"] == ["intra_threads=1", *hidden]
    assert ready["batch"] == 4 and ready["flops"]["per_call"] == 2 * 2 * 8 * 8 * 4
    assert len(worker.run_block(3)) == 3


def test_close_leaves_no_process(workers):
    for worker in workers:
        worker.wait_ready()
        pid = worker.pid
        worker.close()
        worker.close()  # idempotent
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"


def test_worker_needs_its_pipes():
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", "tfperf.worker"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parent,
    )
    assert proc.returncode == 2 and "--cmd-fd" in proc.stderr


def test_error_messages_say_whether_the_user_caused_them():
    from tfperf.core.errors import UserError
    from tfperf.core.protocol import USER_KIND
    from tfperf.worker.serve import error_message

    mine = error_message(UserError("Cannot load m.keras as a Keras model: bad weights."))
    assert mine == {
        "op": "error",
        "kind": USER_KIND,
        "message": "Cannot load m.keras as a Keras model: bad weights.",
    }
    crash = error_message(RuntimeError("oneDNN primitive failed\n  at line 3"))
    assert crash["kind"] == "RuntimeError" and crash["message"] == "oneDNN primitive failed"
    assert error_message(ValueError())["message"] == "ValueError"


def test_only_the_parents_interpreter_gets_the_parents_tfperf_dir(tmp_path):
    """Installed in site-packages, tfperf's directory is the parent's site-packages: another
    environment's worker must not get it on its path (it would load the parent's TensorFlow)."""
    from tfperf.runner.handle import is_parent_interpreter, tfperf_source_dir

    other_env = tmp_path / "env" / "bin" / "python"
    other_env.parent.mkdir(parents=True)
    other_env.symlink_to(os.path.realpath(sys.executable))  # same base interpreter, other env
    environ = {"PATH": "/usr/bin:/bin", "PYTHONPATH": "/user/path"}

    def pythonpath(python: str, extra: list[str]) -> list[str]:
        worker = Worker(
            TINY_MLP, Config(), python=python, pythonpath=extra, timeout_s=5, environ=environ
        )
        return worker.environment()["PYTHONPATH"].split(os.pathsep)

    own = tfperf_source_dir()
    assert pythonpath(sys.executable, ["/hook"]) == [own, "/hook", "/user/path"]
    sibling = Path(sys.executable).with_name("python3")  # same venv, another name
    if sibling.exists() and sibling.resolve() == Path(sys.executable).resolve():
        assert is_parent_interpreter(str(sibling))
    assert not is_parent_interpreter(str(other_env))
    assert pythonpath(str(other_env), ["/hook"]) == ["/hook", "/user/path"]
    bare = Worker(TINY_MLP, Config(), python=str(other_env), timeout_s=5, environ={})
    assert "PYTHONPATH" not in bare.environment()
    assert not is_parent_interpreter("no-such-python-here")
