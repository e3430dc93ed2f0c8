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
:func:`runtime_archive_path` is where the runtime archive for this install and compiler is
cached, :func:`runtime_built` whether it is there already (its first build takes minutes on a
small machine, so tune tries ``xla-aot`` unasked only once it is built).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tfperf.core.aot_loader import host_target
from tfperf.core.paths import cache_dir

__all__ = [
    "compiler",
    "host_target",
    "runtime_archive_path",
    "runtime_built",
    "runtime_march",
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


def runtime_march() -> str:
    """The ``-march`` the runtime archive is built with."""
    # Eigen's matmuls and convolutions (the dot and convolution thunks) live in the archive:
    # built for the baseline x86-64 they would run SSE2 code on an AVX-512 machine (x86-64-v3
    # at most: with AVX-512 this Eigen's spatial-convolution packers do not compile).
    level = host_target() or "x86-64"
    return f"-march={'x86-64-v3' if level == 'x86-64-v4' else level}"


def runtime_archive_path(tf_dir: Path, cxx: str) -> Path:
    """Where ``libtf_xla_runtime.a`` for this install's sources, ``cxx`` and the flags is
    cached (built or not)."""
    stat = (tf_dir / "xla_aot_runtime_src" / "CMakeLists.txt").stat()
    key = f"{tf_dir}|{stat.st_size}|{stat.st_mtime_ns}|{cxx}|{runtime_march()}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_dir() / "xla-aot-runtime" / digest / "build" / "libtf_xla_runtime.a"


def runtime_built() -> bool:
    """Whether the runtime archive of this install and compiler is built and cached."""
    tf_dir, cxx = tensorflow_dir(), compiler()
    if tf_dir is None or cxx is None:
        return False
    sources = tf_dir / "xla_aot_runtime_src" / "CMakeLists.txt"
    return sources.is_file() and runtime_archive_path(tf_dir, cxx).is_file()
