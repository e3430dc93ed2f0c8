"""Tuning the user's own training step: candidates timed per step, then guarded over K steps.

Contract: :class:`TrainEvaluator` is the :class:`~tfperf.tuning.evaluate.Evaluator` of a
training workload (kind ``"train"``, :mod:`tfperf.worker.training`). It compares time per
sample (a call's time over its samples: per step at the same batch, so a candidate with
``steps_per_execution`` N is judged per step, not per call). Unlike inference it times a
candidate *first*: one clearly slower than the default (verdict "slower", its whole 95%
interval below :data:`CLEARLY_SLOWER`) is dropped there, without spending the guard's K steps
on it; any other is then guarded (:func:`tfperf.tuning.trainguard.judge`: the per-step loss
from the same initial weights on the same batches, against the default's) and *rejected* with
its figures when it learns differently. The default's own trajectory must be finite
(:func:`~tfperf.tuning.trainguard.default_problem`, else a :class:`UserError`).
:func:`train_document` adds the training figures to tune's document. Nothing here imports
TensorFlow.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tfperf.core.errors import UserError
from tfperf.core.knobs import label
from tfperf.core.protocol import DEFAULT_GUARD_STEPS
from tfperf.core.stats import paired_speedup
from tfperf.profiles import train_code_lines
from tfperf.runner.recorder import RunRecorder
from tfperf.runner.rounds import calls_per_block
from tfperf.tuning.evaluate import Evaluator, Progress
from tfperf.tuning.options import TuneOptions
from tfperf.tuning.search import MEASURED, REJECTED, Outcome
from tfperf.tuning.space import Space, TrainBaseline, fit_training_space
from tfperf.tuning.trainguard import (
    MIN_STEPS,
    TrainTolerance,
    default_problem,
    judge,
    loss_keys,
)
from tfperf.tuning.workers import MAX_CALLS

SLOWER = "not run: clearly slower than the default, dropped after timing"
TRAIN_BLOCK_S = 0.3
"""Blocks of at least this long: a training step takes tens of milliseconds, and a block of
one or two steps makes each pair's ratio as noisy as a single step."""
BLOCK_STEPS = 4
"""...and of at least this many of the default's steps: a 200 ms step gets 0.8 s blocks, so
that one slow step's jitter does not decide a pair."""
MAX_BLOCK_S = 2.0
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

    def __init__(
        self,
        workload: Mapping[str, Any],
        options: TuneOptions,
        *,
        run: RunRecorder | None = None,
        progress: Progress | None = None,
        batches: tuple[int, ...] = (),
    ) -> None:
        options = replace(options, block_s=max(options.block_s, TRAIN_BLOCK_S))
        self.guard_steps = guard_length(workload, batches)
        workload = {**workload, "guard_steps": self.guard_steps}
        super().__init__(workload, options, run=run, progress=progress, per_sample=True)
        self.tolerance: TrainTolerance = options.train_tolerance or TrainTolerance()
        self.baseline = TrainBaseline()
        """The user's own setup, read back by the default worker."""
        self.default_cost_s = 0.0
        """What starting the default took: a worker, its first steps and its guard."""
        self.fit_speedup: dict | None = None
        """The answer's ``fit`` against the default's (:meth:`confirm_fit`)."""

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
        started = time.monotonic()
        ready = super().start_default()
        self.default_cost_s = time.monotonic() - started
        problem = default_problem(self.reference or [[]])
        if problem:
            raise UserError(problem[0].upper() + problem[1:])
        self.baseline = TrainBaseline.from_ready(ready)
        step = self.step_s()
        if step:
            self.workers.block_s = min(MAX_BLOCK_S, max(self.workers.block_s, BLOCK_STEPS * step))
            default = self.workers.find("default")
            if default is not None:
                default.calls = calls_per_block(default.ready, self.workers.block_s, MAX_CALLS)
        return ready

    def step_s(self) -> float | None:
        """The default's time per training step (its warm-up, over its steps per call)."""
        ready = self.default_ready or {}
        tail = (ready.get("warmup") or {}).get("samples_s", [])[-5:]
        spe = int((ready.get("train") or {}).get("steps_per_call") or 1)
        return statistics.median(tail) / spe if tail else None

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
        self.fit_speedup = self.confirm_fit(config)
        return speedup

    def confirm_fit(self, config: dict) -> dict | None:
        """``paired_speedup`` of the answer's ``fit`` over the default's, per step: each side
        fits ``steps`` steps (a multiple of both sides' steps per call, about
        :data:`FIT_CALL_S` of the default's steps, half under ``--quick``), one warm-up fit
        each, then
        :data:`FIT_ROUNDS` alternating pairs. ``None`` where the workers have no fit."""
        self.progress.phase(f"timing model.fit of the default and of {label(config)}")
        base = self.workers.get({}, self.options.candidate_timeout_s)
        cand = self.workers.get(config, self.options.candidate_timeout_s)
        call_s = QUICK_FIT_CALL_S if self.options.quick else FIT_CALL_S
        steps = fit_steps(self.step_s(), _spe(base), _spe(cand), call_s=call_s)
        times: list[list[float]] = [[], []]
        for round_no in range(FIT_ROUNDS + 1):
            order = ((0, base), (1, cand)) if round_no % 2 else ((1, cand), (0, base))
            for side, handle in order:
                got = handle.worker.extra("fit", 1, arg=steps)
                if not got:
                    return None
                if round_no:  # the first fit of each side warms up (its iterator, callbacks)
                    times[side].append(got[0] / steps)
        result = paired_speedup(times[0], times[1], self.threshold)
        result.update(steps=steps, default_step_ms=statistics.median(times[0]) * 1e3,
                      candidate_step_ms=statistics.median(times[1]) * 1e3)
        return result

    def fit_space(self, space: Space) -> Space:
        """The space once the default ran (:func:`fit_training_space`), without the batch
        sizes its guard does not cover."""
        return self.within_guard(fit_training_space(space, self.baseline, self.step_s()))

    def reference_is_flat(self) -> bool:
        return False  # the guard's "inconclusive" verdict says it for training

    def _try(self, config: dict, incumbent: dict, limit: float, trial_id: int | None) -> Outcome:
        cand = self.workers.get(config, limit)
        info = {**self.candidate_info(cand), "train": cand.ready.get("train")}
        refused = self.memory_refusal(cand, config, incumbent, info)
        if refused is not None:
            return refused
        base = self.workers.get({}, limit)
        inc = self.workers.get(incumbent, limit) if incumbent else base
        times = self.measure([base, inc, cand], trial_id, cand, limit=limit, decide=True)
        speed = paired_speedup(times[0], times[2], self.threshold)
        measured = {
            "speedup": speed,
            "vs_incumbent": paired_speedup(times[1], times[2], self.threshold),
            "time_ms": statistics.median(times[2]) * cand.unit * 1e3,
        }
        spe = int((cand.ready.get("train") or {}).get("steps_per_call") or 1)
        info["step_ms"] = measured["time_ms"] / spe
        if clearly_slower(speed):
            check = {"accepted": True, "reason": "", "guard": {"verdict": SLOWER}}
            return Outcome(config, MEASURED, incumbent=incumbent, accuracy=check, info=info,
                           **measured)
        reduced = (config.get("precision") or "fp32") != "fp32"
        ratio = self._rows_ratio(cand)
        check = judge(self.reference or [[]], self.workers.outputs(cand), reduced, self.tolerance,
                      ratio)
        if not check["accepted"] and ratio != 1.0 and "--guard-seconds" not in check["reason"]:
            check["reason"] += f"; {LEARNING_RATE_NOTE}"
        status = MEASURED if check["accepted"] else REJECTED
        return Outcome(config, status, reason=check["reason"], incumbent=incumbent,
                       accuracy=check, info=info, **measured)


TRAIN_SEARCH_S = 180.0
"""A training search's time when the user sets no limit (see :func:`train_limits`)."""
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


def fit_steps(step_s: float | None, *spes: int, call_s: float = FIT_CALL_S) -> int:
    """The steps of one timed ``fit``: about ``call_s`` of steps, at least
    :data:`FIT_MIN_STEPS`, a whole number of calls on either side."""
    unit = math.lcm(*spes) if spes else 1
    want = max(FIT_MIN_STEPS, round(call_s / step_s) if step_s else FIT_MIN_STEPS)
    return unit * max(1, math.ceil(want / unit))


def candidate_cost_s(evaluator: TrainEvaluator) -> float:
    """About what one candidate costs: a worker started and guarded as the default was, and
    its rounds (at least ``min_rounds`` of three blocks)."""
    rounds = evaluator.options.min_rounds * 3 * evaluator.workers.block_s
    return evaluator.default_cost_s + rounds


def train_limits(
    evaluator: TrainEvaluator, space: Space, options: TuneOptions, progress: Progress
) -> tuple[int | None, float | None]:
    """The trial and time limits of a training search: ``--quick``'s grow to one candidate
    per knob, at the guard's floor of steps (the progress line says so); typed ones stay.
    Given neither a budget nor a trial limit, a training search gets
    :data:`TRAIN_SEARCH_S` (grown the same way): every candidate costs a worker and its guard,
    and a search left to converge took 6 to 11 minutes on the suite's models."""
    knobs = len(space.knobs())
    trials, budget = options.max_trials, options.budget_s
    if budget is None and trials is None:
        need = knobs * candidate_cost_s(evaluator)
        budget = max(TRAIN_SEARCH_S, need)
        progress.phase(
            f"searching for {budget:.0f} s (--budget sets another limit): one candidate of "
            f"each of {knobs} knobs first, about {candidate_cost_s(evaluator):.0f} s each here"
        )
        return trials, budget
    if not options.quick_budget:
        return trials, budget
    trials = max(trials or 0, knobs)
    need = knobs * candidate_cost_s(evaluator)
    if budget is not None and need > budget:
        progress.phase(
            f"--quick's budget grows from {budget:.0f} s to {need:.0f} s: one candidate for "
            f"each of {knobs} knobs, each guarded over at least {MIN_STEPS} steps, takes about "
            f"{candidate_cost_s(evaluator):.0f} s here"
        )
        budget = need
    return trials, budget


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
        "note": "a dataset is read as the model's train function reads it; a finite one is "
        "repeated for timing",
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
    rec["code"] = train_code_lines(rec.get("config") or {})
    fit_sentence(rec, evaluator.fit_speedup)
    more_time_sentence(rec, evaluator.options.confirm_rounds)
    if not rec.get("keep_default") and (rec.get("config") or {}).get("batch"):
        rec["notes"] = [*(rec.get("notes") or []), LEARNING_RATE_NOTE]
    return doc


_TRAJECTORIES = ("losses", "default_losses")


def more_time_sentence(rec: dict, rounds: int) -> None:
    """A default kept because the answer's confirmation was not decided: the rounds that would
    decide it at the interval measured (its half-width shrinks as one over the square root of
    the rounds), instead of "no candidate was faster"."""
    speed = rec.get("speedup") or {}
    low, high = (speed.get("ci95") or [None, None])[:2]
    median = speed.get("median")
    if not rec.get("keep_default") or low is None or not median or median <= 1.0 or low > 1.0:
        return
    # the interval's lower end must rise above 1: its distance from the median shrinks as one
    # over the square root of the rounds
    need = max(rounds + 1, math.ceil(rounds * ((median - low) / (median - 1.0)) ** 2 * 1.2))
    rec["more_time"] = {"confirm_rounds": need, "median": median, "ci95": [low, high]}
    rec["reason"] = (
        f"{rec.get('reason', '')}; the answer measured {median:.2f}x [{low:.2f}-{high:.2f}] "
        f"in {rounds} rounds: --confirm-rounds {need} would decide it at that spread"
    ).lstrip("; ")


def fit_sentence(rec: dict, fit: dict | None) -> None:
    """``recommendation.fit_speedup``, and a note where ``fit``'s speedup and the train
    function's disagree beyond their intervals."""
    rec["fit_speedup"] = fit
    speed = rec.get("speedup") or {}
    if not fit or not fit.get("ci95") or not speed.get("ci95"):
        return
    (lo, hi), (flo, fhi) = speed["ci95"][:2], fit["ci95"][:2]
    if fhi < lo or flo > hi:
        rec["notes"] = [*(rec.get("notes") or []), (
            f"model.fit gave {fit['median']:.2f}x [{flo:.2f}-{fhi:.2f}] per step where the "
            f"train function gave {speed['median']:.2f}x [{lo:.2f}-{hi:.2f}]: what fit does "
            "around the steps (its iterator, callbacks, syncing) is part of your answer")]


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
