"""Whether this install can compile a model ahead of time with XLA (the ``xla-aot`` runtime).

Contract: :func:`xla_aot_facts` ``(tf_dir=None, environ=None)`` returns ``{"available": bool,
"missing": [...]}``, each missing item one phrase that names the piece and its fix. It reads
files and ``PATH`` only, never imports TensorFlow, so the doctor's probe, tune's space (in the
parent) and the worker that compiles all ask the same question the same way. What is needed:

- ``tensorflow/python/_pywrap_tfcompile`` (what ``saved_model_cli aot_compile_cpu`` calls:
  upstream calls tfcompile deprecated, so each install is probed, not assumed);
- ``tensorflow/xla_aot_runtime_src`` (the runtime the compiled code links against, built once
  with cmake) and ``tensorflow/include`` (its headers);
- a C++ compiler (``$CXX``, else ``g++``) and ``cmake``;
- an x86-64 CPU (the target tfperf names for the compiler: :func:`host_target`).

:func:`compiler` is the C++ compiler that will be used (``None`` when there is none).

:func:`aot_target` is what a model is compiled for here (:class:`AotTarget`): the CPU's own
LLVM name where archspec knows this microarchitecture (``icelake-client``, ``znver4``,
``sapphirerapids``: its features follow from the name, AVX-512 VNNI and BF16 included where it
has them), else the x86-64 level; with the ``/proc/cpuinfo`` flags that code may use, which
the loader checks before it runs a library.

:func:`runtime_marches` are the ``-march`` flags the runtime archive is tried with, in order:
the CPU's own name first, the level as the fallback (this TensorFlow's Eigen may not compile
with every instruction set). :func:`runtime_archive_path` is where the archive for this
install, compiler and flags is cached, :func:`runtime_built` whether one is there already (its
first build takes minutes on a small machine, so tune tries ``xla-aot`` unasked only once it
is built).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfperf.core.aot_loader import host_target, level_flags
from tfperf.core.paths import cache_dir

__all__ = [
    "AotTarget",
    "aot_target",
    "compiler",
    "host_target",
    "runtime_archive_path",
    "runtime_built",
    "runtime_marches",
    "tensorflow_dir",
    "xla_aot_facts",
]

WHEEL = "the pip tensorflow wheel for Linux x86-64 ships it"


def tensorflow_dir() -> Path | None:
    """The folder of the ``tensorflow`` package this interpreter imports (not imported)."""
    try:
        spec = importlib.util.find_spec("tensorflow")
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


def compiler(environ: Mapping[str, str] | None = None) -> str | None:
    """The C++ compiler: ``$CXX`` when set (``None`` if it is not found), else ``g++``."""
    environ = os.environ if environ is None else environ
    name = environ.get("CXX", "").strip() or "g++"
    return shutil.which(name, path=environ.get("PATH"))


def xla_aot_facts(
    tf_dir: Path | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``{"available", "missing"}`` for this install (see the module docstring)."""
    environ = os.environ if environ is None else environ
    tf_dir = tf_dir or tensorflow_dir()
    missing: list[str] = []
    if tf_dir is None:
        missing.append("TensorFlow (pip install tensorflow)")
    else:
        if not any((tf_dir / "python").glob("_pywrap_tfcompile*")):
            missing.append(
                "the aot_compile_cpu command (this TensorFlow has no "
                f"tensorflow/python/_pywrap_tfcompile; {WHEEL})"
            )
        if not (tf_dir / "xla_aot_runtime_src" / "CMakeLists.txt").is_file():
            missing.append(f"the XLA AOT runtime sources (tensorflow/xla_aot_runtime_src; {WHEEL})")
        if not (tf_dir / "include" / "tensorflow").is_dir():
            missing.append(f"TensorFlow's C++ headers (tensorflow/include; {WHEEL})")
    if compiler(environ) is None:
        named = environ.get("CXX", "").strip()
        missing.append(
            f"a C++ compiler (CXX={named} is not found; set CXX to one)"
            if named
            else "a C++ compiler (apt-get install g++, or set CXX)"
        )
    if shutil.which("cmake", path=environ.get("PATH")) is None:
        missing.append("cmake, to build the AOT runtime once (apt-get install cmake)")
    if host_target() is None:
        missing.append("an x86-64 CPU (tfperf compiles ahead of time for x86-64 only)")
    return {"available": not missing, "missing": missing}


LLVM_NAMES_OF = ("clang", "19.1.0")
"""The compiler whose CPU names archspec is asked for: XLA's LLVM in TensorFlow 2.21 is newer
and knows every name clang 19 does (``znver5`` and ``graniterapids`` included)."""


@dataclass(frozen=True)
class AotTarget:
    """What XLA AOT compiles a model for on this machine (see the module docstring)."""

    cpu: str
    """``--target_cpu``: the LLVM name of this CPU, or its x86-64 level."""
    level: str
    """This CPU's x86-64 level (the fallback, and the floor of the runtime archive)."""
    cpu_flags: tuple[str, ...]
    """The ``/proc/cpuinfo`` flags code compiled for :attr:`cpu` may use."""
    named: bool
    """Whether :attr:`cpu` is the CPU's own name (``False``: the level)."""


def _named_cpu() -> tuple[str, tuple[str, ...]] | None:
    """archspec's microarchitecture of this host (or its nearest ancestor clang names) as an
    LLVM CPU name, with its features; ``None`` where archspec knows none."""
    try:
        import archspec.cpu

        host = archspec.cpu.host()
    except Exception:  # archspec cannot read this machine
        return None
    for uarch in (host, *host.ancestors):
        try:
            flags = uarch.optimization_flags(*LLVM_NAMES_OF)
        except Exception:  # a name this compiler does not know: try the ancestor
            continue
        found = re.search(r"-march=(\S+)", flags)
        if found and not found.group(1).startswith("x86-64"):
            return found.group(1), tuple(sorted(uarch.features))
    return None


LEVEL_ONLY_ENV = "TFPERF_AOT_TARGET"
"""Set to ``level`` (through a config's env) to compile for the x86-64 level alone: what
``benchmarks/xla_aot_suite.py`` measures the CPU's own name against."""


def aot_target() -> AotTarget | None:
    """What a model is compiled for here; ``None`` off x86-64."""
    level = host_target()
    if level is None:
        return None
    named = None if os.environ.get(LEVEL_ONLY_ENV) == "level" else _named_cpu()
    if named is None:
        return AotTarget(level, level, tuple(level_flags(level)), named=False)
    return AotTarget(named[0], level, named[1], named=True)


def _level_march(level: str) -> str:
    # with AVX-512 this Eigen's spatial-convolution packers may not compile: x86-64-v3 at most
    return f"-march={'x86-64-v3' if level == 'x86-64-v4' else level}"


def runtime_marches(target: AotTarget | None = None) -> list[str]:
    """The ``-march`` flags the runtime archive is tried with, best first."""
    target = target or aot_target()
    if target is None:
        return ["-march=x86-64"]
    fallback = _level_march(target.level)
    own = f"-march={target.cpu}"
    return [own, fallback] if target.named and own != fallback else [fallback]


def runtime_archive_path(tf_dir: Path, cxx: str, march: str) -> Path:
    """Where ``libtf_xla_runtime.a`` for this install's sources, ``cxx`` and ``march`` is
    cached (built or not)."""
    stat = (tf_dir / "xla_aot_runtime_src" / "CMakeLists.txt").stat()
    key = f"{tf_dir}|{stat.st_size}|{stat.st_mtime_ns}|{cxx}|{march}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_dir() / "xla-aot-runtime" / digest / "build" / "libtf_xla_runtime.a"


def runtime_built() -> bool:
    """Whether a runtime archive of this install and compiler is built and cached."""
    tf_dir, cxx = tensorflow_dir(), compiler()
    if tf_dir is None or cxx is None:
        return False
    sources = tf_dir / "xla_aot_runtime_src" / "CMakeLists.txt"
    return sources.is_file() and any(
        runtime_archive_path(tf_dir, cxx, march).is_file() for march in runtime_marches()
    )
