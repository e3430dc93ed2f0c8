"""Interleaved measurement of one workload under several configs (A B, B A, A B, ...).

Contract of :func:`measure`:

- One worker per config (the first config is the baseline), run by ``settings.python`` or,
  one per config, by ``settings.pythons`` (another virtual environment, another TensorFlow;
  trials are named by ``labels`` or the configs' labels), started one after the other so
  that each cold start is timed alone (``parallel_start`` overlaps them, for speed):
  ``cold_start_s`` = process start + TensorFlow import + load + first call, one figure;
  ``first_call_s`` (tracing, XLA compile) is also kept apart, and the worker's warm-up
  samples are handed over as phase ``"warmup"``. ``listener.refuse`` may turn down a worker
  once it is ready (say, one that imported another TensorFlow than its environment holds): it
  becomes a failed trial.
- Then rounds (:class:`tfperf.runner.rounds.Rounds`): each round runs one block per live
  config, in an order shuffled each round, and hands every block to ``listener.block`` as it
  arrives (phase ``"steady"``). A block lasts about ``block_s``
  (:func:`tfperf.runner.rounds.calls_per_block` from the warm-up), or ``calls_per_block``
  calls when that is set.
- It stops after at least ``min_rounds`` rounds when the steady phase has used ``budget_s``
  seconds, or when the precision target is met: the relative half-width of every live
  config's p50 interval and of every candidate's speedup interval is at most ``precision``.
- With ``settings.processes`` = P > 1 the steady phase is cut into P segments of about
  ``budget_s / P`` seconds (and at least ``min_rounds`` rounds) each; between segments every
  live worker is closed and a fresh one of the same config started, timed apart from the
  budget, its warm-up handed over as phase ``"warmup"`` with ``{"process": k}``. Each steady
  block's info names its ``"process"``; ``Trial.process_of`` maps round -> process. The
  precision target can end only the last segment, and only once it has as many rounds as the
  shortest before it (so the processes weigh about the same). A config's speed can depend on
  the process (memory layout, thread placement): within one process that is a constant the
  interval cannot see, across P processes it shows (:func:`tfperf.core.stats.paired_speedup`
  with ``processes``).
- A worker that fails (crash, timeout, memory limit, error) becomes a failed trial with its
  reason (``listener.trial`` is told); the others go on. Workers are always closed.
- Except one case: when the baseline's worker reports a mistake in the user's input
  (:attr:`WorkerFailed.user_error`: a corrupt model file, a .keras that needs --unsafe, a
  factory that raises or returns the wrong thing, inputs that do not fit the model), nothing
  can be measured against it. The listener is told of that failed trial (and of every
  candidate already started, failed as "not measured"), then :func:`measure` raises
  :class:`tfperf.core.errors.UserError` with the worker's sentence.
- A training step on another Keras backend than the baseline's (``keras-jax``) starts from
  the baseline's initial weights, handed over in a file of this run
  (:func:`tfperf.runner.identity.weights_handoff`).
- Optionally, the baseline also times other ways of calling the model (``extras``: "eager",
  "predict"), as information; and with ``outputs_dir`` every live worker then writes the
  outputs of one call to ``<outputs_dir>/outputs-<index>.npz`` (``Trial.outputs_path``), so
  that the caller can check them against the baseline's (a failure there fails the trial).
- After the rounds every live trial's memory is read (:func:`tfperf.runner.memory.memory_of`:
  a converted runtime's in a process that loads its artifact alone), into ``Trial.memory``,
  before any op profile (``ops_s``): a profiler grows its worker, and that is not the
  configuration's memory.

Nothing here imports TensorFlow; :mod:`tfperf.core.stats` (numpy, scipy) is imported when measuring.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfperf.core import stats
from tfperf.core.config import Config
from tfperf.core.errors import UserError
from tfperf.core.memory import Memory
from tfperf.core.protocol import DIFFERS_KIND, SKIPPED_KIND, USER_KIND
from tfperf.machine import contention
from tfperf.runner.handle import Worker, WorkerFailed
from tfperf.runner.identity import SameModel, weights_handoff
from tfperf.runner.memory import memory_of
from tfperf.runner.rounds import Rounds, block_info, calls_per_block

BASELINE = "baseline"
CANDIDATE = "candidate"


@dataclass
class Trial:
    """One config's worker and everything it measured."""

    index: int
    config: Config
    role: str
    label: str
    status: str = "pending"
    """``pending`` -> ``running`` -> ``ok`` | ``failed``."""
    ready: dict[str, Any] = field(default_factory=dict)
    cold_start_s: float | None = None
    warmup_s: list[float] = field(default_factory=list)
    blocks: dict[int, list[float]] = field(default_factory=dict)
    """Steady-state samples by round."""
    process_of: dict[int, int] = field(default_factory=dict)
    """The worker process (0, 1, ...) that measured each round."""
    restart_cold_start_s: list[float] = field(default_factory=list)
    """Cold starts of the fresh processes after the first (``Settings.processes``)."""
    calls_per_block: int = 0
    extras: dict[str, list[float] | None] = field(default_factory=dict)
    """Samples of other ways to call the model (``None``: not offered or failed)."""
    extra_errors: dict[str, str] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    peak_rss_bytes: int = 0
    not_inherited: dict[str, str] = field(default_factory=dict)
    python: str = sys.executable
    """The interpreter that ran the worker."""
    outputs_path: str | None = None
    """One call's outputs (.npz), written after the rounds when ``Settings.outputs_dir`` is set."""
    ops: dict[str, Any] | None = None
    """The op profile (``bench --ops``), taken after the rounds when ``Settings.ops_s`` is set."""
    memory: Memory | None = None
    """The config's memory (:func:`tfperf.runner.memory.memory_of`), read after the rounds."""
    worker: Worker | None = field(default=None, repr=False)

    @property
    def alive(self) -> bool:
        """Whether the trial still measures."""
        return self.status == "running"

    @property
    def samples_s(self) -> list[float]:
        """All steady-state samples, rounds in order."""
        return [s for r in sorted(self.blocks) for s in self.blocks[r]]

    def block_medians(self, rounds: Sequence[int]) -> list[float]:
        """The median of this trial's block in each of ``rounds``, per training step where one
        call runs several (``ready["train"]["steps_per_call"]``): speedups compare steps."""
        steps = int((self.ready.get("train") or {}).get("steps_per_call") or 1)
        return [statistics.median(self.blocks[r]) / steps for r in rounds]

    def processes(self, rounds: Sequence[int]) -> list[int]:
        """The process that measured each of ``rounds``."""
        return [self.process_of.get(r, 0) for r in rounds]

    @property
    def ended_by_bad_input(self) -> bool:
        """Whether this trial failed because the baseline could not run the user's input
        (its own failure as the baseline, or a candidate left unmeasured because of it):
        :func:`measure` then raises one UserError sentence for the whole run."""
        kind = (self.error or {}).get("kind")
        return (self.role == BASELINE and kind == USER_KIND) or kind in (
            SKIPPED_KIND,
            DIFFERS_KIND,
        )

    def retire_worker(self) -> None:
        """Close the worker, keeping its peak RSS in ``peak_rss_bytes``."""
        if self.worker is not None:
            self.peak_rss_bytes = max(self.peak_rss_bytes, self.worker.peak_rss_bytes)
            self.worker.close()

    def fail(self, exc: WorkerFailed) -> None:
        """Record a failure."""
        self.status = "failed"
        self.error = exc.to_dict()
        if self.worker is not None:
            self.peak_rss_bytes = max(self.peak_rss_bytes, self.worker.peak_rss_bytes)


class Listener:
    """Callbacks during :func:`measure` (the defaults do nothing)."""

    def trial(self, trial: Trial, event: str) -> None:
        """``event`` is ``"starting"``, ``"ready"`` or ``"failed"``."""

    def block(self, trial: Trial, samples_s: list[float], phase: str, info: dict) -> None:
        """One block of samples (phase ``"warmup"`` or ``"steady"``), as it arrives."""

    def round(self, done: int, elapsed_s: float, budget_s: float) -> None:
        """A round finished."""

    def refuse(self, trial: Trial, ready: dict[str, Any]) -> WorkerFailed | None:
        """Asked once a worker is ready (``trial.ready`` is set), before it measures: the
        failure to record instead of measuring it, or ``None`` to accept it (the default)."""
        return None


@dataclass
class Measurement:
    """The outcome of :func:`measure`."""

    workload: dict[str, Any]
    trials: list[Trial]
    rounds: int
    stopped: str
    """``precision``, ``budget``, ``max_rounds`` or ``no live trial``."""
    steady_s: float
    other_cpu_share: float | None = None
    """Share of the CPUs other processes kept busy during the rounds
    (:func:`tfperf.machine.contention.other_cpu_share`)."""

    def paired_rounds(self, a: Trial, b: Trial) -> list[int]:
        """The rounds in which both trials measured a block, in order."""
        return sorted(set(a.blocks) & set(b.blocks))

    def speedup(self, base: Trial, cand: Trial, threshold: float) -> dict[str, Any]:
        """:func:`tfperf.core.stats.paired_speedup` of ``cand`` over ``base`` on their paired
        rounds, grouped by worker process."""

        rounds = self.paired_rounds(base, cand)
        return stats.paired_speedup(
            base.block_medians(rounds),
            cand.block_medians(rounds),
            threshold,
            processes=base.processes(rounds),
        )


@dataclass(frozen=True)
class Settings:
    """How long and how precisely to measure."""

    budget_s: float = 30.0
    precision: float = 0.01
    min_rounds: int = 8
    max_rounds: int = 10_000
    block_s: float | None = None
    """Target duration of one block; by default from the budget (0.01..0.25 s, 0.02 s for two
    configs in 30 s): short blocks make many pairs, and a pair's two blocks close in time share
    the machine's state. Call times drift slowly (a block's median of 8 calls varies about as
    much as one of 100), so a pair's ratio is barely noisier with short blocks while there are
    many more of them: at a fixed budget the speedup's interval narrows about 3x from 0.3 s
    blocks to 0.02 s ones (``lstm``, default against ``onednn=off``)."""
    timeout_s: float = 120.0
    init_timeout_s: float = 600.0
    memory_limit_bytes: int | None = None
    warmup_min_calls: int = 5
    warmup_max_s: float = 5.0
    extras: tuple[str, ...] = ()
    extra_s: float = 1.0
    python: str = sys.executable
    pythons: tuple[str, ...] | None = None
    """One interpreter per config, in order (each may be another virtual environment with
    tfperf importable); ``None``: ``python`` for every config."""
    pythonpath: tuple[str, ...] = ()
    parallel_start: bool = False
    """Start every worker at once: quicker, but then cold starts compete for the CPU."""
    calls_per_block: int | None = None
    """Calls in every block; by default set per config from ``block_seconds`` and its warm-up."""
    outputs_dir: str | None = None
    """Where live workers write one call's outputs after the rounds (``None``: they do not)."""
    processes: int = 1
    """Worker processes per config, one after the other (see the module docstring)."""
    ops_s: float | None = None
    """Seconds of calls each live worker profiles after the rounds (``bench --ops``,
    ``docs/ops.md``); ``None``: no profile."""

    def python_for(self, index: int) -> str:
        """The interpreter of config ``index``."""
        return self.pythons[index] if self.pythons is not None else self.python

    def block_seconds(self, n_configs: int) -> float:
        """The target block duration for ``n_configs`` configs sharing the budget."""
        if self.block_s is not None:
            return self.block_s
        return min(0.25, max(0.01, self.budget_s / (max(n_configs, 1) * 750)))


def measure(
    workload: Mapping[str, Any],
    configs: Sequence[Config],
    settings: Settings | None = None,
    listener: Listener | None = None,
    environ: Mapping[str, str] | None = None,
    labels: Sequence[str] | None = None,
) -> Measurement:
    """Measure ``workload`` under every config, interleaved; see the module docstring.

    ``labels`` names the trials (default: each config's label); ``settings.pythons`` and
    ``labels``, when given, have one entry per config.
    """
    settings = settings or Settings()
    listener = listener or Listener()
    trials = _trials(configs, settings, labels)
    same = SameModel(source_of(workload))
    handoff = Path(tempfile.mkdtemp(prefix="tfperf-weights-"))
    workloads = _trial_workloads(workload, trials, str(handoff / "initial-weights.npz"))
    try:
        _start_all(trials, workloads, settings, listener, environ, same)
        before = contention.snapshot()

        def respawn(trial: Trial, process: int) -> None:
            _restart(trial, process, workloads[trial.index], settings, listener, environ)
            if trial.alive:
                _check_same(trial, trial.worker.ready or {}, listener, trials, same)

        rounds, stopped, steady_s = _rounds(trials, settings, listener, respawn)
        other_share = contention.other_cpu_share(before, contention.snapshot())
        if settings.extras and trials[0].alive:
            _extras(trials[0], settings, listener)
        if settings.outputs_dir is not None:
            _outputs(trials, settings.outputs_dir, listener)
        for trial in trials:
            if trial.alive and trial.worker is not None:
                trial.memory = memory_of(trial.worker)  # after the rounds: nothing is timed
        if settings.ops_s:  # after the memory: the profiler's own growth is not the config's
            _profiles(trials, settings.ops_s)
    finally:
        for trial in trials:
            trial.retire_worker()
            if trial.status == "running":
                trial.status = "ok"
        shutil.rmtree(handoff, ignore_errors=True)
    return Measurement(dict(workload), trials, rounds, stopped, steady_s, other_share)


def _trials(
    configs: Sequence[Config], settings: Settings, labels: Sequence[str] | None
) -> list[Trial]:
    """One pending trial per config, the first the baseline."""
    if not configs:
        raise ValueError("measure() needs at least one config")
    for name, per_config in (("settings.pythons", settings.pythons), ("labels", labels)):
        if per_config is not None and len(per_config) != len(configs):
            raise ValueError(f"{name} needs one entry per config ({len(configs)})")
    return [
        Trial(
            i,
            c,
            BASELINE if i == 0 else CANDIDATE,
            labels[i] if labels is not None else c.label(),
            python=settings.python_for(i),
        )
        for i, c in enumerate(configs)
    ]


def _trial_workloads(
    workload: Mapping[str, Any], trials: Sequence[Trial], path: str
) -> list[dict[str, Any]]:
    """Each trial's workload: a training step on another Keras backend than the baseline's
    starts from the baseline's initial weights (:func:`weights_handoff`)."""
    first = trials[0].config.runtime
    return [
        weights_handoff(workload, t.config.runtime, None if t.index == 0 else first, path)
        for t in trials
    ]


def _start_all(
    trials: list[Trial],
    workloads: Sequence[Mapping[str, Any]],
    settings: Settings,
    listener: Listener,
    environ: Mapping[str, str] | None,
    same: SameModel,
) -> None:
    """Start every trial's worker (one after the other, or all at once) and size its blocks."""
    if settings.parallel_start:
        for trial in trials:
            _spawn(trial, workloads[trial.index], settings, listener, environ)
        for trial in trials:
            _await_ready(trial, listener, trials, same)
    else:
        for trial in trials:
            _spawn(trial, workloads[trial.index], settings, listener, environ)
            _await_ready(trial, listener, trials, same)
    block_s = settings.block_seconds(len(trials))
    for trial in trials:
        if trial.alive:
            fixed = settings.calls_per_block
            trial.calls_per_block = fixed or calls_per_block(trial.ready, block_s)


def _new_worker(
    trial: Trial,
    workload: Mapping[str, Any],
    settings: Settings,
    environ: Mapping[str, str] | None,
) -> Worker:
    """A worker (not started) for ``trial``'s config."""
    return Worker(
        workload,
        trial.config,
        python=trial.python,
        pythonpath=list(settings.pythonpath),
        timeout_s=settings.timeout_s,
        init_timeout_s=settings.init_timeout_s,
        memory_limit_bytes=settings.memory_limit_bytes,
        warmup={"min_calls": settings.warmup_min_calls, "max_seconds": settings.warmup_max_s},
        environ=environ,
    )


def _spawn(
    trial: Trial,
    workload: Mapping[str, Any],
    settings: Settings,
    listener: Listener,
    environ: Mapping[str, str] | None,
) -> None:
    listener.trial(trial, "starting")
    worker = _new_worker(trial, workload, settings, environ)
    trial.worker = worker
    try:
        worker.start()
    except WorkerFailed as exc:
        trial.fail(exc)
        listener.trial(trial, "failed")
    trial.not_inherited = dict(worker.not_inherited)


def source_of(workload: Mapping[str, Any]) -> str:
    """How a message names the workload: the model's path or factory, or the built-in's name."""
    return str(workload.get("path") or workload.get("name") or "the workload")


def _await_ready(
    trial: Trial, listener: Listener, trials: Sequence[Trial], same: SameModel
) -> None:
    if trial.status == "failed" or trial.worker is None:
        return
    try:
        ready = trial.worker.wait_ready()
    except WorkerFailed as exc:
        trial.fail(exc)
        listener.trial(trial, "failed")
        if trial.role == BASELINE and exc.user_error:
            _abandon(trials, listener, exc.message or exc.reason)
        return
    trial.ready = ready
    _check_same(trial, ready, listener, trials, same)
    refused = listener.refuse(trial, ready)
    if refused is not None:
        trial.fail(refused)
        trial.worker.close()
        listener.trial(trial, "failed")
        return
    trial.status = "running"
    trial.warmup_s = list(ready["warmup"]["samples_s"])
    trial.cold_start_s = ready["startup_s"] - sum(trial.warmup_s)
    listener.trial(trial, "ready")
    listener.block(trial, trial.warmup_s, "warmup", {"rss_bytes": ready.get("rss_bytes")})


def _restart(
    trial: Trial,
    process: int,
    workload: Mapping[str, Any],
    settings: Settings,
    listener: Listener,
    environ: Mapping[str, str] | None,
) -> None:
    """Replace ``trial``'s worker by a fresh process of the same config (``process``-th)."""
    trial.retire_worker()
    worker = _new_worker(trial, workload, settings, environ)
    trial.worker = worker
    try:
        worker.start()
        ready = worker.wait_ready()
    except WorkerFailed as exc:
        trial.fail(exc)
        listener.trial(trial, "failed")
        return
    warmup = list(ready["warmup"]["samples_s"])
    trial.restart_cold_start_s.append(ready["startup_s"] - sum(warmup))
    listener.block(
        trial, warmup, "warmup", {"rss_bytes": ready.get("rss_bytes"), "process": process}
    )


def _check_same(
    trial: Trial,
    ready: Mapping[str, Any],
    listener: Listener,
    trials: Sequence[Trial],
    same: SameModel,
) -> None:
    """A worker that loaded another model than the first of its interpreter ends the run."""
    try:
        same.check(ready, trial.python)
    except UserError as exc:
        trial.fail(WorkerFailed(str(exc), kind=DIFFERS_KIND, message=str(exc)))
        listener.trial(trial, "failed")
        _abandon(trials, listener, str(exc))


def _abandon(trials: Sequence[Trial], listener: Listener, message: str) -> None:
    """The user's input cannot be measured: fail the others unmeasured, raise UserError."""
    for other in trials:
        if other.status in ("pending", "running") and other.worker is not None:
            other.worker.close()
            other.fail(
                WorkerFailed(
                    "not measured: the baseline could not run this input", kind=SKIPPED_KIND
                )
            )
            listener.trial(other, "failed")
    raise UserError(message)


class _TrialMember:
    """A trial as a member of the rounds: a block runs on its current worker process."""

    def __init__(self, trial: Trial, plan: _Segments) -> None:
        self.trial = trial
        self.plan = plan

    @property
    def alive(self) -> bool:
        return self.trial.alive

    def block(self, round_no: int) -> list[float] | None:
        trial = self.trial
        assert trial.worker is not None
        trial.process_of[round_no] = self.plan.process
        try:
            return trial.worker.run_block(trial.calls_per_block)
        except WorkerFailed as exc:
            trial.fail(exc)
            self.plan.listener.trial(trial, "failed")
            return None


def _precise_enough(trials: list[Trial], precision: float) -> bool:

    live = [t for t in trials if t.alive]
    if not live:
        return True
    if any(stats.rel_ci_halfwidth(t.samples_s) > precision for t in live):
        return False
    base = trials[0]
    if not base.alive:
        return True
    for cand in live[1:] if live[0] is base else live:
        rounds = sorted(set(base.blocks) & set(cand.blocks))
        result = stats.paired_speedup(
            base.block_medians(rounds),
            cand.block_medians(rounds),
            processes=base.processes(rounds),
        )
        low, high = result["ci95"]
        if result["median"] is None or low is None or high is None:
            return False
        if (high - low) / 2.0 / result["median"] > precision:
            return False
    return True


class _Segments:
    """The stop rule of :func:`measure` (module docstring): at least ``min_rounds`` rounds,
    the budget cut into ``settings.processes`` segments with a fresh worker per config between
    them (``spawn``, timed apart from the budget), and the precision target only in the last
    segment once it has as many rounds as the shortest before it."""

    def __init__(
        self, trials: list[Trial], settings: Settings, listener: Listener, spawn: Any
    ) -> None:
        self.trials = trials
        self.settings = settings
        self.listener = listener
        self.spawn = spawn
        self.segments = max(1, settings.processes)
        self.process = 0
        self.in_segment = 0
        self.shortest = 0  # rounds of the shortest finished segment: the last one runs as many
        self.restarts_s = 0.0
        self.start = time.monotonic()

    @property
    def elapsed(self) -> float:
        """Seconds of rounds so far, restarts excluded."""
        return time.monotonic() - self.start - self.restarts_s

    def on_block(self, member: _TrialMember, round_no: int, samples: list[float]) -> None:
        member.trial.blocks[round_no] = samples
        info = block_info(round_no, self.process)
        self.listener.block(member.trial, samples, "steady", info)

    def stop(self, done: int) -> str | None:
        settings = self.settings
        self.in_segment += 1
        elapsed = self.elapsed
        self.listener.round(done, elapsed, settings.budget_s)
        if self.in_segment < settings.min_rounds:
            return None
        if done >= settings.max_rounds:
            return "max_rounds"
        if self.process < self.segments - 1:
            if elapsed >= settings.budget_s * (self.process + 1) / self.segments:
                self._next_segment()
            return None
        if elapsed >= settings.budget_s:
            return "budget"
        if self.in_segment >= self.shortest and _precise_enough(self.trials, settings.precision):
            return "precision"
        return None

    def _next_segment(self) -> None:
        began = time.monotonic()
        first = self.process == 0
        self.shortest = self.in_segment if first else min(self.shortest, self.in_segment)
        self.process += 1
        self.in_segment = 0
        for trial in [t for t in self.trials if t.alive]:
            self.spawn(trial, self.process)
        self.restarts_s += time.monotonic() - began


def _rounds(
    trials: list[Trial], settings: Settings, listener: Listener, spawn: Any
) -> tuple[int, str, float]:
    """The rounds; ``spawn(trial, process)`` starts a fresh worker for ``trial`` between
    segments. Returns (rounds, why they stopped, steady seconds: restarts excluded)."""
    plan = _Segments(trials, settings, listener, spawn)
    members = [_TrialMember(t, plan) for t in trials]
    done, why = Rounds().run(members, plan.on_block, plan.stop)  # type: ignore[arg-type]
    return done, why, plan.elapsed


def _outputs(trials: list[Trial], folder: str, listener: Listener) -> None:
    """Each live worker writes one call's outputs to ``folder`` (see the module docstring)."""
    from pathlib import Path

    for trial in trials:
        if not trial.alive or trial.worker is None:
            continue
        try:
            path = trial.worker.outputs(Path(folder) / f"outputs-{trial.index}.npz")
        except WorkerFailed as exc:
            trial.fail(exc)
            listener.trial(trial, "failed")
            continue
        trial.outputs_path = str(path)


def _extras(trial: Trial, settings: Settings, listener: Listener) -> None:
    """Time other ways of calling the model: two calls to settle, then about ``extra_s``."""
    assert trial.worker is not None
    for name in settings.extras:
        try:
            first = trial.worker.extra(name, 2)
            if first is None:
                trial.extras[name] = None
                continue
            calls = int(min(200, max(3, round(settings.extra_s / max(first[-1], 1e-7)))))
            trial.extras[name] = trial.worker.extra(name, calls)
        except WorkerFailed as exc:
            trial.extras[name] = None
            trial.extra_errors[name] = exc.reason
            return


def _profiles(trials: list[Trial], seconds: float) -> None:
    """Each live worker's op profile, after every timed block (the profiler never runs during
    one); a worker that fails here keeps its measurement and says why in its profile."""
    for trial in trials:
        if not trial.alive or trial.worker is None:
            continue
        try:
            trial.ops = trial.worker.profile(seconds)
        except WorkerFailed as exc:
            trial.ops = {"available": False, "reason": f"the profile failed: {exc.reason}",
                         "ops": [], "op_types": []}
