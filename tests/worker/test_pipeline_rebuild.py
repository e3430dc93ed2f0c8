"""Reading a built tf.data pipeline's functions and rebuilding it with a stage changed: Python
is detected, a parallel-safe map is parallelised with the same elements, batch-before-map is
applied only where the function is checked to give the same per-element results."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tfperf.worker.pipeline import functions, rebuild, stages, structural  # noqa: E402
from tfperf.worker.pipeline.rebuild import NotRebuildable  # noqa: E402

X = np.arange(32 * 4, dtype=np.float32).reshape(32, 4)


def _source() -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices((X, np.arange(32)))


def _double(x, y):
    return x * 2.0, y


def _elements(ds: tf.data.Dataset) -> list:
    return [tf.nest.map_structure(lambda t: t.numpy().tolist(), e) for e in ds]


def _halve(a: np.ndarray) -> np.ndarray:
    return a / 2


def test_python_is_found_in_py_function_numpy_function_and_generators() -> None:
    py = _source().map(lambda x, y: (tf.py_function(_halve, [x], tf.float32), y))
    npf = _source().map(lambda x, y: (tf.numpy_function(_halve, [x], tf.float32), y))

    def rows():
        yield from X

    gen = tf.data.Dataset.from_generator(rows, output_signature=tf.TensorSpec((4,), tf.float32))
    pure = _source().map(_double)
    assert [functions.runs_python(s) for s in stages.chain(py)] == [False, True]
    assert functions.runs_python(stages.chain(npf)[-1])
    assert functions.runs_python(stages.chain(gen)[-1])
    assert not functions.runs_python(stages.chain(pure)[-1])
    assert stages.label(stages.chain(py)[-1]) == "map(_halve)"
    assert stages.label(stages.chain(gen)[-1]) == "from_generator(rows)"


def test_parallel_safe_allows_random_draws_but_not_python_or_state() -> None:
    counter = tf.Variable(0)

    def count(x, y):
        counter.assign_add(1)
        return x, y

    def flip(x, y):
        return tf.where(tf.random.uniform([]) < 0.5, x, -x), y

    assert functions.parallel_safe(stages.chain(_source().map(_double))[-1])
    assert functions.parallel_safe(stages.chain(_source().map(flip))[-1])
    assert not functions.parallel_safe(stages.chain(_source().map(count))[-1])
    py = _source().map(lambda x, y: (tf.py_function(_halve, [x], tf.float32), y))
    assert not functions.parallel_safe(stages.chain(py)[-1])


def test_parallel_rebuild_keeps_every_later_stage_and_element() -> None:
    ds = (
        _source()
        .map(_double)
        .filter(lambda x, y: y % 3 != 0)
        .batch(4, drop_remainder=True)
        .take(5)
        .repeat(2)
        .prefetch(1)
    )
    rebuilt = structural.parallelise(ds, "MapDataset")
    kinds = [stages.kind(s) for s in stages.chain(rebuilt)]
    assert kinds[1] == "ParallelMapDataset" and "MapDataset" not in kinds
    assert len(kinds) == len(stages.chain(ds))
    assert _elements(rebuilt) == _elements(ds)  # order kept: deterministic by default


def test_a_stage_that_cannot_be_rebuilt_leaves_the_fix_unmeasured() -> None:
    ds = _source().map(_double).padded_batch(4)
    found = structural.plan(ds, None)
    assert "parallel_map" not in [r.name for r in found.rewrites]
    item = next(u for u in found.unmeasured if u["name"] == "parallel_map")
    assert "PaddedBatchDataset" in item["reason"] and "num_parallel_calls" in item["change"]


def test_batch_before_map_only_where_the_batch_gives_the_same_results() -> None:
    ds = _source().map(_double).batch(8)
    found = structural.plan(ds, None)
    fix = next(r for r in found.rewrites if r.name == "batch_before_map")
    moved = fix.apply(ds)
    assert [stages.kind(s) for s in stages.chain(moved)][1:] == ["BatchDataset", "MapDataset"]
    assert _elements(moved) == _elements(ds)

    shuffled = structural.plan(_source().map(_double).shuffle(8).batch(8), None)
    assert "batch_before_map" not in [r.name for r in shuffled.rewrites]
    item = next(u for u in shuffled.unmeasured if u["name"] == "batch_before_map")
    assert "stand between the map and the batch (shuffle)" in item["reason"]

    def centre(x, y):  # the mean of a batch is not the mean of one element
        return x - tf.reduce_mean(x), y

    def first(x, y):  # a batch has another first row
        return x[0] * tf.ones_like(x), y

    for func in (centre, first):
        found = structural.plan(_source().map(func).batch(8), None)
        assert "batch_before_map" not in [r.name for r in found.rewrites]
        item = next(u for u in found.unmeasured if u["name"] == "batch_before_map")
        assert "other results on a batch" in item["reason"]


def test_the_batch_check_refuses_what_it_cannot_compare() -> None:
    ragged = tf.data.Dataset.range(1, 9).map(lambda n: tf.range(n))
    with pytest.raises(NotRebuildable, match="differ in shape"):
        rebuild.check_batchable(lambda t: t * 2, ragged)
    with pytest.raises(NotRebuildable, match="fails on a batch"):  # written for one element
        rebuild.check_batchable(lambda n: tf.reshape(n, [1]), tf.data.Dataset.range(4))

    def flip(x, y):
        return tf.where(tf.random.uniform([]) < 0.5, x, -x), y

    found = structural.plan(_source().map(flip).batch(8), None)
    item = next(u for u in found.unmeasured if u["name"] == "batch_before_map")
    assert "random" in item["reason"]


def test_unmeasured_fixes_of_the_bounding_stage_come_first() -> None:
    py = _source().map(lambda x, y: (tf.py_function(_halve, [x], tf.float32), y))
    ds = py.batch(4)
    found = structural.plan(ds, "map(_halve)")
    names = [u["name"] for u in found.unmeasured]
    assert names[:3] == ["batch_before_map", "tf_ops", "parallel_map"]
    assert all(u["stage"] == "map(_halve)" for u in found.unmeasured[:3])
    assert "GIL" in found.unmeasured[2]["reason"]
    assert not found.rewrites  # nothing about Python is rebuilt
