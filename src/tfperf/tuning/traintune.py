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
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tfperf.core.errors import UserError
from tfperf.core.protocol import DEFAULT_GUARD_STEPS
from tfperf.core.stats import paired_speedup
from tfperf.profiles import train_code_lines
from tfperf.runner.recorder import RunRecorder
from tfperf.tuning.evaluate import Evaluator, Progress
from tfperf.tuning.options import TuneOptions
from tfperf.tuning.search import MEASURED, REJECTED, Outcome
from tfperf.tuning.space import Space
from tfperf.tuning.trainguard import MIN_STEPS, TrainTolerance, default_problem, judge

SLOWER = "not run: clearly slower than the default, dropped after timing"
TRAIN_BLOCK_S = 0.3
"""Blocks of at least this long: a training step takes tens of milliseconds, and a block of
one or two steps makes each pair's ratio as noisy as a single step."""
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
        ready = super().start_default()
        problem = default_problem(self.reference or [[]])
        if problem:
            raise UserError(problem[0].upper() + problem[1:])
        return ready

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
        if clearly_slower(speed):
            check = {"accepted": True, "reason": "", "guard": {"verdict": SLOWER}}
            return Outcome(config, MEASURED, incumbent=incumbent, accuracy=check, info=info,
                           **measured)
        reduced = (config.get("precision") or "fp32") != "fp32"
        ratio = self._rows_ratio(cand)
        check = judge(self.reference or [[]], self.workers.outputs(cand), reduced, self.tolerance,
                      ratio)
        if not check["accepted"] and ratio != 1.0:
            check["reason"] += f"; {LEARNING_RATE_NOTE}"
        status = MEASURED if check["accepted"] else REJECTED
        return Outcome(config, status, reason=check["reason"], incumbent=incumbent,
                       accuracy=check, info=info, **measured)


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
    doc["train"] = {
        "default": ready.get("train"),
        "default_losses": [float(v) for v in (evaluator.reference or [[]])[0]],
        "tolerance": evaluator.tolerance.to_dict(),
        "note": "a dataset is read as the model's train function reads it; a finite one is "
        "repeated for timing",
    }
    trajectories = doc["train"]["trajectories"] = {}
    ratios = doc["train"]["batch_ratios"] = {}
    for row in doc.get("candidates", []):
        guard = row.get("guard")
        if guard:
            if guard.get("losses"):
                trajectories[row["label"]] = guard["losses"]
                ratios[row["label"]] = guard.get("batch_ratio", 1.0)
            row["guard"] = {k: v for k, v in guard.items() if k not in _TRAJECTORIES}
    rec = doc.get("recommendation") or {}
    doc["train"]["chosen"] = None if rec.get("keep_default") else rec.get("label")
    if rec.get("guard"):
        rec["guard"] = {k: v for k, v in rec["guard"].items() if k not in _TRAJECTORIES}
    rec["code"] = train_code_lines(rec.get("config") or {})
    if not rec.get("keep_default") and (rec.get("config") or {}).get("batch"):
        rec["notes"] = [*(rec.get("notes") or []), LEARNING_RATE_NOTE]
    return doc


_TRAJECTORIES = ("losses", "default_losses")
