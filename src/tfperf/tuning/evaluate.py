"""Trying a tune's candidates for real, in worker processes.

Contract: :class:`Evaluator` is the function the search calls: ``evaluator(config, incumbent,
timeout_s) -> Outcome``. A candidate's outputs on the sample inputs are checked against the
default's (fp32 TensorFlow; a candidate at another batch runs on the same sample rows repeated,
and is checked against the reference rows repeated the same way) by
:func:`tfperf.accuracy.guard` first -- beyond tolerance it is *rejected* and not timed further;
then its memory (:func:`tfperf.runner.memory.memory_of`) -- a peak over ``max_memory_mb``
rejects it too, with both figures, before it is timed; then interleaved rounds
(:class:`tfperf.runner.rounds.Rounds`) of default, incumbent and
candidate run until the verdict against the incumbent is decided or ``max_rounds`` is reached.
A conversion that fails, a worker that crashes or hangs past its timeout
(``candidate_timeout_s``, or the ``timeout_s`` a caller gives when that is shorter) makes the
candidate *failed* with the worker's reason.
:meth:`Evaluator.confirm` measures the winner against the default alone (see
:func:`confirm_processes`). With a :class:`~tfperf.runner.recorder.RunRecorder` every candidate
is a trial of the run, its blocks and its comparison with the default stored as they come; the
outcome is in the trial's ``info["outcome"]``, which a resumed tune replays.

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import psutil

from tfperf.accuracy import guard
from tfperf.core.errors import UserError
from tfperf.core.knobs import label, normalize
from tfperf.core.memory import Memory, over_ceiling
from tfperf.core.protocol import artifact_from_notes, repeat_rows
from tfperf.core.stats import paired_speedup
from tfperf.diagnosis.install import install_fingerprint
from tfperf.runner.handle import WorkerFailed
from tfperf.runner.memory import memory_of
from tfperf.runner.recorder import RunRecorder
from tfperf.runner.rounds import Rounds, block_info
from tfperf.tuning import compiles
from tfperf.tuning.options import TuneOptions
from tfperf.tuning.search import FAILED, MEASURED, REJECTED, Outcome
from tfperf.tuning.space import to_config_dict
from tfperf.tuning.workers import CandidateStart, Handle, WorkerPool

CONFIRM_ROUNDS_PER_PROCESS = 7
"""Each pair of confirmation workers measures at least this many rounds (>= MIN_PAIRS)."""
MAX_CONFIRM_PROCESSES = 3
DEFAULT_WARMUP = {"min_calls": 5, "max_seconds": 3.0}
AHEAD_HEADROOM_BYTES = 2**30
"""Memory left free beside a worker started ahead (:meth:`Evaluator.start_ahead`)."""


def confirm_processes(rounds: int) -> int:
    """How many worker pairs share ``rounds`` confirmation rounds: one per 7 rounds, 1 to 3
    (the default 21 rounds: 3; ``--quick``'s 10: 1)."""
    return max(1, min(MAX_CONFIRM_PROCESSES, rounds // CONFIRM_ROUNDS_PER_PROCESS))


class Progress:
    """Receives progress events (the CLI shows them); every method may be ignored.

    In order: :meth:`phase` (the default starts), :meth:`start` (the search's limits), then
    for each candidate :meth:`candidate` and :meth:`done`, and :meth:`phase` again (the
    confirmation). A resumed tune's replayed candidates are not told one by one: ``start``
    counts them.
    """

    def start(
        self, total: int | None, budget_s: float | None = None, resumed: int = 0
    ) -> None:
        """The search starts: ``total`` is its trial limit and ``budget_s`` its time limit
        (``None``: none), ``resumed`` the finished candidates of the tune it resumes (counted
        in ``total``)."""

    def candidate(self, name: str) -> None:
        """A candidate is being tried."""

    def done(self, outcome: Outcome) -> None:
        """A candidate finished (measured, rejected or failed; ``outcome.info["error"]``
        holds a failed worker's record)."""

    def phase(self, text: str) -> None:
        """A phase without a candidate (starting the default, confirming)."""

    def notice(self, text: str) -> None:
        """A change to what the user asked for that they must see whatever the display (a
        time limit that grows); a phase where not told apart."""
        self.phase(text)


def failure_reason(exc: WorkerFailed, config: Mapping[str, Any] | None = None) -> str:
    """The worker's reason, saying where a crash happened when its log tells; a mistake the
    worker found in the user's input is its own sentence."""
    if exc.user_error and exc.message:
        return exc.message
    tail = exc.stderr_tail or ""
    config = config or {}
    if exc.signal and "lite/python" in tail:
        return f"{exc.reason} inside the LiteRT converter"
    allocator = config.get("allocator", "system")
    runtime = str(config.get("runtime", ""))
    if exc.signal and runtime.startswith("openvino") and allocator != "system":
        # OpenVINO's CPU plugin frees with glibc what the preloaded allocator handed out.
        return f"{exc.reason}: OpenVINO aborts with {allocator} preloaded (LD_PRELOAD)"
    if exc.signal and "openvino" in tail:
        return f"{exc.reason} inside OpenVINO"
    return exc.reason


class Evaluator:
    """Tries candidates for real in worker processes (see the module docstring)."""

    block_time = staticmethod(statistics.median)
    """A block's time per call from its calls' times: their median (a served call's
    latency; :class:`~tfperf.tuning.traintune.TrainEvaluator` takes their mean)."""

    def __init__(
        self,
        workload: Mapping[str, Any],
        options: TuneOptions | None = None,
        *,
        labels: Any = None,
        run: RunRecorder | None = None,
        progress: Progress | None = None,
        per_sample: bool = False,
        keep_workers: int = 2,
        candidates: CandidateStart = CandidateStart(),
    ) -> None:
        self.workload = dict(workload)
        self.options = options or TuneOptions()
        self.labels = labels
        self.run = run
        self.progress = progress or Progress()
        self.per_sample = per_sample
        """Throughput: every time compared is per sample (a call's time over its batch)."""
        self.workers = WorkerPool(
            workload,
            block_s=self.options.block_s,
            per_sample=per_sample,
            warmup=DEFAULT_WARMUP,
            keep=keep_workers,
            candidates=candidates,
        )
        self.rounds = Rounds()
        self.enough_from = self.options.min_rounds
        """The round from which ``measure``'s ``enough`` is asked (verdicts wait for
        ``min_rounds`` whatever it is)."""
        self.reference: list | None = None
        self.default_batch = 1
        """The batch of the default (and of the reference outputs)."""
        self.default_ready: dict | None = None
        self.default_memory: Memory | None = None
        self.baseline_trial: int | None = None
        self.not_inherited: dict[str, str] = {}
        """Speed-relevant variables of the caller's environment that workers did not get."""
        self.spent_s: list[float] = []
        """What each candidate tried so far took, start to outcome."""

    @property
    def threshold(self) -> float:
        return self.options.threshold

    def close(self) -> None:
        """Close every worker and the baseline trial."""
        if self.run is not None and self.baseline_trial is not None:
            self.run.finish_trial(self.baseline_trial, "ok", self._default_info())
            self.baseline_trial = None
        self.workers.close()

    # ------------------------------------------------------------------ the default
    def _default_info(self) -> dict:
        """The baseline trial's info: its batch and TensorFlow install (with its fingerprint,
        as bench records it), which an exported result carries."""
        info: dict[str, Any] = {"role": "default", "batch": self.default_batch}
        if self.default_memory is not None:
            info["memory"] = self.default_memory.to_dict()
        install = (self.default_ready or {}).get("install")
        if install:
            info["install"] = dict(install, fingerprint=install_fingerprint(install))
        return info

    def start_default(self) -> dict:
        """Start the default worker and take the reference outputs; its ``ready`` message.

        Raises :class:`UserError` when the default itself cannot run (nothing to tune).
        """
        ready = self.start_default_worker()
        self.take_reference()
        return ready

    def start_default_worker(self) -> dict:
        """Start the default worker (:meth:`start_default` without the reference outputs)."""
        with _default_fails():
            handle = self.workers.get({}, self.options.candidate_timeout_s)
        self.default_ready = handle.ready
        self.default_memory = memory_of(handle.worker)
        self.default_batch = handle.batch
        self.not_inherited = dict(handle.worker.not_inherited)
        if self.run is not None:
            self.baseline_trial = self.run.trial("default", to_config_dict({}), "baseline")
            warm = (handle.ready.get("warmup") or {}).get("samples_s") or []
            if warm:
                self.run.block(self.baseline_trial, warm, "warmup")
        return handle.ready

    def take_reference(self) -> None:
        """Take the default's reference outputs, once; workers started ahead start on
        meanwhile (nothing is timed)."""
        if self.reference is None:
            with _default_fails():
                handle = self.workers.find(label({})) or self.workers.get(
                    {}, self.options.candidate_timeout_s)
                self.reference = self.workers.outputs(handle, self.outputs_timeout_s())

    def outputs_timeout_s(self) -> float | None:
        """How long the reference outputs may take to answer (``None``: the worker's own
        timeout, one call's outputs)."""
        return None

    def reference_at(self, batch: int) -> tuple[list, Any]:
        """The reference outputs and labels for a candidate that ran at ``batch``: a worker at
        another batch repeats the sample rows (``tile_to``), so each batch-major reference
        array (and the labels) has its rows repeated the same way."""
        reference, labels = list(self.reference or []), self.labels
        if batch == self.default_batch:
            return reference, labels

        def fit(array: Any) -> Any:
            rows = getattr(array, "shape", ())[:1]
            return repeat_rows(array, batch) if rows == (self.default_batch,) else array

        return [fit(a) for a in reference], None if labels is None else fit(labels)

    def reference_is_flat(self) -> bool:
        """Whether every reference output of two values or more is constant to within 1e-6
        of its scale. A single value (one score of one request) is no evidence either way:
        the check compares it, and says nothing of it here."""
        arrays = [a for a in (np.asarray(a, dtype=np.float64) for a in self.reference or [])
                  if a.size > 1]
        return bool(arrays) and all(
            float(np.ptp(a)) <= 1e-6 * max(float(np.max(np.abs(a))), 1e-30) for a in arrays
        )

    # ------------------------------------------------------------------ one candidate
    def __call__(self, config: dict, incumbent: dict, timeout_s: float | None) -> Outcome:
        config, incumbent = normalize(config), normalize(incumbent)
        name = label(config)
        self.progress.candidate(name)
        trial_id = self._new_trial(config)
        self.workers.evict({"default", label(incumbent), name, *self._parts_of(incumbent)})
        limit = self.start_limit(config)
        if timeout_s is not None:
            limit = min(limit, timeout_s)
        started = time.monotonic()
        try:
            outcome = self.known_too_slow(config, incumbent) or self._try(
                config, incumbent, limit, trial_id)
        except WorkerFailed as exc:
            self.workers.drop(name)
            self.workers.drop_dead()
            self.workers.drop_spares()  # no measurement of it follows
            reason = self._compile_too_slow(config, exc) or failure_reason(exc, config)
            info = {"error": exc.to_dict()}
            outcome = Outcome(config, FAILED, reason=reason, incumbent=incumbent, info=info)
        outcome.info["elapsed_s"] = time.monotonic() - started
        self.spent_s.append(outcome.info["elapsed_s"])
        if outcome.status == MEASURED:
            self._compare(trial_id, outcome.speedup)
        self.finish_trial(trial_id, outcome)
        self.progress.done(outcome)
        return outcome

    def start_limit(self, config: dict) -> float:
        """How long ``config``'s worker may take to start (:func:`tfperf.tuning.compiles.limit`:
        under ``--quick`` an ahead-of-time compile gets less than ``--candidate-timeout``)."""
        return compiles.limit(config, self.options.quick, self.options.candidate_timeout_s)

    def _compile_too_slow(self, config: dict, exc: WorkerFailed) -> str | None:
        """The sentence of a compile that ran past ``--quick``'s bound (remembered for the
        next quick tune here), ``None`` for any other failure."""
        bound = exc.timeout_s
        if (not (self.options.quick and compiles.compiles(config)) or bound is None
                or bound >= self.options.candidate_timeout_s):
            return None  # not --quick's bound that it ran past
        self.slow_compiles().remember(config, bound)
        return compiles.too_slow(bound)

    def slow_compiles(self) -> compiles.SlowCompiles:
        """This workload's record of compiles too slow for ``--quick``
        (:class:`tfperf.tuning.compiles.SlowCompiles`)."""
        install = (self.default_ready or {}).get("install") or {}
        return compiles.SlowCompiles(self.workload, install.get("tf_version"))

    def known_too_slow(self, config: dict, incumbent: dict | None = None) -> Outcome | None:
        """Under ``--quick``, the failed outcome of an ahead-of-time compile that ran past its
        bound when this model was tuned here before (not started again); ``None`` otherwise."""
        if not (self.options.quick and compiles.compiles(config)):
            return None
        bound = self.slow_compiles().known(config)
        if bound is None:
            return None
        return Outcome(normalize(config), FAILED, reason=compiles.too_slow(bound, before=True),
                       incumbent=dict(incumbent or {}))

    def start_ahead(self, *configs: dict) -> None:
        """Start workers two at a time, where memory allows (the default's peak once more for
        each): ``configs`` are the candidate tried now, then those likely to come next. Where
        the candidate tried now has no worker, it starts with the first after it that has
        none: two starts share two CPUs (one alone leaves a core idle, a third slows both; a
        transformer's candidate took 18.6 s to start beside two others, 13 s beside one), and
        the candidate after this one finds its worker ready. Where it has one, nothing starts:
        its rounds come first, and what comes after them is known only from its verdict (a
        winner's next candidates start during its guard; workers started for a loser's would
        be wasted, as were two of a transformer's, 9.9 s, before the step they waited on).
        Nothing is timed while a worker starts."""
        wanted = [normalize(c) for c in configs]
        if wanted and not self.workers.started(wanted[0]):
            self.start_fresh(*wanted)

    def removal_enough(self, vs_answer: Mapping[str, Any], done: int) -> bool:
        """Whether a removal measured again (:meth:`remeasure`), undecided after ``done``
        rounds, can end before the rounds it is allowed: never here (a training tune ends it
        where its confirmation would end,
        :meth:`tfperf.tuning.traintune.TrainEvaluator.removal_enough`)."""
        return False

    def start_fresh(self, *configs: dict) -> None:
        """Start the workers of the first two ``configs`` that have none, where memory allows
        (the default's peak once more for each)."""
        fresh = [c for c in map(normalize, configs)
                 if not self.workers.started(c) and self.known_too_slow(c) is None][:2]
        for config in self._within_memory(fresh):
            self.workers.start_ahead(config, self.start_limit(config))

    def start_spares(self, *configs: dict) -> None:
        """Start a second worker for each of ``configs`` (whose workers are in use), where
        memory allows: the fresh pair :meth:`remeasure` measures in, started while nothing is
        timed (:meth:`tfperf.tuning.workers.WorkerPool.start_spare`)."""
        for config in self._within_memory([normalize(c) for c in configs]):
            self.workers.start_spare(config, self.start_limit(config))

    def _within_memory(self, configs: list[dict]) -> list[dict]:
        """The first of ``configs`` whose workers memory allows beside those running: the
        default's peak once more for each, :data:`AHEAD_HEADROOM_BYTES` left free."""
        rss = ((self.default_ready or {}).get("peak_rss_bytes") or 0)
        free = psutil.virtual_memory().available - AHEAD_HEADROOM_BYTES
        return [c for n, c in enumerate(configs, start=1) if free >= (n + 1) * rss]

    @staticmethod
    def candidate_info(cand: Any) -> dict:
        """What an outcome keeps of its candidate's worker: notes, artifact, first call."""
        notes = list(cand.ready.get("notes") or [])
        return {
            "notes": notes,
            "artifact": artifact_from_notes(notes),
            "first_call_s": cand.ready.get("first_call_s"),
            "batch": cand.batch,
        }

    def _try(self, config: dict, incumbent: dict, limit: float, trial_id: int | None) -> Outcome:
        cand = self.workers.get(config, limit)
        info = self.candidate_info(cand)
        reference, labels = self.reference_at(cand.batch)
        check = guard(reference, self.workers.outputs(cand), self.options.tolerance, labels)
        if not check["accepted"]:
            self.workers.drop(label(config))
            return Outcome(
                config,
                REJECTED,
                reason=check["reason"],
                incumbent=incumbent,
                accuracy=check,
                time_ms=cand.per_call_s * 1e3,
                info=info,
            )
        refused = self.memory_refusal(cand, config, incumbent, info, check)
        if refused is not None:
            return refused
        base = self.workers.get({}, limit)
        inc = self.workers.get(incumbent, limit) if incumbent else base
        times = self.measure([base, inc, cand], trial_id, cand, limit=limit, decide=True)
        return Outcome(
            config,
            MEASURED,
            speedup=paired_speedup(times[0], times[2], self.threshold),
            vs_incumbent=paired_speedup(times[1], times[2], self.threshold),
            incumbent=incumbent,
            accuracy=check,
            time_ms=statistics.median(times[2]) * cand.unit * 1e3,
            info=info,
        )

    def remeasure(self, config: dict, incumbent: dict) -> Outcome:
        """``config`` measured against ``incumbent`` again, in a fresh pair of workers (the
        spares a training tune started during the first measurement's guard, else two started
        side by side now), for up to the rounds a confirmation may take (``--confirm-rounds``,
        at least ``max_rounds``), stopping once decided or once :meth:`removal_enough` says
        more rounds cannot keep the knob: an undecided removal's second measurement
        (:func:`tfperf.tuning.prune.prune`), apart from the processes of the first, so that
        a speed that belongs to one process does not decide it. Its guard was the first
        measurement's; a worker that fails makes it *failed*."""
        config, incumbent = normalize(config), normalize(incumbent)
        name = f"{label(config)} against {label(incumbent)}, measured again"
        self.progress.candidate(name)
        trial_id = None
        if self.run is not None:
            trial_id = self.run.trial(name, to_config_dict(config), "removal")
        started = time.monotonic()
        limit = self.options.candidate_timeout_s
        try:
            for stale in (config, incumbent):
                self.workers.renew(label(stale))  # its spare, where one started, takes over
            self.start_fresh(incumbent, config)
            inc, cand = self.workers.get(incumbent, limit), self.workers.get(config, limit)
            rounds = max(self.options.confirm_rounds, self.options.max_rounds)
            times = self.measure([inc, inc, cand], trial_id, cand, limit=limit, decide=True,
                                 rounds=rounds, enough=self.removal_enough)
            outcome = Outcome(
                config, MEASURED, incumbent=incumbent,
                vs_incumbent=paired_speedup(times[1], times[2], self.threshold),
                time_ms=statistics.median(times[2]) * cand.unit * 1e3,
                info={**self.candidate_info(cand), "measured_again": True})
        except WorkerFailed as exc:
            self.workers.drop_dead()
            outcome = Outcome(config, FAILED, reason=failure_reason(exc, config),
                              incumbent=incumbent, info={"error": exc.to_dict()})
        outcome.info["elapsed_s"] = time.monotonic() - started
        self.finish_trial(trial_id, outcome)
        self.progress.done(outcome)
        return outcome

    def _parts_of(self, incumbent: dict) -> set[str]:
        """The live workers whose config is part of ``incumbent`` (some of its knobs, as set
        there): an answer is pruned by removing each knob in turn, and the first pair of a
        training tune had started ``xla=jit`` beside the ``steps_per_execution`` that won, a
        removal of ``steps_per_execution=8,xla=jit`` that a transformer's pruning started
        again (5.4 s)."""
        knobs = set(label(incumbent).split(","))
        return {n for n in self.workers.labels() if set(n.split(",")) < knobs}

    def memory_refusal(self, cand: Handle, config: dict, incumbent: dict, info: dict,
                       accuracy: dict | None = None) -> Outcome | None:
        """Read the candidate's memory into ``info["memory"]``; its rejection when its peak is
        over ``max_memory_mb`` (then not worth timing), else ``None``."""
        memory = memory_of(cand.worker)
        info["memory"] = memory.to_dict()
        over = over_ceiling(memory, self.options.max_memory_mb)
        if not over:
            return None
        self.workers.drop(label(config))
        info["over_ceiling"] = True
        return Outcome(config, REJECTED, reason=over, incumbent=incumbent, accuracy=accuracy,
                       time_ms=cand.per_call_s * 1e3, info=info)

    # ------------------------------------------------------------------ rounds
    def measure(
        self,
        handles: list[Handle],
        trial_id: int | None,
        cand: Handle,
        *,
        limit: float,
        decide: bool,
        rounds: int | None = None,
        first_round: int = 0,
        process: int = 0,
        enough: Callable[[dict, int], bool] | None = None,
    ) -> list[list[float]]:
        """Interleaved rounds of ``handles`` (a handle listed twice runs once); each one's
        block times (:attr:`block_time`) per call or per sample. With ``decide`` the rounds
        stop once the verdict of ``handles[2]`` against ``handles[1]`` is decided (from
        ``min_rounds`` on), or from :attr:`enough_from` on once ``enough(comparison, rounds
        done)`` says that more rounds cannot change what the caller does with it. Stored
        blocks are numbered from ``first_round`` and name their ``process`` if not 0."""
        unique = list({id(h): h for h in handles}.values())
        block_times: dict[int, list[float]] = {id(h): [] for h in unique}
        target = rounds or self.options.max_rounds
        started = time.monotonic()

        def on_block(handle: Any, round_no: int, samples: list[float]) -> None:
            block_times[id(handle)].append(self.block_time(samples) / handle.unit)
            info = block_info(first_round + round_no, process)
            self._record(handle, cand, trial_id, samples, info)

        def stop(done: int) -> str | None:
            if done >= target:
                return "rounds"
            if time.monotonic() - started > limit:
                return "time limit"
            if not decide or done < min(self.options.min_rounds, self.enough_from):
                return None
            pair = (block_times[id(handles[1])], block_times[id(handles[2])])
            speedup = paired_speedup(*pair, self.threshold)
            if done >= self.options.min_rounds and speedup["verdict"] != "inconclusive":
                return speedup["verdict"]
            if done >= self.enough_from and enough is not None and enough(speedup, done):
                return "enough"
            return None

        self.rounds.run(unique, on_block, stop)
        return [block_times[id(h)] for h in handles]

    def confirm(self, config: dict, rounds: int) -> dict:
        """Winner vs default, interleaved for ``rounds`` rounds: ``paired_speedup``'s result
        plus, for each side (``default_``, ``candidate_``), ``ms`` (per call), ``batch`` and
        ``samples_per_s``. The rounds are shared among :func:`confirm_processes` pairs of
        workers, a fresh pair after the first (which may be the search's own workers), so
        that a speed that depends on the process shows in the interval."""
        self.progress.phase(f"confirming {label(config)} against the default")
        trial_id = None
        if self.run is not None:
            name = f"{label(config)} (confirmation)"
            trial_id = self.run.trial(name, to_config_dict(config), "confirmation")
        processes = self.confirm_processes(rounds)
        times: list[list[float]] = [[], []]
        process_of: list[int] = []

        def pair_rounds(k: int, count: int, base: Handle, cand: Handle) -> dict:
            """``count`` rounds of the ``k``-th pair; the comparison of every round so far."""
            result = self.measure(
                [base, base, cand], trial_id, cand, limit=math.inf, decide=False,
                rounds=count, first_round=len(process_of), process=k,
            )
            times[0].extend(result[0])
            times[1].extend(result[2])
            process_of.extend([k] * len(result[0]))
            return paired_speedup(times[0], times[1], self.threshold,
                                  processes=process_of if processes > 1 else None)

        for k in range(processes):
            if k:  # a fresh pair, its two workers started side by side
                self.workers.drop(label({}))
                self.workers.drop(label(config))
                self.start_ahead({}, config)
            base = self.workers.get({}, self.options.candidate_timeout_s)
            cand = self.workers.get(config, self.options.candidate_timeout_s)
            share = rounds // processes + (1 if k < rounds % processes else 0)
            speedup = pair_rounds(k, share, base, cand)
        more = self.confirm_runs_on(speedup, len(process_of))
        if more:
            speedup = pair_rounds(processes - 1, more, base, cand)
        for side, handle, ts in (("default", base, times[0]), ("candidate", cand, times[1])):
            speedup[f"{side}_ms"] = statistics.median(ts) * handle.unit * 1e3
            speedup[f"{side}_batch"] = handle.batch
            speedup[f"{side}_samples_per_s"] = samples_per_s(speedup[f"{side}_ms"], handle.batch)
        self._compare(trial_id, speedup)
        if self.run is not None and trial_id is not None:
            self.run.finish_trial(trial_id, "ok", {"confirmation": speedup})
        return speedup

    def confirm_runs_on(self, speedup: Mapping[str, Any], done: int) -> int:
        """How many more rounds the confirmation's last pair runs after ``done`` left
        ``speedup`` undecided: none here (a training tune's may, :class:`TrainEvaluator`)."""
        return 0

    def confirm_processes(self, rounds: int) -> int:
        """How many worker pairs share the confirmation's rounds (:func:`confirm_processes`)."""
        return confirm_processes(rounds)

    # ------------------------------------------------------------------ the store
    def _record(
        self, handle: Handle, cand: Handle, trial_id: int | None, samples: list, info: dict
    ) -> None:
        """Store a block: the candidate's to its trial, the default's to the baseline trial."""
        if self.run is None:
            return
        if handle is cand and trial_id is not None:
            self.run.block(trial_id, samples, "steady", info)
        elif handle is self.workers.find("default") and self.baseline_trial is not None:
            self.run.block(self.baseline_trial, samples, "steady", info)

    def _compare(self, trial_id: int | None, speedup: dict | None) -> None:
        """Record a candidate-vs-default comparison (for history and the HTML report)."""
        if self.run is None or trial_id is None or self.baseline_trial is None or not speedup:
            return
        self.run.comparison(self.baseline_trial, trial_id, speedup)

    def _new_trial(self, config: dict) -> int | None:
        if self.run is None:
            return None
        return self.run.trial(label(config), to_config_dict(config), "candidate")

    def finish_trial(self, trial_id: int | None, outcome: Outcome) -> None:
        """Close a candidate's trial with its outcome (what a resumed tune replays)."""
        if self.run is None or trial_id is None:
            return
        status = {MEASURED: "ok", REJECTED: "rejected", FAILED: "failed"}[outcome.status]
        error = {"reason": outcome.reason} if outcome.status != MEASURED else None
        self.run.finish_trial(trial_id, status, {"outcome": outcome.to_dict()}, error)


def samples_per_s(time_ms: float | None, batch: int | None) -> float | None:
    """Samples per second of calls taking ``time_ms`` for ``batch`` samples each."""
    if not time_ms or not batch:
        return None
    return batch / (time_ms / 1e3)


@contextlib.contextmanager
def _default_fails() -> Iterator[None]:
    """A failing default worker as one sentence: there is nothing to tune."""
    try:
        yield
    except WorkerFailed as exc:
        if exc.timeout_s is not None:
            raise UserError(
                f"the default configuration took longer than {exc.timeout_s:g} s to answer "
                "(--candidate-timeout and the time its guard needs): a model this slow needs a "
                "larger --candidate-timeout."
            ) from None
        raise UserError(
            f"the workload does not run under the default configuration ({exc.reason}); "
            "check it with `tfperf bench` first."
        ) from None
