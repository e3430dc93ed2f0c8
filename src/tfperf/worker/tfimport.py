"""Import TensorFlow without the packages it imports only because they are installed.

Contract: :func:`import_tensorflow` ``(hide_jax) -> (tf, hidden)`` imports TensorFlow and returns
it with the names of the packages kept out of that import. With ``hide_jax`` and jax installed,
jax is one of them: ``tensorflow.lite.python.util`` imports ``jax.jit`` whenever jax can be
imported (it is used only to convert JAX functions to LiteRT), which costs about 2 s of CPU at
every start of a TensorFlow process (measured on a 2-core machine: 2.5-2.8 s to import
TensorFlow without it, 3.8-4.8 s with it). Hidden means ``sys.modules["jax"] = None`` for the
duration of the import only: TensorFlow's ``try: from jax import jit`` then falls back as if jax
were absent, and code that imports jax afterwards (a factory that uses it) still gets it.

A worker hides jax unless keras runs on JAX there (:func:`jax_is_needed`). Its ``import_s``
and ``cold_start_s`` are then what a process without jax pays; doctor's ``optional-imports``
finding gives the user's own import time with jax. Where keras runs on JAX, the worker's
compilations are kept in JAX's persistent cache (:func:`share_jax_compilations`).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from tfperf.core.kerasbackend import configured_backend

HIDDEN_DURING_IMPORT = ("jax",)
"""Packages TensorFlow imports at start only because they are installed, and never needs to run
a TensorFlow model."""


def jax_is_needed(runtime: str) -> bool:
    """Whether keras runs on JAX in this worker (runtime ``keras-jax`` or the user's backend)."""
    return runtime == "keras-jax" or configured_backend()[0] == "jax"


def import_tensorflow(hide_jax: bool) -> tuple[Any, list[str]]:
    """``(tensorflow, hidden)``: TensorFlow imported with ``hidden`` kept out (module doc)."""
    hidden = []
    if hide_jax and "tensorflow" not in sys.modules:
        hidden = [
            name
            for name in HIDDEN_DURING_IMPORT
            if name not in sys.modules and importlib.util.find_spec(name) is not None
        ]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # "import jax" raises ImportError
    try:
        import tensorflow as tf
    finally:
        for name in hidden:
            if sys.modules.get(name, False) is None:
                del sys.modules[name]
    return tf, hidden


JAX_CACHE_MAX_BYTES = 512 * 2**20
"""The most JAX's persistent compilation cache keeps in tfperf's cache folder (least recently
used entries go first)."""


def share_jax_compilations(directory: Path) -> None:
    """Keep JAX's compilations in ``directory`` (its persistent cache): a tune starts several
    JAX workers of one model, and each compiled the same steps again (an RNN's start on JAX
    took 4 s for that of 6 s building the model). ``directory`` is per CPU count, as what XLA
    compiles may follow the threads it will have. Only the start is shorter: every timed round
    and guard step runs after compilation, cached or not. A jax without these options compiles
    in every worker, as before."""
    try:
        import jax

        directory.mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", str(directory))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_compilation_cache_max_size", JAX_CACHE_MAX_BYTES)
    except Exception:  # an older jax, a read-only folder: compile as without the cache
        return


def hidden_note(name: str) -> str:
    """The note of a worker that imported TensorFlow without ``name``."""
    return (f"TensorFlow was imported without {name}, which it imports whenever it is "
            f"installed and never needs to run this model: this cold start is what a process "
            f"without {name} pays (tfperf doctor says what {name} adds here)")
