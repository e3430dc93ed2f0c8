"""Parent side: every worker of a run must have loaded the same model with the same inputs.

Contract: :class:`SameModel` holds the first fingerprint each interpreter's workers reported
(the ``fingerprint`` of a worker's ``ready`` message, made by
:mod:`tfperf.worker.fingerprint`) and :meth:`SameModel.check` compares every later one with
it. Inputs or weights that differ raise :class:`ModelDiffers`, a
:class:`~tfperf.core.errors.UserError` whose sentence says what differs and what to do. Callers
check a worker as soon as it is ready, before its outputs or timings are used.

Two fingerprints are the same model when their digests are equal, or when their numeric
summaries agree to :data:`RTOL` (weights that differ only in their last bits, say from a
factory that trains a few steps under another thread count). A worker that reports no
fingerprint (a test hook's own preparation) is not checked. Workers of different interpreters
(``tfperf builds compare``) are not compared with each other: two Keras versions may draw
different weights from the same seed.

Keras backends draw initial weights each its own way, whatever the seed, so a training step on
another backend (the runtime ``keras-jax``) starts from the baseline's weights instead:
:func:`weights_handoff` gives each worker's training workload the file the baseline's worker
writes its initial weights to (``weights_out``) and a worker of another runtime loads them from
(``weights_in``, matched by variable path and shape), before either takes its fingerprint;
a custom loop's candidate of the same runtime takes them too (``state_in``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tfperf.core.errors import UserError

RTOL = 1e-4
"""Relative tolerance of the numeric summaries (of the largest value in the summary)."""


class ModelDiffers(UserError):
    """Two workers of one run loaded different weights or different inputs."""


def _summaries_agree(a: list[float], b: list[float]) -> bool:
    if len(a) != len(b):
        return False
    scale = max([abs(v) for v in a + b] + [1e-30])
    pairs = zip(a, b, strict=True)
    return all(math.isclose(x, y, rel_tol=RTOL, abs_tol=RTOL * scale) for x, y in pairs)


def same_part(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two descriptions of inputs (or of weights) are of the same arrays."""
    if a is None or b is None:
        return a is None and b is None
    if a.get("digest") == b.get("digest"):
        return True
    return bool(a.get("summary")) and _summaries_agree(list(a["summary"]), list(b["summary"]))


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """``"inputs"`` and/or ``"weights"``: the parts in which two fingerprints differ."""
    return [part for part in ("inputs", "weights") if not same_part(a.get(part), b.get(part))]


def advice(source: str, parts: list[str]) -> str:
    """The sentence for a model whose ``parts`` differ between two worker processes."""
    what = " and ".join(parts)
    fixes = []
    if "weights" in parts:
        fixes.append(
            "seed the generator the factory builds its weights with, or save the model "
            "(model.save('model.keras')) and pass the file"
        )
    if "inputs" in parts:
        fixes.append("seed the generator of its inputs, or pass --inputs FILE.npz")
    return (
        f"{source} gives different {what} in two fresh processes, so tfperf would compare "
        f"two different models: {'; '.join(fixes)}. tfperf seeds the global generators of "
        "Python, NumPy, TensorFlow and Keras, but not a private one such as "
        "np.random.default_rng() without a seed."
    )


def model_digests(found: Mapping[str, Any] | None) -> dict[str, str | None] | None:
    """``{"inputs", "weights"}``: the first 12 hex digits of each digest (``weights`` ``None``
    for a model without variables), or ``None`` without a fingerprint."""
    if not found:
        return None
    return {
        part: (found.get(part) or {}).get("digest", "")[:12] or None
        for part in ("inputs", "weights")
    }


def weights_handoff(
    workload: Mapping[str, Any], runtime: str, baseline_runtime: str | None, path: str
) -> dict[str, Any]:
    """``workload`` for a worker of ``runtime``: a training step's baseline worker
    (``baseline_runtime`` None: this is it) writes its initial weights to ``path``, a worker of
    another runtime loads them; a worker of the same runtime is told where they are
    (``state_in``): a custom loop's takes them, so that a factory drawing its weights from a
    private unseeded generator is the same model there (a Keras model's is checked by its
    fingerprint, as before)."""
    if workload.get("kind") != "train":
        return dict(workload)
    if baseline_runtime is None:
        return {**workload, "weights_out": path}
    if runtime != baseline_runtime:
        return {**workload, "weights_in": path}
    return {**workload, "state_in": path}


class SameModel:
    """The reference fingerprint per interpreter, and the check of every later worker."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._first: dict[str, dict[str, Any]] = {}

    def check(self, ready: Mapping[str, Any], python: str = "") -> None:
        """Compare a worker's ``ready`` fingerprint with the first of its interpreter's;
        raises :class:`ModelDiffers` when they differ."""
        found = ready.get("fingerprint")
        if not found:
            return
        first = self._first.setdefault(python, dict(found))
        parts = differences(first, found)
        if parts:
            raise ModelDiffers(advice(self.source, parts))
