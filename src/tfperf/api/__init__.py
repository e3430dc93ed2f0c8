"""The library API: the commands as Python functions returning typed results.

``tfperf.doctor()``, ``tfperf.bench()``, ``tfperf.tune()``, ``tfperf.compare()`` and
``tfperf.pipeline()`` are re-exported by :mod:`tfperf` itself (imported on first use, so
``import tfperf`` stays cheap). See :mod:`tfperf.api.calls` for the contract and
``docs/api.md`` for examples.
"""

from tfperf.api.calls import bench, compare, doctor, pipeline, tune
from tfperf.api.results import (
    BenchResult,
    BenchRow,
    CompareResult,
    DoctorResult,
    PipelineResult,
    Recommendation,
    Result,
    TuneResult,
)
from tfperf.core.errors import UserError

# The same names as tfperf.API_NAMES (the package root cannot import this module to read them:
# tests/api/test_api.py checks that the two lists agree).
__all__ = [
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
]
