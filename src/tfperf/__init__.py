"""tfperf: make TensorFlow run as fast as the machine allows.

The library API (:mod:`tfperf.api`) is reachable from here: ``tfperf.doctor()``,
``tfperf.bench(model)``, ``tfperf.tune(model)``, ``tfperf.compare(a, b)``,
``tfperf.pipeline(target)``, ``tfperf.history()``, ``tfperf.report(run)``,
``tfperf.apply(profile)`` and their result types (``builds`` and ``fleet`` are command-line
only). They are imported on first use, so
``import tfperf`` stays cheap; the parent process (the CLI and the API) never imports
TensorFlow: anything that needs it runs in a worker subprocess.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

__version__ = "0.1.0"

API_NAMES = (
    "ApplyResult",
    "BenchResult",
    "BenchRow",
    "CompareResult",
    "DoctorResult",
    "FailOnTriggered",
    "HistoryResult",
    "LoadResult",
    "PipelineResult",
    "Recommendation",
    "ReportResult",
    "Result",
    "TuneResult",
    "UserError",
    "apply",
    "bench",
    "compare",
    "doctor",
    "history",
    "pipeline",
    "report",
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


class _Report:
    """``tfperf.report``: the library's ``report()`` when called (``tfperf.report(run_id)``),
    and the report subpackage (:mod:`tfperf.report`) for anything else, so that
    ``import tfperf.report.html as html`` keeps working beside the function."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return importlib.import_module("tfperf.api").report(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module("tfperf.report"), name)

    def __repr__(self) -> str:
        return "<function tfperf.report>"

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        return importlib.import_module("tfperf.api").report.__doc__


class _Package(types.ModuleType):
    """The ``tfperf`` module's own type, so that ``tfperf.report`` can be the library's
    ``report()``: the import system binds a subpackage to its parent under its name when it is
    first imported (:mod:`tfperf.report`, the report modules), which would hide the function.
    That binding is kept apart; imports of the subpackage go through ``sys.modules``."""

    @property
    def report(self) -> Any:
        return _REPORT

    @report.setter
    def report(self, module: types.ModuleType) -> None:
        self.__dict__["_report_package"] = module


_REPORT = _Report()
sys.modules[__name__].__class__ = _Package
