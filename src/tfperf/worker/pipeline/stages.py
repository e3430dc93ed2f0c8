"""Prefix throughput: how fast each prefix of a ``tf.data`` pipeline runs (worker side).

Contract: :func:`chain` lists the datasets a pipeline is built from, source first, each one a
real, iterable ``tf.data.Dataset`` (the prefix that ends with that stage); :func:`measure_stages`
counts each prefix's elements for a short time budget with the public ``Dataset.reduce`` and
returns::

    [{"stage": "map(_load)", "kind": "MapDataset", "elements_per_s": float,
      "batches_per_s": float,       # elements_per_s / elements per final batch
      "added_ms_per_batch": float,  # the time this stage adds per final batch
      "bounding": bool,
      "python_code": bool},         # its function runs Python (py_function, from_generator)
     ...]

A prefix that ends before the pipeline's batch stage is timed with ``batch(B)`` appended (``B``
the final batch size), so every prefix is counted per batch, as the full pipeline is: counting
single elements would charge each prefix ``Dataset.reduce``'s per-element call, which the batch
stage does not pay (a plain ``from_tensor_slices`` then looks slower than the whole pipeline).
The batch stage itself is then the prefix before it with that same ``batch(B)``: it takes that
prefix's figure rather than a second timing of the same pipeline, whose noise alone would
otherwise be charged to the batch stage (and could make it "bound" a pipeline whose map costs
everything).
``elements_per_s`` is the prefix's element rate either way. When elements cannot be batched
(shapes differ), the prefix's element rate divided by ``B`` stands in.

The bounding stage is the one that adds the most time per final batch. Walking from the last
stage to the source reads ``Dataset._inputs()``, the one non-public call here: tf.data offers
no public way to reach the stages of a built pipeline. When it is missing, only the whole
pipeline is measured.
"""

from __future__ import annotations

import time
from typing import Any

from tfperf.worker.pipeline import functions
from tfperf.worker.pipeline.target import TargetError, first_line
from tfperf.worker.pipeline.timing import endless

_KIND_LABEL = {
    "MapDataset": "map",
    "ParallelMapDataset": "map(parallel)",
    "BatchDataset": "batch",
    "ParallelBatchDataset": "batch(parallel)",
    "PaddedBatchDataset": "padded_batch",
    "PrefetchDataset": "prefetch",
    "CacheDataset": "cache",
    "ShuffleDataset": "shuffle",
    "RepeatDataset": "repeat",
    "InterleaveDataset": "interleave",
    "ParallelInterleaveDataset": "interleave(parallel)",
    "FilterDataset": "filter",
    "TensorSliceDataset": "from_tensor_slices",
    "TensorDataset": "from_tensors",
    "RangeDataset": "range",
    "TFRecordDatasetV2": "TFRecordDataset",
    "OptionsDataset": "with_options",
}


def kind(ds: Any) -> str:
    """The dataset's class name without the leading underscore (``"MapDataset"``)."""
    return type(ds).__name__.lstrip("_")


def label(ds: Any) -> str:
    """A short human label: ``map(_load)``, ``batch``, ``from_tensor_slices``,
    ``from_generator(gen)``; a lambda that calls ``tf.py_function(augment, ...)`` gives
    ``map(augment)``."""
    k = kind(ds)
    text = _KIND_LABEL.get(k, k)
    if functions.is_generator(ds):
        return f"from_generator({functions.python_name(ds) or 'generator'})"
    func = getattr(getattr(ds, "_map_func", None), "_func", None)
    name = getattr(func, "__name__", None)
    if name == "<lambda>":
        name = functions.python_name(ds) or name
    if name and name != "<lambda>" and text.startswith(("map", "filter", "interleave")):
        text = f"{text.split('(')[0]}({name}{', parallel' if 'parallel' in text else ''})"
    return text


def chain(ds: Any) -> list[Any]:
    """The pipeline's datasets from the source to ``ds`` itself (``[ds]`` if unknown)."""
    found = [ds]
    current = ds
    while True:
        inputs_fn = getattr(current, "_inputs", None)
        try:
            inputs = list(inputs_fn()) if callable(inputs_fn) else []
        except Exception:
            inputs = []
        if len(inputs) != 1:
            break
        current = inputs[0]
        found.append(current)
    found.reverse()
    return found


def final_batch_size(ds: Any) -> int:
    """Elements in one batch of ``ds`` (1 when it is not batched or unknown): the size its
    last batch stage was built with, else the leading dimension of its elements (a
    ``py_function``'s output has no static shape, so the stage's own figure comes first)."""
    import tensorflow as tf

    batches = [d for d in chain(ds) if "Batch" in kind(d) and hasattr(d, "_batch_size")]
    if batches:
        try:
            return max(1, int(batches[-1]._batch_size))
        except (TypeError, ValueError):
            pass
    spec = tf.nest.flatten(ds.element_spec)
    if not spec:
        return 1
    shape = getattr(spec[0], "shape", None)
    if shape is None or shape.rank is None or shape.rank == 0:
        return 1
    if shape[0] is not None:
        return int(shape[0])
    first = tf.nest.flatten(next(iter(ds)))[0]
    return int(first.shape[0]) if first.shape.rank else 1


def _reduce_seconds(ds: Any, n: int) -> float:
    """Wall time to pull ``n`` elements of ``ds`` inside TensorFlow (``Dataset.reduce``)."""
    import tensorflow as tf

    start = time.perf_counter()
    try:
        ds.take(n).reduce(tf.constant(0, tf.int64), lambda acc, *_: acc + 1)
    except tf.errors.OpError as exc:
        raise TargetError(
            f"the dataset raised {type(exc).__name__} while timing its stages: {first_line(exc)}"
        ) from exc
    return time.perf_counter() - start


def rate(ds: Any, budget_s: float, base_n: int = 8) -> float | None:
    """Elements per second of ``ds`` (repeated when finite) over about ``budget_s``.

    Elements are counted by ``Dataset.reduce``, inside TensorFlow, so Python's per-element
    iterator overhead does not swamp cheap stages. A short run of ``base_n`` elements is
    subtracted from a long one, which cancels the fixed cost of starting an iteration.
    """

    if int(ds.cardinality()) == 0:
        return None
    src = endless(ds)
    base_t = _reduce_seconds(src, base_n)
    # A first long run of 8x the short one, fewer where the short run shows that would far
    # exceed the budget (a slow stage would otherwise take many times its budget).
    per_element = max(base_t, 1e-9) / base_n
    n = base_n + min(7 * base_n, max(base_n, int(budget_s / per_element)))
    while True:
        t = _reduce_seconds(src, n)
        spent = t - base_t
        if spent >= budget_s or n >= 1 << 24:
            break
        n = int(n * min(16.0, max(2.0, 1.3 * budget_s / max(spent, 1e-4))))
    return (n - base_n) / spent if spent > 0 else None


def _batched_rate(prefix: Any, batch: int, budget_s: float) -> tuple[float | None, float | None]:
    """``(elements/s, batches/s)`` of a prefix that ends before the batch stage, timed as
    ``prefix.batch(batch)``; the element rate divided by ``batch`` when elements do not batch."""

    try:
        bps = rate(prefix.batch(batch), budget_s)
    except (TargetError, TypeError, ValueError):
        bps = None
    if bps is not None:
        return bps * batch, bps
    eps = rate(prefix, budget_s)
    return eps, eps / batch if eps else None


def _plain_batch(ds: Any, batch: int) -> bool:
    """Whether ``ds`` is a ``batch(batch)`` stage (not padded, no other size)."""
    try:
        return kind(ds) in ("BatchDataset", "ParallelBatchDataset") and int(ds._batch_size) == batch
    except (AttributeError, TypeError, ValueError):
        return False


def measure_stages(ds: Any, budget_s: float = 0.5, batch_hint: int | None = None) -> list[dict]:
    """Measure every prefix of ``ds``; see the module docstring for the result."""
    prefixes = chain(ds)
    batch = batch_hint or final_batch_size(ds)
    has_batch = any("Batch" in kind(p) for p in prefixes)
    rows: list[dict] = []
    before_batch = has_batch
    batched_before: float | None = None  # batches/s of the prefix before, timed as .batch(B)
    for prefix in prefixes:
        k = kind(prefix)
        if "Batch" in k:
            before_batch = False
        if before_batch and batch > 1:
            eps, bps = _batched_rate(prefix, batch, budget_s)
            batched_before = bps
        elif batched_before is not None and _plain_batch(prefix, batch):
            # The prefix before was timed with this very batch(B) appended: timing it again
            # would measure the same pipeline twice and charge the noise to the batch stage.
            eps = bps = batched_before
            batched_before = None
        else:
            eps = rate(prefix, budget_s)
            bps = eps
            batched_before = None
        rows.append(
            {
                "stage": label(prefix),
                "kind": k,
                "elements_per_s": eps,
                "batches_per_s": bps,
                "added_ms_per_batch": None,
                "bounding": False,
                "python_code": functions.runs_python(prefix),
            }
        )
    previous_ms = 0.0
    for row in rows:
        bps = row["batches_per_s"]
        if not bps:
            continue
        ms = 1e3 / bps
        row["added_ms_per_batch"] = max(0.0, ms - previous_ms)
        previous_ms = ms
    timed = [r for r in rows if r["added_ms_per_batch"] is not None]
    if timed:
        max(timed, key=lambda r: r["added_ms_per_batch"])["bounding"] = True
    return rows
