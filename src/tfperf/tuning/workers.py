"""The live workers of a tune: one per config, the default's and the incumbent's kept alive.

Contract: :class:`WorkerPool` starts a worker for a config on first use
(:meth:`WorkerPool.get`) and hands back the same :class:`Handle` until it is dropped; every
worker must report the default's model and inputs (:class:`tfperf.runner.identity.SameModel`,
else :class:`~tfperf.runner.identity.ModelDiffers` is raised and the worker closed).
:meth:`WorkerPool.evict` keeps at most ``keep`` idle workers besides the ones named.
:meth:`WorkerPool.start_spare` starts a second worker for a config whose worker is in use, which
:meth:`WorkerPool.renew` puts in that worker's place (a measurement made again in fresh
processes whose start overlapped what came before it).
:meth:`WorkerPool.outputs` has a worker write one call's outputs and reads them back.
For a training step, the first worker (the default's) writes its initial weights to a file of
the pool's and a worker of another runtime (``keras-jax``) loads them before its fingerprint is
taken (``weights_out`` / ``weights_in`` in the workload, ``docs/ARCHITECTURE.md``).
A candidate's worker (any config but the default) starts as :class:`CandidateStart` says: a
training tune skips what only the default's figures show (the input-wait probe) and warms a
candidate up over fewer calls (the rounds are interleaved with the default's, so a candidate
still settling shows in its interval, not as a false speed).
A :class:`Handle` knows what one timed value covers (``unit``: a call, or a sample in a
throughput tune) and how many calls make a block.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import statistics
import tempfile
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfperf.accuracy import load_outputs
from tfperf.core.config import Config
from tfperf.core.errors import UserError
from tfperf.core.knobs import label
from tfperf.runner.handle import Worker, WorkerFailed, close_all
from tfperf.runner.identity import SameModel, weights_handoff
from tfperf.runner.measure import source_of
from tfperf.runner.rounds import calls_per_block
from tfperf.tuning.space import split_batch

MAX_CALLS = 100_000
"""A tune's blocks may hold this many calls (bench caps them lower: it stores every sample)."""


@dataclass(frozen=True)
class CandidateStart:
    """How a candidate's worker starts where the default's does otherwise: ``workload`` keys
    laid over the workload, and its warm-up policy (``None``: the default's)."""

    workload: Mapping[str, Any] = field(default_factory=dict)
    warmup: Mapping[str, Any] | None = None


class Handle:
    """A live worker for one config and what it needs to time a block."""

    def __init__(self, worker: Worker, ready: dict, block_s: float, per_sample: bool) -> None:
        self.worker = worker
        self.ready = ready
        self.batch = int(ready.get("batch") or 1)
        self.unit = self.batch if per_sample else 1
        """What one timed value covers: a call (latency) or a sample (throughput)."""
        tail = (ready.get("warmup") or {}).get("samples_s", [])[-5:] or [
            ready.get("first_call_s") or block_s
        ]
        self.per_call_s = max(statistics.median(tail), 1e-7)
        """The warm-up's time per call (a rejected candidate's only figure)."""
        self.calls = calls_per_block(ready, block_s, MAX_CALLS)

    @property
    def alive(self) -> bool:
        return True  # a failing worker raises WorkerFailed: the candidate fails

    def block(self, round_no: int) -> list[float]:
        """One block of calls (a member of :class:`tfperf.runner.rounds.Rounds`)."""
        return self.worker.run_block(self.calls)


class WorkerPool:
    """Workers by config label (see the module docstring)."""

    def __init__(
        self,
        workload: Mapping[str, Any],
        *,
        block_s: float,
        per_sample: bool,
        warmup: Mapping[str, Any],
        keep: int,
        candidates: CandidateStart = CandidateStart(),
    ) -> None:
        self.workload = dict(workload)
        self.candidates = candidates
        self.block_s = block_s
        self.per_sample = per_sample
        self.warmup = dict(warmup)
        self.keep = keep
        self.same = SameModel(source_of(self.workload))
        self._handles: OrderedDict[str, Handle] = OrderedDict()
        self._ahead: OrderedDict[str, Worker] = OrderedDict()
        """Workers started ahead of their use (:meth:`start_ahead`), not yet ready."""
        self._spares: OrderedDict[str, Worker] = OrderedDict()
        """Second workers of configs whose worker is in use (:meth:`start_spare`)."""
        self._first_runtime: str | None = None

    @functools.cached_property
    def _tmp(self) -> Path:
        """The folder of the files handed to workers, made on first use: a pool that never
        hands one over leaves nothing behind, even where it is never closed."""
        return Path(tempfile.mkdtemp(prefix="tfperf-tune-"))

    def get(self, config: dict, timeout_s: float) -> Handle:
        """The worker of ``config``, started (and checked) on first use. Returns once every
        worker started ahead is ready too: the caller times blocks next, and a worker still
        starting would take CPU from them."""
        name = label(config)
        if name not in self._handles:
            ahead = self._ahead.pop(name, None)
            worker = ahead or self._spawn(config, timeout_s)
            self._handles[name] = self._checked(worker, worker.wait_ready())
        self._handles.move_to_end(name)
        self._settle()
        return self._handles[name]

    def start_ahead(self, config: dict, timeout_s: float) -> None:
        """Start ``config``'s worker without waiting for it: its start overlaps the start
        of the worker :meth:`get` is asked for next. A worker that fails to start ahead is
        forgotten; asked for later, it starts again and fails where its candidate is told."""
        if label(config) not in self._handles:
            self._start_into(self._ahead, config, timeout_s)

    def start_spare(self, config: dict, timeout_s: float) -> None:
        """Start a second worker for ``config``, whose worker is in use, without waiting for
        it: a fresh process that takes that worker's place when :meth:`renew` drops it (a
        measurement made again apart from the processes of the first). Spares that will not
        be used are closed by :meth:`drop_spares`."""
        self._start_into(self._spares, config, timeout_s)

    def _start_into(self, table: OrderedDict[str, Worker], config: dict,
                    timeout_s: float) -> None:
        """Spawn ``config``'s worker into ``table`` unless it holds one; one that cannot start
        (an allocator not installed) is not kept: the candidate is told when it is tried."""
        name = label(config)
        if name not in table:
            with contextlib.suppress(WorkerFailed, UserError):
                table[name] = self._spawn(config, timeout_s)

    def renew(self, name: str) -> None:
        """Close the worker of the config labelled ``name``; its spare, where one was started,
        is its next worker (ready at the next :meth:`get`), else that one starts anew."""
        self.drop(name)
        spare = self._spares.pop(name, None)
        if spare is not None:
            self._ahead[name] = spare

    def drop_spares(self) -> None:
        """Close the spares not taken by :meth:`renew`."""
        close_all(list(self._spares.values()))
        self._spares.clear()

    def started(self, config: dict) -> bool:
        """Whether ``config``'s worker is started (ready, or started ahead)."""
        name = label(config)
        return name in self._handles or name in self._ahead

    def _settle(self) -> None:
        """Wait until each worker started ahead is ready, and keep the ones that are."""
        while self._ahead:
            name, worker = self._ahead.popitem(last=False)
            try:
                self._handles[name] = self._checked(worker, worker.wait_ready())
            except (WorkerFailed, UserError):
                worker.close()

    def _spawn(self, config: dict, timeout_s: float) -> Worker:
        batch, worker_config = split_batch(config)
        workload = self._weights_handoff(worker_config)
        warmup = self.warmup
        if config:
            workload = {**workload, **self.candidates.workload}
            warmup = dict(self.candidates.warmup or warmup)
        worker = Worker(
            workload if batch is None else {**workload, "tile_to": batch},
            Config.from_dict(worker_config),
            timeout_s=max(5.0, timeout_s),
            init_timeout_s=max(5.0, timeout_s),
            warmup=warmup,
        )
        worker.start()
        return worker

    def _checked(self, worker: Worker, ready: dict) -> Handle:
        """The handle of a ready worker that reports the default's model (else closed)."""
        try:
            self.same.check(ready)
        except UserError:
            worker.close()
            raise
        return Handle(worker, ready, self.block_s, self.per_sample)

    def _weights_handoff(self, config: Mapping[str, Any]) -> dict:
        """The workload, with the file a training step's initial weights cross Keras backends
        by (:func:`tfperf.runner.identity.weights_handoff`): the first worker is the
        default's."""
        if self.workload.get("kind") != "train":
            return dict(self.workload)  # no file: the folder is made only where one is
        runtime = config.get("runtime") or "tf"
        path = str(self._tmp / "initial-weights.npz")
        workload = weights_handoff(self.workload, runtime, self._first_runtime, path)
        self._first_runtime = self._first_runtime or runtime
        return workload

    def labels(self) -> list[str]:
        """The labels of the live (ready) workers."""
        return list(self._handles)

    def find(self, name: str) -> Handle | None:
        """The live worker of the config labelled ``name``, if any."""
        return self._handles.get(name)

    def evict(self, keep: set[str]) -> None:
        """Close the oldest workers not named in ``keep`` beyond the spare allowance."""
        spare = [n for n in self._handles if n not in keep]
        while len(spare) > self.keep:
            self._handles.pop(spare.pop(0)).worker.close()

    def drop(self, name: str) -> None:
        handle = self._handles.pop(name, None)
        if handle is not None:
            handle.worker.close()

    def drop_dead(self) -> None:
        """Forget workers that failed (a failed worker closes itself)."""
        dead = [n for n, h in self._handles.items() if h.worker.pid is None or h.worker.closed]
        for name in dead:
            self._handles.pop(name)

    def outputs(self, handle: Handle, timeout_s: float | None = None) -> list:
        """One call's outputs of ``handle``'s worker (waited for up to ``timeout_s``, else
        the worker's own timeout)."""
        path = self._tmp / f"out-{time.monotonic_ns()}.npz"
        handle.worker.outputs(path, timeout_s)
        arrays = load_outputs(path)
        path.unlink(missing_ok=True)
        return arrays

    def close(self) -> None:
        """Close every worker, all asked to quit first, and remove the temporary files."""
        close_all([*(h.worker for h in self._handles.values()), *self._ahead.values(),
                   *self._spares.values()])
        self._handles.clear()
        self._ahead.clear()
        self._spares.clear()
        if "_tmp" in self.__dict__:
            shutil.rmtree(self.__dict__.pop("_tmp"), ignore_errors=True)
