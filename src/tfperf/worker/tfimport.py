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
finding gives the user's own import time with jax.

No compilation cache is shared between workers, JAX's persistent one included: a process that
loads its steps' executables from it holds less memory than one that compiled them, as the
user's own process does (a transformer's JAX worker held 788 MB after its start with them
loaded, 940 MB with them compiled; a tiny MLP's model 64 MB against 143 MB), and every
figure of a worker's memory is that of the process the user would run.
"""

from __future__ import annotations

import importlib.util
import sys
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


def hidden_note(name: str) -> str:
    """The note of a worker that imported TensorFlow without ``name``."""
    return (f"TensorFlow was imported without {name}, which it imports whenever it is "
            f"installed and never needs to run this model: this cold start is what a process "
            f"without {name} pays (tfperf doctor says what {name} adds here)")
