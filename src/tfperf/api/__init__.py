"""The library API: the commands as Python functions returning typed results.

``tfperf.doctor()``, ``tfperf.bench()`` (steady state or under load), ``tfperf.tune()``,
``tfperf.compare()``, ``tfperf.pipeline()``, ``tfperf.history()``, ``tfperf.report()`` and
``tfperf.apply()`` are re-exported by :mod:`tfperf` itself (imported on first use, so
``import tfperf`` stays cheap). See :mod:`tfperf.api.calls` for the contract and
``docs/api.md`` for examples.
"""

from tfperf.api.calls import bench, compare, doctor, pipeline, tune
from tfperf.api.results import (
    ApplyResult,
    BenchResult,
    BenchRow,
    CompareResult,
    DoctorResult,
    HistoryResult,
    LoadResult,
    PipelineResult,
    Recommendation,
    ReportResult,
    Result,
    TuneResult,
)
from tfperf.api.runs import apply, history, report
from tfperf.core.errors import FailOnTriggered, UserError

# The same names as tfperf.API_NAMES (the package root cannot import this module to read them:
# tests/api/test_api.py checks that the two lists agree).
__all__ = [
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
]
