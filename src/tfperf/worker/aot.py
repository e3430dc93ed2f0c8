"""Worker side: the ``xla-aot`` runtime, a model compiled ahead of time by XLA and called through
a small C entry point, without TensorFlow's runtime in the call.

Contract: :func:`aot_prepared` ``(loaded, config) -> Prepared``, called by
:func:`tfperf.worker.convert.prepare_variant` for ``runtime="xla-aot"``:

1. The install must have what :func:`tfperf.core.aot.xla_aot_facts` lists, else
   :class:`~tfperf.worker.artifacts.ConversionError` names what is missing and its fix.
2. The model is exported as a SavedModel whose ``serving_default`` signature takes the sample
   inputs' exact shapes (``in_000``...) and returns each output (``out_000``..., TensorFlow's
   flattening order), with its variables folded into constants first
   (``convert_variables_to_constants_v2``: ``aot_compile_cpu``'s own freezer cannot find Keras 3
   variables). Outputs whose shape depends on the input values are refused (XLA AOT compiles
   static shapes only).
3. ``saved_model_cli aot_compile_cpu`` compiles it for :func:`~tfperf.core.aot.aot_target`
   (``--target_cpu``: the CPU's LLVM name, its level as the fallback), with
   ``--multithreading`` when ``runtime_threads`` > 1; its error becomes one sentence (the ops
   XLA has no kernel for, or its last line).
4. The runtime archive (``tensorflow/xla_aot_runtime_src``, position-independent) is built
   once per install, compiler and ``-march`` under ``cache_dir()/xla-aot-runtime``: for the
   CPU's own name where it builds, else its level. It holds the sources every model links
   (:func:`~tfperf.core.aot.runtime_sources`: seconds to build); the kernel libraries (Eigen
   dots, convolutions, sort: minutes) are compiled, once, only when a model's link names a
   symbol the archive lacks, and that model's own archive then holds them too.
5. ``entry.cc`` (:data:`ENTRY`, extern "C" functions over the generated class) is compiled
   with the generated header and linked with the objects and the archive into
   ``libmodel.so`` (every symbol resolved at link time, ``-z defs``), which needs
   ``libtensorflow_framework.so.2`` at run time (for Abseil; an rpath to TensorFlow's folder is
   recorded). ``model.json`` records the inputs, outputs,
   target CPU (``target_cpu``: the CPU's own LLVM name, or the level where the name is unknown
   or fails), the instruction-set flags that code may use (``cpu_flags``), the runtime
   archive's ``-march`` and threading. The folder is what an adopter needs: the runtime archive
   sits beside the model (``libtf_xla_runtime.a``), ``build.sh`` builds ``example.cc`` (a C++
   caller) from the folder and the installed TensorFlow alone, naming no path of tfperf's cache;
   ``run_model.py`` is :mod:`tfperf.core.aot_loader`, which runs the library on NumPy arrays
   without TensorFlow or tfperf.
6. The library runs through :class:`tfperf.core.aot_loader.AotModel` (ctypes), which refuses
   one compiled for a CPU this one is not. The timed call is ``AotModel.__call__``: it copies
   the host arrays in, runs, and copies every output out (``docs/timed-call.md``).

Everything is cached in the variant's folder (:func:`~tfperf.worker.artifacts.artifact_dir`,
keyed by the model, its inputs, the target CPU and threading) under a file lock, so that two
workers never compile the same model at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tfperf.core import aot_loader
from tfperf.core.aot import (
    RUNTIME_FLAGS,
    AotTarget,
    aot_target,
    compiler,
    runtime_archive_path,
    runtime_marches,
    runtime_sources,
    tensorflow_dir,
    xla_aot_facts,
)
from tfperf.core.aot_loader import AotModel, level_flags
from tfperf.core.protocol import ARTIFACT_NOTE, COMPILED_NOTE
from tfperf.worker.artifacts import ConversionError, artifact_dir, first_error, inputs_of
from tfperf.worker.opprofile import layer_table, tf_profiler, timed_calls
from tfperf.worker.workload import Prepared, TimedCall

STAND_IN = (
    "XLA AOT code has no profiler: these are XLA JIT's figures for the same graph "
    "(tf.function(jit_compile=True)), a stand-in, not the AOT code's own"
)

UNKNOWN_CPU = "is not a recognized processor"
CLASS = "TfperfModel"


def class_name(folder: Path) -> str:
    """The generated class of the model compiled into ``folder``: named after the folder (a
    digest of the model), because an inline function's static data is bound process-wide
    (GNU unique symbols), so two models of one class name loaded by one process would share
    one model's buffer sizes."""
    return f"{CLASS}_{re.sub(r'[^0-9A-Za-z]', '_', folder.name)}"
LIBRARY = "libmodel.so"
ARCHIVE = "libtf_xla_runtime.a"
BUILD_SCRIPT = "build.sh"
COMPILE_TIMEOUT_S = 900.0
RUNTIME_BUILD_TIMEOUT_S = 3600.0
"""One runtime source's compilation: a kernel library takes a minute on an idle core."""
CXXFLAGS = ("-std=c++17", "-D_GLIBCXX_USE_CXX11_ABI=1", "-O2", "-fPIC", "-w")

ENTRY = """// The C entry point of a model compiled ahead of time by XLA (tfperf's xla-aot runtime).
#define EIGEN_USE_THREADS
#include <cstddef>
#include <memory>
#include <string>
#include "unsupported/Eigen/CXX11/Tensor"
#include "model.h"

struct TfperfAot {
  std::unique_ptr<Eigen::ThreadPool> pool;
  std::unique_ptr<Eigen::ThreadPoolDevice> device;
  TfperfModel model;
  std::string error;
};

static TfperfModel& M(void* h) { return static_cast<TfperfAot*>(h)->model; }

extern "C" {
// threads > 0: run on an Eigen pool of that many threads (a model compiled with multithreading)
void* tfperf_aot_create(int threads) {
  auto* h = new TfperfAot();
  if (threads > 0) {
    h->pool.reset(new Eigen::ThreadPool(threads));
    h->device.reset(new Eigen::ThreadPoolDevice(h->pool.get(), threads));
    h->model.set_thread_pool(h->device.get());
  }
  return h;
}
void tfperf_aot_destroy(void* h) { delete static_cast<TfperfAot*>(h); }
int tfperf_aot_arg_index(void* h, const char* name) { return M(h).LookupArgIndex(name); }
int tfperf_aot_result_index(void* h, const char* name) { return M(h).LookupResultIndex(name); }
void* tfperf_aot_arg_data(void* h, int i) { return M(h).arg_data(i); }
size_t tfperf_aot_arg_size(void* h, int i) { return M(h).arg_size(i); }
const void* tfperf_aot_result_data(void* h, int i) { return M(h).result_data(i); }
size_t tfperf_aot_result_size(void* h, int i) { return M(h).result_size(i); }
int tfperf_aot_run(void* h) { return M(h).Run() ? 1 : 0; }
const char* tfperf_aot_error(void* h) {
  auto* a = static_cast<TfperfAot*>(h);
  a->error = a->model.error_msg();
  return a->error.c_str();
}
}
"""

BUILD = """#!/bin/sh
# Builds ./example (example.cc) from this folder and the installed TensorFlow alone: the compiled
# model (model.h, model*.o), the XLA AOT runtime archive ({archive}, rebuilt here from
# TensorFlow's xla_aot_runtime_src when it is missing: seconds, once) and TensorFlow's headers and
# libtensorflow_framework.so.2. Set PYTHON to the interpreter whose TensorFlow to use, or TF_DIR.
set -e
cd "$(dirname "$0")"
CXX="${{CXX:-g++}}"
FIND_TF='import importlib.util as u; s = u.find_spec("tensorflow")
print(s.submodule_search_locations[0] if s else "")'
WHERE="${{TF_DIR:+in $TF_DIR}}"
if [ -z "${{TF_DIR:-}}" ]; then
  WHERE="for ${{PYTHON:-python3}}"
  TF_DIR="$("${{PYTHON:-python3}}" -c "$FIND_TF" 2>/dev/null || true)"
fi
if [ -z "$TF_DIR" ] || [ ! -d "$TF_DIR/include" ]; then
  echo "build.sh: no TensorFlow found $WHERE: set PYTHON (the interpreter whose TensorFlow" \
    "compiled this model) or TF_DIR (that TensorFlow's package folder)" >&2
  exit 1
fi
if [ ! -f {archive} ]; then
  mkdir -p runtime-build
  for src in $(find "$TF_DIR/xla_aot_runtime_src" -name '*.cc' | grep -Ev '{kernels}'); do
    "$CXX" {flags} {march} -I"$TF_DIR"/xla_aot_runtime_src -I"$TF_DIR"/include \
      -c "$src" -o "runtime-build/$(echo "$src" | tr / _).o"
  done
  ar rcs {archive} runtime-build/*.o
fi
{link}
""".replace("{archive}", ARCHIVE)

EXAMPLE = """// A C++ caller of the compiled model: zeros in, the first output's first value out.
// Build (from this folder):
//   {build}
#include <cstdio>
#include <cstring>
#include "model.h"

int main() {{
  TfperfModel model;  // single-threaded; see entry.cc for an Eigen thread pool
  std::memset(model.arg_data(0), 0, model.arg_size(0));
  if (!model.Run()) {{ std::fprintf(stderr, "%s\\n", model.error_msg().c_str()); return 1; }}
  std::printf("%g\\n", static_cast<const float*>(model.result_data(0))[0]);
  return 0;
}}
"""


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (another worker building the same thing waits)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class UnknownCpu(ConversionError):
    """XLA's LLVM does not know the CPU's name: the model is compiled for its level instead."""


class NotFinished(ConversionError):
    """A build or compilation that ran out of time or could not start: it may work next time."""


def _run(cmd: list[str], what: str, cwd: Path | None = None,
         timeout_s: float = COMPILE_TIMEOUT_S) -> str:
    """Run ``cmd``; its output, or :class:`ConversionError` saying ``what`` failed and why
    (:class:`NotFinished` when it timed out or could not start)."""
    try:
        done = subprocess.run(
            cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NotFinished(f"{what} failed: {exc}.") from None
    output = done.stdout + done.stderr
    if UNKNOWN_CPU in output:  # LLVM ignores the name: it fails, or compiles generic code
        name = re.search(r"'([^']+)' " + UNKNOWN_CPU, output)
        raise UnknownCpu(f"XLA's LLVM does not know the CPU {name.group(1) if name else ''}.")
    if done.returncode != 0:
        raise ConversionError(f"{what} failed: {_reason(output)}")
    return output


_UNSUPPORTED = re.compile(r"unsupported operations.*?XLA_CPU_JIT: ([\w, ]+?) \(", re.DOTALL)
_TRACEBACK_END = re.compile(r"^(\w+(?:Error|Exception)): (.+)$", re.MULTILINE)


def _reason(output: str) -> str:
    """One sentence from a compiler's output: the ops XLA cannot compile, the exception, or the
    last error line."""
    ops = _UNSUPPORTED.search(output)
    if ops:
        return f"XLA has no CPU kernel for the op(s) {ops.group(1).strip()}, so AOT cannot compile."
    raised = _TRACEBACK_END.findall(output)
    if raised:
        return raised[-1][1].strip()[:300]
    lines = [ln.strip() for ln in output.splitlines() if "error:" in ln.lower()]
    lines = lines or [ln.strip() for ln in output.splitlines() if ln.strip()] or ["no output"]
    line = lines[0 if "error:" in lines[0].lower() else -1]
    return re.sub(r"/\S*/([^/\s]+:\d+)", r"\1", line)[:300]  # a source file by its name alone


def _export(loaded: Any, where: Path) -> tuple[list[dict], list[dict]]:
    """Write the fixed-shape, frozen SavedModel of step 2; its input and output specs."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    arrays = inputs_of(loaded)
    names = list(loaded.input_names)
    specs = [
        tf.TensorSpec(x.shape, tf.as_dtype(x.dtype), name=f"in_{i:03d}")
        for i, x in enumerate(arrays)
    ]

    def call(*args: Any) -> list:
        return tf.nest.flatten(loaded.call_model(dict(zip(names, args, strict=True))))

    concrete = tf.function(call, input_signature=specs).get_concrete_function()
    for tensor in concrete.outputs:
        if not tensor.shape.is_fully_defined():
            raise ConversionError(
                f"an output's shape {tensor.shape} depends on the input values (a dynamic "
                "shape): XLA AOT compiles static shapes only."
            )
    try:
        # functional While/If kept: lowered to v1 frames (Enter, Exit) XLA cannot compile them
        frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=False)
    except Exception as exc:
        raise ConversionError(
            f"the model's variables cannot be folded into constants: {first_error(exc)}"
        ) from None

    def serve(*args: Any) -> dict:
        return {f"out_{i:03d}": t for i, t in enumerate(tf.nest.flatten(frozen(*args)))}

    module = tf.Module()
    module.serve = tf.function(serve, input_signature=specs)
    tf.saved_model.save(module, str(where), signatures={"serving_default": module.serve})
    inputs = [_spec(f"in_{i:03d}", x.shape, x.dtype) for i, x in enumerate(arrays)]
    outputs = [
        _spec(f"out_{i:03d}", t.shape.as_list(), t.dtype.as_numpy_dtype)
        for i, t in enumerate(concrete.outputs)
    ]
    return inputs, outputs


def _spec(name: str, shape: Any, dtype: Any) -> dict:
    import numpy as np

    return {"name": name, "shape": [int(d) for d in shape], "dtype": np.dtype(dtype).name}


@dataclass(frozen=True)
class RuntimeArchive:
    """The runtime archive a model links against, and the ``-march`` it was built with."""

    path: Path
    march: str
    note: str
    """Why it is not built for the CPU's own name, where it is not (else empty)."""


def runtime_archive(tf_dir: Path, cxx: str) -> RuntimeArchive:
    """``libtf_xla_runtime.a`` for this install and compiler, built once and cached (step 4):
    for the CPU's own name where it builds, else for its level
    (:func:`~tfperf.core.aot.runtime_marches`). A build that failed leaves a ``failed`` file
    with its reason, so that it is not tried again; one that ran out of time does not, and the
    next attempt goes on from the objects it built.

    TensorFlow is not imported: the parent starts this as a one-shot child before an
    ``xla-aot`` worker (:func:`main`), so that the minutes of the first build are not
    counted against the worker's start-up deadline."""
    notes: list[str] = []
    marches = runtime_marches()
    for march in marches:
        archive = runtime_archive_path(tf_dir, cxx, march)
        failed = archive.parent.parent / "failed"
        with _locked(archive.parent.parent / ".lock"):
            if not archive.exists() and not failed.exists():
                try:
                    _build_runtime(tf_dir, cxx, march, archive.parent)
                except NotFinished:
                    raise  # out of time on a busy machine: not a reason to give the flags up
                except ConversionError as exc:
                    failed.write_text(str(exc))
            if archive.exists():
                return RuntimeArchive(archive, march, "; ".join(notes))
            notes.append(f"the runtime archive did not build with {march}: "
                         f"{failed.read_text()[:200]}")
    raise ConversionError(notes[-1] if notes else "the XLA AOT runtime did not build.")


def _build_runtime(tf_dir: Path, cxx: str, march: str, build: Path) -> None:
    core, _ = runtime_sources(tf_dir)
    _archive(build / ARCHIVE, _compiled_sources(tf_dir, cxx, march, core, build / "objects"))


def _object_name(source: Path) -> str:
    return re.sub(r"[^0-9A-Za-z.]", "_", source.as_posix().split("xla_aot_runtime_src/")[-1]) + ".o"


def _compiled_sources(tf_dir: Path, cxx: str, march: str, sources: list[Path],
                      into: Path) -> list[Path]:
    """Each source's object under ``into``, compiled where it is not there yet, as many at once
    as this process has cores. An object is renamed into place whole, so that a build that ran
    out of time goes on from the objects it finished."""
    into.mkdir(parents=True, exist_ok=True)
    include = [f"-I{tf_dir / 'xla_aot_runtime_src'}", f"-I{tf_dir / 'include'}"]

    def compile_one(source: Path) -> Path:
        obj = into / _object_name(source)
        if not obj.exists():
            partial = obj.with_suffix(".partial.o")
            _run([cxx, *RUNTIME_FLAGS, march, *include, "-c", str(source), "-o", str(partial)],
                 f"building the XLA AOT runtime ({march})", timeout_s=RUNTIME_BUILD_TIMEOUT_S)
            partial.rename(obj)
        return obj

    jobs = max(1, len(os.sched_getaffinity(0)))
    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(compile_one, sources))


def _archive(path: Path, objects: list[Path]) -> None:
    partial = path.with_suffix(".partial.a")
    partial.unlink(missing_ok=True)
    _run(["ar", "rcs", str(partial), *map(str, objects)], "archiving the XLA AOT runtime")
    partial.rename(path)


def _link_library(folder: Path, tf_dir: Path, cxx: str, runtime: RuntimeArchive) -> list[str]:
    """Link ``libmodel.so`` (step 5); the kernel libraries it needed besides the archive."""
    command = [*_link_command(str(tf_dir), cxx, "entry.cc", LIBRARY), "-shared", "-Wl,-z,defs"]
    first = subprocess.run(command, cwd=folder, capture_output=True, text=True, check=False)
    if first.returncode == 0:
        return []
    if "undefined reference" not in first.stderr:
        raise ConversionError(f"linking the compiled model failed: {_reason(first.stderr)}")
    core, kernels = runtime_sources(tf_dir)
    objects = runtime.path.parent / "objects"
    with _locked(runtime.path.parent.parent / ".lock"):
        _compiled_sources(tf_dir, cxx, runtime.march, kernels, objects)
    local = folder / ARCHIVE
    local.unlink()  # a link to the cache's archive: never written through
    _archive(local, [objects / _object_name(p) for p in core + kernels])
    _run(command, "linking the compiled model", cwd=folder)
    return [p.name for p in kernels]


def _missing_sentence(facts: dict) -> str:
    return "XLA AOT cannot compile on this install: it needs " + "; ".join(facts["missing"]) + "."


def main(argv: list[str] | None = None) -> int:
    """``python -m tfperf.worker.aot``: build the runtime archive if it is not cached yet.

    Prints its path (exit 0), or one sentence saying why it cannot be built (exit 3)."""
    del argv
    facts = xla_aot_facts()
    tf_dir, cxx = tensorflow_dir(), compiler()
    try:
        if not facts["available"] or tf_dir is None or cxx is None:
            raise ConversionError(_missing_sentence(facts))
        print(runtime_archive(tf_dir, cxx).path, flush=True)
    except ConversionError as exc:
        print(exc, flush=True)
        return 3
    return 0


def _link_command(tf_dir: str, cxx: str, source: str, out: str) -> list[str]:
    """The compiler line that links ``source`` with the compiled model and the runtime archive
    beside it (``tf_dir``: TensorFlow's folder, for its headers and Abseil)."""
    objects = ["model.o", "model_constants.o", "model_metadata.o", ARCHIVE]
    return [
        cxx, *CXXFLAGS, f"-I{tf_dir}/include", "-I.", source, *objects,
        f"-L{tf_dir}", "-l:libtensorflow_framework.so.2", f"-Wl,-rpath,{tf_dir}", "-o", out,
    ]


def _aot_compile(saved: Path, folder: Path, multithreading: bool, cpu: str) -> None:
    cli = [sys.executable, "-m", "tensorflow.python.tools.saved_model_cli", "aot_compile_cpu"]
    _run(
        [
            *cli, "--dir", str(saved), "--tag_set", "serve",
            "--signature_def_key", "serving_default", "--output_prefix", str(folder / "model"),
            "--cpp_class", class_name(folder), "--target_cpu", cpu,
            "--multithreading", str(multithreading),
        ],
        "XLA AOT compilation (saved_model_cli aot_compile_cpu)",
    )


def _adopter_files(folder: Path, runtime: RuntimeArchive) -> None:
    """What builds a C++ caller from the folder alone: the runtime archive beside the model,
    ``build.sh`` (which rebuilds the archive from the installed TensorFlow where it is
    missing) and ``example.cc``."""
    local = folder / ARCHIVE
    local.unlink(missing_ok=True)
    try:
        os.link(runtime.path, local)  # the same file as the cache's, where one filesystem
    except OSError:
        shutil.copy2(runtime.path, local)
    _write_build_script(folder, runtime, with_kernels=False)
    example = EXAMPLE.format(build=f"sh {BUILD_SCRIPT}").replace(CLASS, class_name(folder))
    (folder / "example.cc").write_text(example)


def _write_build_script(folder: Path, runtime: RuntimeArchive, with_kernels: bool) -> None:
    line = " ".join(_link_command('"$TF_DIR"', '"$CXX"', "example.cc", "example"))
    skipped = "^$" if with_kernels else r"(dot|convolution)_lib_|sort_lib\.cc"
    script = BUILD.format(march=runtime.march, link=line, flags=" ".join(RUNTIME_FLAGS),
                          kernels=skipped)
    (folder / BUILD_SCRIPT).write_text(script)


def _compile(loaded: Any, folder: Path, multithreading: bool, target: AotTarget,
             runtime: RuntimeArchive) -> None:
    """Steps 2 to 5 into ``folder``; ``model.json`` is written last (it marks a whole build)."""
    tf_dir, cxx = tensorflow_dir(), compiler()
    assert tf_dir is not None and cxx is not None  # xla_aot_facts said so
    saved = folder / "savedmodel"
    shutil.rmtree(saved, ignore_errors=True)
    inputs, outputs = _export(loaded, saved)
    cpu, flags = target.cpu, list(target.cpu_flags)
    try:
        _aot_compile(saved, folder, multithreading, cpu)
    except UnknownCpu:
        if not target.named:
            raise
        cpu, flags = target.level, level_flags(target.level)  # the level, as the fallback
        _aot_compile(saved, folder, multithreading, cpu)
    _adopter_files(folder, runtime)
    (folder / "entry.cc").write_text(ENTRY.replace(CLASS, class_name(folder)))
    kernels = _link_library(folder, tf_dir, cxx, runtime)
    if kernels:
        _write_build_script(folder, runtime, with_kernels=True)
    meta = {
        "library": LIBRARY, "header": "model.h", "class": class_name(folder),
        "target_cpu": cpu, "target_level": target.level, "cpu_flags": sorted(flags),
        "runtime_march": runtime.march, "runtime_note": runtime.note,
        "runtime_kernels": kernels,
        "multithreading": multithreading, "inputs": inputs, "outputs": outputs,
        "needs": f"libtensorflow_framework.so.2 (Abseil) from {tf_dir}, found by rpath",
    }
    (folder / "model.json").write_text(json.dumps(meta, indent=1))


def _compiled_notes(folder: Path, threads: int, multithreading: bool) -> list[str]:
    meta = json.loads((folder / "model.json").read_text())
    runs = f"multithreaded on {threads} Eigen threads" if multithreading else "single-threaded"
    notes = [f"XLA AOT for {meta['target_cpu']} (runtime {meta['runtime_march']}), {runs}"]
    return notes + ([meta["runtime_note"]] if meta.get("runtime_note") else [])


def aot_prepared(loaded: Any, config: dict) -> Prepared:
    """The model compiled ahead of time and called through ctypes (see the module docstring)."""
    if loaded.format == "tflite":
        raise ConversionError("a .tflite model runs on LiteRT; XLA AOT compiles TensorFlow models.")
    facts = xla_aot_facts()
    target = aot_target()
    if not facts["available"] or target is None:
        raise ConversionError(_missing_sentence(facts))
    threads = config.get("runtime_threads") or 1
    multithreading = threads > 1
    runtime = runtime_archive(tensorflow_dir(), compiler())  # type: ignore[arg-type]
    key = f"{target.cpu}-{runtime.path.parent.parent.name[:6]}"  # the archive's own key
    folder = artifact_dir(loaded, f"xla-aot{'-mt' if multithreading else ''}-{key}")
    with _locked(folder / ".lock"):
        cached = (folder / "model.json").exists()
        if not cached:
            started = time.perf_counter()
            _compile(loaded, folder, multithreading, target, runtime)
            compiled_in = time.perf_counter() - started
        # this tfperf's loader, also beside a library compiled by an earlier one
        (folder / "run_model.py").write_text(Path(aot_loader.__file__).read_text())
    notes = _compiled_notes(folder, threads, multithreading)
    notes.append("reused the compiled model from the cache" if cached
                 else f"{COMPILED_NOTE}{compiled_in:.1f} s")
    try:
        model = AotModel(folder, threads)
    except (OSError, RuntimeError) as exc:
        raise ConversionError(f"the compiled model cannot run: {exc}") from None
    # set_inputs, run and copy the outputs out: the same work as every other runtime's call
    call = TimedCall(lambda arrays: model(*arrays), list(inputs_of(loaded)))
    return Prepared(
        call=call,
        outputs=call,
        batch=loaded.batch,
        flops_per_call=loaded.flops_per_call,
        flops_source=loaded.flops_source,
        extra={},
        notes=[*loaded.notes, *notes, ARTIFACT_NOTE + str(folder / LIBRARY)],
        profile=_jit_stand_in(loaded),
    )


def _jit_stand_in(loaded: Any) -> Any:
    """XLA AOT code has no profiler: XLA JIT's profile of the same graph stands in for it,
    marked as such (the JIT function is built only when a profile is asked for), with XLA JIT's
    own unprofiled calls, so that its profiler's overhead compares XLA JIT with itself."""

    def run(calls: int) -> Any:
        from tfperf.worker.tfrun import tf_prepared

        jit = tf_prepared(loaded, {"xla": "jit"})
        for _ in range(3):  # compile and settle outside the profile
            jit.call()
        plain = timed_calls(jit.call, calls)
        profile = tf_profiler(jit.call, lambda: layer_table(loaded.model, loaded.batch), True,
                              stand_in=STAND_IN)
        return replace(profile(calls), plain_s=plain)

    return run


if __name__ == "__main__":
    sys.exit(main())
