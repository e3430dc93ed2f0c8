"""Timed blocks of pipeline and training work (worker side).

Contract: each function runs one block and returns its time per step in seconds (the block's
total wall time divided by its steps, so bursty pipelines are measured by their throughput).
Every block starts a fresh iterator and discards its first ``skip`` elements, so no candidate
keeps background work (prefetch buffers, parallel calls) running into another's block.

- :func:`dataset_block` — the dataset alone: seconds per batch.
- :func:`compute_block` — the training step alone on one cached batch: seconds per step.
- :func:`train_block`   — both together, batches from the pipeline: seconds per step.

A dataset that yields nothing, or raises while iterating, raises
:class:`~tfperf.worker.pipeline.target.TargetError` with one sentence.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from tfperf.worker.pipeline.target import TargetError, first_line

Step = Callable[[Any], Any]


def endless(ds: Any) -> Any:
    """``ds`` repeated when it is finite (so a block never runs out), else ``ds`` itself."""
    import tensorflow as tf

    card = int(ds.cardinality())
    return ds if card == int(tf.data.INFINITE_CARDINALITY) else ds.repeat()


def pull(it: Iterator[Any], produced: int) -> Any:
    """``next(it)``, turning exhaustion and dataset errors into :class:`TargetError`."""
    import tensorflow as tf

    try:
        return next(it)
    except StopIteration:
        if produced == 0:
            raise TargetError(
                "the dataset is empty (it yields no elements); check its source and filters"
            ) from None
        raise TargetError(f"the dataset stopped after {produced} elements") from None
    except (tf.errors.OpError, ValueError, TypeError) as exc:
        raise TargetError(
            f"the dataset raised {type(exc).__name__} after {produced} elements: {first_line(exc)}"
        ) from exc


def first_batch(ds: Any) -> Any:
    """The first element of ``ds`` (raises :class:`TargetError` when it is empty or fails)."""
    return pull(iter(ds), 0)


def run_step(step: Step, batch: Any) -> None:
    """One training step on ``batch``; a failure becomes :class:`TargetError`."""
    try:
        step(batch)
    except Exception as exc:
        raise TargetError(
            f"the training step failed with {type(exc).__name__}: {first_line(exc)}; "
            "check that the model accepts the dataset's elements"
        ) from exc


def dataset_block(ds: Any, steps: int, skip: int = 2) -> float:
    """Seconds per batch of a fresh iterator of ``ds`` over ``steps`` batches."""
    it = iter(endless(ds))
    for i in range(skip):
        pull(it, i)
    start = time.perf_counter()
    for i in range(steps):
        pull(it, skip + i)
    return (time.perf_counter() - start) / steps


def compute_block(step: Step, batch: Any, steps: int) -> float:
    """Seconds per training step on the cached ``batch`` (no input pipeline)."""
    start = time.perf_counter()
    for _ in range(steps):
        run_step(step, batch)
    return (time.perf_counter() - start) / steps


def train_block(ds: Any, step: Step, steps: int, skip: int = 2) -> float:
    """Seconds per training step with batches pulled from a fresh iterator of ``ds``."""
    it = iter(endless(ds))
    for i in range(skip):
        run_step(step, pull(it, i))
    start = time.perf_counter()
    for i in range(steps):
        run_step(step, pull(it, skip + i))
    return (time.perf_counter() - start) / steps


def keras_step(model: Any) -> Step:
    """A step that trains ``model`` on one dataset element (``x``, ``(x, y)`` or with weights)."""
    import keras

    def step(batch: Any) -> Any:
        x, y, w = keras.utils.unpack_x_y_sample_weight(batch)
        return model.train_on_batch(x, y, sample_weight=w)

    return step
