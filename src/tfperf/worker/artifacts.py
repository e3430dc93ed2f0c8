"""Worker side: what every converted or compiled variant shares: its error, its sample inputs,
and its folder in the cache.

Contract: :class:`ConversionError` is the one error a variant that cannot be built raises
(``str(err)`` is one sentence, which the worker reports as the trial's error).
:func:`artifact_dir` ``(loaded, key)`` is the variant's folder under
``cache_dir()/converted``, named by ``key`` and a digest of the model's weights and sample
inputs, so that a cached file is only ever reused for the same model (a model whose weights
cannot be read gets a folder of its own each time). TensorFlow is imported inside functions
only.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from tfperf.core.paths import cache_dir
from tfperf.worker.workload import told_lines


class ConversionError(RuntimeError):
    """A variant could not be built; ``str(err)`` is one sentence saying why."""


def inputs_of(loaded: Any) -> list:
    """The sample inputs as arrays, in the model's input order."""
    import numpy as np

    return [np.asarray(loaded.inputs[n]) for n in loaded.input_names]


def _weights_digest(loaded: Any, h: Any) -> bool:
    """Feed what identifies the model's weights into ``h``; ``False`` when nothing does."""
    import numpy as np

    if loaded.format == "savedmodel":
        root = Path(loaded.source)
        for item in sorted(root.rglob("*")):
            if item.is_file():
                stat = item.stat()
                h.update(f"{item.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
        return True
    weights = getattr(loaded.model, "weights", None)
    if not weights:
        return False
    for w in weights:
        h.update(np.ascontiguousarray(np.asarray(w)).tobytes())
    return True


def _digest(loaded: Any, runtime: str) -> str:
    """A key for the converted file: weights, sample inputs, runtime (so a cache never lies)."""
    import numpy as np

    h = hashlib.sha256(f"v3|{runtime}|{loaded.format}|{loaded.source}".encode())
    for x in inputs_of(loaded):
        h.update(str((x.shape, x.dtype.str)).encode())
        h.update(np.ascontiguousarray(x).tobytes())
    if not _weights_digest(loaded, h):
        h.update(os.urandom(16))  # weights unknown: never reuse this conversion
    return h.hexdigest()[:20]


def artifact_dir(loaded: Any, runtime: str) -> Path:

    path = cache_dir() / "converted" / f"{runtime}-{_digest(loaded, runtime)}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def first_error(exc: BaseException) -> str:

    lines = [ln.strip() for ln in str(exc).splitlines() if "error:" in ln]
    text = lines[-1] if lines else (told_lines(str(exc)) or [type(exc).__name__])[0]
    return text.split("error:", 1)[-1].strip()[:300]
