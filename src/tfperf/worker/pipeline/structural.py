"""Structural fixes measured on the user's own dataset, without flags in their function, and
the ones that need their code (worker side).

Contract: :func:`plan` looks at a built pipeline and returns a :class:`Plan`:

- ``rewrites`` -- the structural fixes tfperf can apply safely by rebuilding the pipeline
  (:func:`tfperf.worker.pipeline.rebuild.replace`), each a function from the dataset to the
  rebuilt dataset:

  - ``parallel_map`` -- every sequential ``map`` whose function is parallel-safe
    (:func:`tfperf.worker.pipeline.functions.parallel_safe`: TensorFlow ops only, no state but
    random generators) gets ``num_parallel_calls=tf.data.AUTOTUNE``;
  - ``interleave`` -- the same for a sequential ``interleave``;
  - ``batch_before_map`` -- the ``map`` right before the ``batch`` moves after it, when its
    function runs TensorFlow ops only, draws no random numbers, and gives on a batch of the
    pipeline's own sample elements the results it gives on each alone
    (:func:`tfperf.worker.pipeline.rebuild.check_batchable`).

- ``unmeasured`` -- ``{"name", "change", "reason", "stage"}`` for each structural fix that
  would address a stage but needs the user's code (a function that runs Python: parallel calls
  take turns on the GIL, so the advice is to vectorise it per batch or move it to TensorFlow
  ops) or could not be applied safely (the reason says why). Ranked: the fixes of the bounding
  stage first, then by the gain they usually bring (vectorising before parallel calls).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tfperf.worker.pipeline import functions as fn
from tfperf.worker.pipeline import rebuild
from tfperf.worker.pipeline.rebuild import NotRebuildable
from tfperf.worker.pipeline.stages import chain, kind, label

SEQUENTIAL = {"MapDataset": "parallel_map", "InterleaveDataset": "interleave"}
MAPS = ("MapDataset", "ParallelMapDataset")
BATCHES = ("BatchDataset", "ParallelBatchDataset")
RANK = (
    "batch_before_map",
    "tf_ops",
    "generator_to_tf",
    "interleave",
    "parallel_map",
    "parallel_generators",
)
"""The order unmeasured fixes of one stage are listed in: the larger usual gain first."""


@dataclass(frozen=True)
class Rewrite:
    """A structural fix applied by rebuilding the pipeline."""

    name: str
    change: str
    apply: Callable[[Any], Any]


@dataclass(frozen=True)
class Plan:
    rewrites: list[Rewrite] = field(default_factory=list)
    unmeasured: list[dict] = field(default_factory=list)


def _name(stage: Any) -> str:
    """The user's function name for code snippets (``fn`` when it is a lambda)."""
    name = fn.python_name(stage) or getattr(
        getattr(getattr(stage, "_map_func", None), "_func", None), "__name__", None
    )
    return name if name and name != "<lambda>" else "fn"


def _parallel(stage: Any, base: Any) -> Any:
    import tensorflow as tf

    func = rebuild.user_function(stage)
    if kind(stage) == "InterleaveDataset":
        return base.interleave(
            func,
            cycle_length=int(stage._cycle_length),
            block_length=int(stage._block_length),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
    return base.map(func, num_parallel_calls=tf.data.AUTOTUNE)


def parallelise(ds: Any, which: str) -> Any:
    """``ds`` with every sequential, parallel-safe stage of kind ``which`` made parallel."""
    while True:
        stages = chain(ds)
        at = next(
            (i for i, s in enumerate(stages) if kind(s) == which and fn.parallel_safe(s)), None
        )
        if at is None:
            return ds
        ds = rebuild.replace(ds, at, lambda base, s=stages[at]: _parallel(s, base))


def _map_before_batch(stages: list[Any]) -> int | None:
    at = next((i for i, s in enumerate(stages) if kind(s) in BATCHES), None)
    if at is None or at < 2 or kind(stages[at - 1]) not in MAPS:
        return None
    return at - 1


def batch_first(ds: Any) -> Any:
    """``ds`` with the map right before its batch moved after the batch."""
    stages = chain(ds)
    at = _map_before_batch(stages)
    if at is None:
        raise NotRebuildable("no map right before the batch")
    mapped, batched = stages[at], stages[at + 1]
    return rebuild.replace(
        ds, at, lambda base: rebuild.replay(mapped, rebuild.replay(batched, base)), skip=1
    )


def plan(ds: Any, bounding: str | None) -> Plan:
    """What to rebuild and what to advise for ``ds`` (see the module docstring)."""
    stages = chain(ds)
    out = Plan()
    for which, name in SEQUENTIAL.items():
        _plan_parallel(ds, stages, which, name, out)
    _plan_batch_first(ds, stages, out)
    for stage in stages:
        if fn.runs_python(stage):
            out.unmeasured.extend(_python_advice(stage))
    out.unmeasured.sort(
        key=lambda u: (u["stage"] != bounding, RANK.index(u["name"]) if u["name"] in RANK else 99)
    )
    return out


def _plan_parallel(ds: Any, stages: list[Any], which: str, name: str, out: Plan) -> None:
    found = [s for s in stages if kind(s) == which]
    safe = [s for s in found if fn.parallel_safe(s)]
    for stage in found:
        if stage in safe or fn.runs_python(stage):
            continue  # Python stages get their own advice
        ops = ", ".join(fn.stateful_ops(stage)[:3])
        reason = f"its function holds state ({ops}), so parallel calls could change its results"
        out.unmeasured.append(_advice(name, stage, _parallel_change(stage), reason))
    if not safe:
        return
    change = "\n".join(_parallel_change(s) for s in safe)
    try:
        parallelise(ds, which)
    except NotRebuildable as exc:
        out.unmeasured.append(_advice(name, safe[0], change, str(exc)))
        return
    out.rewrites.append(Rewrite(name, change, lambda d: parallelise(d, which)))


def _parallel_change(stage: Any) -> str:
    name = _name(stage)
    if kind(stage) == "InterleaveDataset":
        return (
            f"ds = ds.interleave({name}, cycle_length={int(stage._cycle_length)}, "
            f"num_parallel_calls=tf.data.AUTOTUNE)  # was: ds.interleave({name}, ...)"
        )
    return f"ds = ds.map({name}, num_parallel_calls=tf.data.AUTOTUNE)  # was: ds.map({name})"


def _batch_change(stage: Any) -> str:
    name = _name(stage)
    return f"ds = ds.batch(n).map({name})  # was: ds.map({name}).batch(n)"


def _plan_batch_first(ds: Any, stages: list[Any], out: Plan) -> None:
    at = _map_before_batch(stages)
    _farther_maps(stages, at, out)
    if at is None or fn.runs_python(stages[at]):
        return  # Python maps get their own advice
    stage = stages[at]
    change = _batch_change(stage)
    try:
        if fn.draws_random(stage):
            raise NotRebuildable(
                "the map draws random numbers, so its results on a batch cannot be checked "
                "against its results on each element (a random op may draw once per batch); "
                "draw one value per element, e.g. tf.random.uniform([tf.shape(x)[0], ...])"
            )
        rebuild.check_batchable(rebuild.user_function(stage), stages[at - 1])
        batch_first(ds)
    except NotRebuildable as exc:
        out.unmeasured.append(_advice("batch_before_map", stage, change, str(exc)))
        return
    out.rewrites.append(Rewrite("batch_before_map", change, batch_first))


def _farther_maps(stages: list[Any], moved: int | None, out: Plan) -> None:
    """Batch-before-map, unmeasured, for the TensorFlow maps before the batch that are not
    right before it (other stages stand between; only the map right before is moved)."""
    batch_at = next((i for i, s in enumerate(stages) if kind(s) in BATCHES), None)
    for i, stage in enumerate(stages[:batch_at] if batch_at else []):
        if kind(stage) not in MAPS or i == moved or fn.runs_python(stage):
            continue
        between = ", ".join(label(s) for s in stages[i + 1 : batch_at])
        reason = (
            f"stages stand between the map and the batch ({between}); tfperf moves only a map "
            "that comes right before the batch"
        )
        out.unmeasured.append(_advice("batch_before_map", stage, _batch_change(stage), reason))


GIL = (
    "parallel calls of Python code take turns on the GIL, so they help only where it waits "
    "(I/O, sleep) or runs NumPy code that releases the GIL"
)


def _python_advice(stage: Any) -> list[dict]:
    """The fixes for a stage that runs Python, all of which need the user's code."""
    name = _name(stage)
    if fn.is_generator(stage):
        return [
            _advice(
                "generator_to_tf",
                stage,
                GENERATOR_TO_TF.format(name=name),
                f"{name} is a Python generator, run by one thread: tfperf cannot move its "
                "work out of Python",
            ),
            _advice(
                "parallel_generators",
                stage,
                PARALLEL_GENERATORS.format(name=name),
                f"it needs {name} to take a shard index; {GIL}",
            ),
        ]
    items = [
        _advice(
            "batch_before_map",
            stage,
            VECTORISE.format(name=name),
            "the map runs Python: tfperf does not call a Python function on batches it was "
            "not written for; vectorise it per batch",
        ),
        _advice(
            "tf_ops",
            stage,
            TF_OPS.format(name=name),
            "the map runs Python: the function has to be rewritten, which only its author can do",
        ),
    ]
    if kind(stage) in SEQUENTIAL:
        items.append(
            _advice(
                SEQUENTIAL[kind(stage)],
                stage,
                _parallel_change(stage),
                f"the map runs Python: {GIL}; and tfperf cannot know whether it is safe to "
                "call from several threads",
            )
        )
    return items


def _advice(name: str, stage: Any, change: str, reason: str) -> dict:
    return {"name": name, "change": change, "reason": reason, "stage": label(stage)}


VECTORISE = """def {name}_batch(images):  # the same work, NumPy over the whole batch
    ...
ds = ds.batch(n).map(lambda x, *rest: (tf.py_function({name}_batch, [x], x.dtype), *rest))
# one Python call per batch instead of one per element"""
TF_OPS = """# write {name} with TensorFlow ops (tf.image.*, tf.math.*) instead of tf.py_function:
ds = ds.map({name}_tf, num_parallel_calls=tf.data.AUTOTUNE)"""
GENERATOR_TO_TF = """# yield raw records from {name}; do the per-element work in TensorFlow ops:
ds = ds.map(tf_fn, num_parallel_calls=tf.data.AUTOTUNE)
# or read the data with from_tensor_slices / TFRecordDataset instead of a generator"""
PARALLEL_GENERATORS = """ds = tf.data.Dataset.range(n).interleave(  # one generator per shard
    lambda i: tf.data.Dataset.from_generator({name}, args=(i,), output_signature=...),
    num_parallel_calls=tf.data.AUTOTUNE)"""
