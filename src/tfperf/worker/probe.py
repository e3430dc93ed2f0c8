"""The install audit that runs next to TensorFlow (worker side).

Two entry points:

- :func:`describe_install` -- cheap facts about the TensorFlow already imported in this process
  (version, distribution and channel, build info, Python, oneDNN on/off and why, XLA). The bench
  worker puts it in its ``ready`` message.
- ``python -m tfperf.worker.probe --out FILE`` -- doctor's full probe. It inherits the user's
  environment (the parent adds only ``TF_CPP_MIN_LOG_LEVEL=0``), sends its own fd 2 to
  ``FILE.stderr`` while it imports TensorFlow so that cpu_feature_guard's lines can be parsed,
  runs a few small ops (so oneDNN, the thread pools and the allocator are really in use), and
  writes one JSON record to ``FILE`` (with the Keras backend in use and whether jax imports:
  :mod:`tfperf.core.kerasbackend`). If TensorFlow cannot be imported the record says why
  (``status``: ``not_installed`` or ``import_failed``); if the process dies, ``FILE.stderr`` is
  what the parent reads to say why.

TensorFlow is imported inside functions only: importing this module costs nothing.
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import importlib.metadata as md
import json
import os
import platform
import re
import struct
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from tfperf.core.allocators import current_allocator
from tfperf.core.aot import xla_aot_facts
from tfperf.core.isa import NEURAL_FEATURES, isa_from_flags, onednn_default_for, parse_cpuinfo
from tfperf.core.kerasbackend import keras_backend_facts
from tfperf.core.paths import read_text
from tfperf.core.perfenv import perf_env
from tfperf.core.tflog import parse_tf_log

TF_DISTRIBUTIONS: dict[str, str] = {
    "tensorflow": "pypi",
    "tensorflow-cpu": "pypi",
    "tensorflow-gpu": "pypi",
    "tf-nightly": "nightly",
    "tf-nightly-cpu": "nightly",
    "tf-nightly-gpu": "nightly",
    "intel-tensorflow": "intel",
    "intel-tensorflow-avx512": "intel",
    "tensorflow-intel": "intel",
    "tensorflow-macos": "apple",
    "tensorflow-aarch64": "aarch64",
    "tensorflow-cpu-aws": "aws",
    "tensorflow-rocm": "rocm",
}
"""Known distributions that install the ``tensorflow`` package, and the channel each means."""

_OPENMP_RUNTIMES = re.compile(
    r"/(libgomp[^/\s]*\.so[^/\s]*|libiomp5[^/\s]*\.so|libomp\.so[^/\s]*)$"
)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _provides_tensorflow(dist: md.Distribution) -> bool:
    top = dist.read_text("top_level.txt")
    if top is not None:
        return "tensorflow" in top.split()
    return any(str(f) == "tensorflow/__init__.py" for f in dist.files or [])


def tensorflow_distributions() -> list[dict[str, Any]]:
    """Every installed distribution that provides the ``tensorflow`` package.

    Each item: ``name``, ``version``, ``channel`` (pypi / nightly / intel / apple / aarch64 /
    aws / rocm / conda / local wheel / unknown), ``installer`` and ``location``.
    """
    found: dict[str, dict[str, Any]] = {}
    for dist in md.distributions():
        name = _canonical(dist.metadata.get("Name") or "")
        if not (name in TF_DISTRIBUTIONS or name.startswith(("tensorflow", "tf-nightly"))):
            continue
        if not _provides_tensorflow(dist):
            continue
        installer = (dist.read_text("INSTALLER") or "").strip() or None
        channel = TF_DISTRIBUTIONS.get(name, "unknown")
        direct = dist.read_text("direct_url.json")
        if direct:
            try:
                url = json.loads(direct).get("url", "")
            except ValueError:
                url = ""
            if url.startswith("file:"):
                channel = "local wheel"
        if installer == "conda" or _conda_owns(name):
            channel = "conda"
        if ".dev" in (dist.version or "") and channel == "pypi":
            channel = "nightly"
        location = str(dist.locate_file(""))
        found.setdefault(
            f"{name}@{location}",
            {
                "name": name,
                "version": dist.version,
                "channel": channel,
                "installer": installer,
                "location": location,
            },
        )
    return sorted(found.values(), key=lambda d: d["name"])


def _conda_owns(name: str) -> bool:
    meta = os.path.join(sys.prefix, "conda-meta")
    if not os.path.isdir(meta):
        return False
    stems = (name, name.replace("tensorflow", "tensorflow-base"))
    return any(f.startswith(stems) and f.endswith(".json") for f in os.listdir(meta))


def _util_port() -> Any:
    try:
        from tensorflow.python.util import _pywrap_util_port

        return _pywrap_util_port
    except ImportError:
        return None


def _onednn(port: Any) -> dict[str, Any]:
    """oneDNN on or off in this process, and why."""

    enabled = bool(port.IsMklEnabled()) if port is not None else None
    value = os.environ.get("TF_ENABLE_ONEDNN_OPTS")
    if value is not None:
        why = f"TF_ENABLE_ONEDNN_OPTS={value} is set"
        source = "env"
    else:
        source = "build default"
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as fh:
                cpu_isa = isa_from_flags(parse_cpuinfo(fh.read())["flags"])
        except OSError:
            cpu_isa = []
        has = [n for n in NEURAL_FEATURES if n in cpu_isa]
        if platform.machine() in ("x86_64", "AMD64") and sys.platform.startswith("linux"):
            why = (
                "build default: x86 Linux builds turn oneDNN on for CPUs with "
                + "/".join(NEURAL_FEATURES)
                + (f"; this CPU has {' '.join(has)}" if has else "; this CPU has none of them")
            )
            if enabled is not None and enabled != onednn_default_for(cpu_isa):
                why = f"build default of this distribution ({'on' if enabled else 'off'})"
        else:
            why = "build default of this platform"
    return {"enabled": enabled, "source": source, "why": why}


CUDA_WHEELS: dict[str, tuple[str, ...]] = {
    "cudnn": ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-cu11"),
    "cuda_runtime": (
        "nvidia-cuda-runtime-cu13",
        "nvidia-cuda-runtime-cu12",
        "nvidia-cuda-runtime-cu11",
    ),
}
"""The pip wheels that bring CUDA libraries (what ``tensorflow[and-cuda]`` installs)."""


def cuda_wheels() -> dict[str, str | None]:
    """Versions of the installed CUDA runtime and cuDNN wheels (``None`` where absent)."""
    found: dict[str, str | None] = {}
    for key, names in CUDA_WHEELS.items():
        found[key] = None
        for name in names:
            try:
                found[key] = md.version(name)
                break
            except md.PackageNotFoundError:
                continue
    return found


def _build_info(tf: Any) -> dict[str, Any]:
    try:
        info = dict(tf.sysconfig.get_build_info())
    except Exception:  # very old releases have no build info
        return {}
    return {k: v for k, v in info.items() if isinstance(v, (str, int, float, bool)) or v is None}


def describe_install() -> dict[str, Any]:
    """Cheap facts about the TensorFlow already imported in this process (imports it if not)."""
    import tensorflow as tf

    port = _util_port()
    dists = tensorflow_distributions()
    version = getattr(tf, "__version__", None)
    active = next(
        (d for d in dists if os.path.dirname(os.path.dirname(tf.__file__)) == d["location"]),
        dists[0] if dists else None,
    )
    return {
        "tf_version": version,
        "git_version": getattr(getattr(tf, "version", None), "GIT_VERSION", None),
        "compiler": getattr(getattr(tf, "version", None), "COMPILER_VERSION", None),
        "path": os.path.dirname(tf.__file__),
        "distribution": active,
        "distributions": dists,
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "build": _build_info(tf),
        "cuda_wheels": cuda_wheels(),
        "onednn": _onednn(port),
        "xla_available": bool(port.IsBuiltWithXLA()) if port is not None else None,
        "allocator": current_allocator(),
    }


def effective_threads(getter: int, env_value: str | None, schedulable: int) -> dict[str, Any]:
    """TensorFlow's real pool size when its getter returns ``getter`` (0 means default).

    TensorFlow's rule (``process_util.cc``, ``local_device.cc``): a value set through the API
    wins; otherwise ``TF_NUM_INTRAOP_THREADS``/``TF_NUM_INTEROP_THREADS`` when a positive integer;
    otherwise ``port::MaxParallelism()``, the CPUs in the process's affinity mask. The CFS quota
    of a container is not taken into account by TensorFlow.
    """
    if getter > 0:
        return {"effective": getter, "source": "set through tf.config.threading"}
    try:
        env_num = int(env_value) if env_value is not None else 0
    except ValueError:
        env_num = 0
    if env_num > 0:
        return {"effective": env_num, "source": "environment"}
    return {"effective": schedulable, "source": "default: CPUs in the affinity mask"}


def _threads(tf: Any) -> dict[str, Any]:
    schedulable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    threading = tf.config.threading
    intra_get = int(threading.get_intra_op_parallelism_threads())
    inter_get = int(threading.get_inter_op_parallelism_threads())
    intra = effective_threads(intra_get, os.environ.get("TF_NUM_INTRAOP_THREADS"), schedulable)
    inter = effective_threads(inter_get, os.environ.get("TF_NUM_INTEROP_THREADS"), schedulable)
    # TensorFlow names its inter-op pool threads "tf_Compute": count them as a cross-check.
    observed = _thread_names().get("tf_Compute")
    inter["observed_threads"] = observed
    return {
        "intra_op": {"getter": intra_get, **intra},
        "inter_op": {"getter": inter_get, **inter},
    }


def _thread_names() -> dict[str, int]:
    names: dict[str, int] = {}
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return names
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/comm", encoding="utf-8") as fh:
                name = fh.read().strip()
        except OSError:
            continue
        names[name] = names.get(name, 0) + 1
    return names


def elf_needed(path: str) -> list[str]:
    """The ``DT_NEEDED`` libraries of a 64-bit little-endian ELF file (``[]`` if not one).

    Reads only the section headers, the ``.dynamic`` section and the few strings it names, so
    it stays fast on TensorFlow's largest libraries.
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return []
            shoff = struct.unpack_from("<Q", head, 0x28)[0]
            shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
            fh.seek(shoff)
            table = fh.read(shentsize * shnum)
            sections = [
                struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize) for i in range(shnum)
            ]
            dynamic = next((sec for sec in sections if sec[1] == 6), None)  # SHT_DYNAMIC
            if dynamic is None or dynamic[6] >= len(sections):
                return []
            fh.seek(dynamic[4])
            raw = fh.read(dynamic[5])
            strtab_offset = sections[dynamic[6]][4]
            needed = []
            for i in range(0, len(raw) - 15, 16):
                tag, value = struct.unpack_from("<qQ", raw, i)
                if tag == 0:
                    break
                if tag == 1:  # DT_NEEDED
                    fh.seek(strtab_offset + value)
                    needed.append(fh.read(256).split(b"\0", 1)[0].decode(errors="replace"))
            return needed
    except (OSError, struct.error):
        return []


def openmp_usage(tf_dir: str, maps_text: str) -> dict[str, Any]:
    """Whether TensorFlow's own libraries use OpenMP, and which OpenMP runtimes are mapped.

    ``linked`` is true when a TensorFlow shared library mapped into this process needs an
    OpenMP runtime (``DT_NEEDED``: libgomp, libiomp5, libomp); only then do ``OMP_*`` and
    ``KMP_*`` variables reach TensorFlow's kernels. ``mapped`` lists OpenMP runtimes in the
    process (another library, such as scikit-learn or an MKL numpy, may bring its own).
    """
    paths = set()
    mapped = set()
    for line in maps_text.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5].startswith("/"):
            path = parts[5].strip()
            if path.startswith(tf_dir + os.sep) and ".so" in path:
                paths.add(path)
            if _OPENMP_RUNTIMES.search(path):
                mapped.add(path)
    users = sorted(
        os.path.relpath(p, tf_dir)
        for p in paths
        if any(_OPENMP_RUNTIMES.search("/" + lib) for lib in elf_needed(p))
    )
    return {
        "linked": bool(users),
        "linked_by": users,
        "libraries_checked": len(paths),
        "mapped": sorted(mapped),
    }


OPTIONAL_IMPORTS = {
    "sklearn": ("scikit-learn", "keras.wrappers"),
    "matplotlib": ("matplotlib", "keras.visualization"),
    "jax": ("jax", "tensorflow.lite"),
}
"""Packages TensorFlow or keras imports whenever they are installed and no model needs to run, by
module name: the distribution that installs each and the module that imports it."""


class ImportClock(importlib.abc.MetaPathFinder):
    """Times the import of the packages ``names``, each with its submodules and everything they
    import in turn (``matplotlib.pyplot`` counts for matplotlib).

    Placed first on ``sys.meta_path``, it finds their modules as the path finder would and wraps
    the loaders; ``seconds`` maps each package imported to its seconds. An import nested in
    another one timed here counts once, for the outer one.
    """

    def __init__(self, names: Any) -> None:
        self.names = frozenset(names)
        self.seconds: dict[str, float] = {}
        self.depth = 0

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname.partition(".")[0] not in self.names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _TimedLoader(spec.loader, self)
        return spec


class _TimedLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, clock: ImportClock) -> None:
        self._loader, self._clock = loader, clock

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        clock = self._clock
        clock.depth += 1
        started = time.perf_counter()
        try:
            self._loader.exec_module(module)
        finally:
            clock.depth -= 1
            if clock.depth == 0:
                package = module.__name__.partition(".")[0]
                elapsed = time.perf_counter() - started
                clock.seconds[package] = clock.seconds.get(package, 0.0) + elapsed

    def __getattr__(self, name: str) -> Any:  # resource readers, get_data, ...
        return getattr(self._loader, name)


def _exercise(tf: Any) -> None:
    """Run a matmul and a conv (oneDNN kernels when oneDNN is on) so pools and libs are live."""
    x = tf.random.normal((64, 64))
    tf.matmul(x, x).numpy()
    image = tf.random.normal((1, 16, 16, 8))
    kernel = tf.random.normal((3, 3, 8, 8))
    tf.nn.conv2d(image, kernel, 1, "SAME").numpy()


def full_probe(stderr_path: str) -> dict[str, Any]:
    """Import TensorFlow with fd 2 sent to ``stderr_path`` and audit it (see the module doc)."""

    record: dict[str, Any] = {"status": "ok", "env": perf_env()}
    saved = os.dup(2)
    clock = ImportClock(OPTIONAL_IMPORTS)
    sys.meta_path.insert(0, clock)
    started = time.perf_counter()
    with open(stderr_path, "wb", buffering=0) as capture:
        os.dup2(capture.fileno(), 2)
        try:
            try:
                import tensorflow as tf
            except ModuleNotFoundError as exc:
                missing = exc.name == "tensorflow" or str(exc).startswith(
                    "No module named 'tensorflow'"
                )
                record["status"] = "not_installed" if missing else "import_failed"
                record["error"] = _error(exc)
                return record
            except BaseException as exc:  # TensorFlow raising anything on import
                record["status"] = "import_failed"
                record["error"] = _error(exc)
                return record
            record["import_s"] = time.perf_counter() - started
            record["optional_imports"] = [
                {
                    "module": name,
                    "distribution": OPTIONAL_IMPORTS[name][0],
                    "imported_by": OPTIONAL_IMPORTS[name][1],
                    "seconds": seconds,
                }
                for name, seconds in sorted(clock.seconds.items())
            ]
            _exercise(tf)
        finally:
            sys.meta_path.remove(clock)
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            log_text = read_text(stderr_path)
            record["log"] = parse_tf_log(log_text)
    record.update(describe_install())
    record["allocator"] = current_allocator()
    record["isa_missing"] = record["log"]["isa_missing"]
    record["threads"] = _threads(tf)
    record["openmp"] = openmp_usage(record["path"], read_text("/proc/self/maps"))
    record["xla_aot"] = xla_aot_probe(record["path"])
    record.update(keras_backend_facts())
    try:
        record["gpus_visible"] = [d.name for d in tf.config.list_physical_devices("GPU")]
    except Exception as exc:  # a broken CUDA setup raises here
        record["gpus_visible"] = []
        record["gpu_error"] = f"{type(exc).__name__}: {exc}"
    return record


def xla_aot_probe(tf_dir: str) -> dict[str, Any]:
    """:func:`tfperf.core.aot.xla_aot_facts` for this TensorFlow, with the compiler's Python
    wrapper really imported (a file that is there but does not load is missing too)."""
    facts = xla_aot_facts(Path(tf_dir))
    if not any("aot_compile_cpu" in m for m in facts["missing"]):
        try:
            from tensorflow.python import _pywrap_tfcompile  # noqa: F401
        except Exception as exc:  # a broken wrapper: the command cannot run
            facts["missing"].append(
                f"the aot_compile_cpu command (importing _pywrap_tfcompile failed: {exc})"
            )
            facts["available"] = False
    return facts


def _error(exc: BaseException) -> dict[str, str]:
    tail = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return {
        "type": type(exc).__name__,
        "message": f"{type(exc).__name__}: {exc}".strip(),
        "traceback_tail": "".join(tail[-3:])[-2000:],
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m tfperf.worker.probe --out FILE``: write the full probe's JSON record to FILE."""
    parser = argparse.ArgumentParser(prog="python -m tfperf.worker.probe")
    parser.add_argument("--out", required=True, help="where to write the JSON record")
    args = parser.parse_args(argv)
    try:
        record = full_probe(args.out + ".stderr")
    except Exception as exc:  # TensorFlow imported but failed to run an op or report itself
        record = {"status": "import_failed", "env": perf_env(), "error": _error(exc)}
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(record, fh, default=str)
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # The record is on disk: skip TensorFlow's teardown, which only delays the parent.
    os._exit(code)
