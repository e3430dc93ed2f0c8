"""Rebuild a built ``tf.data`` pipeline with one stage changed (worker side).

Contract:

- :func:`user_function` -- the Python function the user passed to ``map``/``filter``/
  ``interleave``, which tfperf calls again (traced again) to rebuild a stage.
- :func:`replace` -- the pipeline rebuilt from the stage at ``index``: that stage is replaced by
  ``make(input_of_stage)``, and every later stage is applied again with the public
  ``Dataset`` methods and the arguments it was built with (:data:`REPLAY`). A later stage that
  cannot be applied again (a kind not in the table, a cache in a file) raises
  :class:`NotRebuildable` with the reason, and the fix is reported unmeasured.
- :func:`check_batchable` -- whether a map function gives, called once on a batch of sample
  elements, the results it gives on each element alone (checked on the pipeline's own
  elements, never assumed); :class:`NotRebuildable` with the reason otherwise.

Reading a stage's arguments uses the dataset classes' private attributes (``_map_func``,
``_batch_size``, ...), as :mod:`tfperf.worker.pipeline.stages` does with ``_inputs()``: tf.data
has no public way to take a built pipeline apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfperf.worker.pipeline.stages import chain, kind


class NotRebuildable(Exception):
    """The pipeline cannot be rebuilt with the change; ``str()`` says why (one clause)."""


def user_function(ds: Any, attr: str = "_map_func") -> Callable[..., Any]:
    """The Python function the stage was built with."""
    func = getattr(getattr(ds, attr, None), "_func", None)
    if func is None:
        raise NotRebuildable(f"the {kind(ds)} stage does not expose its function")
    return func


def _deterministic(ds: Any) -> bool | None:
    return {"true": True, "false": False}.get(str(getattr(ds, "_deterministic", "default")))


def _map(stage: Any, base: Any) -> Any:
    calls = getattr(stage, "_num_parallel_calls", None)
    if calls is None:
        return base.map(user_function(stage))
    return base.map(
        user_function(stage), num_parallel_calls=int(calls), deterministic=_deterministic(stage)
    )


def _batch(stage: Any, base: Any) -> Any:
    calls = getattr(stage, "_num_parallel_calls", None)
    return base.batch(
        int(stage._batch_size),
        drop_remainder=bool(stage._drop_remainder),
        num_parallel_calls=None if calls is None else int(calls),
        deterministic=_deterministic(stage),
    )


def _interleave(stage: Any, base: Any) -> Any:
    calls = getattr(stage, "_num_parallel_calls", None)
    return base.interleave(
        user_function(stage),
        cycle_length=int(stage._cycle_length),
        block_length=int(stage._block_length),
        num_parallel_calls=None if calls is None else int(calls),
        deterministic=_deterministic(stage),
    )


def _cache(stage: Any, base: Any) -> Any:
    filename = stage._filename.numpy().decode() if hasattr(stage._filename, "numpy") else ""
    if filename:
        raise NotRebuildable("the pipeline caches into a file, which a rebuilt copy would share")
    return base.cache()


def _shuffle(stage: Any, base: Any) -> Any:
    return base.shuffle(
        int(stage._buffer_size), reshuffle_each_iteration=bool(stage._reshuffle_each_iteration)
    )


REPLAY: dict[str, Callable[[Any, Any], Any]] = {
    "MapDataset": _map,
    "ParallelMapDataset": _map,
    "BatchDataset": _batch,
    "ParallelBatchDataset": _batch,
    "InterleaveDataset": _interleave,
    "ParallelInterleaveDataset": _interleave,
    "FlatMapDataset": lambda s, b: b.flat_map(user_function(s)),
    "FilterDataset": lambda s, b: b.filter(user_function(s, "_predicate")),
    "PrefetchDataset": lambda s, b: b.prefetch(int(s._buffer_size)),
    "RepeatDataset": lambda s, b: b.repeat(int(s._count)),
    "TakeDataset": lambda s, b: b.take(int(s._count)),
    "SkipDataset": lambda s, b: b.skip(int(s._count)),
    "ShuffleDataset": _shuffle,
    "CacheDataset": _cache,
    "OptionsDataset": lambda s, b: b.with_options(s.options()),
    "UnbatchDataset": lambda s, b: b.unbatch(),
}
"""How to apply each kind of stage again on a new input, with the arguments it was built with."""


def replay(stage: Any, base: Any) -> Any:
    """``stage`` applied again on top of ``base``."""
    how = REPLAY.get(kind(stage))
    if how is None:
        raise NotRebuildable(f"tfperf cannot rebuild a {kind(stage)} stage")
    try:
        return how(stage, base)
    except NotRebuildable:
        raise
    except Exception as exc:
        raise NotRebuildable(f"rebuilding the {kind(stage)} stage failed ({exc})") from exc


def replace(ds: Any, index: int, make: Callable[[Any], Any], skip: int = 0) -> Any:
    """The pipeline with stage ``index`` of :func:`chain` replaced by ``make(its input)``,
    the ``skip`` stages after it dropped (``make`` did their work), the rest applied again.
    The result must yield elements of the same types and compatible shapes."""
    stages = chain(ds)
    if index < 1 or index >= len(stages):
        raise NotRebuildable("the pipeline's stages cannot be reached")
    try:
        out = make(stages[index - 1])
    except NotRebuildable:
        raise
    except Exception as exc:  # the user's function traced again, on another input
        raise NotRebuildable(f"rebuilding the {kind(stages[index])} stage failed ({exc})") from exc
    for stage in stages[index + 1 + skip :]:
        out = replay(stage, out)
    check_same_spec(ds.element_spec, out.element_spec)
    return out


def check_same_spec(before: Any, after: Any) -> None:
    """Raise :class:`NotRebuildable` unless ``after`` has ``before``'s structure, dtypes and
    compatible shapes."""
    import tensorflow as tf

    try:
        tf.nest.assert_same_structure(before, after)
    except (TypeError, ValueError) as exc:
        raise NotRebuildable("the rebuilt pipeline yields elements of another structure") from exc
    for a, b in zip(tf.nest.flatten(before), tf.nest.flatten(after), strict=True):
        if a.dtype != b.dtype or not a.shape.is_compatible_with(b.shape):
            raise NotRebuildable(
                f"the rebuilt pipeline yields {b.dtype.name}{b.shape} where the pipeline "
                f"yields {a.dtype.name}{a.shape}"
            )


SAMPLES = 4
"""Sample elements the batch-before-map check calls the function on."""


def check_batchable(func: Callable[..., Any], before: Any) -> None:
    """Raise :class:`NotRebuildable` unless ``func``, mapped over a batch of the first
    :data:`SAMPLES` elements of ``before``, gives each element's own result (and gives the same
    result twice on one element: a function that draws random numbers cannot be checked)."""
    import tensorflow as tf

    try:
        samples = list(before.take(SAMPLES))
    except tf.errors.OpError as exc:
        raise NotRebuildable(f"reading sample elements failed ({type(exc).__name__})") from exc
    if len(samples) < 2:
        raise NotRebuildable("the pipeline has fewer than 2 elements to check the function on")
    try:
        stacked = tf.nest.map_structure(lambda *xs: tf.stack(xs), *samples)
    except (TypeError, ValueError, tf.errors.OpError) as exc:
        raise NotRebuildable("the elements before the map differ in shape") from exc
    src = tf.data.Dataset.from_tensor_slices(stacked)
    one, again = list(src.map(func)), list(src.map(func))
    if not all(_same(a, b, exact=True) for a, b in zip(one, again, strict=True)):
        raise NotRebuildable("the map gives different results on the same element")
    try:
        batch = next(iter(src.batch(len(samples)).map(func)))
    except Exception as exc:
        raise NotRebuildable(f"the map function fails on a batch ({type(exc).__name__})") from exc
    for i, alone in enumerate(one):
        row = tf.nest.map_structure(lambda t, i=i: t[i] if t.shape.rank else t, batch)
        if not _same(alone, row, exact=False):
            raise NotRebuildable(
                "the map function gives other results on a batch than on each element alone"
            )


def _same(a: Any, b: Any, exact: bool) -> bool:
    import numpy as np
    import tensorflow as tf

    try:
        tf.nest.assert_same_structure(a, b)
    except (TypeError, ValueError):
        return False
    for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b), strict=True):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if exact or not np.issubdtype(x.dtype, np.inexact):
            if not np.array_equal(x, y):
                return False
        elif not np.allclose(x, y, rtol=1e-5, atol=1e-6):
            return False
    return True
