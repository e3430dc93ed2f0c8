"""Worker side: a training step's data, read the same way for a Keras model and a custom loop.

Contract:

- :class:`TrainPrepared` is the :class:`~tfperf.worker.workload.Prepared` of a training step,
  with what it reports in ``ready["train"]``.
- :func:`data_of` ``(dataset, workload, config) -> TrainData``: the user's ``tf.data`` dataset
  as timed (a finite one repeated, which a note says; ``config["input_pipeline"] == "tuned"``:
  its sequential maps and interleaves made parallel and ``prefetch(AUTOTUNE)`` added;
  ``workload["tile_to"]``: its batches re-cut to that many rows, the same samples in the same
  order), the guard's batches cached (``guard_steps`` of the workload's, at least
  :data:`~tfperf.core.protocol.MIN_GUARD_STEPS`, as many samples at another batch) and the
  first batches as the user gave them (what every worker's fingerprint is of). A dataset that
  is empty, or whose pipeline raises, is a :class:`UserError`.
- :func:`input_wait_share` ``(call, fed, cached) -> float | None``: 1 - the median call on one
  cached batch over the median call on the user's dataset (``None`` where either raises: it
  is information only).
- :func:`py_dataset` makes a ``keras.utils.PyDataset`` the ``tf.data`` form Keras' ``fit``
  makes of it on TensorFlow (in order, its length known).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tfperf.core.errors import UserError
from tfperf.core.protocol import (
    DEFAULT_GUARD_STEPS,
    GUARD_SECONDS,
    MIN_GUARD_STEPS,
    OTHER_DRAWS_NOTE,
)
from tfperf.worker.fingerprint import digest_of
from tfperf.worker.workload import Prepared, call_error_sentence

DEFAULT_GUARD_SECONDS = GUARD_SECONDS
INPUT_PROBE_S = 0.25
"""Seconds spent on each side of the input-wait measurement (at least 3 calls each)."""
POLICIES = {"bf16": "mixed_bfloat16", "mixed_float16": "mixed_float16"}
"""The Keras policy of each reduced ``precision``, set before the factory runs."""
PY_DATASET_NOTE = ("a keras.utils.PyDataset, read in order through Keras' own adapter, as "
                   "fit reads it on TensorFlow (its tf.data form)")


@dataclass
class TrainPrepared(Prepared):
    """:class:`Prepared` with what a training step reports in ``ready["train"]``."""

    train: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TrainData:
    """The dataset as timed, the guard's cached batches and the batches fingerprinted."""

    dataset: Any
    notes: list[str]
    guard_steps: int
    guard_data: Any
    batches: list[Any]
    own_batches: list[Any]


def data_of(dataset: Any, workload: dict[str, Any], config: dict[str, Any]) -> TrainData:
    """The user's ``dataset`` as timed and guarded under ``config`` (module docstring)."""
    pipeline, rows = config.get("input_pipeline"), workload.get("tile_to")
    timed, notes = timing_dataset(dataset, workload, pipeline)
    # where a knob changes the batches (a tuned pipeline, a re-cut batch), the fingerprint
    # every worker shares is still of the user's data as the default's worker reads it
    as_given = timing_dataset(dataset, workload, None)[0] if (pipeline or rows) else None
    given = fill(as_given.take(4), workload) if as_given is not None else []
    own = batch_rows(given[0]) if rows else 1
    if rows:
        timed = timed.rebatch(rows, drop_remainder=True)
        notes.append(f"batch {rows}: the dataset's batches of {own} re-cut to {rows} rows "
                     "(the same samples in the same order)")
    steps = guard_steps(workload) * own // int(rows or 1)
    guard_data = timed.take(steps).cache()
    batches = fill(guard_data, workload)
    if pipeline and not rows and not same_data(guard_data, as_given, steps):
        notes.append(OTHER_DRAWS_NOTE)
    return TrainData(timed, notes, steps, guard_data, batches, given or batches[:4])


def same_data(ours: Any, theirs: Any, steps: int) -> bool:
    """Whether two datasets' first ``steps`` batches hold the same arrays (the first batches
    of a tuned pipeline may be the same draws, and later ones not)."""
    import tensorflow as tf

    def arrays(dataset: Any) -> Any:
        return (t.numpy() for element in dataset.take(steps) for t in tf.nest.flatten(element))

    return digest_of(arrays(ours)) == digest_of(arrays(theirs))


def timing_dataset(
    dataset: Any, workload: dict[str, Any], pipeline: str | None
) -> tuple[Any, list[str]]:
    """The user's dataset for timing: a finite one repeated (a note says how many batches);
    ``pipeline == "tuned"``: its sequential maps and interleaves made parallel (TensorFlow
    keeps their order) and ``prefetch(AUTOTUNE)`` added, as ``tfperf pipeline`` would."""
    import tensorflow as tf

    data = dataset
    if pipeline == "tuned":
        from tfperf.worker.pipeline.structural import parallelise

        for which in ("MapDataset", "InterleaveDataset"):
            data = parallelise(data, which)
        data = data.prefetch(tf.data.AUTOTUNE)
    count = int(data.cardinality())
    if count == 0:
        raise UserError(f"The dataset of {workload['path']} is empty: it yields no batch.")
    if count == tf.data.INFINITE_CARDINALITY:
        return data, []
    size = f"{count} batches" if count > 0 else "its batches"
    return data.repeat(), [f"a finite dataset ({size}) is repeated for timing"]


def fill(guard_data: Any, workload: dict[str, Any]) -> list[Any]:
    """Iterate the guard's cached batches once (filling the cache); the first few kept."""
    kept: list[Any] = []
    try:
        for element in guard_data:
            if len(kept) < 4:
                kept.append(element)
    except Exception as exc:  # the user's pipeline raised
        raise UserError(
            f"Reading the dataset of {workload['path']} raised {call_error_sentence(exc)}."
        ) from None
    if not kept:
        raise UserError(f"The dataset of {workload['path']} is empty: it yields no batch.")
    return kept


def flat(batches: list[Any]) -> list[Any]:
    """Every array of ``batches``, in order (what the fingerprint of the inputs is of)."""
    import tensorflow as tf

    return [t.numpy() for b in batches for t in tf.nest.flatten(b)]


def batch_rows(batch: Any) -> int:
    """The rows of a batch (its first array's first dimension)."""
    import tensorflow as tf

    first = tf.nest.flatten(batch)[0]
    return int(first.shape[0]) if first.shape.rank else 1


def guard_steps(workload: dict[str, Any]) -> int:
    """The guard's steps at the workload's batch."""
    return max(MIN_GUARD_STEPS, int(workload.get("guard_steps") or DEFAULT_GUARD_STEPS))


def input_wait_share(call: Callable[[Any], None], fed: Any, cached: Any) -> float | None:
    """1 - (median ``call`` on the iterator ``cached``, one batch repeated) / (median ``call``
    on ``fed``, the user's dataset). Medians: a call that compiles is not input (on JAX the
    first partial batch of a finite dataset, 24 rows after 93 of 32, compiled the step again:
    one call of 0.6 s among 300 of 0.8 ms made "waiting for input 90% of a step" of a text
    model's 15%)."""

    def per_call(it: Any) -> float:
        call(it)  # the first call on a new iterator may trace
        times: list[float] = []
        start = time.perf_counter()
        while len(times) < 3 or time.perf_counter() - start < INPUT_PROBE_S:
            t0 = time.perf_counter()
            call(it)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    try:
        on_data, alone = per_call(fed), per_call(cached)
    except Exception:  # information only: never lose the measurement over it
        return None
    return max(0.0, 1.0 - alone / on_data) if on_data > 0 else None


def is_py_dataset(obj: Any) -> bool:
    """Whether ``obj`` is a ``keras.utils.PyDataset``."""
    import keras

    return isinstance(obj, keras.utils.PyDataset)


def py_dataset(data: Any) -> Any:
    """A ``keras.utils.PyDataset`` as the ``tf.data.Dataset`` Keras' ``fit`` makes of it (in
    order: the guard compares the same batches), its length known."""
    import tensorflow as tf
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    dataset = PyDatasetAdapter(data, shuffle=False).get_tf_dataset()
    return dataset.apply(tf.data.experimental.assert_cardinality(len(data)))
