"""The tune's worker pool with real workers: a worker started ahead overlaps the next start,
is ready before anything is timed, is the one handed out later; one that fails to start ahead
is forgotten, and started again when its candidate is tried. A spare is a second process for a
config whose worker is in use, which takes its place when that one is renewed."""

from __future__ import annotations

import tempfile

import pytest

from tfperf.core.knobs import label
from tfperf.tuning.workers import CandidateStart, WorkerPool

pytestmark = [pytest.mark.tf]

TINY_MLP = {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1}
ONE_THREAD = {"intra_threads": 1}
ONE_POOL = {"inter_threads": 1}


def test_a_worker_started_ahead_is_ready_before_the_next_get_returns_and_is_reused(
    monkeypatch, tmp_path,
):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    own = CandidateStart(workload={"input_probe": False},
                         warmup={"min_calls": 1, "max_seconds": 0.2})
    pool = WorkerPool(TINY_MLP, block_s=0.05, per_sample=False,
                      warmup={"min_calls": 2, "max_seconds": 0.5}, keep=2, candidates=own)
    try:
        pool.start_ahead(ONE_THREAD, 120.0)
        ahead = pool._ahead[label(ONE_THREAD)]
        default = pool.get({}, 120.0)
        # nothing is timed while a worker still starts: get returned once both were ready
        assert ahead.ready is not None and default.worker.ready is not None
        handle = pool.find(label(ONE_THREAD))
        assert handle is not None and handle.worker is ahead
        assert pool.get(ONE_THREAD, 120.0) is handle  # no second start
        assert handle.worker.config.intra_threads == 1
        # a candidate starts as CandidateStart says, the default as the pool's own workload
        assert handle.worker.warmup == own.warmup and default.worker.warmup["min_calls"] == 2
        assert handle.worker.workload["input_probe"] is False
        assert "input_probe" not in default.worker.workload

        monkeypatch.setenv("TFPERF_INJECT_FAULT", "exit-on-init")  # this start ahead dies
        pool.start_ahead(ONE_POOL, 120.0)
        monkeypatch.delenv("TFPERF_INJECT_FAULT")
        crashed = pool._ahead[label(ONE_POOL)]
        assert pool.get({}, 120.0) is default  # the crash is not raised where it is not asked
        assert pool.find(label(ONE_POOL)) is None and not pool._ahead
        again = pool.get(ONE_POOL, 120.0)  # asked for, it starts afresh
        assert again.worker is not crashed and again.worker.config.inter_threads == 1
        # an inference pool hands its workers no file: it makes no folder to leave behind
        assert not any(tmp_path.iterdir())
    finally:
        pool.close()


def test_a_spare_is_a_fresh_process_that_takes_its_configs_place_once_renewed():
    pool = WorkerPool(TINY_MLP, block_s=0.05, per_sample=False,
                      warmup={"min_calls": 1, "max_seconds": 0.2}, keep=2)
    try:
        first = pool.get({}, 120.0)
        pool.start_spare({}, 120.0)
        spare = pool._spares[label({})]
        assert spare.pid != first.worker.pid
        assert pool.get({}, 120.0) is first  # in use until renewed: get hands out the first
        pool.renew(label({}))
        renewed = pool.get({}, 120.0)
        assert first.worker.closed and renewed.worker is spare and spare.ready is not None
        pool.start_spare({}, 120.0)  # one that no measurement takes is closed
        unused = pool._spares[label({})]
        pool.drop_spares()
        assert unused.closed and not pool._spares and pool.get({}, 120.0) is renewed
    finally:
        pool.close()


def test_workers_start_two_at_a_time_the_one_tried_now_first_none_before_its_verdict(monkeypatch):
    from tfperf.tuning.evaluate import Evaluator

    evaluator = Evaluator(TINY_MLP)
    ready: set[str] = set()
    started: list[str] = []
    monkeypatch.setattr(evaluator.workers, "started", lambda config: label(config) in ready)
    monkeypatch.setattr(evaluator.workers, "start_ahead",
                        lambda config, timeout_s: started.append(label(config)))
    one_pool_one_thread = {**ONE_POOL, **ONE_THREAD}
    # the one tried now has no worker: it starts with the next, not with the two after it
    evaluator.start_ahead(ONE_THREAD, ONE_POOL, one_pool_one_thread)
    assert started == [label(ONE_THREAD), label(ONE_POOL)]
    started.clear()
    # it has one, the next has none: nothing starts before its rounds, whose verdict says
    # which candidates come next
    ready.add(label(ONE_THREAD))
    evaluator.start_ahead(ONE_THREAD, ONE_POOL, one_pool_one_thread)
    assert started == []
    # the next one tried has no worker: it starts with the first after it that has none
    ready.add(label(ONE_POOL))
    evaluator.start_ahead(one_pool_one_thread, ONE_THREAD, {"intra_threads": 2}, ONE_POOL)
    assert started == [label(one_pool_one_thread), label({"intra_threads": 2})]


def test_the_workers_of_part_of_the_incumbent_are_kept_for_its_pruning(monkeypatch):
    from tfperf.tuning.evaluate import Evaluator

    evaluator = Evaluator(TINY_MLP)
    live = ["default", "xla=jit", "intra_threads=1", "steps_per_execution=8",
            "steps_per_execution=8,intra_threads=1"]
    kept: list[set[str]] = []
    monkeypatch.setattr(evaluator.workers, "labels", lambda: live)
    monkeypatch.setattr(evaluator.workers, "evict", kept.append)

    def measured(*args):
        raise LookupError("measured")

    monkeypatch.setattr(evaluator, "_try", measured)
    with pytest.raises(LookupError):
        evaluator({"steps_per_execution": 8, "xla": "jit", "inter_threads": 1},
                  {"steps_per_execution": 8, "xla": "jit"}, None)
    assert kept == [{"default", "steps_per_execution=8,xla=jit",
                     "steps_per_execution=8,xla=jit,inter_threads=1",
                     "xla=jit", "steps_per_execution=8"}]


def test_closing_the_pool_asks_every_worker_to_quit_before_waiting_for_any(monkeypatch):
    # closed one by one, each worker's wind-down is waited for before the next is asked
    pool = WorkerPool(TINY_MLP, block_s=0.05, per_sample=False,
                      warmup={"min_calls": 1, "max_seconds": 0.2}, keep=3)
    events: list[tuple[str, str]] = []
    try:
        workers = [pool.get(config, 120.0).worker for config in ({}, ONE_THREAD)]
        for worker in workers:
            for step in ("ask_to_quit", "close"):
                original = getattr(worker, step)

                def logged(original=original, step=step, name=label(worker.config.changes())):
                    events.append((step, name))
                    original()

                monkeypatch.setattr(worker, step, logged)
    finally:
        pool.close()
    names = [label({}), label(ONE_THREAD)]
    first_close = events.index(("close", names[0]))
    assert events[:first_close] == [("ask_to_quit", n) for n in names]
    assert {n for step, n in events if step == "close"} == set(names)
    # each quit was honoured: the workers exited by themselves, not killed after the grace
    assert [w._child.proc.returncode for w in workers] == [0, 0]
