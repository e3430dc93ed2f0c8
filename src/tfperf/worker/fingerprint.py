"""Worker side: the same model and the same inputs in every worker, and the proof of it.

Contract:

- :func:`seed_everything` seeds the global random generators a model factory usually draws
  from (Python's ``random``, NumPy's legacy global generator, TensorFlow's global seed, and
  Keras's when Keras is loaded). :func:`tfperf.worker.loading.load_workload` calls it
  before it imports a factory's module and again before it calls the factory, so an ordinary
  unseeded factory builds the same weights and the same inputs in every worker process.
- :func:`fingerprint` describes a loaded workload's inputs and weights: for each, an exact
  digest (SHA-256 of dtypes, shapes and bytes) and a numeric summary (per array: the sum, the
  sum of squares and a sum weighted by a fixed pattern, in float64). The worker sends it in its
  ``ready`` message; the parent (:mod:`tfperf.runner.identity`) compares the fingerprints of every
  worker of a run, so that outputs and timings are never compared across two different models.
  The summary lets a model whose weights differ only in the last bits between two thread
  configurations (a factory that trains a few steps) count as the same model.

``weights`` is ``None`` where the model exposes no variables (a plain function); for a
``.tflite`` model it is the digest of the file.
"""

from __future__ import annotations

import hashlib
import random
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

PATTERN_PERIOD = 97
"""The weighted sum uses weights ``cos(i mod 97)``: a permutation of values changes it."""


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's, TensorFlow's and (when loaded) Keras's global generators."""
    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    tf = sys.modules.get("tensorflow")
    if tf is not None:
        tf.random.set_seed(seed)
    keras = sys.modules.get("keras")
    set_keras_seed = getattr(getattr(keras, "utils", None), "set_random_seed", None)
    if callable(set_keras_seed):
        set_keras_seed(seed)


def _as_numpy(value: Any) -> Any:
    import numpy as np

    to_numpy = getattr(value, "numpy", None)
    return np.asarray(to_numpy() if callable(to_numpy) else value)


def _summary(array: Any) -> list[float]:
    import numpy as np

    flat = np.asarray(array, dtype=np.float64).ravel()
    if flat.size == 0:
        return [0.0, 0.0, 0.0]
    pattern = np.cos(np.arange(flat.size) % PATTERN_PERIOD)
    return [float(flat.sum()), float(np.square(flat).sum()), float(flat @ pattern)]


def _digest_update(digest: Any, array: Any) -> None:
    """Add an array's dtype, shape and contents to ``digest`` (strings by value: the bytes
    of an object array are pointers)."""
    digest.update(f"{array.dtype.str}{array.shape}".encode())
    digest.update(repr(array.tolist()).encode() if array.dtype == object else array.tobytes())


def digest_of(arrays: Iterable[Any]) -> str:
    """The digest of :func:`describe_arrays` alone, of ``arrays`` read one at a time (a long
    stream of batches is never held at once)."""
    digest = hashlib.sha256()
    for value in arrays:
        _digest_update(digest, _as_numpy(value))
    return digest.hexdigest()


def describe_arrays(arrays: list[Any]) -> dict[str, Any]:
    """``{"digest", "summary", "count"}`` of ``arrays`` in order (see the module docstring)."""
    digest = hashlib.sha256()
    summary: list[float] = []
    for value in arrays:
        array = _as_numpy(value)
        _digest_update(digest, array)
        summary.extend(_summary(array) if array.dtype.kind in "biuf" else [])
    return {"digest": digest.hexdigest(), "summary": summary, "count": len(arrays)}


def model_variables(model: Any, keepalive: Any = None) -> list[Any] | None:
    """The variables of a Keras model, a ``tf.Module`` or a SavedModel's owner, in a stable
    order; ``None`` where there are none to read (a plain function)."""
    for owner in (model, keepalive):
        for attr in ("weights", "variables"):
            found = getattr(owner, attr, None)
            if found is not None and not callable(found):
                return list(found)
    return None


def fingerprint(loaded: Any) -> dict[str, Any]:
    """The fingerprint of a :class:`~tfperf.worker.workload.Loaded` (module docstring)."""
    inputs = describe_arrays([loaded.inputs[name] for name in loaded.input_names])
    if loaded.format == "tflite":
        data = Path(loaded.model).read_bytes()
        weights: dict[str, Any] | None = {
            "digest": hashlib.sha256(data).hexdigest(),
            "summary": [],
            "count": 1,
        }
    else:
        variables = model_variables(loaded.model, loaded.keepalive)
        weights = describe_arrays(variables) if variables else None
    return {"inputs": inputs, "weights": weights}
