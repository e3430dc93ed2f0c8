"""``tfperf pipeline``: is training waiting for its input pipeline, where, and what fixes it.

The parent side (:mod:`tfperf.pipeline.analyze`, :func:`analyze_pipeline`) never imports
TensorFlow; the worker (:mod:`tfperf.worker.pipeline.main`) does the measuring in its own process.
"""

from __future__ import annotations

from tfperf.pipeline.analyze import analyze_pipeline

__all__ = ["analyze_pipeline"]
