"""The inputs of a remote model: what the server says it takes, and the arrays sent to it.

Contract:

- :class:`InputSpec` (frozen) is one input as a server publishes it: name, NumPy dtype name,
  shape (``-1`` for a dimension of any size, ``None`` for an unknown rank).
  :data:`V2_DTYPES` and :data:`TF_DTYPES` translate the Open Inference Protocol's datatypes
  and TensorFlow's ``DT_*`` enum names to NumPy's (strings, ``BYTES`` and ``DT_STRING``, are
  ``object`` arrays of ``bytes``); :func:`dtype_of` refuses a datatype missing or unknown
  with one sentence.
- :func:`generated` makes one request's arrays from specs: ``batch`` rows where the first
  dimension is free, 1 where any other is; floats drawn from a standard normal, integers from
  {0, 1} (valid ids for any embedding), booleans at random, strings ``b"a"``; seeded.
- :func:`from_npz` reads ``--inputs`` (a ``.npz``: one array per input, by name; a single
  array fits a single input whatever its name; a missing or unreadable file is a
  :class:`~tfperf.core.errors.UserError`) and :func:`fit` checks arrays against the
  specs when the server published any: an unknown or missing name, a rank or a fixed
  dimension that differs is :class:`~tfperf.core.errors.UserError`, one sentence. Text arrays
  (NumPy's ``str`` or ``bytes`` dtypes: what ``numpy.savez`` writes for strings) become
  ``object`` arrays of UTF-8 ``bytes``, the form every wire sends.
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tfperf.core.errors import UserError

V2_DTYPES = {
    "BOOL": "bool",
    "UINT8": "uint8",
    "UINT16": "uint16",
    "UINT32": "uint32",
    "UINT64": "uint64",
    "INT8": "int8",
    "INT16": "int16",
    "INT32": "int32",
    "INT64": "int64",
    "FP16": "float16",
    "FP32": "float32",
    "FP64": "float64",
    "BYTES": "object",
}
TF_DTYPES = {
    "DT_FLOAT": "float32",
    "DT_DOUBLE": "float64",
    "DT_HALF": "float16",
    "DT_INT8": "int8",
    "DT_INT16": "int16",
    "DT_INT32": "int32",
    "DT_INT64": "int64",
    "DT_UINT8": "uint8",
    "DT_UINT16": "uint16",
    "DT_UINT32": "uint32",
    "DT_UINT64": "uint64",
    "DT_BOOL": "bool",
    "DT_STRING": "object",
}
NUMPY_TO_V2 = {v: k for k, v in V2_DTYPES.items()}
NUMPY_TO_TF = {v: k for k, v in TF_DTYPES.items()}


@dataclass(frozen=True)
class InputSpec:
    """One model input as the server publishes it (module docstring)."""

    name: str
    dtype: str
    shape: tuple[int, ...] | None

    def describe(self) -> str:
        shape = (
            "?" if self.shape is None else "x".join("N" if d < 0 else str(d) for d in self.shape)
        )
        return f"{self.name} {self.dtype}[{shape}]"


def dtype_of(table: Mapping[str, str], datatype: object, name: object) -> str:
    """The NumPy dtype of a published ``datatype`` (module docstring)."""
    if not datatype:
        raise UserError(
            f"the server's metadata gives input {name!r} no datatype: give --inputs, and "
            "check the model's signature."
        )
    if datatype not in table:
        raise UserError(
            f"the server's input {name!r} is of datatype {datatype}, which tfperf cannot send "
            f"(it sends {', '.join(sorted(table))})."
        )
    return table[str(datatype)]


def as_strings(array: np.ndarray) -> np.ndarray:
    """A ``str`` or ``bytes`` array as an ``object`` array of UTF-8 bytes, shape kept."""
    if array.dtype.kind not in "USO":
        raise UserError(
            f"an array of {array.dtype} cannot be sent as strings: give --inputs text arrays."
        )
    flat = [v.encode() if isinstance(v, str) else bytes(v) for v in array.ravel()]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(array.shape)


def _concrete(shape: tuple[int, ...] | None, batch: int) -> tuple[int, ...]:
    if shape is None:
        return (batch,)
    return tuple((batch if i == 0 else 1) if d < 0 else d for i, d in enumerate(shape))


def generated(specs: Sequence[InputSpec], batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    """One request's arrays, made to fit ``specs`` (module docstring)."""
    rng = np.random.default_rng(seed)
    out = {}
    for spec in specs:
        shape = _concrete(spec.shape, batch)
        kind = np.dtype(spec.dtype).kind
        if kind == "f":
            value = rng.standard_normal(shape).astype(spec.dtype)
        elif kind in "iu":
            value = rng.integers(0, 2, shape).astype(spec.dtype)
        elif kind == "b":
            value = rng.integers(0, 2, shape).astype(bool)
        else:
            value = np.full(shape, b"a", dtype=object)
        out[spec.name] = value
    return out


def from_npz(path: str) -> dict[str, np.ndarray]:
    """The arrays of ``--inputs`` (a ``.npz``), by name; an unreadable file is a
    :class:`~tfperf.core.errors.UserError`."""
    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise ValueError("a single array, not an archive of them")
        with loaded as archive:
            return {name: archive[name] for name in archive.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise UserError(
            f"--inputs {path!r} is not a readable .npz ({exc}): write one with numpy.savez."
        ) from None


def _check(name: str, array: np.ndarray, spec: InputSpec) -> None:
    if spec.shape is None:
        return
    fits = array.ndim == len(spec.shape) and all(
        want < 0 or want == got for want, got in zip(spec.shape, array.shape, strict=True)
    )
    if not fits:
        raise UserError(
            f"input {name!r} has shape {list(array.shape)} but the server's model takes "
            f"{spec.describe()}: give --inputs arrays of that shape, or leave --inputs out."
        )


def fit(arrays: Mapping[str, np.ndarray], specs: Sequence[InputSpec]) -> dict[str, np.ndarray]:
    """``arrays`` checked against ``specs`` and renamed for a lone input (module docstring)."""
    if not specs:
        return {k: as_strings(a) if a.dtype.kind in "US" else a for k, a in arrays.items()}
    if len(arrays) == 1 and len(specs) == 1:
        arrays = {specs[0].name: next(iter(arrays.values()))}
    names = {s.name for s in specs}
    if set(arrays) != names:
        raise UserError(
            f"--inputs holds {sorted(arrays)} but the server's model takes "
            f"{', '.join(s.describe() for s in specs)}: name the .npz arrays after its inputs."
        )
    out = {}
    for spec in specs:
        array = np.asarray(arrays[spec.name])
        _check(spec.name, array, spec)
        out[spec.name] = array.astype(spec.dtype) if spec.dtype != "object" else as_strings(array)
    return out
