"""Run a model compiled ahead of time by XLA (``tfperf``'s ``xla-aot`` runtime) on NumPy arrays.

Contract: this file stands alone (the standard library and NumPy only) so that it can be copied
next to a compiled model and used by a server that has neither TensorFlow nor tfperf: tfperf's
worker times the model through it, and ``tfperf tune --out-dir`` writes it beside the shared
library as ``aot_model.py``.

- :func:`host_flags` is the set of instruction-set flags this CPU reports (``/proc/cpuinfo``).
- :func:`host_target` is the x86-64 level this machine's instructions allow (``x86-64-v4`` where
  AVX-512 F/BW/CD/DQ/VL are all present, ``x86-64-v3`` with AVX2/FMA/BMI, ``x86-64-v2``,
  ``x86-64``), or ``None`` off x86-64; :func:`level_flags` the flags a level needs. The model
  itself is compiled for the CPU's own LLVM name where one is known (``tfperf.core.aot``), the
  level otherwise; ``model.json`` records the name (``target_cpu``) and the flags that code may
  use (``cpu_flags``).
- :class:`AotModel` ``(folder)`` loads ``folder/model.json`` and the shared library it names,
  refuses (``RuntimeError``, one sentence) a library compiled for a CPU whose instructions this
  one lacks (its ``cpu_flags``; the level, for a ``model.json`` without them), and
  runs it: :meth:`AotModel.set_inputs` copies the arrays into the compiled function's own
  buffers, :meth:`AotModel.run` calls it, :meth:`AotModel.outputs` copies its results out,
  :meth:`AotModel.__call__` does all three. ``threads`` > 1 runs a library compiled with XLA's
  multithreading on an Eigen pool of that many threads.
"""

from __future__ import annotations

import ctypes
import json
import platform
from pathlib import Path
from typing import Any

_LEVELS = (
    ("x86-64-v4", ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")),
    ("x86-64-v3", ("avx2", "fma", "bmi1", "bmi2", "movbe", "f16c")),
    ("x86-64-v2", ("sse4_2", "ssse3", "popcnt")),
)


_ALIASES = {"pni": "sse3"}
"""Flags the kernel names otherwise than the instruction set (and archspec) does."""


def host_flags(cpuinfo: str | None = None) -> set[str]:
    """The instruction-set flags of this CPU as ``/proc/cpuinfo`` names them (empty where it
    cannot be read)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags = set(line.partition(":")[2].split())
            return flags | {_ALIASES[f] for f in flags if f in _ALIASES}
    return set()


def host_target(cpuinfo: str | None = None) -> str | None:
    """The x86-64 level this machine runs (see the module docstring); ``None`` off x86-64."""
    if cpuinfo is None and platform.machine() not in ("x86_64", "AMD64"):
        return None
    flags = host_flags(cpuinfo)
    for name, needs in _LEVELS:
        if all(f in flags for f in needs):
            return name
    return "x86-64"


def level_flags(level: str) -> list[str]:
    """The flags code compiled for ``level`` may use (those of every level up to it)."""
    names = [name for name, _ in _LEVELS]
    if level not in names:
        return []
    return sorted({f for name, needs in _LEVELS[names.index(level):] for f in needs})


def runs_here(target: str | None, here: str | None) -> bool:
    """Whether code compiled for the level ``target`` runs on a CPU of level ``here``."""
    names = ["x86-64", *(name for name, _ in reversed(_LEVELS))]
    return target in names and here in names and names.index(here) >= names.index(target)


def refusal(meta: dict[str, Any], cpuinfo: str | None = None) -> str | None:
    """Why a library described by ``meta`` (its ``model.json``) cannot run here, or ``None``."""
    built = meta.get("target_cpu")
    needs = meta.get("cpu_flags")
    if needs is not None:
        lacking = sorted(set(needs) - host_flags(cpuinfo))
        if lacking:
            shown = ", ".join(lacking[:6]) + (" ..." if len(lacking) > 6 else "")
            return f"was compiled for {built} CPUs and this one lacks {shown}"
        return None
    here = host_target(cpuinfo)
    if not runs_here(built, here):
        return f"was compiled for {built} CPUs and this one runs {here or platform.machine()}"
    return None


def _bind(lib: Any) -> None:
    handle, size = ctypes.c_void_p, ctypes.c_size_t
    signatures = {
        "tfperf_aot_create": (handle, [ctypes.c_int]),
        "tfperf_aot_destroy": (None, [handle]),
        "tfperf_aot_arg_index": (ctypes.c_int, [handle, ctypes.c_char_p]),
        "tfperf_aot_result_index": (ctypes.c_int, [handle, ctypes.c_char_p]),
        "tfperf_aot_arg_data": (ctypes.c_void_p, [handle, ctypes.c_int]),
        "tfperf_aot_arg_size": (size, [handle, ctypes.c_int]),
        "tfperf_aot_result_data": (ctypes.c_void_p, [handle, ctypes.c_int]),
        "tfperf_aot_result_size": (size, [handle, ctypes.c_int]),
        "tfperf_aot_run": (ctypes.c_int, [handle]),
        "tfperf_aot_error": (ctypes.c_char_p, [handle]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes


class AotModel:
    """A compiled model of ``folder`` (its ``model.json`` and shared library), ready to run."""

    def __init__(self, folder: str | Path, threads: int | None = None) -> None:
        # NumPy is loaded here, not with the module: tfperf's doctor reads host_target() from
        # it without loading NumPy.
        import numpy

        self._np = numpy
        folder = Path(folder).resolve()  # a bare file name would be looked up in the library path
        self.meta = json.loads((folder / "model.json").read_text())
        refused = refusal(self.meta)
        if refused:
            raise RuntimeError(
                f"{folder / self.meta['library']} {refused}: compile it again on this machine."
            )
        self._lib = ctypes.CDLL(str(folder / self.meta["library"]))
        _bind(self._lib)
        pool = (threads or 1) if self.meta.get("multithreading") else 0
        self._handle = self._lib.tfperf_aot_create(pool)
        self._args = [self._index("arg", spec) for spec in self.meta["inputs"]]
        self._results = [self._index("result", spec) for spec in self.meta["outputs"]]

    def _index(self, kind: str, spec: dict[str, Any]) -> int:
        prefix = "feed_" if kind == "arg" else "fetch_"
        find = getattr(self._lib, f"tfperf_aot_{kind}_index")
        index = find(self._handle, (prefix + spec["name"]).encode())
        size = getattr(self._lib, f"tfperf_aot_{kind}_size")(self._handle, index)
        np = self._np
        want = int(np.prod(spec["shape"], dtype=np.int64)) * np.dtype(spec["dtype"]).itemsize
        if index < 0 or size != want:
            raise RuntimeError(f"{spec['name']} does not match the compiled model's {kind}s.")
        return index

    def set_inputs(self, arrays: list[Any]) -> None:
        """Copy one array per input (``model.json``'s order, shapes and dtypes) into the model."""
        for spec, index, array in zip(self.meta["inputs"], self._args, arrays):  # noqa: B905
            data = self._np.ascontiguousarray(array, dtype=spec["dtype"])
            if list(data.shape) != list(spec["shape"]):
                raise ValueError(f"{spec['name']} takes shape {spec['shape']}, not {data.shape}.")
            ctypes.memmove(self._lib.tfperf_aot_arg_data(self._handle, index), data.ctypes.data,
                           data.nbytes)

    def run(self) -> None:
        """One call of the compiled function on the inputs set last."""
        if not self._lib.tfperf_aot_run(self._handle):
            raise RuntimeError(self._lib.tfperf_aot_error(self._handle).decode() or "Run failed")

    def outputs(self) -> list[Any]:
        """Copies of the results of the last :meth:`run`, in ``model.json``'s order."""
        out = []
        for spec, index in zip(self.meta["outputs"], self._results):  # noqa: B905
            size = self._lib.tfperf_aot_result_size(self._handle, index)
            pointer = self._lib.tfperf_aot_result_data(self._handle, index)
            raw = (ctypes.c_char * size).from_address(pointer)
            array = self._np.frombuffer(raw, dtype=spec["dtype"])
            out.append(array.reshape(spec["shape"]).copy())
        return out

    def __call__(self, *arrays: Any) -> list[Any]:
        self.set_inputs(list(arrays))
        self.run()
        return self.outputs()

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle:
            self._lib.tfperf_aot_destroy(handle)
            self._handle = None


if __name__ == "__main__":  # python aot_model.py: run the model beside this file on zeros
    import numpy as np

    model = AotModel(Path(__file__).resolve().parent)
    zeros = [np.zeros(s["shape"], s["dtype"]) for s in model.meta["inputs"]]
    print([o.shape for o in model(*zeros)])
