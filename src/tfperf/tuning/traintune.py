"""Tuning the user's own training step: candidates timed per step, then guarded over K steps.

Contract: :class:`TrainEvaluator` is the :class:`~tfperf.tuning.evaluate.Evaluator` of a
training workload (kind ``"train"``, :mod:`tfperf.worker.training`). It compares time per
sample (a call's time over its samples: per step at the same batch, so a candidate with
``steps_per_execution`` N is judged per step, not per call). Unlike inference it times a
candidate *first*: one clearly slower than the default (verdict "slower", its whole 95%
interval below :data:`CLEARLY_SLOWER`) is dropped there, without spending the guard's K steps
on it, and so is one that cannot become the answer (:func:`could_answer`: not significantly
faster than its incumbent, nor a removal the pruning would take); the rounds of a candidate
that is no removal end as soon as its interval against the incumbent lies wholly below the
"faster" bound (:meth:`TrainEvaluator.cannot_win`). Any other is then guarded
(:func:`tfperf.tuning.trainguard.judge`: the per-step loss from the same initial weights on
the same batches, against the default's) and *rejected* with its figures when it learns
differently. Every configuration that can be recommended has therefore passed the guard.
The default's own trajectory must be finite (:func:`~tfperf.tuning.trainguard.default_problem`,
else a :class:`UserError`); it is taken while the first candidates' workers start
(:meth:`TrainEvaluator.start_ahead`), else where it is first needed, and the tune takes it
after its search in any case (:meth:`TrainEvaluator.take_reference`).
:func:`train_document` adds the training figures to tune's document. Nothing here imports
TensorFlow.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tfperf.core.errors import UserError
from tfperf.core.knobs import label
from tfperf.core.protocol import DEFAULT_GUARD_STEPS, GUARD_SECONDS, OTHER_DRAWS_NOTE
from tfperf.core.stats import paired_speedup
from tfperf.profiles import train_code_lines
from tfperf.runner.handle import WorkerFailed
from tfperf.runner.recorder import RunRecorder
from tfperf.runner.rounds import calls_per_block
from tfperf.tuning.evaluate import Evaluator, Progress, failure_reason
from tfperf.tuning.loopspace import fit_step_space
from tfperf.tuning.options import TuneOptions
from tfperf.tuning.prune import AGAIN, KEEP, decision
from tfperf.tuning.search import MEASURED, REJECTED, Outcome
from tfperf.tuning.space import (
    MAX_TRAIN_CALL_S,
    QUICK_MAX_CALL_S,
    Space,
    TrainBaseline,
    fit_training_space,
    steps_ladder,
)
from tfperf.tuning.trainguard import (
    MIN_STEPS,
    TrainTolerance,
    default_problem,
    judge,
    loss_keys,
)
from tfperf.tuning.workers import MAX_CALLS, CandidateStart

SLOWER = "not run: clearly slower than the default, dropped after timing"
NOT_FASTER = (
    "not run: not significantly faster than the configuration it was measured against, so "
    "it cannot become the answer")
TRAIN_BLOCK_S = 0.3
"""Blocks of at least this long: a training step takes tens of milliseconds, and a block of
one or two steps makes each pair's ratio as noisy as a single step."""
BLOCK_STEPS = 4
"""...and of at least this many of the default's steps: a 200 ms step gets 0.8 s blocks, so
that one slow step's jitter does not decide a pair."""
MAX_BLOCK_S = 2.0
CANDIDATE_START = CandidateStart(
    workload={"input_probe": False}, warmup={"min_calls": 1, "max_seconds": 2.0})
"""A candidate's worker skips the input-wait probe (only the default's is shown) and warms
up for 2 s (or until its calls settle), however few calls that is, not over 5 calls at least:
its first call (tracing, compilation) is made apart, and a call of 32 slow steps can take
seconds (five of them were most of a slow candidate's start)."""
QUICK_CANDIDATE_START = replace(CANDIDATE_START, warmup={"min_calls": 1, "max_seconds": 1.0})
"""...and under ``--quick`` for 1 s: the default's one-step calls of a transformer ran
within 5% of their median from the first call after the one made apart, while the ten calls
that show the settling took a candidate of 8 steps a call 1.6 s, and most candidates' warm-up
ran to the cap (two workers start side by side, so each second of it is one of the tune's)."""
CLEARLY_SLOWER = 0.9
"""A candidate whose whole speedup interval lies below this is not guarded: it cannot win."""


LEARNING_RATE_NOTE = (
    "another batch size takes another number of optimizer steps for the same samples and may "
    "need another learning rate, which tfperf does not tune"
)


def guard_length(workload: Mapping[str, Any], batches: tuple[int, ...]) -> int:
    """The default's guard steps: ``--guard-steps`` (at least :data:`MIN_STEPS`), and enough
    for the largest batch tried (``batches``, the workload's batch being ``batch``) to run
    :data:`MIN_STEPS` steps over the same samples."""
    steps = max(MIN_STEPS, int(workload.get("guard_steps") or DEFAULT_GUARD_STEPS))
    own = int(workload.get("batch") or 1)
    ratio = max([b / own for b in batches], default=1.0)
    return max(steps, math.ceil(MIN_STEPS * ratio))


def is_training(workload: Mapping[str, Any]) -> bool:
    """Whether ``workload`` is the user's own training step."""
    return workload.get("kind") == "train"


class TrainEvaluator(Evaluator):
    """Tries training candidates (see the module docstring)."""

    block_time = staticmethod(statistics.fmean)
    """A block's time per call is its calls' mean: ``fit`` pays every step, the slow ones
    too, and a call of 32 steps has them inside it, where a median of one-step calls would
    leave them out (a CNN's one-step calls averaged 4.2% above their median, all of it
    counted against more steps per call)."""

    def __init__(
        self,
        workload: Mapping[str, Any],
        options: TuneOptions,
        *,
        run: RunRecorder | None = None,
        progress: Progress | None = None,
        batches: tuple[int, ...] = (),
    ) -> None:
        self.started = time.monotonic()
        floor = QUICK_BLOCK_S if options.quick else TRAIN_BLOCK_S
        options = replace(options, block_s=max(options.block_s, floor))
        self.usual_rounds = min(options.max_rounds,
                                QUICK_MAX_ROUNDS if options.quick else TRAIN_MAX_ROUNDS)
        """A candidate's rounds unless it may still win (:meth:`rounds_enough`)."""
        self.guard_steps = guard_length(workload, batches)
        workload = {**workload, "guard_steps": self.guard_steps}
        super().__init__(workload, options, run=run, progress=progress, per_sample=True,
                         candidates=QUICK_CANDIDATE_START if options.quick else CANDIDATE_START)
        self.enough_from = min(self.enough_from, FUTILE_ROUNDS)
        self.tolerance: TrainTolerance = options.train_tolerance or TrainTolerance()
        self.baseline = TrainBaseline()
        """The user's own setup, read back by the default worker."""
        self.default_cost_s = 0.0
        """What starting the default took: a worker, its first steps and its guard."""
        self.fit_speedup: dict | None = None
        """The answer's ``fit`` against the default's (:meth:`confirm_fit`)."""
        self.fit_failed: str | None = None
        """Why that ``fit`` was not timed, where a worker failed in it."""
        self.search_budget_s: float | None = None
        """The search's time (:func:`train_limits`)."""
        self.tune_limit_s: float | None = None
        """When the tune is to end, in seconds from its start (:func:`train_limits`)."""
        self.next_if_won: Callable[[dict], list[dict]] | None = None
        """Set by the search: the candidates that come next if the one tried now becomes the
        answer. Their workers start while its guard runs (:meth:`_guard`)."""
        self.remeasure_if_undecided = False
        """Set by the pruning while it measures a removal: an undecided one is measured again
        in a fresh pair of workers (:meth:`remeasure`), which then starts while the first
        measurement's guard runs (:meth:`_guard`)."""

    def within_guard(self, space: Space) -> Space:
        """``space`` without the batch sizes the default's guard does not cover: a batch of
        ``B`` rows needs the default to have seen at least :data:`MIN_STEPS` x ``B`` samples."""
        rows = self.default_batch
        too_big = tuple(
            b for b in space.values.get("batch", ())[1:] if MIN_STEPS * b > self.guard_steps * rows
        )
        if not too_big:
            return space
        return space.drop(
            "batch", too_big,
            f"the default's guard covers {self.guard_steps} steps of {rows} rows, fewer "
            f"samples than {MIN_STEPS} steps of this batch: raise --guard-steps to try it",
        )

    def _rows_ratio(self, cand: Any) -> float:
        """The candidate's rows per step over the default's (its ``batch`` knob)."""
        default = ((self.default_ready or {}).get("train") or {}).get("batch") or 1
        return float((cand.ready.get("train") or {}).get("batch") or default) / float(default)

    def start_default(self) -> dict:
        """Start the default's worker; its guard (the reference) runs while the first
        candidates' workers start (:meth:`start_ahead`), or when it is first needed."""
        started = time.monotonic()
        ready = self.start_default_worker()
        self.baseline = TrainBaseline.from_ready(ready)
        step = self.step_s()
        self.default_cost_s = time.monotonic() - started + self.guard_cost_s()
        if step:
            self.workers.block_s = min(MAX_BLOCK_S, max(self.workers.block_s, BLOCK_STEPS * step))
            default = self.workers.find("default")
            if default is not None:
                default.calls = calls_per_block(default.ready, self.workers.block_s, MAX_CALLS)
        return ready

    def take_reference(self) -> None:
        """The default's guard, once; one sentence where its own losses cannot serve."""
        if self.reference is not None:
            return
        super().take_reference()
        problem = default_problem(self.reference or [[]])
        if problem:
            raise UserError(problem[0].upper() + problem[1:])

    def start_ahead(self, *configs: dict) -> None:
        """Start workers ahead (:meth:`Evaluator.start_ahead`); the default's guard, not yet
        taken, runs while they start: it is timed by no one, and the default's start and its
        guard one after the other left a core idle for a transformer's 10 s. Beside that
        guard one worker starts, not two: the guard takes the other core, and the second
        (the next knob's candidate, from the default) is wasted where the first wins, as
        steps per call did on every model of the suite; a transformer's first candidate,
        started beside the guard and another worker, was ready 8.2 s later."""
        super().start_ahead(*(configs if self.reference is not None else configs[:1]))
        self.take_reference()

    def guard_cost_s(self) -> float:
        """About what a guard costs: its train function's first call (tracing, compilation)
        and its steps at the default's speed."""
        train = (self.default_ready or {}).get("train") or {}
        return float(train.get("first_steps_s") or 0.0) + self.guard_steps * (self.step_s() or 0.0)

    def outputs_timeout_s(self) -> float:
        """How long a guard may take to answer: ``--candidate-timeout``, or twice what its
        steps take at the default's step time where that is longer (a step of seconds runs
        the guard's 50 steps for minutes, past a timeout sized for one request): the steps
        it runs (``--guard-steps``, stopped after ``--guard-seconds`` once it has run
        :data:`MIN_STEPS`) and its train function's first call."""
        step = self.step_s() or 0.0
        train = (self.default_ready or {}).get("train") or {}
        cap = float(self.workload.get("guard_seconds") or GUARD_SECONDS)
        steps_s = max(MIN_STEPS * step, min(self.guard_steps * step, cap))
        expected = float(train.get("first_steps_s") or 0.0) + steps_s
        return max(self.options.candidate_timeout_s, 2.0 * expected + 10.0)

    def step_s(self) -> float | None:
        """The default's time per training step (its warm-up, over its steps per call)."""
        ready = self.default_ready or {}
        tail = (ready.get("warmup") or {}).get("samples_s", [])[-5:]
        spe = int((ready.get("train") or {}).get("steps_per_call") or 1)
        return statistics.median(tail) / spe if tail else None

    def candidate_cost_s(self) -> float:
        """What one more candidate costs here: the median of the candidates tried so far
        (each one's worker started while the one before it started), else a worker started
        and guarded as the default was and ``min_rounds`` rounds of three blocks."""
        if len(self.spent_s) >= 2:
            return statistics.median(self.spent_s)
        rounds = self.options.min_rounds * 3 * self.workers.block_s
        return self.default_cost_s + rounds

    def tail_s(self, answer: Mapping[str, Any]) -> float:
        """What follows a search that ends at ``answer``: one removal per knob where it has
        two or more (:func:`tfperf.tuning.prune.prune`), the last one added measured again on
        the workers of the step that added it (its rounds only: three blocks a round); the
        confirmation (a fresh pair of workers after the first, two blocks a round) and the
        timed ``fit`` (:meth:`confirm_fit`); nothing for the default."""
        return self._tail_s(len(answer))

    def _tail_s(self, knobs: int) -> float:
        """:meth:`tail_s` of an answer of ``knobs`` knobs."""
        if not knobs:
            return 0.0
        last = 0.0 if knobs < 2 else self.usual_rounds * 3 * self.workers.block_s
        return (knobs - 1) * self.candidate_cost_s() + last + self.confirm_s()

    def confirm_s(self) -> float:
        """About what confirming an answer takes: a fresh pair of workers after the first
        (started side by side), two blocks a round, and the timed ``fit``."""
        rounds = self.options.confirm_rounds
        pairs = self.confirm_processes(rounds) - 1
        confirm = pairs * self.default_cost_s + rounds * 2 * self.workers.block_s
        call_s = QUICK_FIT_CALL_S if self.options.quick else FIT_CALL_S
        fit = (FIT_ROUNDS + 1) * 2 * max(call_s, FIT_MIN_STEPS * (self.step_s() or 0.0))
        return confirm + fit

    def reserve_s(self, answer: Mapping[str, Any]) -> float:
        """The time a search must leave to start one more candidate with ``answer`` as its
        incumbent: that candidate's cost and what follows the search where it wins, an
        answer one knob larger (:meth:`tail_s`)."""
        return self.candidate_cost_s() + self._tail_s(len(answer) + 1)

    def may_look_again(self, candidate: dict) -> bool:
        """Whether one more candidate and what follows it where it wins (:meth:`tail_s`)
        still end the tune within :data:`QUICK_TRAIN_TUNE_S`: a second look at a knob
        measured on the answer's step uses time left over, and never a grown limit."""
        return self._ends_by(candidate, QUICK_TRAIN_TUNE_S)

    def may_reach_again(self, candidate: dict) -> bool:
        """:meth:`may_look_again` for a knob whose one candidate was measured on a step the
        answer has since shortened (steps per call measured on the default's step, before
        XLA): within the tune's limit, grown where one candidate of each knob needs it
        (:func:`train_limits`). That limit pays for reaching every knob, and such a knob's
        gain on the answer was never measured: a transformer's ``--quick`` measured 4 steps
        per call at 1.01-1.08x on the default's 40-50 ms step, ended its reach past 110 s
        with ``xla=jit`` and never tried steps per call on XLA's 25-30 ms step."""
        return self._ends_by(candidate, max(QUICK_TRAIN_TUNE_S, self.tune_limit_s or 0.0))

    def _ends_by(self, candidate: dict, limit_s: float) -> bool:
        more = self.candidate_cost_s() + self.tail_s(candidate)
        return self.elapsed_s() + more <= limit_s

    def elapsed_s(self) -> float:
        """Seconds since this tune began (the evaluator is made before the default starts)."""
        return time.monotonic() - self.started

    def confirm_processes(self, rounds: int) -> int:
        """One pair of workers for a slow step (:data:`SLOW_STEP_S` or more): its rounds are
        long, and a fresh pair costs a worker start and its first steps; more rounds in one
        pair narrow the interval more than more pairs do."""
        step = self.step_s()
        return 1 if step and step >= SLOW_STEP_S else super().confirm_processes(rounds)

    def confirm(self, config: dict, rounds: int) -> dict:
        """The train function's confirmation, then the answer confirmed the way the user runs
        it: ``model.fit`` of the same steps in the default's and the answer's workers,
        interleaved (:attr:`fit_speedup`, per step)."""
        speedup = super().confirm(config, rounds)
        try:
            self.fit_speedup = self.confirm_fit(config)
        except WorkerFailed as exc:  # information only: the confirmation above decided
            self.workers.drop_dead()
            self.fit_failed = failure_reason(exc, config)
        return speedup

    def confirm_fit(self, config: dict) -> dict | None:
        """``paired_speedup`` of the answer's ``fit`` over the default's, per step: each side
        fits ``steps`` steps (a multiple of both sides' steps per call, about
        :data:`FIT_CALL_S` of the default's steps, half under ``--quick``), one warm-up fit
        each, then :data:`FIT_ROUNDS` alternating pairs. A step's time runs from the call to
        fit's end of training; ``return_wait_ms`` (median, max) is what fit took after it,
        its iterator's deletion (:mod:`tfperf.worker.training`). Where the answer's steps
        hold another number of rows (its ``batch``), the speedup is per sample
        (``per: "sample"``), as every other comparison of the tune. ``None`` where the workers
        have no fit."""
        self.progress.phase(f"timing model.fit of the default and of {label(config)}")
        base = self.workers.get({}, self.options.candidate_timeout_s)
        cand = self.workers.get(config, self.options.candidate_timeout_s)
        call_s = QUICK_FIT_CALL_S if self.options.quick else FIT_CALL_S
        steps = fit_steps(self.step_s(), _spe(base), _spe(cand), call_s=call_s)
        rows = [_rows(base), _rows(cand)]
        per_step: list[list[float]] = [[], []]
        waits: list[float] = []
        for round_no in range(FIT_ROUNDS + 1):
            order = ((0, base), (1, cand)) if round_no % 2 else ((1, cand), (0, base))
            for side, handle in order:
                got = handle.worker.extra_calls("fit", 1, arg=steps)
                if not got:
                    return None
                if round_no:  # the first fit of each side warms up (its iterator, callbacks)
                    call_s, trained_s = got.samples_s[0], got.returned[0] or got.samples_s[0]
                    per_step[side].append(trained_s / steps)
                    waits.append(call_s - trained_s)
        per_sample = [[t / rows[side] for t in per_step[side]] for side in (0, 1)]
        result = paired_speedup(*per_sample, self.threshold)
        result.update(steps=steps, per="sample" if rows[0] != rows[1] else "step",
                      default_rows=rows[0], candidate_rows=rows[1],
                      default_step_ms=statistics.median(per_step[0]) * 1e3,
                      candidate_step_ms=statistics.median(per_step[1]) * 1e3,
                      return_wait_ms={"median": statistics.median(waits) * 1e3,
                                      "max": max(waits) * 1e3})
        return result

    @property
    def max_call_s(self) -> float:
        """The longest call of several steps the ladder of steps per call allows."""
        return QUICK_MAX_CALL_S if self.options.quick else MAX_TRAIN_CALL_S

    def fit_space(self, space: Space) -> Space:
        """The space once the default ran (:func:`fit_training_space`), without the batch
        sizes its guard does not cover."""
        fitted = fit_training_space(space, self.baseline, self.step_s(), self.max_call_s)
        return self.within_guard(fit_step_space(fitted, self.baseline))

    def resize_ladder(self, space: Space, answer: Outcome) -> Space:
        """``space`` with the steps-per-call ladder grown to what the new answer's step allows
        (:func:`steps_ladder` from its step, measured in ``answer``): the ladder was sized
        from the default's step, and a knob that shortens the step (XLA cut a transformer's
        from 34 to 22 ms) leaves room for more steps in a call of the same length. Only
        larger values are added; those tried stay."""
        current = space.values.get("steps_per_execution", ())
        step_ms = answer.info.get("step_ms")
        if len(current) < 2 or not step_ms:
            return space
        ladder = steps_ladder(step_ms / 1e3, self.baseline.steps_per_execution, self.max_call_s)
        top = max(int(v) for v in current if v)
        grown = tuple(v for v in ladder if v > top)
        if not grown:
            return space
        return replace(space, values={**space.values, "steps_per_execution": (*current, *grown)})

    def reference_is_flat(self) -> bool:
        return False  # the guard's "inconclusive" verdict says it for training

    def rounds_enough(self, vs_incumbent: Mapping[str, Any], done: int, removal: bool) -> bool:
        """Whether a candidate's rounds (``done`` so far, undecided) can end: at
        :attr:`usual_rounds`, unless its median still points where a verdict would change
        the answer -- at or above the "faster" bound for a candidate (it may yet become the
        answer), at or below the "slower" one for a removal (its knob may yet be kept) -- and
        then it runs on to ``max_rounds``; and before that, once it cannot win
        (:meth:`cannot_win`)."""
        if removal:
            may_decide = self._may_keep(vs_incumbent)
        else:
            may_decide = (vs_incumbent.get("median") or 0.0) >= 1.0 + self.threshold
        if done >= self.usual_rounds and not may_decide:
            return True
        return not removal and self.cannot_win(vs_incumbent)

    def removal_enough(self, vs_answer: Mapping[str, Any], done: int) -> bool:
        """A removal measured again takes the rounds a confirmation takes: its
        ``confirm_rounds``, and on to ``max_rounds`` only where its median is at or below
        the "slower" bound (:meth:`confirm_runs_on`'s rule, read for a removal). Above it,
        more rounds could keep the knob only by moving that median across the bound: four
        second measurements of a transformer's ``--quick`` ran to 16 rounds at 0.98-1.00x,
        where its confirmation takes 10. The default tune's confirmation takes 21, more
        than ``max_rounds``: nothing ends earlier there."""
        return done >= self.options.confirm_rounds and not self._may_keep(vs_answer)

    def _may_keep(self, vs_answer: Mapping[str, Any]) -> bool:
        """Whether a removal's median is at or below the "slower" bound: more rounds may
        still find it significantly slower, and keep its knob."""
        median = vs_answer.get("median") or 0.0
        return 0.0 < median <= 1.0 / (1.0 + self.threshold)

    def confirm_runs_on(self, speedup: Mapping[str, Any], done: int) -> int:
        """The rule of :meth:`rounds_enough` for the confirmation: one still undecided with its
        median at or above the "faster" bound runs on to ``max_rounds`` (``--quick``'s 10
        rounds left a CNN's 1.08x [0.98-1.25] undecided, and the tune answered the default)."""
        undecided = speedup.get("verdict") == "inconclusive"
        may_decide = (speedup.get("median") or 0.0) >= 1.0 + self.threshold
        return max(0, self.options.max_rounds - done) if undecided and may_decide else 0

    def cannot_win(self, vs_incumbent: Mapping[str, Any]) -> bool:
        """Whether a comparison's 95% interval lies wholly below the "faster" bound (1 +
        threshold): more rounds would have to move its median beyond the interval's end."""
        high = (vs_incumbent.get("ci95") or [None, None])[1]
        return high is not None and high < 1.0 + self.threshold

    def _try(self, config: dict, incumbent: dict, limit: float, trial_id: int | None) -> Outcome:
        cand = self.workers.get(config, limit)
        info = {**self.candidate_info(cand), "train": cand.ready.get("train")}
        refused = self.memory_refusal(cand, config, incumbent, info)
        if refused is not None:
            return refused
        base = self.workers.get({}, limit)
        inc = self.workers.get(incumbent, limit) if incumbent else base
        # rounds go where they can change the answer (rounds_enough)
        enough = functools.partial(self.rounds_enough, removal=is_removal(config, incumbent))
        times = self.measure([base, inc, cand], trial_id, cand, limit=limit, decide=True,
                             enough=enough)
        speed = paired_speedup(times[0], times[2], self.threshold)
        measured = {
            "speedup": speed,
            "vs_incumbent": paired_speedup(times[1], times[2], self.threshold),
            "time_ms": statistics.median(times[2]) * cand.unit * 1e3,
        }
        spe = int((cand.ready.get("train") or {}).get("steps_per_call") or 1)
        info["step_ms"] = measured["time_ms"] / spe
        unguarded = SLOWER if clearly_slower(speed) else (
            None if could_answer(config, incumbent, measured["vs_incumbent"]) else NOT_FASTER)
        if unguarded:
            check = {"accepted": True, "reason": "", "guard": {"verdict": unguarded}}
            return Outcome(config, MEASURED, incumbent=incumbent, accuracy=check, info=info,
                           **measured)
        again = (incumbent, config) if self._measured_again(measured["vs_incumbent"]) else ()
        check = self._guard(config, cand, again)
        if again and not check["accepted"]:
            self.workers.drop_spares()  # a removal the guard rejects keeps its knob
        status = MEASURED if check["accepted"] else REJECTED
        return Outcome(config, status, reason=check["reason"], incumbent=incumbent,
                       accuracy=check, info=info, **measured)

    def _measured_again(self, vs_incumbent: Mapping[str, Any]) -> bool:
        """Whether the pruning measures this removal again (:attr:`remeasure_if_undecided`,
        :func:`tfperf.tuning.prune.decision`) should the guard accept it."""
        undecided = Outcome({}, MEASURED, vs_incumbent=dict(vs_incumbent))
        return self.remeasure_if_undecided and decision(undecided) == AGAIN

    def _guard(self, config: dict, cand: Any, again: tuple[dict, ...] = ()) -> dict:
        """The guard's verdict on a candidate that can become the answer. The workers of what
        comes next if it does (:attr:`next_if_won`) start meanwhile, those that have none even
        where the first has one: the guard is timed by no one, and its compilation (a
        transformer's XLA step: 12 s) kept one core busy while the other waited. (Where the
        next candidate wins in turn, a worker started here for what follows it from this one
        is wasted; a transformer's next pair, Keras on JAX ready and the threads after it,
        otherwise waited for JAX's rounds and started on its own, 10 s.) So do the spares of
        ``again``, the fresh pair an undecided removal is measured again in (a transformer's
        pair took 14 s to start after its 13-s guard)."""
        if self.next_if_won is not None:
            self.start_fresh(*self.next_if_won(config))
        self.start_spares(*again)
        self.take_reference()
        reduced = (config.get("precision") or "fp32") != "fp32"
        ratio = self._rows_ratio(cand)
        outputs = self.workers.outputs(cand, self.outputs_timeout_s())
        check = judge(self.reference or [[]], outputs, reduced, self.tolerance,
                      ratio)
        return explained(check, ratio, cand.ready.get("notes") or (),
                         self._sparse_rows(config, cand))

    def _sparse_rows(self, config: dict, cand: Any) -> str | None:
        """The optimizer that updates an ``Embedding`` otherwise on TensorFlow than on JAX,
        where ``config`` changes the backend: found by whichever of the two workers runs on
        TensorFlow (:func:`tfperf.worker.trainstate.sparse_rows_optimizer`)."""
        if not config.get("runtime"):
            return None
        return next((train["sparse_rows"] for train in (
            (self.default_ready or {}).get("train") or {}, cand.ready.get("train") or {})
            if train.get("sparse_rows")), None)


def explained(
    check: dict, ratio: float, notes: Sequence[str], sparse_rows: str | None = None
) -> dict:
    """A guard's ``check`` whose rejection says what else differs from the default's
    training: another batch (``ratio`` of its rows, :data:`LEARNING_RATE_NOTE`, where the
    time cap did not cut it), other draws of the user's random augmentation (the worker's
    :data:`~tfperf.core.protocol.OTHER_DRAWS_NOTE` among ``notes``), or, on another backend,
    the optimizer ``sparse_rows`` that updates an ``Embedding`` otherwise there."""
    if check["accepted"]:
        return check
    if ratio != 1.0 and "--guard-seconds" not in check["reason"]:
        check["reason"] += f"; {LEARNING_RATE_NOTE}"
    if OTHER_DRAWS_NOTE in notes:
        check["reason"] += "; " + OTHER_DRAWS_NOTE.split(": ", 1)[1]
    if sparse_rows:
        check["reason"] += "; " + SPARSE_ROWS_NOTE.format(optimizer=sparse_rows)
    return check


SPARSE_ROWS_NOTE = (
    "the backends update your Embedding differently: on TensorFlow your {optimizer} squares "
    "its gradient one looked-up row at a time (a row looked up twice in a batch gets another "
    "second moment), on JAX the summed gradient, so they train your model apart from the "
    "same start")
"""Said in a rejection across backends where a TensorFlow worker found the user's optimizer
so (:func:`tfperf.worker.trainstate.sparse_rows_optimizer`): on a text classifier with an
Embedding and Adam, the same batches from the same weights gave a loss of 0.12 after 100 steps
on TensorFlow and 0.48 on JAX; an Embedding averaged into a Dense gave the same losses to four
digits on both under SGD, and other ones under Adam."""


TRAIN_TUNE_S = 270.0
"""A training tune's whole time when the user sets no limit (see :func:`train_limits`)..."""
QUICK_TRAIN_TUNE_S = 110.0
"""...and under ``--quick``."""
TRAIN_MAX_ROUNDS = 12
"""A training candidate's rounds (blocks of at least :data:`TRAIN_BLOCK_S` and
:data:`BLOCK_STEPS` steps) unless it may still win: one still undecided there with a median
below the "faster" bound is within a few percent of its incumbent (at 16 rounds each such
candidate of a CNN's search took 34 s); one at or above it runs on to ``max_rounds`` (16). From
12 pairs the 95% interval of the median leaves out the two most extreme ratios each side..."""
QUICK_SECOND_LOOKS = 2
"""Under ``--quick``, candidates beyond one per knob: second looks at knobs whose one
candidate was undecided above the threshold (:meth:`tfperf.tuning.search.Search._look_again`),
where the time left allows."""
QUICK_MAX_ROUNDS = 10
"""...and under ``--quick`` (blocks of at least :data:`QUICK_BLOCK_S`): most stop at the sixth,
decided or unable to win; at 6 pairs the interval is the whole range of the ratios and one
disturbed pair leaves even a 1.5x step undecided, from 9 pairs it is not. A CNN's 1.06x step
per call stayed undecided at 10 rounds of 0.2 s, so a promising one runs on to 16 here too..."""
FUTILE_ROUNDS = 4
"""A candidate stops from this round on once it cannot win
(:meth:`TrainEvaluator.cannot_win`; at 4 pairs its interval is every pair's ratio, so all of
them below the "faster" bound): a candidate truly 1.03x the faster shows that by chance with
odds of at most 1 in 16, one 1.1x with a pair's spread of 10% about 1 in 300. Losing
candidates made most of a tune's rounds (a JAX candidate on one CPU at 0.57x ran 6 rounds of
1.2 s calls; a transformer's default tune measured 9 knobs at 10-33 s each)."""
QUICK_BLOCK_S = 0.2
"""...and under ``--quick``, blocks of at least this long (and :data:`BLOCK_STEPS` steps)."""
SLOW_STEP_S = 0.05
FIT_CALL_S = 1.0
"""A timed ``fit`` runs about this long of the default's steps..."""
QUICK_FIT_CALL_S = 0.5
"""...half that under ``--quick``..."""
FIT_MIN_STEPS = 16
"""...and at least this many steps."""
FIT_ROUNDS = 6


def _spe(handle: Any) -> int:
    return int((handle.ready.get("train") or {}).get("steps_per_call") or 1)


def _rows(handle: Any) -> int:
    """The rows of one training step of ``handle``'s worker."""
    return int((handle.ready.get("train") or {}).get("batch") or 1)


def fit_steps(step_s: float | None, *spes: int, call_s: float = FIT_CALL_S) -> int:
    """The steps of one timed ``fit``: about ``call_s`` of steps, at least
    :data:`FIT_MIN_STEPS`, rounded to the nearest whole number of calls on either side (one
    call at least)."""
    unit = math.lcm(*spes) if spes else 1
    want = max(FIT_MIN_STEPS, round(call_s / step_s) if step_s else FIT_MIN_STEPS)
    return unit * max(1, round(want / unit))  # the nearest whole number of calls


@dataclass(frozen=True)
class TrainLimits:
    """A training search's limits: its trial limit, its time (``None``: none) and the time it
    keeps for what follows it (``reserve``; ``None`` under a budget the user typed, which
    bounds the search alone)."""

    max_trials: int | None
    budget_s: float | None
    reserve: Callable[[dict], float] | None = None
    look_again: Callable[[dict], bool] | None = None
    """Under ``--quick``: whether a second look at an undecided knob still ends the tune
    within :data:`QUICK_TRAIN_TUNE_S` (:meth:`TrainEvaluator.may_look_again`)..."""
    reach_again: Callable[[dict], bool] | None = None
    """...and at one measured on a step the answer has since shortened, within the tune's
    limit (:meth:`TrainEvaluator.may_reach_again`)."""
    planned: int | None = None
    """The trials the progress counts towards (``None``: ``max_trials``): under ``--quick``
    one per knob, the second looks beyond them."""


def train_limits(
    evaluator: TrainEvaluator, space: Space, options: TuneOptions, progress: Progress
) -> TrainLimits:
    """The limits of a training search. A budget or trial limit the user typed stays as
    typed. Otherwise the whole tune (the default's start, the search, pruning, confirming)
    is to end within :data:`TRAIN_TUNE_S`, or :data:`QUICK_TRAIN_TUNE_S` under ``--quick``
    (which also tries at least one candidate per knob): the search stops starting
    candidates once the time left is what its answer needs after it
    (:meth:`TrainEvaluator.reserve_s`). Either grows to one candidate of each knob, guarded
    over at least :data:`MIN_STEPS` steps, where that costs more here; the progress line
    says so."""
    limits = _sized_limits(evaluator, space, options, progress)
    evaluator.search_budget_s = limits.budget_s
    if limits.budget_s is not None:
        evaluator.tune_limit_s = evaluator.elapsed_s() + limits.budget_s
    return limits


def _sized_limits(
    evaluator: TrainEvaluator, space: Space, options: TuneOptions, progress: Progress
) -> TrainLimits:
    """:func:`train_limits`, before the evaluator is told the search's time."""
    knobs = space.most_knobs()
    trials, budget = options.max_trials, options.budget_s
    if not knobs or ((budget is not None or trials is not None) and not options.quick_budget):
        return TrainLimits(trials, budget)  # nothing to size (no knob to try), or as typed
    whole = QUICK_TRAIN_TUNE_S if options.quick else TRAIN_TUNE_S
    each = evaluator.candidate_cost_s()
    # every knob once, with room to prune an answer of two knobs and confirm it
    floor = (knobs + 2) * each + evaluator.confirm_s()
    spent = evaluator.elapsed_s()
    budget = max(whole - spent, floor)
    ends = spent + budget
    flag = "--quick's" if options.quick else "the tune's"
    if ends > whole + 1:
        progress.notice(
            f"{flag} time limit grows from {whole:.0f} s to {ends:.0f} s: one candidate for "
            f"each of {knobs} knobs takes up to about {each:.0f} s here (its worker, its rounds "
            f"and, where it can become the answer, its guard over at least {MIN_STEPS} steps)"
        )
    else:
        progress.phase(
            f"searching so that the tune ends in about {whole:.0f} s (--budget sets the "
            f"search's own limit): one candidate of each of {knobs} knobs first, about "
            f"{each:.0f} s each here"
        )
    if not options.quick:
        return TrainLimits(trials, budget, evaluator.reserve_s)
    looks = {"look_again": evaluator.may_look_again,
             "reach_again": evaluator.may_reach_again}
    if not options.quick_trials:  # a trial limit typed beside --quick stays as typed
        return TrainLimits(trials, budget, evaluator.reserve_s, **looks)
    # one candidate per knob, not --quick's trials for an inference tune (8: a search of six
    # knobs said "trial 6/8" and ended)
    return TrainLimits(knobs + QUICK_SECOND_LOOKS, budget, evaluator.reserve_s, **looks,
                       planned=knobs)


def could_answer(config: Mapping[str, Any], incumbent: Mapping[str, Any],
                 vs_incumbent: Mapping[str, Any]) -> bool:
    """Whether a measured candidate can become the answer, so that its guard must run: it is
    significantly faster than its incumbent (the search's only step), or it is the incumbent
    with a knob removed that is not significantly slower, which the pruning may take
    (:func:`tfperf.tuning.prune.decision`). Any other candidate leaves the answer as it is,
    whatever its loss does."""
    if vs_incumbent.get("verdict") == "faster":
        return True
    return is_removal(config, incumbent) and decision(
        Outcome(dict(config), MEASURED, vs_incumbent=dict(vs_incumbent))) != KEEP


def is_removal(config: Mapping[str, Any], incumbent: Mapping[str, Any]) -> bool:
    """Whether ``config`` is ``incumbent`` with one knob or more taken out."""
    return len(config) < len(incumbent) and all(
        k in incumbent and incumbent[k] == v for k, v in config.items())


def clearly_slower(speedup: Mapping[str, Any]) -> bool:
    """Significantly slower, with the whole 95% interval below :data:`CLEARLY_SLOWER`."""
    high = (speedup.get("ci95") or [None, None])[1]
    return speedup.get("verdict") == "slower" and high is not None and high < CLEARLY_SLOWER


def train_document(doc: dict, evaluator: TrainEvaluator) -> dict:
    """Tune's document with the training figures: the default's ``train`` (first steps'
    cost, input wait), its loss trajectory and each guarded candidate's (``trajectories``,
    by label; the candidates' ``guard`` keep the figures only), the chosen label, the
    tolerance used, and the code lines the recommendation needs."""
    ready = evaluator.default_ready or {}
    keys = loss_keys(evaluator.reference or [[]])
    doc["train"] = {
        "default": ready.get("train"),
        "baseline": evaluator.baseline.to_dict(),
        "loss_keys": keys,
        "default_losses": first_key(evaluator.reference or [[]], len(keys)),
        "tolerance": evaluator.tolerance.to_dict(),
        "note": f"a dataset is read as {READER[evaluator.baseline.step]} reads it; a finite "
        "one is repeated for timing",
    }
    step_figures(doc, evaluator.baseline.steps_per_execution)
    trajectories = doc["train"]["trajectories"] = {}
    ratios = doc["train"]["batch_ratios"] = {}
    for row in doc.get("candidates", []):
        guard = row.get("guard")
        if guard:
            if guard.get("losses"):
                trajectories[row["label"]] = guard["losses"]
                ratios[row["label"]] = guard.get("batch_ratio", 1.0)
            row["guard"] = without_trajectories(guard)
    rec = doc.get("recommendation") or {}
    doc["train"]["chosen"] = None if rec.get("keep_default") else rec.get("label")
    if rec.get("guard"):
        rec["guard"] = without_trajectories(rec["guard"])
    rec["code"] = train_code_lines(
        rec.get("config") or {}, doc["train"]["baseline"],
        own_backend=evaluator.workload.get("keras_backend") or "",
        notes=rec.get("notes") or ())
    fit_sentence(rec, evaluator.fit_speedup, evaluator.fit_failed)
    more_time_sentence(rec)
    if not rec.get("keep_default") and (rec.get("config") or {}).get("batch"):
        rec["notes"] = [*(rec.get("notes") or []), LEARNING_RATE_NOTE]
    return doc


READER = {"fit": "the model's train function", "loop": "your step"}
"""What reads the user's batches, by the kind of training step."""
_TRAJECTORIES = ("losses", "default_losses")


def more_time_sentence(rec: dict) -> None:
    """A default kept because the answer's confirmation was not decided: the rounds that would
    decide it at the interval measured (its half-width shrinks as one over the square root of
    the rounds), from the rounds it ran (``n_pairs``: a training confirmation may run on past
    ``--confirm-rounds``), instead of "no candidate was faster"."""
    speed = rec.get("speedup") or {}
    low, high = (speed.get("ci95") or [None, None])[:2]
    median, rounds = speed.get("median"), int(speed.get("n_pairs") or 0)
    if (not rec.get("keep_default") or low is None or not median or median <= 1.0
            or low > 1.0 or not rounds):
        return
    # the interval's lower end must rise above 1: its distance from the median shrinks as one
    # over the square root of the rounds
    need = max(rounds + 1, math.ceil(rounds * ((median - low) / (median - 1.0)) ** 2 * 1.2))
    rec["more_time"] = {"confirm_rounds": need, "median": median, "ci95": [low, high]}
    rec["reason"] = (
        f"{rec.get('reason', '')}; the answer measured {median:.2f}x [{low:.2f}-{high:.2f}] "
        f"in {rounds} rounds: --confirm-rounds {need} would decide it at that spread"
    ).lstrip("; ")


def fit_sentence(rec: dict, fit: dict | None, failed: str | None = None) -> None:
    """``recommendation.fit_speedup``, and a note where ``fit``'s speedup and the train
    function's disagree beyond their intervals, or where ``fit`` could not be timed
    (``failed``: the answer stands on its confirmation)."""
    rec["fit_speedup"] = fit
    if failed and not rec.get("keep_default"):
        rec["notes"] = [*(rec.get("notes") or []), f"fit not timed: {failed}"]
    _return_wait_sentence(rec, fit)
    speed = rec.get("speedup") or {}
    if not fit or not fit.get("ci95") or not speed.get("ci95"):
        return
    (lo, hi), (flo, fhi) = speed["ci95"][:2], fit["ci95"][:2]
    if fhi < lo or flo > hi:
        rec["notes"] = [*(rec.get("notes") or []), (
            f"model.fit gave {fit['median']:.2f}x [{flo:.2f}-{fhi:.2f}] per step where the "
            f"train function gave {speed['median']:.2f}x [{lo:.2f}-{hi:.2f}]: what fit does "
            "around the steps (its iterator, callbacks, syncing) is part of your answer")]


def _return_wait_sentence(rec: dict, fit: dict | None) -> None:
    """A note where fit returned long after its training ended (more than a tenth of the
    default's fit): a cost of each call of fit, the same on both sides, that no knob moves."""
    fit = fit or {}
    wait = fit.get("return_wait_ms") or {}
    trained_ms = fit.get("default_step_ms", 0.0) * fit.get("steps", 0)
    if not wait or wait["median"] <= 0.1 * trained_ms:
        return
    rec["notes"] = [*(rec.get("notes") or []), (
        f"model.fit returned a median {wait['median']:.0f} ms (at most {wait['max']:.0f} ms) "
        f"after its {fit['steps']} steps ended ({trained_ms:.0f} ms with your setup), on both "
        "sides: deleting fit's data iterator waits for tf.data's autotune thread, whose period "
        "starts at 10 ms and doubles up to 60 s. Each call of fit can pay it once, whatever its "
        "steps cost, and each epoch over a finite dataset, whose iterator is new (a loop of "
        "short fit calls pays it each time). The speedups above leave it out.")]


def without_trajectories(guard: dict) -> dict:
    """A guard's figures without its per-step values (each key's too)."""
    out = {k: v for k, v in guard.items() if k not in _TRAJECTORIES}
    if isinstance(out.get("keys"), dict):
        out["keys"] = {k: without_trajectories(v) for k, v in out["keys"].items()}
    return out


def first_key(outputs: list[Any], keys: int) -> list[float]:
    """The first guarded key's per-step values of a worker's guard outputs."""
    import numpy as np

    values = np.asarray(outputs[0] if outputs else [], dtype=np.float64).reshape(-1, keys)
    return [float(v) for v in values[:, 0]]


def _per_step(ms: float | None, batch: int | None, spe: int) -> dict:
    if not ms:
        return {"step_ms": None, "sample_ms": None}
    return {"step_ms": ms / spe, "sample_ms": ms / batch if batch else None}


def step_figures(doc: dict, own_spe: int) -> None:
    """``step_ms`` and ``sample_ms`` beside every ``time_ms`` (which stays per call): the
    default, each candidate (its steps per call from its config, else the user's) and the
    recommendation (its confirmation's figures)."""

    def spe_of(config: Mapping[str, Any] | None) -> int:
        return int((config or {}).get("steps_per_execution") or own_spe)

    default = doc.get("default") or {}
    default.update(_per_step(default.get("time_ms"), default.get("batch"), own_spe))
    for row in doc.get("candidates", []):
        row.update(_per_step(row.get("time_ms"), row.get("batch"), spe_of(row.get("config"))))
    rec = doc.get("recommendation") or {}
    rec.update(_per_step(rec.get("time_ms"), rec.get("batch"), spe_of(rec.get("config"))))
