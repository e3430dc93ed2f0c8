"""tfperf: make TensorFlow run as fast as the machine allows.

The library API (:mod:`tfperf.api`) is reachable from here: ``tfperf.doctor()``,
``tfperf.bench(model)``, ``tfperf.tune(model)``, ``tfperf.compare(a, b)``,
``tfperf.pipeline(target)`` and their result types. They are imported on first use, so
``import tfperf`` stays cheap; the parent process (the CLI and the API) never imports
TensorFlow: anything that needs it runs in a worker subprocess.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

API_NAMES = (
    "BenchResult",
    "BenchRow",
    "CompareResult",
    "DoctorResult",
    "PipelineResult",
    "Recommendation",
    "Result",
    "TuneResult",
    "UserError",
    "bench",
    "compare",
    "doctor",
    "pipeline",
    "tune",
)

__all__ = ["__version__", *API_NAMES]


def __getattr__(name: str) -> Any:
    if name in API_NAMES:
        # Imported by name, on first use: the package root depends on nothing, so that the
        # modules that read ``tfperf.__version__`` do not import the API's layer.
        return getattr(importlib.import_module("tfperf.api"), name)
    raise AttributeError(f"module 'tfperf' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *API_NAMES])
