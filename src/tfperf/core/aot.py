"""Whether this install can compile a model ahead of time with XLA (the ``xla-aot`` runtime).

Contract: :func:`xla_aot_facts` ``(tf_dir=None, environ=None)`` returns ``{"available": bool,
"missing": [...]}``, each missing item one phrase that names the piece and its fix. It reads
files and ``PATH`` only, never imports TensorFlow, so the doctor's probe, tune's space (in the
parent) and the worker that compiles all ask the same question the same way. What is needed:

- ``tensorflow/python/_pywrap_tfcompile`` (what ``saved_model_cli aot_compile_cpu`` calls:
  upstream calls tfcompile deprecated, so each install is probed, not assumed);
- ``tensorflow/xla_aot_runtime_src`` (the runtime the compiled code links against, built once)
  and ``tensorflow/include`` (its headers);
- a C++ compiler (``$CXX``, else ``g++``) and ``ar`` (binutils, which comes with it);
- an x86-64 CPU (the target tfperf names for the compiler: :func:`host_target`).

:func:`compiler` is the C++ compiler that will be used (``None`` when there is none).

:func:`aot_target` is what a model is compiled for here (:class:`AotTarget`): the CPU's own
LLVM name where archspec knows this microarchitecture (``icelake-client``, ``znver4``,
``sapphirerapids``: its features follow from the name, AVX-512 VNNI and BF16 included where it
has them), else the x86-64 level; with the ``/proc/cpuinfo`` flags that code may use, which
the loader checks before it runs a library.

:func:`runtime_marches` are the ``-march`` flags the runtime archive is tried with, in order:
the CPU's own name first, the level as the fallback (this TensorFlow's Eigen may not compile
with every instruction set); :data:`RUNTIME_FLAGS` the other flags of every runtime source.
:func:`runtime_sources` splits the runtime's sources into the ones every compiled model links
(its entry point, allocator, run options) and the kernel libraries (Eigen dots, convolutions,
sort) that only a model whose code calls them needs. :func:`runtime_archive_path` is where the
archive for this install, compiler and flags is cached.
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
    "RUNTIME_FLAGS",
    "AotTarget",
    "aot_target",
    "compiler",
    "host_target",
    "runtime_archive_path",
    "runtime_marches",
    "runtime_sources",
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
    if shutil.which("ar", path=environ.get("PATH")) is None:
        missing.append("ar, to archive the AOT runtime (apt-get install binutils)")
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


RUNTIME_FLAGS = (
    "-std=c++17", "-O3", "-DNDEBUG", "-fPIC", "-w", "-ftemplate-backtrace-limit=0",
    # Eigen's own AVX-512 GEMM packers and TensorFlow's contraction kernel both specialise
    # gemm_pack_rhs: with both, no AVX-512 -march compiles
    "-DEIGEN_USE_AVX512_GEMM_KERNELS=0",
)
"""What every runtime source is compiled with, besides ``-march`` and the include folders."""

_KERNEL_LIBRARY = re.compile(r"(?:^|/)(?:(?:dot|convolution)_lib_\w+|sort_lib)\.cc$")


def runtime_sources(tf_dir: Path) -> tuple[list[Path], list[Path]]:
    """The runtime's ``.cc`` files: (what every model links, the kernel libraries)."""
    every = sorted((tf_dir / "xla_aot_runtime_src").rglob("*.cc"))
    kernels = [p for p in every if _KERNEL_LIBRARY.search(p.as_posix())]
    return [p for p in every if p not in kernels], kernels


def _level_march(level: str) -> str:
    return f"-march={level}"


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
    flags = " ".join(RUNTIME_FLAGS)
    key = f"{tf_dir}|{stat.st_size}|{stat.st_mtime_ns}|{cxx}|{march}|{flags}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_dir() / "xla-aot-runtime" / digest / "build" / "libtf_xla_runtime.a"
