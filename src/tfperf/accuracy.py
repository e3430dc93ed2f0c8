"""Parent side: how far a candidate's outputs are from the fp32 TensorFlow reference, and the guard.

Contract
--------

:func:`compare_outputs` ``(reference, candidate, labels=None) -> dict`` takes the outputs of one
call of the same inputs (lists of arrays, output by output, as written by the worker's
``outputs`` op) and returns::

    {"max_abs_error": float,     # max |candidate - reference| over every output element
     "max_rel_error": float,     # max_abs_error / max |reference| (per output, the worst one)
     "top1_agreement": float | None,   # share of rows whose argmax agrees (classifier outputs)
     "metric": {"name", "reference", "candidate"} | None,   # with labels
     "shape_mismatch": str | None}

A classifier output is a 2-D array of at least two columns (one row per example). With
``labels`` (one integer class per row of the first output) the task metric is top-1 accuracy;
with float labels of the first output's shape it is the mean absolute error.

:class:`Tolerance` holds the limits and :meth:`Tolerance.check` turns a comparison into
``(accepted, reason)``. The defaults (:data:`DEFAULT_TOLERANCE`) are

- ``rel = 0.02``: the largest error may be 2% of the reference's largest magnitude — loose enough
  for fp16 weights and bf16 compute (errors ~0.1-1%), tight enough to catch a broken variant;
- ``abs = None``: no absolute limit unless asked;
- ``top1 = 0.99``: 99% of the examples keep their top-1 class (classifier outputs only;
  at batch 1 that means every one);
- ``metric = 0.01``: with labels, the task metric may lose at most 0.01 (1 point of accuracy).

``--tolerance`` is parsed by :func:`parse_tolerance`: a bare number sets ``rel``; otherwise
comma-separated ``key=value`` pairs (``rel=0.05,top1=0.99,abs=1e-3,metric=0.02``).

numpy only: nothing here imports TensorFlow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from tfperf.core.errors import UserError


@dataclass(frozen=True)
class Tolerance:
    """Limits a candidate must stay within (``None`` = no limit of that kind)."""

    rel: float | None = 0.02
    abs: float | None = None
    top1: float | None = 0.99
    metric: float | None = 0.01

    def check(self, comparison: dict) -> tuple[bool, str]:
        """``(True, "")`` when ``comparison`` is within every limit, else ``(False, why)``."""
        if comparison.get("shape_mismatch"):
            return False, f"outputs differ in shape: {comparison['shape_mismatch']}"
        abs_err = comparison["max_abs_error"]
        rel_err = comparison["max_rel_error"]
        if abs_err is None or rel_err is None:
            return False, "the outputs contain NaN or infinity"
        if self.abs is not None and abs_err > self.abs:
            return False, f"max abs error {abs_err:.3g} > tolerance {self.abs:g}"
        if self.rel is not None and rel_err > self.rel:
            return False, f"max relative error {rel_err:.3g} > tolerance {self.rel:g}"
        agree = comparison.get("top1_agreement")
        if self.top1 is not None and agree is not None and agree < self.top1:
            return False, f"top-1 agreement {agree:.1%} < {self.top1:.1%}"
        metric = comparison.get("metric")
        if self.metric is not None and metric:
            loss = _metric_loss(metric)
            if loss > self.metric:
                return False, (
                    f"{metric['name']} {metric['candidate']:.4g} vs {metric['reference']:.4g} "
                    f"for the reference (loses {loss:.3g} > {self.metric:g})"
                )
        return True, ""

    def to_dict(self) -> dict:
        """The limits as a JSON-able dict."""
        return asdict(self)


DEFAULT_TOLERANCE = Tolerance()


def _metric_loss(metric: dict) -> float:
    """How much worse the candidate's task metric is (accuracy: lower; mae: higher)."""
    if metric["name"] == "accuracy":
        return float(metric["reference"] - metric["candidate"])
    return float(metric["candidate"] - metric["reference"])


def parse_tolerance(text: str | None) -> Tolerance:
    """Read ``--tolerance``: a number (the relative limit) or ``key=value`` pairs."""
    if text is None or not text.strip():
        return DEFAULT_TOLERANCE
    text = text.strip()
    try:
        return replace(DEFAULT_TOLERANCE, rel=_limit(text))
    except ValueError:
        pass
    values: dict[str, float | None] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in ("rel", "abs", "top1", "metric"):
            raise UserError(
                f"bad --tolerance {text!r}: give a number or pairs like rel=0.05,top1=0.99,"
                "abs=1e-3,metric=0.01."
            )
        try:
            values[key] = _limit(value)
        except ValueError:
            raise UserError(
                f"bad --tolerance value {value!r} for {key}: give a number >= 0 or 'none'."
            ) from None
        if key == "top1" and values[key] is not None and values[key] > 1:
            raise UserError(
                f"bad --tolerance value {value!r} for top1: it is a share of examples, "
                "give a number from 0 to 1 (0.99 = 99%)."
            )
    return replace(DEFAULT_TOLERANCE, **values)


def _limit(text: str) -> float | None:
    text = text.strip().lower()
    if text in ("none", "off"):
        return None
    value = float(text)
    if not value >= 0:
        raise ValueError(text)
    return value


def _is_classifier(arr: Any) -> bool:
    return arr.ndim == 2 and arr.shape[1] >= 2


def _task_metric(ref: Any, cand: Any, labels: Any) -> dict | None:
    import numpy as np

    labels = np.asarray(labels)
    if labels.dtype.kind in "iub" and _is_classifier(ref) and labels.shape == (ref.shape[0],):
        return {
            "name": "accuracy",
            "reference": float(np.mean(ref.argmax(axis=1) == labels)),
            "candidate": float(np.mean(cand.argmax(axis=1) == labels)),
        }
    if labels.shape == ref.shape:
        return {
            "name": "mae",
            "reference": float(np.mean(np.abs(ref - labels))),
            "candidate": float(np.mean(np.abs(cand - labels))),
        }
    raise UserError(
        f"labels of shape {labels.shape} fit neither the model's first output {ref.shape} "
        "(regression) nor its rows (one class per example); pass matching labels."
    )


def compare_outputs(reference: Sequence[Any], candidate: Sequence[Any], labels: Any = None) -> dict:
    """Compare a candidate's outputs with the reference's (see the module docstring)."""
    import numpy as np

    result: dict = {
        "max_abs_error": None,
        "max_rel_error": None,
        "top1_agreement": None,
        "metric": None,
        "shape_mismatch": None,
    }
    refs = [np.asarray(r, dtype=np.float64) for r in reference]
    cands = [np.asarray(c, dtype=np.float64) for c in candidate]
    if len(refs) != len(cands):
        result["shape_mismatch"] = f"{len(cands)} outputs instead of {len(refs)}"
        return result
    bad = [f"{c.shape} vs {r.shape}" for r, c in zip(refs, cands, strict=True) if r.size != c.size]
    if bad:
        result["shape_mismatch"] = "; ".join(bad)
        return result
    cands = [c.reshape(r.shape) for r, c in zip(refs, cands, strict=True)]
    abs_errs, rel_errs = [], []
    for r, c in zip(refs, cands, strict=True):
        if not (np.isfinite(c).all() and np.isfinite(r).all()):
            return result
        err = float(np.max(np.abs(c - r))) if r.size else 0.0
        scale = float(np.max(np.abs(r))) if r.size else 0.0
        abs_errs.append(err)
        rel_errs.append(err / scale if scale > 0 else (0.0 if err == 0 else float("inf")))
    result["max_abs_error"] = max(abs_errs, default=0.0)
    result["max_rel_error"] = max(rel_errs, default=0.0)
    if refs and _is_classifier(refs[0]):
        result["top1_agreement"] = float(np.mean(refs[0].argmax(axis=1) == cands[0].argmax(axis=1)))
    if labels is not None and refs:
        result["metric"] = _task_metric(refs[0], cands[0], labels)
    return result


def load_outputs(path: str | Path) -> list[Any]:
    """The outputs a worker wrote to an ``.npz`` (keys ``out0``, ``out1``... or any, in order)."""
    import numpy as np

    with np.load(path, allow_pickle=False) as data:
        keys = sorted(data.files, key=_natural)
        return [data[k] for k in keys]


def _natural(key: str) -> tuple:
    digits = "".join(ch for ch in key if ch.isdigit())
    return (key.rstrip("0123456789"), int(digits) if digits else -1)


def load_labels(path: str | Path) -> Any:
    """Labels from ``.npy`` or ``.npz`` (its first array, or the one named ``labels``)."""
    import numpy as np

    path = Path(path)
    if not path.is_file():
        raise UserError(f"--labels {path} does not exist; pass a .npy or .npz file of labels.")
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        raise UserError(
            f"--labels {path} is not a numpy array file; save the labels with np.save or np.savez."
        ) from None
    if hasattr(data, "files"):
        with data:
            if not data.files:
                raise UserError(f"--labels {path} holds no arrays; save the labels into it.")
            return data["labels"] if "labels" in data.files else data[data.files[0]]
    return data


def guard(
    reference: Sequence[Any],
    candidate: Sequence[Any],
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    labels: Any = None,
) -> dict:
    """Compare and check in one step: the comparison plus ``accepted`` and ``reason``."""
    comparison = compare_outputs(reference, candidate, labels)
    accepted, reason = tolerance.check(comparison)
    return {**comparison, "accepted": accepted, "reason": reason}
