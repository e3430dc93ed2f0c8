"""Which Keras backend this environment runs, and whether JAX can be that backend.

Contract: :func:`keras_backend_facts` ``() -> {"keras_backend", "keras_backend_source", "jax"}``
reads the backend the way Keras 3 picks it at import, without importing keras (so the parent
reads it as its workers will):
``KERAS_BACKEND`` when set, else the ``"backend"`` of ``keras.json`` in ``KERAS_HOME`` (default
``~/.keras``), else ``"tensorflow"``; ``keras_backend_source`` says which (``"KERAS_BACKEND"``,
``"keras.json"`` or ``"default"``). ``jax`` is ``{"importable", "version", "error",
"install"}``: whether ``jax`` and ``jaxlib`` are found on the path (not imported: importing
jax costs about 2 s of CPU, which every doctor run would pay), jax's installed version, what
is missing, and the line that installs it (the ``keras-jax`` runtime of ``tfperf tune
--train`` needs it). Doctor's probe puts these in its record.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

JAX_INSTALL = "pip install 'tfperf[jax]'"
"""What installs jax for the ``keras-jax`` runtime (``jax[cpu]``)."""


def configured_backend(environ: Any = None) -> tuple[str, str]:
    """``(backend, source)`` as Keras 3 reads it at import (module docstring)."""
    environ = os.environ if environ is None else environ
    if environ.get("KERAS_BACKEND"):
        return str(environ["KERAS_BACKEND"]), "KERAS_BACKEND"
    home = Path(environ.get("KERAS_HOME") or Path.home() / ".keras")
    try:
        backend = json.loads((home / "keras.json").read_text()).get("backend")
    except (OSError, ValueError, AttributeError):  # no file, not JSON, not an object
        backend = None
    if backend:
        return str(backend), "keras.json"
    return "tensorflow", "default"


def jax_facts() -> dict[str, Any]:
    """Whether jax and jaxlib are found here, jax's version, and the install line."""
    missing = [name for name in ("jax", "jaxlib") if importlib.util.find_spec(name) is None]
    try:
        version: str | None = md.version("jax")
    except md.PackageNotFoundError:
        version = None
    return {
        "importable": not missing,
        "version": version,
        "error": f"{' and '.join(missing)} not installed" if missing else None,
        "install": JAX_INSTALL,
    }


def keras_backend_facts() -> dict[str, Any]:
    """The backend, where it was read from, and jax's facts (module docstring)."""
    backend, source = configured_backend()
    return {"keras_backend": backend, "keras_backend_source": source, "jax": jax_facts()}
