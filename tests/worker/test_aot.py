"""The xla-aot runtime for real: a tiny model compiled ahead of time, run by a worker, checked
against TensorFlow; the artifacts an adopter gets; the failures said in one sentence."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import require
from tfperf.accuracy import compare_outputs, load_outputs
from tfperf.core.aot import xla_aot_facts
from tfperf.core.config import Config
from tfperf.core.protocol import artifact_from_notes
from tfperf.runner.handle import Worker, WorkerFailed

pytestmark = pytest.mark.tf

TINY_MLP = {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1}


@pytest.fixture(scope="session")
def aot_runtime() -> Path:
    """The XLA AOT runtime archive, built once per install into tfperf's cache (a minute or
    more the first time: every later session finds it there)."""
    facts = xla_aot_facts()
    require(facts["available"], "XLA AOT needs " + "; ".join(facts["missing"]))
    done = subprocess.run(
        [sys.executable, "-m", "tfperf.worker.aot"], capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    return Path(done.stdout.strip().splitlines()[-1])


def _outputs(worker: Worker, path: Path) -> list:
    worker.wait_ready()
    worker.run_block(3)
    return load_outputs(worker.outputs(path))


@pytest.fixture(scope="module")
def compiled(aot_runtime, tmp_path_factory):
    """The tiny MLP's outputs under TensorFlow and under xla-aot (multithreaded, 2 threads),
    each from a worker of its own, and the xla-aot worker's notes."""
    folder = tmp_path_factory.mktemp("aot")
    with Worker(TINY_MLP, Config(), timeout_s=300) as tf_worker:
        reference = _outputs(tf_worker, folder / "tf.npz")
    aot = Config(runtime="xla-aot", runtime_threads=2)
    with Worker(TINY_MLP, aot, timeout_s=300) as aot_worker:
        outputs = _outputs(aot_worker, folder / "aot.npz")
        notes = aot_worker.ready["notes"]
    return reference, outputs, notes


def test_a_compiled_mlp_gives_tensorflow_s_outputs(compiled):
    reference, outputs, notes = compiled
    comparison = compare_outputs(reference, outputs)
    assert comparison["max_rel_error"] < 1e-4, comparison
    assert any("multithreaded on 2 Eigen threads" in n for n in notes), notes
    library = Path(artifact_from_notes(notes))
    meta = json.loads((library.parent / "model.json").read_text())
    assert meta["multithreading"] is True
    assert meta["target_cpu"].startswith("x86-64")
    assert [o["shape"] for o in meta["outputs"]] == [list(reference[0].shape)]


def test_the_adopter_gets_a_loader_and_a_cxx_example_that_build_and_run(compiled, tmp_path):
    from tfperf.tuning.conclude import export_artifact

    recommendation = {"artifact": artifact_from_notes(compiled[2])}
    out = Path(export_artifact(recommendation, tmp_path / "out"))
    assert {"libmodel.so", "model.h", "run_model.py", "example.cc", "model.json"} <= {
        p.name for p in out.iterdir()
    }
    # The loader needs NumPy only: a server without TensorFlow or tfperf runs it.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    ran = subprocess.run(
        [sys.executable, "-S", "-c", _NO_TF_LOADER], cwd=out, capture_output=True, text=True,
        env=env, timeout=120,
    )
    assert ran.returncode == 0, ran.stderr[-1500:]
    assert "tensorflow loaded: False" in ran.stdout
    build = re.search(r"^//   (.+)$", (out / "example.cc").read_text(), re.MULTILINE)
    assert build, "example.cc names its build line"
    subprocess.run(build.group(1), shell=True, cwd=out, check=True, timeout=300)
    done = subprocess.run(["./example"], cwd=out, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.strip()) == float(done.stdout.strip())  # a number, not NaN


_NO_TF_LOADER = textwrap.dedent(
    f"""
    import sys
    sys.path[:0] = [p for p in {[p for p in sys.path if "site-packages" in p]!r}]
    import numpy as np
    import run_model
    model = run_model.AotModel(".")
    zeros = [np.zeros(s["shape"], s["dtype"]) for s in model.meta["inputs"]]
    print([o.shape for o in model(*zeros)])
    print("tensorflow loaded:", "tensorflow" in sys.modules)
    """
)


def test_the_profile_s_python_line_runs_the_library_without_tensorflow(compiled):
    from tfperf.profiles import code_lines

    (line,) = code_lines({"runtime": "xla-aot", "runtime_threads": 2}, "builtin",
                         artifact_from_notes(compiled[2]))
    check = (
        f"import runpy, sys\nimport numpy as np\n{line}\n"
        "arrays = [np.zeros(s['shape'], s['dtype']) for s in model.meta['inputs']]\n"
        "print(model(*arrays)[0].shape, 'tensorflow' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-1500:]
    assert done.stdout.strip() == f"{compiled[0][0].shape} False"


def test_a_library_compiled_for_a_newer_cpu_is_refused(compiled, monkeypatch):
    from tfperf.core import aot_loader

    folder = Path(artifact_from_notes(compiled[2])).parent
    monkeypatch.setattr(aot_loader, "host_target", lambda cpuinfo=None: "x86-64-v2")
    refused = r"compiled for x86-64-v\d CPUs and this one runs x86-64-v2: compile it again"
    with pytest.raises(RuntimeError, match=refused):
        aot_loader.AotModel(folder)


def test_no_compiler_fails_the_candidate_with_the_fix():
    config = Config.parse(["runtime=xla-aot"], ["CXX=/nonexistent/g++"])
    worker = Worker(TINY_MLP, config, timeout_s=120)
    with pytest.raises(WorkerFailed) as failed:
        worker.start()
        worker.wait_ready()
    worker.close()
    assert "C++ compiler (CXX=/nonexistent/g++ is not found" in failed.value.reason


_ODD_MODELS = textwrap.dedent(
    """
    import numpy as np
    import tensorflow as tf

    def strings():
        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
        def model(x):
            return tf.cast(tf.strings.length(tf.strings.as_string(x)), tf.float32)
        return model, np.ones((1, 4), np.float32)

    def masked():
        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
        def model(x):
            return tf.boolean_mask(x, x > 0.5)
        return model, np.linspace(0, 1, 4, dtype=np.float32).reshape(1, 4)
    """
)


@pytest.mark.parametrize(
    ("factory", "expected"),
    [
        ("strings", r"XLA has no CPU kernel for the op\(s\) AsString"),
        ("masked", r"depends on the input values \(a dynamic shape\)"),
    ],
)
def test_a_model_aot_cannot_compile_says_why_in_one_sentence(
    aot_runtime, tmp_path, monkeypatch, factory, expected
):
    from tfperf.modelref import resolve_model
    from tfperf.worker.artifacts import ConversionError
    from tfperf.worker.prepare import load_workload, prepare_loaded

    (tmp_path / "aot_odd_models.py").write_text(_ODD_MODELS)
    monkeypatch.chdir(tmp_path)
    loaded = load_workload(resolve_model(f"aot_odd_models:{factory}"))
    with pytest.raises(ConversionError) as failed:
        prepare_loaded(loaded, {"runtime": "xla-aot"})
    message = str(failed.value)
    assert "\n" not in message and len(message) < 400, message
    assert re.search(expected, message), message
