"""``tfperf pipeline``: is training waiting for its input pipeline, where, and what fixes it.

The parent side (:mod:`tfperf.input_pipeline.analyze`, :func:`~tfperf.input_pipeline.analyze.
analyze_pipeline`) never imports TensorFlow; the worker (:mod:`tfperf.worker.pipeline.main`)
does the measuring in its own process. This module holds only the defaults the command line
shows, so that ``tfperf --help`` loads nothing else.
"""

DEFAULT_TIMEOUT = 900.0
"""The pipeline worker may run this long (seconds)."""
DEFAULT_MIN_BLOCK_S = 0.2
"""Blocks shorter than this (seconds) get more steps: a fast pipeline's 20 steps last a few
milliseconds, and such blocks measure the machine's noise more than the pipeline."""
