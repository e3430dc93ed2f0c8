"""``tfperf tune`` as a library function: find the fastest correct configuration for a workload.

Contract
--------

:func:`tune` ``(workload, ...) -> dict`` searches the pruned space of :mod:`tfperf.space` with
:class:`tfperf.search.Search` and returns the JSON document ``tfperf tune --json`` prints::

    {"run_id", "workload", "machine": {"fingerprint", "cpu", "cores"}, "install",
     "objective": "latency"|"throughput",
     "strategy", "stopped", "trials", "elapsed_s", "tolerance", "space_size",
     "default": {"time_ms", "batch", "samples_per_s"},
     "recommendation": {"label", "config", "keep_default": bool, "reason",
                        "speedup": {"median", "ci95": [lo, hi], "p_value", "verdict", ...},
                        "time_ms", "batch", "samples_per_s", "max_abs_error",
                        "max_rel_error", "top1_agreement",
                        "adoption", "adoption_text", "artifact", "notes"},
     "candidates": [{"label", "config", "status": "measured"|"rejected"|"failed", "reason",
                     "speedup", "time_ms", "batch", "samples_per_s", "max_abs_error",
                     "max_rel_error", "top1_agreement", "metric", "adoption", "artifact",
                     "notes"}],  # ranked
     "unavailable": [{"knob", "value", "reason"}],
     "profile": path | None, "artifacts_dir": path | None, "warnings": [...]}

``time_ms`` is always the median time of one call (``batch`` samples). The objective decides
what a speedup compares: ``"latency"`` (the default) the time of one call; ``"throughput"``
(``tune(..., throughput=True)``, which adds the ``batch`` knob of :mod:`tfperf.space`) the time
per sample, a call's time over its batch, so a speedup is the candidate's samples per second
over the default's at the workload's batch. Every comparison uses it: the interleaved rounds,
the search's steps, the confirmation and the ranking.

How a candidate is tried (:class:`Evaluator`): a worker per config (the default's and the
incumbent's stay alive, with a few recent ones); the candidate's outputs on the sample inputs
are checked against the default's (fp32 TensorFlow; a candidate at another batch runs on the
same sample rows repeated, and is checked against the reference rows repeated the same way) by
:func:`tfperf.accuracy.guard` first —
beyond tolerance it is *rejected* and not timed further; then rounds of blocks interleave
default, incumbent and candidate (in an order shuffled each round, as in
:mod:`tfperf.measure`) until the verdict against the incumbent is
decided or ``max_rounds`` is reached. A conversion that fails, a worker that crashes or hangs
past its timeout (the time left in the budget, at most ``candidate_timeout_s``) makes the
candidate *failed* with the worker's reason, and the search goes on.

The final confirmation round measures the winner against the default alone, interleaved, for
``confirm_rounds`` rounds: the reported speedup and its CI come from it. From 14 rounds on they
are shared among 2 or 3 pairs of worker processes (:func:`confirm_processes`), each pair after
the first freshly started: a config's speed can depend on its process, and only several
processes show it (:func:`tfperf.stats.paired_speedup` with ``processes``). Unless that verdict
is ``"faster"`` and the whole interval lies above 1, the recommendation is to keep the default.

Everything is recorded in the store as it happens (a run of kind ``"tune"``, one trial per
evaluated candidate whose ``info["outcome"]`` is the :class:`tfperf.search.Outcome`), so
``resume=RUN`` replays an interrupted tune's finished candidates without measuring them again.

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import contextlib
import math
import random
import shutil
import statistics
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from tfperf.accuracy import DEFAULT_TOLERANCE, Tolerance
from tfperf.config import Config
from tfperf.convert import artifact_from_notes
from tfperf.errors import UserError
from tfperf.identity import SameModel
from tfperf.keepdefault import keep_default_why, rejection_advice
from tfperf.measure import ORDER_SEED, source_of
from tfperf.search import FAILED, MEASURED, REJECTED, Outcome, Search, cache_key
from tfperf.space import (
    ADOPTION_TEXT,
    DEFAULT_BATCHES,
    Space,
    adoption,
    label,
    normalize,
    split_batch,
    to_config_dict,
)
from tfperf.workerproc import Worker, WorkerFailed

KIND = "tune"


class TuneInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`tune`: run ``run_id`` is stored as ``interrupted`` with its
    ``finished`` candidates, which ``resume=run_id`` replays without measuring them again."""

    def __init__(self, run_id: int, finished: int) -> None:
        super().__init__(run_id, finished)
        self.run_id = run_id
        self.finished = finished


class Progress:
    """Receives progress events (the CLI shows them with rich); every method may be ignored."""

    def start(self, total: int | None) -> None:
        """The search starts; ``total`` is the trial limit when known."""

    def candidate(self, name: str) -> None:
        """A candidate is being tried."""

    def done(self, outcome: Outcome) -> None:
        """A candidate finished."""

    def phase(self, text: str) -> None:
        """A phase without a candidate (starting the default, confirming)."""


class _Handle:
    """A live worker for one config and what it needs to time a block.

    ``unit`` is what one timed value covers: ``1`` (a call: latency) or the worker's batch (a
    sample: throughput); :meth:`block_median` divides each block's median call time by it.
    """

    def __init__(self, worker: Worker, ready: dict, block_s: float, per_sample: bool) -> None:
        self.worker = worker
        self.ready = ready
        self.batch = int(ready.get("batch") or 1)
        self.unit = self.batch if per_sample else 1
        tail = (ready.get("warmup") or {}).get("samples_s", [])[-5:] or [
            ready.get("first_call_s") or block_s
        ]
        self.per_call_s = max(statistics.median(tail), 1e-7)
        self.calls = int(min(100_000, max(1, round(block_s / self.per_call_s))))

    def block_median(self) -> tuple[float, list[float]]:
        """The block's median time per call (latency) or per sample (throughput), and its raw
        per-call samples (what the store keeps)."""
        samples = self.worker.run_block(self.calls)
        return statistics.median(samples) / self.unit, samples


CONFIRM_ROUNDS_PER_PROCESS = 7
"""Each pair of confirmation workers measures at least this many rounds (>= MIN_PAIRS)."""
MAX_CONFIRM_PROCESSES = 3


def confirm_processes(rounds: int) -> int:
    """How many worker pairs share ``rounds`` confirmation rounds: one per 7 rounds, 1 to 3
    (the default 21 rounds: 3; ``--quick``'s 10: 1)."""
    return max(1, min(MAX_CONFIRM_PROCESSES, rounds // CONFIRM_ROUNDS_PER_PROCESS))


class Evaluator:
    """Tries candidates for real in worker processes (see the module docstring)."""

    def __init__(
        self,
        workload: Mapping[str, Any],
        *,
        tolerance: Tolerance = DEFAULT_TOLERANCE,
        labels: Any = None,
        block_s: float = 0.1,
        min_rounds: int = 6,
        max_rounds: int = 16,
        candidate_timeout_s: float = 300.0,
        warmup: Mapping[str, Any] | None = None,
        keep_workers: int = 2,
        store: Any = None,
        run_id: int | None = None,
        progress: Progress | None = None,
        threshold: float = 0.03,
        per_sample: bool = False,
    ) -> None:
        self.workload = dict(workload)
        self.per_sample = per_sample
        """Throughput: every time compared is per sample (a call's time over its batch)."""
        self.tolerance = tolerance
        self.labels = labels
        self.block_s = block_s
        self.min_rounds = min_rounds
        self.max_rounds = max_rounds
        self._order_rng = random.Random(ORDER_SEED)
        self.candidate_timeout_s = candidate_timeout_s
        self.warmup = dict(warmup or {"min_calls": 5, "max_seconds": 3.0})
        self.keep_workers = keep_workers
        self.store = store
        self.run_id = run_id
        self.progress = progress or Progress()
        self.threshold = threshold
        self._workers: OrderedDict[str, _Handle] = OrderedDict()
        self.same = SameModel(source_of(self.workload))
        """Every worker must load the default's model and inputs (:mod:`tfperf.identity`)."""
        self._tmp = Path(tempfile.mkdtemp(prefix="tfperf-tune-"))
        self.reference: list | None = None
        self.default_batch = 1
        """The batch of the default (and of the reference outputs)."""
        self.default_ready: dict | None = None
        self.baseline_trial: int | None = None
        self.not_inherited: dict[str, str] = {}
        """Speed-relevant variables of the caller's environment that workers did not get."""

    # ------------------------------------------------------------------ workers
    def _start(self, config: dict, timeout_s: float) -> _Handle:
        name = label(config)
        if name in self._workers:
            self._workers.move_to_end(name)
            return self._workers[name]
        batch, worker_config = split_batch(config)
        worker = Worker(
            self.workload if batch is None else {**self.workload, "tile_to": batch},
            Config.from_dict(worker_config),
            timeout_s=max(5.0, timeout_s),
            init_timeout_s=max(5.0, timeout_s),
            warmup=self.warmup,
        )
        worker.start()
        ready = worker.wait_ready()
        try:
            self.same.check(ready)
        except UserError:
            worker.close()
            raise
        handle = _Handle(worker, ready, self.block_s, self.per_sample)
        self._workers[name] = handle
        return handle

    def _evict(self, keep: set[str]) -> None:
        spare = [n for n in self._workers if n not in keep]
        while len(spare) > self.keep_workers:
            self._workers.pop(spare.pop(0)).worker.close()

    def _drop(self, name: str) -> None:
        handle = self._workers.pop(name, None)
        if handle is not None:
            handle.worker.close()

    def _drop_dead(self) -> None:
        """Forget workers that failed (a failed worker closes itself)."""
        for name in [
            n
            for n, h in self._workers.items()
            if h.worker.pid is None or getattr(h.worker, "_closed", False)
        ]:
            self._workers.pop(name)

    def close(self) -> None:
        """Close every worker, close the baseline trial and remove temporary files."""
        if self.store is not None and self.baseline_trial is not None:
            self.store.finish_trial(self.baseline_trial, "ok", {"role": "default"}, None)
            self.baseline_trial = None
        for handle in self._workers.values():
            handle.worker.close()
        self._workers.clear()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def _outputs(self, handle: _Handle) -> list:
        from tfperf.accuracy import load_outputs

        path = self._tmp / f"out-{time.monotonic_ns()}.npz"
        handle.worker.outputs(path)
        arrays = load_outputs(path)
        path.unlink(missing_ok=True)
        return arrays

    def start_default(self) -> dict:
        """Start the default worker and take the reference outputs; its ``ready`` message.

        Raises :class:`UserError` when the default itself cannot run (nothing to tune).
        """
        try:
            handle = self._start({}, self.candidate_timeout_s)
            self.reference = self._outputs(handle)
        except WorkerFailed as exc:
            raise UserError(
                f"the workload does not run under the default configuration ({exc.reason}); "
                "check it with `tfperf bench` first."
            ) from None
        self.default_ready = handle.ready
        self.default_batch = handle.batch
        self.not_inherited = dict(handle.worker.not_inherited)
        if self.store is not None:
            self.baseline_trial = self.store.new_trial(
                self.run_id, "default", to_config_dict({}), "baseline"
            )
            warm = (handle.ready.get("warmup") or {}).get("samples_s") or []
            if warm:
                self.store.add_block(self.baseline_trial, warm, "warmup")
        return handle.ready

    def reference_at(self, batch: int) -> tuple[list, Any]:
        """The reference outputs and labels for a candidate that ran at ``batch``: a worker at
        another batch repeats the sample rows (``tile_to``), so each batch-major reference
        array (and the labels) has its rows repeated the same way."""
        from tfperf.inputs import repeat_rows

        reference, labels = list(self.reference or []), self.labels
        if batch == self.default_batch:
            return reference, labels

        def fit(array: Any) -> Any:
            rows = getattr(array, "shape", ())[:1]
            return repeat_rows(array, batch) if rows == (self.default_batch,) else array

        return [fit(a) for a in reference], None if labels is None else fit(labels)

    def reference_is_flat(self) -> bool:
        """Whether every reference output is constant to within 1e-6 of its scale."""
        import numpy as np

        arrays = [np.asarray(a, dtype=np.float64) for a in self.reference or []]
        return bool(arrays) and all(
            a.size == 0 or float(np.ptp(a)) <= 1e-6 * max(float(np.max(np.abs(a))), 1e-30)
            for a in arrays
        )

    # ------------------------------------------------------------------ one candidate
    def __call__(self, config: dict, incumbent: dict, timeout_s: float | None) -> Outcome:
        config, incumbent = normalize(config), normalize(incumbent)
        name = label(config)
        self.progress.candidate(name)
        trial_id = self._new_trial(config)
        self._evict({"default", label(incumbent)})
        limit = (
            self.candidate_timeout_s
            if timeout_s is None
            else min(self.candidate_timeout_s, timeout_s)
        )
        started = time.monotonic()
        try:
            outcome = self._try(config, incumbent, limit, trial_id)
        except WorkerFailed as exc:
            self._drop(name)
            self._drop_dead()
            outcome = Outcome(
                config,
                FAILED,
                reason=_failure_reason(exc, config),
                incumbent=incumbent,
                info={"error": exc.to_dict()},
            )
        outcome.info["elapsed_s"] = time.monotonic() - started
        if outcome.status == MEASURED:
            self._compare(trial_id, outcome.speedup)
        self._finish_trial(trial_id, outcome)
        self.progress.done(outcome)
        return outcome

    def _try(self, config: dict, incumbent: dict, limit: float, trial_id: int | None) -> Outcome:
        from tfperf.accuracy import guard

        name = label(config)
        cand = self._start(config, limit)
        notes = list(cand.ready.get("notes") or [])
        info = {
            "notes": notes,
            "artifact": artifact_from_notes(notes),
            "first_call_s": cand.ready.get("first_call_s"),
            "batch": cand.batch,
        }
        reference, labels = self.reference_at(cand.batch)
        check = guard(reference, self._outputs(cand), self.tolerance, labels)
        if not check["accepted"]:
            self._drop(name)
            return Outcome(
                config,
                REJECTED,
                reason=check["reason"],
                incumbent=incumbent,
                accuracy=check,
                time_ms=cand.per_call_s * 1e3,
                info=info,
            )
        base = self._start({}, limit)
        inc = self._start(incumbent, limit) if incumbent else base
        rounds = self._rounds(
            [base, inc, cand], trial_id, cand, started=time.monotonic(), limit=limit, decide=True
        )
        from tfperf.stats import paired_speedup

        speedup = paired_speedup(rounds[0], rounds[2], self.threshold)
        vs_inc = paired_speedup(rounds[1], rounds[2], self.threshold)
        return Outcome(
            config,
            MEASURED,
            speedup=speedup,
            vs_incumbent=vs_inc,
            incumbent=incumbent,
            accuracy=check,
            time_ms=statistics.median(rounds[2]) * cand.unit * 1e3,
            info=info,
        )

    def _rounds(
        self,
        handles: list[_Handle],
        trial_id: int | None,
        cand: _Handle,
        *,
        started: float,
        limit: float,
        decide: bool,
        rounds: int | None = None,
        first_round: int = 0,
        process: int = 0,
    ) -> list[list[float]]:
        """Interleaved rounds; block medians per handle (a handle listed twice runs once).
        Stored blocks are numbered from ``first_round`` and name their ``process`` if not 0."""
        from tfperf.stats import paired_speedup

        unique = list(dict.fromkeys(id(h) for h in handles))
        by_id = {id(h): h for h in handles}
        medians: dict[int, list[float]] = {i: [] for i in unique}
        target = rounds or self.max_rounds
        for r in range(target):
            order = list(unique)
            self._order_rng.shuffle(order)
            for i in order:
                median, samples = by_id[i].block_median()
                medians[i].append(median)
                self._record(by_id[i], cand, trial_id, samples, first_round + r, process)
            if time.monotonic() - started > limit:
                break
            if decide and r + 1 >= self.min_rounds:
                verdict = paired_speedup(
                    medians[id(handles[1])], medians[id(handles[2])], self.threshold
                )["verdict"]
                if verdict in ("faster", "slower", "same"):
                    break
        return [medians[id(h)] for h in handles]

    def _record(
        self,
        handle: _Handle,
        cand: _Handle,
        trial_id: int | None,
        samples: list,
        r: int,
        process: int = 0,
    ) -> None:
        """Store a block: the candidate's to its trial, the default's to the baseline trial."""
        if self.store is None:
            return
        info = {"round": r} if not process else {"round": r, "process": process}
        if handle is cand and trial_id is not None:
            self.store.add_block(trial_id, samples, "steady", info)
        elif handle is self._workers.get("default") and self.baseline_trial is not None:
            self.store.add_block(self.baseline_trial, samples, "steady", info)

    def confirm(self, config: dict, rounds: int) -> dict:
        """Winner vs default, interleaved for ``rounds`` rounds: ``paired_speedup``'s result
        plus, for each side (``default_``, ``candidate_``), ``ms`` (per call), ``batch`` and
        ``samples_per_s``. The rounds are shared among :func:`confirm_processes` pairs of
        workers, a fresh pair after the first (which may be the search's own workers), so
        that a speed that depends on the process shows in the interval."""
        from tfperf.stats import paired_speedup

        self.progress.phase(f"confirming {label(config)} against the default")
        trial_id = None
        if self.store is not None:
            trial_id = self.store.new_trial(
                self.run_id,
                f"{label(config)} (confirmation)",
                to_config_dict(config),
                "confirmation",
            )
        processes = confirm_processes(rounds)
        times: list[list[float]] = [[], []]
        process_of: list[int] = []
        for k in range(processes):
            if k:
                self._drop(label({}))
                self._drop(label(config))
            base = self._start({}, self.candidate_timeout_s)
            cand = self._start(config, self.candidate_timeout_s)
            result = self._rounds(
                [base, base, cand],
                trial_id,
                cand,
                started=time.monotonic(),
                limit=math.inf,
                decide=False,
                rounds=rounds // processes + (1 if k < rounds % processes else 0),
                first_round=len(process_of),
                process=k,
            )
            times[0] += result[0]
            times[1] += result[2]
            process_of += [k] * len(result[0])
        speedup = paired_speedup(
            times[0], times[1], self.threshold, processes=process_of if processes > 1 else None
        )
        for side, handle, ts in (("default", base, times[0]), ("candidate", cand, times[1])):
            speedup[f"{side}_ms"] = statistics.median(ts) * handle.unit * 1e3
            speedup[f"{side}_batch"] = handle.batch
            speedup[f"{side}_samples_per_s"] = _samples_per_s(speedup[f"{side}_ms"], handle.batch)
        self._compare(trial_id, speedup)
        if self.store is not None and trial_id is not None:
            self.store.finish_trial(trial_id, "ok", {"confirmation": speedup}, None)
        return speedup

    def _compare(self, trial_id: int | None, speedup: dict | None) -> None:
        """Record a candidate-vs-default comparison (for history and the HTML report)."""
        if self.store is None or trial_id is None or self.baseline_trial is None or not speedup:
            return
        self.store.add_comparison(self.run_id, self.baseline_trial, trial_id, speedup)

    # ------------------------------------------------------------------ store
    def _new_trial(self, config: dict) -> int | None:
        if self.store is None:
            return None
        return self.store.new_trial(self.run_id, label(config), to_config_dict(config), "candidate")

    def _finish_trial(self, trial_id: int | None, outcome: Outcome) -> None:
        if self.store is None or trial_id is None:
            return
        status = {MEASURED: "ok", REJECTED: "rejected", FAILED: "failed"}[outcome.status]
        error = {"reason": outcome.reason} if outcome.status != MEASURED else None
        self.store.finish_trial(trial_id, status, {"outcome": outcome.to_dict()}, error)


def _failure_reason(exc: WorkerFailed, config: Mapping[str, Any] | None = None) -> str:
    """The worker's reason, saying where a crash happened when its log tells."""
    tail = exc.stderr_tail or ""
    config = config or {}
    if exc.signal and "lite/python" in tail:
        return f"{exc.reason} inside the LiteRT converter"
    allocator = config.get("allocator", "system")
    if (
        exc.signal
        and str(config.get("runtime", "")).startswith("openvino")
        and allocator != "system"
    ):
        # OpenVINO's CPU plugin frees with glibc what the preloaded allocator handed out.
        return f"{exc.reason}: OpenVINO aborts with {allocator} preloaded (LD_PRELOAD)"
    if exc.signal and "openvino" in tail:
        return f"{exc.reason} inside OpenVINO"
    return exc.reason


# ---------------------------------------------------------------------------- the tune


def _restricted(space: Space, knobs: tuple[str, ...] | None) -> Space:
    """``space`` with only ``knobs`` tuned (all of them when ``None``)."""
    return space.restrict(knobs) if knobs else space


def _resume_cache(
    store: Any, resume: int | str, workload: Mapping[str, Any], objective: str
) -> dict:
    loaded = store.load_run(resume)
    run = loaded["run"]
    if run["kind"] != KIND:
        raise UserError(f"run {run['id']} is a {run['kind']} run, not a tune; pass a tune run.")
    if run["workload"] != dict(workload):
        raise UserError(
            f"run {run['id']} tuned another workload; resume it with the same model and options."
        )
    tuned_for = (run.get("settings") or {}).get("objective", "latency")
    if tuned_for != objective:
        flag = "with --throughput" if tuned_for == "throughput" else "without --throughput"
        raise UserError(f"run {run['id']} tuned for {tuned_for}; resume it {flag}.")
    cache = {}
    for trial in loaded["trials"]:
        data = (trial.get("info") or {}).get("outcome")
        if trial["status"] in ("ok", "rejected", "failed") and data:
            outcome = Outcome.from_dict(data)
            cache[cache_key(outcome.config, outcome.incumbent)] = outcome
    return cache


def _samples_per_s(time_ms: float | None, batch: int | None) -> float | None:
    """Samples per second of calls taking ``time_ms`` for ``batch`` samples each."""
    if not time_ms or not batch:
        return None
    return batch / (time_ms / 1e3)


def _candidate_row(outcome: Outcome) -> dict:
    acc = outcome.accuracy or {}
    batch = outcome.info.get("batch")
    return {
        "label": outcome.label,
        "config": to_config_dict(outcome.config),
        "status": outcome.status,
        "reason": outcome.reason,
        "speedup": outcome.speedup,
        "time_ms": outcome.time_ms,
        "batch": batch,
        "samples_per_s": _samples_per_s(outcome.time_ms, batch),
        "max_abs_error": acc.get("max_abs_error"),
        "max_rel_error": acc.get("max_rel_error"),
        "top1_agreement": acc.get("top1_agreement"),
        "metric": acc.get("metric"),
        "adoption": adoption(outcome.config),
        "artifact": outcome.info.get("artifact"),
        "notes": outcome.info.get("notes", []),
    }


def rank(outcomes: list[Outcome]) -> list[dict]:
    """One row per distinct candidate (its latest measurement), best first.

    Measured candidates by speedup over the default (highest first), then rejected, then
    failed ones.
    """
    latest: dict[str, Outcome] = {}
    for o in outcomes:
        if o.status != MEASURED and o.label in latest and latest[o.label].status == MEASURED:
            continue
        latest[o.label] = o
    order = {MEASURED: 0, REJECTED: 1, FAILED: 2}

    def key(o: Outcome) -> tuple:
        median = (o.speedup or {}).get("median") or 0.0
        return (order[o.status], -median)

    return [_candidate_row(o) for o in sorted(latest.values(), key=key)]


def tune(
    workload: Mapping[str, Any],
    *,
    strategy: str = "staged",
    max_trials: int | None = None,
    budget_s: float | None = None,
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    labels: Any = None,
    runtimes: tuple[str, ...] | None = None,
    knobs: tuple[str, ...] | None = None,
    store_path: str | None = None,
    resume: int | str | None = None,
    profile_out: str | Path | None = None,
    artifacts_dir: str | Path | None = None,
    confirm_rounds: int = 21,
    block_s: float = 0.1,
    min_rounds: int = 6,
    max_rounds: int = 16,
    candidate_timeout_s: float = 300.0,
    threshold: float = 0.03,
    seed: int = 0,
    space: Space | None = None,
    progress: Progress | None = None,
    command: str = "tfperf tune",
    throughput: bool = False,
    batch_sizes: tuple[int, ...] | None = None,
) -> dict:
    """Tune ``workload`` (a workload dict); see the module docstring for the result.

    ``throughput`` tunes samples per second instead of the time of one call: the ``batch``
    knob tries ``batch_sizes`` (default :data:`tfperf.space.DEFAULT_BATCHES`, without sizes
    whose call the default would take over :data:`MAX_CALL_S` to run) and every time compared
    is per sample.
    """
    from tfperf.bench import machine_summary
    from tfperf.machine import collect_machine
    from tfperf.search import STRATEGIES
    from tfperf.space import build_space, machine_facts
    from tfperf.store import Store

    if strategy not in STRATEGIES:
        raise UserError(f"unknown strategy {strategy!r}: use one of {', '.join(STRATEGIES)}.")
    if max_trials is not None and max_trials < 1:
        raise UserError("--max-trials must be at least 1.")
    if budget_s is not None and budget_s <= 0:
        raise UserError("--budget must be a positive number of seconds.")
    if batch_sizes is not None and not throughput:
        raise UserError("--batch-sizes applies to a throughput tune: add --throughput.")
    if knobs and "batch" in knobs and not throughput:
        raise UserError("the batch knob is tuned for throughput only: add --throughput.")
    progress = progress or Progress()
    machine = collect_machine()
    train = _is_training(workload)
    fmt = workload.get("format", "builtin") if workload.get("kind") == "model" else "builtin"
    batches = tuple(batch_sizes or DEFAULT_BATCHES) if throughput else ()
    facts = machine_facts(machine, fmt, train, runtimes, int(workload.get("batch", 1)), batches)
    given_space = space is not None
    space = _restricted(space or build_space(facts), knobs)
    objective = "throughput" if throughput or "batch" in space.knobs() else "latency"
    settings = {
        "objective": objective,
        "batch_sizes": list(batches),
        "strategy": strategy,
        "max_trials": max_trials,
        "budget_s": budget_s,
        "tolerance": tolerance.to_dict(),
        "threshold": threshold,
        "space": {k: list(v) for k, v in space.values.items()},
        "resumed_from": None,
    }
    started = time.monotonic()
    with Store.open(store_path) as store:
        cache = _resume_cache(store, resume, workload, objective) if resume is not None else {}
        if resume is not None:
            settings["resumed_from"] = str(resume)
        run_id = store.new_run(KIND, command, dict(workload), machine, settings)
        evaluator = Evaluator(
            workload,
            tolerance=tolerance,
            labels=labels,
            block_s=block_s,
            min_rounds=min_rounds,
            max_rounds=max_rounds,
            candidate_timeout_s=candidate_timeout_s,
            store=store,
            run_id=run_id,
            progress=progress,
            threshold=threshold,
            per_sample=objective == "throughput",
        )
        try:
            progress.phase("starting the default configuration")
            default_ready = evaluator.start_default()
            if throughput and not given_space and evaluator.default_batch != facts.batch:
                # the inputs file (or factory) set the batch: the ladder is around that one
                space = _restricted(
                    build_space(replace(facts, batch=evaluator.default_batch)), knobs
                )
            if throughput and batch_sizes is None:
                space = _cap_batches(space, default_ready)
            for outcome in cache.values():
                tid = store.new_trial(
                    run_id, outcome.label, to_config_dict(outcome.config), "candidate"
                )
                evaluator._finish_trial(tid, outcome)
            progress.start(max_trials)
            search = Search(
                space,
                evaluator,
                max_trials=max_trials,
                budget_s=budget_s,
                cache=cache,
                seed=seed,
                runtime_first=max_trials is not None or budget_s is not None,
            )
            result = search.run(strategy)
            doc = _conclude(evaluator, result, confirm_rounds, default_ready)
            doc["objective"] = objective
            if evaluator.reference_is_flat():
                doc["warnings"].append(
                    "the model's outputs on the sample inputs are (nearly) constant, so the "
                    "accuracy check cannot tell a variant from the original; tune with real "
                    "weights and --inputs (and --labels) for a check that means something"
                )
            if evaluator.not_inherited:
                names = ", ".join(sorted(evaluator.not_inherited))
                doc["warnings"].append(
                    f"you had set {names}; tune measured without them (every configuration "
                    "sets its own environment)"
                )
            doc["environment"] = {"not_inherited": evaluator.not_inherited}
        except UserError as exc:
            store.finish_run(run_id, "failed", {"error": str(exc)})
            raise
        except KeyboardInterrupt:
            store.finish_run(run_id, "interrupted", {})
            trials = store.load_run(run_id)["trials"]
            finished = sum(t["role"] == "candidate" and bool(t["info"]) for t in trials)
            raise TuneInterrupted(run_id, finished) from None
        except BaseException:
            store.finish_run(run_id, "interrupted", {})
            raise
        finally:
            evaluator.close()
        doc.update(
            run_id=run_id,
            workload=dict(workload),
            machine=machine_summary(machine),
            install=default_ready.get("install", {}),
            strategy=strategy,
            stopped=result.stopped,
            trials=len(result.outcomes),
            elapsed_s=time.monotonic() - started,
            tolerance=tolerance.to_dict(),
            space_size=space.size(),
            unavailable=space.unavailable,
        )
        from tfperf.profiles import default_profile_path, profile_from_tune, save_profile

        target = (
            Path(profile_out)
            if profile_out
            else default_profile_path(
                {"workload": dict(workload), "machine": doc["machine"], "objective": objective}
            )
        )
        if artifacts_dir is None:
            artifacts_dir = target.with_name(target.stem + "-model")
        doc["artifacts_dir"] = _export_artifact(doc["recommendation"], artifacts_dir)
        doc["profile"] = str(save_profile(profile_from_tune(doc, machine), target))
        store.finish_run(
            run_id, "ok", {"recommendation": doc["recommendation"], "profile": doc["profile"]}
        )
    return doc


MAX_CALL_S = 1.0
"""A throughput tune's default batch sizes stop where one call of the default would take
longer than this (estimated from its time per sample): a block is at least one call, and a
candidate takes dozens of blocks."""


def _cap_batches(space: Space, ready: Mapping[str, Any]) -> Space:
    """``space`` without the batch sizes whose calls would take over :data:`MAX_CALL_S`."""
    tail = (ready.get("warmup") or {}).get("samples_s", [])[-5:]
    if not tail:
        return space
    per_sample = statistics.median(tail) / int(ready.get("batch") or 1)
    too_big = tuple(b for b in space.values.get("batch", ())[1:] if b * per_sample > MAX_CALL_S)
    if not too_big:
        return space
    return space.drop(
        "batch",
        too_big,
        f"a call would take over {MAX_CALL_S:g} s at the default's {per_sample * 1e3:.3g} ms "
        "per sample; name it in --batch-sizes to try it anyway",
    )


def _is_training(workload: Mapping[str, Any]) -> bool:
    if workload.get("kind") != "builtin":
        return False
    from tfperf.workloads import get_builtin

    return get_builtin(workload["name"]).task == "train"


def _conclude(evaluator: Evaluator, result: Any, confirm_rounds: int, ready: dict) -> dict:
    """Confirm the winner against the default and build the document's core."""
    candidates = rank(result.outcomes)
    default_ms = None
    default_batch = evaluator.default_batch
    tail = (ready.get("warmup") or {}).get("samples_s", [])[-5:]
    if tail:
        default_ms = statistics.median(tail) * 1e3
    winner = normalize(result.incumbent)
    warnings: list[str] = []
    recommendation: dict = {
        "label": "default",
        "config": to_config_dict({}),
        "keep_default": True,
        "speedup": None,
        "adoption": "env",
        "adoption_text": "nothing to change",
        "artifact": None,
        "max_abs_error": 0.0,
        "max_rel_error": 0.0,
        "top1_agreement": None,
        "time_ms": default_ms,
        "batch": default_batch,
        "samples_per_s": _samples_per_s(default_ms, default_batch),
        "notes": [],
        "reason": "no candidate was significantly faster than the default",
    }
    if winner:
        try:
            confirmed = evaluator.confirm(winner, confirm_rounds)
        except WorkerFailed as exc:
            confirmed = None
            warnings.append(f"the winner failed during confirmation: {exc.reason}")
        row = next(c for c in candidates if c["label"] == label(winner))
        if confirmed and _significantly_faster(confirmed):
            recommendation = {
                "label": label(winner),
                "config": to_config_dict(winner),
                "keep_default": False,
                "reason": "significantly faster than the default in the confirmation round",
                "speedup": confirmed,
                "time_ms": confirmed["candidate_ms"],
                "batch": confirmed["candidate_batch"],
                "samples_per_s": confirmed["candidate_samples_per_s"],
                "max_abs_error": row["max_abs_error"],
                "max_rel_error": row["max_rel_error"],
                "top1_agreement": row["top1_agreement"],
                "adoption": row["adoption"],
                "adoption_text": ADOPTION_TEXT[row["adoption"]],
                "artifact": row["artifact"],
                "notes": row["notes"],
            }
            default_ms = confirmed["default_ms"]
        elif confirmed:
            low = (confirmed.get("ci95") or [None])[0]
            recommendation["reason"] = (
                f"the best candidate ({label(winner)}) was not significantly faster in the "
                f"confirmation round (verdict {confirmed['verdict']}, 95% CI from "
                f"{low if low is None else format(low, '.2f')})"
            )
            recommendation["speedup"] = confirmed
    _explain_keep_default(recommendation, candidates, evaluator, default_ms, bool(winner))
    warnings += rejection_advice(candidates, evaluator.tolerance.rel)
    return {
        "default": {
            "time_ms": default_ms,
            "batch": default_batch,
            "samples_per_s": _samples_per_s(default_ms, default_batch),
        },
        "recommendation": recommendation,
        "candidates": candidates,
        "warnings": warnings,
    }


def _explain_keep_default(
    recommendation: dict,
    candidates: list[dict],
    evaluator: Evaluator,
    default_ms: float | None,
    confirmed: bool,
) -> None:
    """Say which case a "keep the default" is (:mod:`tfperf.keepdefault`); ``None`` otherwise.
    A winner that failed its confirmation keeps that sentence unless faster candidates were
    rejected, which the user must hear first."""
    if not recommendation["keep_default"]:
        recommendation["keep_default_why"] = None
        return
    why = keep_default_why(
        candidates,
        default_ms,
        evaluator.default_batch,
        per_sample=evaluator.per_sample,
        threshold=evaluator.threshold,
    )
    recommendation["keep_default_why"] = why
    if not confirmed or why["case"] != "none_faster":
        recommendation["reason"] = why["summary"]


def _significantly_faster(speedup: dict) -> bool:
    """The confirmation's verdict is "faster" and its whole 95% interval lies above 1."""
    low = (speedup.get("ci95") or [None])[0]
    return speedup.get("verdict") == "faster" and low is not None and low > 1.0


def _export_artifact(recommendation: dict, out_dir: str | Path | None) -> str | None:
    """Copy the winner's converted model and its snippet to ``out_dir``; the folder or None."""
    artifact = recommendation.get("artifact")
    if not artifact or out_dir is None:
        return None
    source = Path(artifact).parent
    target = Path(out_dir).expanduser()
    try:
        target.mkdir(parents=True, exist_ok=True)
        for item in source.iterdir():
            if item.suffix in (".tflite", ".xml", ".bin", ".py"):
                shutil.copy2(item, target / item.name)
    except OSError as exc:
        raise UserError(
            f"cannot write the converted model to {target} ({exc}); pass a writable --out-dir."
        ) from None
    snippet = target / "run_model.py"
    with contextlib.suppress(OSError):
        snippet.write_text(snippet.read_text().replace(str(source), str(target)))
    recommendation["artifact"] = str(target / Path(artifact).name)
    return str(target)


ProgressFactory = Callable[[], Progress]
