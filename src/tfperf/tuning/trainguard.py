"""The guard of a training tune: does a candidate still learn what the default learns?

Contract: each worker's ``outputs`` for a training workload are ``[per-step loss, validation
metric values, their names]`` from the same initial weights and the same batches in the same
order (:mod:`tfperf.worker.training`). :func:`judge` ``(reference, candidate, reduced,
tolerance, ratio) -> dict`` compares a candidate's with the default's over the samples both
saw: ``ratio`` is the candidate's rows per step over the default's (a throughput tune's
``batch`` knob), so ``n`` candidate steps are compared with the default's first ``n x ratio``
(:func:`common_steps`); at the same batch, their common steps:

- any NaN or Inf loss: rejected;
- ``drop`` = the default's first-tenth mean loss minus its last-tenth mean;
- when ``drop`` is under :attr:`TrainTolerance.learning` of the default's first-tenth mean,
  the guard cannot tell learning from noise: the verdict is ``"inconclusive"`` and a
  reduced-precision candidate is not accepted (an fp32 one is, when its last tenth is within
  ``rel`` of the default's);
- else accepted when the last-tenth means differ by at most ``drop_tol x drop`` and at most
  ``rel x`` the default's last-tenth mean (fp32 changes: :data:`FP32`; reduced precision,
  ``precision`` other than fp32: :data:`REDUCED`);
- with validation data, each compiled metric must agree within ``rel`` of the default's.

The result is ``{"accepted", "reason", "guard": {"steps", "default_first_loss",
"default_final_loss", "final_loss", "verdict", "share_of_drop", "losses",
"default_losses", "default_steps", "batch_ratio", "validation"}}``; ``reason`` carries the
figures of a rejection ("final loss 0.412 vs 0.305, +35% of the default's drop"). numpy only.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tfperf.core.errors import UserError
from tfperf.core.protocol import MIN_GUARD_STEPS

MIN_STEPS = MIN_GUARD_STEPS


@dataclass(frozen=True)
class Limits:
    """How far a candidate's last-tenth loss may be from the default's."""

    drop: float
    """Share of the default's own drop (first tenth minus last tenth)."""
    rel: float
    """Share of the default's last-tenth mean loss (and of each validation metric)."""


FP32 = Limits(drop=0.1, rel=0.05)
"""fp32 changes (threads, oneDNN, allocator, XLA, steps per execution) reorder float sums, and
XLA draws dropout masks its own way: a GRU's or an MLP-with-dropout's last tenth moved 2-3%
under ``jit_compile`` while learning the same, so the relative limit is 5%."""
REDUCED = Limits(drop=0.25, rel=0.1)
"""bf16/fp16 compute rounds every activation to 8 (bf16) or 11 bits: the loss wanders more."""


@dataclass(frozen=True)
class TrainTolerance:
    """The guard's limits; ``learning``: the share of its first-tenth loss the default must
    lose for the guard to judge at all."""

    fp32: Limits = FP32
    reduced: Limits = REDUCED
    learning: float = 0.05

    def to_dict(self) -> dict:
        return asdict(self)


def parse_train_tolerance(text: str | None) -> TrainTolerance:
    """``--tolerance`` of a training tune: a bare number sets ``drop`` for every precision;
    else ``drop=..,rel=..,reduced_drop=..,reduced_rel=..,learning=..``."""
    if not text:
        return TrainTolerance()
    values: dict[str, float] = {}
    try:
        if "=" not in text:
            values = {"drop": float(text), "reduced_drop": float(text)}
        for item in filter(None, (t.strip() for t in text.split(","))) if "=" in text else ():
            key, _, value = item.partition("=")
            if key.strip() not in ("drop", "rel", "reduced_drop", "reduced_rel", "learning"):
                raise ValueError(key)
            values[key.strip()] = float(value)
    except ValueError:
        raise UserError(
            f"--tolerance {text!r} is not a training tolerance: write a share of the default's "
            "loss drop (0.1) or drop=0.1,rel=0.02,reduced_drop=0.25,reduced_rel=0.05."
        ) from None
    return TrainTolerance(
        fp32=Limits(values.get("drop", FP32.drop), values.get("rel", FP32.rel)),
        reduced=Limits(
            values.get("reduced_drop", REDUCED.drop), values.get("reduced_rel", REDUCED.rel)
        ),
        learning=values.get("learning", 0.05),
    )


def _tenths(losses: np.ndarray, n: int) -> tuple[float, float]:
    tenth = max(1, n // 10)
    return float(np.mean(losses[:tenth])), float(np.mean(losses[n - tenth : n]))


def default_problem(reference: list[Any]) -> str | None:
    """One sentence when the default's own trajectory cannot serve as the reference."""
    keys = loss_keys(reference)
    values = _columns(reference[0], len(keys))
    for i, key in enumerate(keys):
        bad = np.flatnonzero(~np.isfinite(values[:, i]))
        if bad.size:
            return (
                f"the {key} is {values[bad[0], i]} at step {bad[0] + 1} under the default "
                "configuration: fix the model, its labels or its learning rate before tuning."
            )
    return None


def common_steps(default_steps: int, candidate_steps: int, ratio: float) -> tuple[int, int]:
    """``(default's steps, candidate's steps)`` that saw the same samples, when a candidate's
    step holds ``ratio`` times the default's rows."""
    n = min(candidate_steps, int(default_steps / ratio + 1e-9))
    return min(default_steps, round(n * ratio)), n


def judge(
    reference: list[Any], candidate: list[Any], reduced: bool, tolerance: TrainTolerance,
    ratio: float = 1.0,
) -> dict:
    """The guard's verdict on ``candidate`` against ``reference`` (module docstring): every
    guarded key (a column of the per-step values, named by the outputs' fourth array, matched
    to the candidate's column of that name) judged alone; the first key's figures lead, each
    key's are under ``guard["keys"]`` when several."""
    keys = loss_keys(reference)
    ref_all = _columns(reference[0], len(keys))
    cand_all, missing = _aligned(candidate, keys)
    if missing:
        return {"accepted": False, "reason": missing, "guard": {"verdict": "rejected"}}
    verdicts = {}
    for i, key in enumerate(keys):
        verdicts[key] = _judge_column(ref_all[:, i], cand_all[:, i], reduced, tolerance, ratio)
    figures = dict(verdicts[keys[0]][2])
    if len(keys) > 1:
        figures["keys"] = {k: v[2] for k, v in verdicts.items()}
    order = ("rejected", "inconclusive", "accepted")
    key, (verdict, reason, _) = min(verdicts.items(), key=lambda kv: order.index(kv[1][0]))
    if reason and len(keys) > 1:
        reason = f"{key}: {reason}"
    figures["verdict"] = verdict
    if figures["steps"] < MIN_STEPS and verdict == "rejected":
        reason = _cap_reason(reference, figures, ratio) or reason
    if verdict in ("accepted", "inconclusive") and len(reference) > 1:
        reason = _validation(reference, candidate, _limits(reduced, tolerance).rel, figures)
        verdict = "rejected" if reason else verdict
        figures["verdict"] = verdict
    return {"accepted": verdict != "rejected", "reason": reason, "guard": figures}


def _cap_reason(reference: list[Any], figures: dict, ratio: float) -> str:
    """Where the default's guard stopped at its time cap before covering enough steps of a
    candidate's batch: the ``--guard-seconds`` (or ``--guard-steps``) that would."""
    timing = np.asarray(reference[4], dtype=np.float64) if len(reference) > 4 else np.array([])
    if timing.size < 3 or not timing[1]:
        return ""
    took, cap = float(timing[0]), float(timing[2])
    done = int(figures["default_steps"]) or 1
    need_steps = math.ceil(MIN_STEPS * ratio)
    need_s = math.ceil(took / done * need_steps * 1.2)
    return (
        f"the default's guard stopped at its {cap:g} s cap after {done} steps, which cover "
        f"{figures['steps']} steps of this batch, fewer than {MIN_STEPS}: --guard-seconds "
        f"{need_s} (with --guard-steps {need_steps} or more) would cover them"
    )


def loss_keys(outputs: list[Any]) -> list[str]:
    """The keys a worker's guard outputs hold values of (``["loss"]`` when it names none)."""
    if len(outputs) > 3 and len(outputs[3]):
        return [str(k) for k in outputs[3]]
    return ["loss"]


def _aligned(candidate: list[Any], keys: list[str]) -> tuple[np.ndarray, str]:
    """The candidate's per-step values with its columns in the order of ``keys`` (the
    default's): Keras orders a step's logs by backend (on TensorFlow ``loss`` came first, on
    JAX ``kind_loss`` of a two-output model). A key the candidate's step does not return is
    one sentence instead."""
    own = loss_keys(candidate)
    values = _columns(candidate[0], len(own))
    missing = [k for k in keys if k not in own]
    if missing:
        return values, (f"its train step returns no {missing[0]} (it returns "
                        f"{', '.join(own)}), which the default's guard compares")
    return values[:, [own.index(k) for k in keys]], ""


def _by_name(candidate: list[Any], names: list[str]) -> np.ndarray:
    """The candidate's validation metrics in the order of ``names``; NaN for one it lacks."""
    values = np.asarray(candidate[1], dtype=np.float64) if len(candidate) > 1 else np.array([])
    if len(candidate) <= 2:
        return values
    own = dict(zip((str(n) for n in candidate[2]), values, strict=False))
    return np.asarray([own.get(name, np.nan) for name in names], dtype=np.float64)


def _columns(values: Any, keys: int) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).reshape(-1, keys)


def _limits(reduced: bool, tolerance: TrainTolerance) -> Limits:
    return tolerance.reduced if reduced else tolerance.fp32


def _judge_column(
    ref_all: np.ndarray, cand_all: np.ndarray, reduced: bool, tolerance: TrainTolerance,
    ratio: float,
) -> tuple[str, str, dict]:
    """One key's verdict, reason and figures."""
    m, n = common_steps(ref_all.size, cand_all.size, ratio)
    ref, cand = ref_all[:m], cand_all[:n]
    first, last = _tenths(ref, m) if m else (math.nan, math.nan)
    final = _tenths(cand, n)[1] if n else math.nan
    drop = first - last
    limits = _limits(reduced, tolerance)
    share = (final - last) / drop if drop > 0 else None
    figures = {
        "steps": int(n),
        "default_first_loss": first,
        "default_final_loss": last,
        "final_loss": final if math.isfinite(final) else None,
        "share_of_drop": share,
        "limits": asdict(limits),
        "losses": [float(v) if math.isfinite(v) else None for v in cand],
        "default_losses": [float(v) for v in ref],
        "default_steps": int(m),
        "batch_ratio": float(ratio),
    }
    verdict, reason = _verdict(ref, cand, drop, share, limits, reduced, tolerance)
    figures["verdict"] = verdict
    return verdict, reason, figures


def _verdict(
    ref: np.ndarray, cand: np.ndarray, drop: float, share: float | None, limits: Limits,
    reduced: bool, tolerance: TrainTolerance,
) -> tuple[str, str]:
    n = min(ref.size, cand.size)
    if n < MIN_STEPS:
        return "rejected", f"the guard ran {n} steps, fewer than {MIN_STEPS}"
    bad = np.flatnonzero(~np.isfinite(cand))
    if bad.size:
        return "rejected", f"the loss became {cand[bad[0]]} at step {bad[0] + 1}"
    first, last = _tenths(ref, ref.size)
    final = _tenths(cand, cand.size)[1]
    off = abs(final - last)
    text = f"final loss {final:.4g} vs {last:.4g}"
    if drop < tolerance.learning * abs(first):
        why = (
            f"inconclusive: the default's loss fell only {drop:.3g} from {first:.4g} in "
            f"{ref.size} steps, too little to tell learning from noise"
        )
        if reduced:
            return "rejected", why + "; reduced precision is not accepted without that check"
        if off > limits.rel * abs(last):
            return "rejected", f"{text}, {off / abs(last):.1%} of it (limit {limits.rel:.0%})"
        return "inconclusive", why
    if off > limits.drop * drop:
        assert share is not None
        return "rejected", (
            f"{text}, {share:+.0%} of the default's drop (limit {limits.drop:.0%})"
        )
    if off > limits.rel * abs(last):
        return "rejected", f"{text}, {off / abs(last):.1%} apart (limit {limits.rel:.0%})"
    return "accepted", ""


def _validation(reference: list[Any], candidate: list[Any], rel: float, figures: dict) -> str:
    """Each validation metric within ``rel`` of the default's; the reason when not."""
    ref = np.asarray(reference[1], dtype=np.float64)
    names = [str(v) for v in (reference[2] if len(reference) > 2 else range(ref.size))]
    cand = _by_name(candidate, names)
    figures["validation"] = {
        name: {"default": float(r), "candidate": float(c) if math.isfinite(c) else None}
        for name, r, c in zip(names, ref, cand, strict=False)
    }
    for name, r, c in zip(names, ref, cand, strict=False):
        if not math.isfinite(c) or abs(c - r) > rel * max(abs(r), 1e-12):
            return f"validation {name} {c:.4g} vs {r:.4g} (limit {rel:.0%} apart)"
    return ""
