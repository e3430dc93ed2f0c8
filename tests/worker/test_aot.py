"""The xla-aot runtime for real: a tiny model compiled ahead of time, run by a worker, checked
against TensorFlow; the artifacts an adopter gets; the failures said in one sentence."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import require
from tfperf.accuracy import compare_outputs, load_outputs
from tfperf.core.config import Config
from tfperf.core.protocol import artifact_from_notes
from tfperf.runner.handle import Worker, WorkerFailed

# the first test to need the runtime archive may build it: minutes, more on a busy machine
pytestmark = [pytest.mark.tf, pytest.mark.timeout(2400)]

TINY_MLP = {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1}


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
    assert [o["shape"] for o in meta["outputs"]] == [list(reference[0].shape)]


def test_the_model_is_compiled_for_this_cpu_s_own_name_and_says_which(compiled):
    from tfperf.core.aot import aot_target, runtime_marches
    from tfperf.core.aot_loader import host_flags

    target = aot_target()
    meta = json.loads((Path(artifact_from_notes(compiled[2])).parent / "model.json").read_text())
    assert meta["target_cpu"] == target.cpu and meta["target_level"] == target.level
    assert set(meta["cpu_flags"]) <= host_flags() and "avx2" in meta["cpu_flags"]
    if target.named:  # archspec knows this CPU: the name, not a level
        assert not meta["target_cpu"].startswith("x86-64")
    assert meta["runtime_march"] in runtime_marches(target)
    assert any(f"XLA AOT for {target.cpu} (runtime {meta['runtime_march']})" in n
               for n in compiled[2])


def test_the_adopter_gets_a_loader_and_a_cxx_example_that_build_and_run(compiled, tmp_path):
    from tfperf.core.paths import cache_dir
    from tfperf.tuning.conclude import export_artifact

    recommendation = {"artifact": artifact_from_notes(compiled[2])}
    out = Path(export_artifact(recommendation, tmp_path / "out"))
    assert {"libmodel.so", "model.h", "run_model.py", "example.cc", "model.json", "build.sh",
            "libtf_xla_runtime.a"} <= {p.name for p in out.iterdir()}
    # The loader needs NumPy only: a server without TensorFlow or tfperf runs it.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    ran = subprocess.run(
        [sys.executable, "-S", "-c", _NO_TF_LOADER], cwd=out, capture_output=True, text=True,
        env=env, timeout=120,
    )
    assert ran.returncode == 0, ran.stderr[-1500:]
    assert "tensorflow loaded: False" in ran.stdout
    assert "sh build.sh" in (out / "example.cc").read_text()
    cache = cache_dir().resolve()
    assert str(cache) not in (out / "build.sh").read_text() + (out / "example.cc").read_text()
    # a copy of the out-dir builds with tfperf's cache out of sight (an empty folder mounted
    # over it, in a mount namespace of the build's own)
    copy = tmp_path / "elsewhere"
    shutil.copytree(out, copy)
    (copy / "libtf_xla_runtime.a").unlink()  # build.sh compiles it again from TensorFlow's sources
    (tmp_path / "empty").mkdir()
    require(shutil.which("unshare") is not None, "unshare (util-linux) is needed")
    hide = f"mount --bind {tmp_path / 'empty'} {cache} && ls -A {cache} | wc -l && sh build.sh"
    built = subprocess.run(
        ["unshare", "-m", "sh", "-c", hide], cwd=copy, capture_output=True, text=True,
        env={**os.environ, "PYTHON": sys.executable}, timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    assert built.stdout.split()[0] == "0", "the cache was not hidden from the build"
    done = subprocess.run(["./example"], cwd=copy, capture_output=True, text=True, timeout=60)
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


def test_a_library_compiled_for_a_cpu_whose_instructions_this_one_lacks_is_refused(
    compiled, monkeypatch
):
    from tfperf.core import aot_loader

    folder = Path(artifact_from_notes(compiled[2])).parent
    fewer = aot_loader.host_flags() - {"avx2", "fma"}
    monkeypatch.setattr(aot_loader, "host_flags", lambda cpuinfo=None: fewer)
    refused = r"was compiled for \S+ CPUs and this one lacks avx2, fma: compile it again"
    with pytest.raises(RuntimeError, match=refused):
        aot_loader.AotModel(folder)


def test_a_runtime_archive_that_does_not_build_for_the_cpu_falls_back_to_the_level(
    aot_runtime, monkeypatch
):
    from tfperf.core.aot import compiler, tensorflow_dir
    from tfperf.worker import aot

    built = aot_runtime.parent.parent  # the archive the fixture built, whichever -march it has
    marches = [m for m in aot.runtime_marches()
               if aot.runtime_archive_path(tensorflow_dir(), compiler(), m).parent.parent == built]
    monkeypatch.setattr(aot, "runtime_marches", lambda: ["-march=no-such-cpu", *marches])
    found = aot.runtime_archive(tensorflow_dir(), compiler())
    assert found.path == aot_runtime and found.march == marches[0]
    assert found.note.startswith("the runtime archive did not build with -march=no-such-cpu")
    # the failure is remembered: the next worker does not try the build again
    failed = aot.runtime_archive_path(tensorflow_dir(), compiler(), "-march=no-such-cpu")
    assert (failed.parent.parent / "failed").is_file()


_CALLS_A_KERNEL = """
#include "xla/backends/cpu/runtime/sort_lib.h"
extern "C" void* kernel() {
  using xla::cpu::internal::SortDims, xla::cpu::internal::SortDirection;
  void (*sort)(const SortDims&, float*, bool, SortDirection) =
      &xla::cpu::internal::SortInplace<float>;
  return reinterpret_cast<void*>(sort);
}
"""


def test_a_link_that_needs_a_kernel_library_gets_it_in_the_model_s_own_archive(
    aot_runtime, tmp_path, monkeypatch
):
    """No model compiled here calls a kernel library, so the link that needs one is made by an
    entry point that calls XLA's sort (``sort_lib.cc``, as XLA's sort thunk does). That library
    alone is named a kernel: the others are minutes of compiling, and it is the quickest of
    them (27 s of one core against 52 s for the int8 matmul's ``dot_lib_s8.cc``)."""
    from tfperf.core.aot import compiler, tensorflow_dir
    from tfperf.worker import aot

    tf_dir, cxx = tensorflow_dir(), compiler()
    runtime = aot.runtime_archive(tf_dir, cxx)
    assert not any("sort_lib" in m for m in _members(runtime.path))  # the cached archive: core
    core, kernels = aot.runtime_sources(tf_dir)
    sort = [p for p in kernels if p.name == "sort_lib.cc"]
    monkeypatch.setattr(aot, "runtime_sources", lambda _: (core, sort))
    (tmp_path / "entry.cc").write_text(_CALLS_A_KERNEL)
    for name in ("model", "model_constants", "model_metadata"):
        (tmp_path / f"{name}.c").write_text("int tfperf_empty_" + name + ";\n")
        subprocess.run([cxx, "-x", "c", "-fPIC", "-c", f"{name}.c", "-o", f"{name}.o"],
                       cwd=tmp_path, check=True)
    os.link(runtime.path, tmp_path / "libtf_xla_runtime.a")  # as _adopter_files leaves it
    assert aot._link_library(tmp_path, tf_dir, cxx, runtime) == ["sort_lib.cc"]
    assert any("sort_lib" in m for m in _members(tmp_path / "libtf_xla_runtime.a"))
    assert not any("sort_lib" in m for m in _members(runtime.path))  # the cache's is untouched
    assert (tmp_path / "libmodel.so").is_file()


def _members(archive: Path) -> list[str]:
    return subprocess.run(["ar", "t", str(archive)], capture_output=True, text=True,
                          check=True).stdout.split()


def test_build_sh_without_tensorflow_says_what_to_set_in_one_sentence(tmp_path):
    """An out-dir's ``build.sh`` on a machine where its interpreter has no TensorFlow (here
    Python without its site-packages), or with a TF_DIR that is not one: one sentence."""
    from tfperf.worker import aot

    runtime = aot.RuntimeArchive(tmp_path / aot.ARCHIVE, "-march=x86-64", "")
    aot._write_build_script(tmp_path, runtime, with_kernels=False)
    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    for extra in ({"PYTHON": str(bare)}, {"TF_DIR": str(tmp_path / "nowhere")}):
        env = {k: v for k, v in os.environ.items() if k not in ("TF_DIR", "PYTHONPATH")}
        built = subprocess.run(["sh", "build.sh"], cwd=tmp_path, capture_output=True, text=True,
                               env={**env, **extra}, timeout=60)
        assert built.returncode == 1, built.stderr
        assert built.stderr.count("\n") == 1 and "Traceback" not in built.stderr, built.stderr
        assert "no TensorFlow found" in built.stderr and "set PYTHON" in built.stderr
        assert "or TF_DIR" in built.stderr and str(next(iter(extra.values()))) in built.stderr


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


def test_a_cpu_name_xla_s_llvm_does_not_know_falls_back_to_the_level(
    aot_runtime, tmp_path, monkeypatch
):
    from tfperf.core.aot import AotTarget, aot_target
    from tfperf.core.aot_loader import level_flags
    from tfperf.modelref import resolve_model
    from tfperf.worker import aot
    from tfperf.worker.prepare import load_workload, prepare_loaded

    level = aot_target().level
    unknown = AotTarget("no-such-cpu", level, tuple(level_flags(level)), named=True)
    monkeypatch.setattr(aot, "aot_target", lambda: unknown)
    monkeypatch.setenv("TFPERF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(aot, "runtime_archive", lambda tf_dir, cxx: aot.RuntimeArchive(
        aot_runtime, "-march=x86-64-v3", ""))
    (tmp_path / "aot_small_model.py").write_text(_SMALL_MODEL)
    monkeypatch.chdir(tmp_path)
    prepared = prepare_loaded(load_workload(resolve_model("aot_small_model:make")),
                              {"runtime": "xla-aot"})
    meta = json.loads((Path(artifact_from_notes(prepared.notes)).parent / "model.json")
                      .read_text())
    assert meta["target_cpu"] == level and meta["cpu_flags"] == level_flags(level)
    assert [o.shape for o in prepared.call()] == [(1, 2)]


_SMALL_MODEL = textwrap.dedent(
    """
    import numpy as np
    import tensorflow as tf

    def make():
        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
        def model(x):
            return tf.matmul(x, tf.ones([4, 2])) + 1.0
        return model, np.ones((1, 4), np.float32)
    """
)


def test_two_compiled_models_run_side_by_side_in_one_process(aot_runtime, tmp_path, monkeypatch):
    """A server may load two models: each compiled class is named after its model, so that
    the process-wide static data of one does not stand in for the other's."""
    from tfperf.modelref import resolve_model
    from tfperf.worker.prepare import load_workload, prepare_loaded

    (tmp_path / "aot_two_models.py").write_text(_TWO_MODELS)
    monkeypatch.chdir(tmp_path)
    calls = [prepare_loaded(load_workload(resolve_model(f"aot_two_models:{name}")),
                            {"runtime": "xla-aot"}).call for name in ("narrow", "wide")]
    assert [o.shape for o in calls[0]()] == [(1, 2)]
    assert [o.shape for o in calls[1]()] == [(3, 5)]
    assert [o.shape for o in calls[0]()] == [(1, 2)]


_TWO_MODELS = textwrap.dedent(
    """
    import numpy as np
    import tensorflow as tf

    def narrow():
        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
        def model(x):
            return tf.matmul(x, tf.ones([4, 2]))
        return model, np.ones((1, 4), np.float32)

    def wide():
        @tf.function(input_signature=[tf.TensorSpec([3, 7], tf.float32)])
        def model(x):
            return tf.matmul(x, tf.ones([7, 5])) * 2.0
        return model, np.ones((3, 7), np.float32)
    """
)
