"""What a configuration costs: its memory, and the price of a million samples.

Contract:

- :class:`Memory` is frozen and JSON-able (``Memory.from_dict(m.to_dict()) == m``), every
  figure in MiB (``MB`` in the tables, as ``free -m`` and ``docker stats`` print it):
  ``peak_rss_mb`` (the process's high-water mark, warm-up and conversion included where they
  ran in it), ``steady_rss_mb`` (after warm-up, at the last reading), ``model_mb`` (RSS once the
  model is ready minus the process's RSS before it was loaded) and ``artifact_mb`` (the
  converted file on disk, ``None`` without one). ``measured_in`` says which process:
  ``"worker"`` (the worker that imports TensorFlow and timed it) or ``"deployed"`` (a process
  that loads only the converted artifact and its runtime, :mod:`tfperf.worker.deployed`, as a
  server of that artifact would); for a deployed figure ``worker_peak_rss_mb`` keeps the
  worker's own peak. A converted runtime whose deployed process failed, or imported
  TensorFlow (then its figures are not a deployment's), keeps the worker's figures and says
  why in ``not_deployed`` (``None`` otherwise). ``instances`` > 1 is a served layout's sum
  over its instances, and ``projected`` marks the one estimate allowed: a layout's total before
  it starts (instances x the measured per-instance figure).
- :func:`over_ceiling` is the sentence a candidate is rejected with when its peak exceeds
  ``--max-memory-mb`` (``"peak 812 MB > ceiling 600 MB"``), else ``None``.
- :func:`change` is how a configuration's peak moved from run A to run B:
  ``{"a_peak_rss_mb", "b_peak_rss_mb", "growth"}`` (``growth`` = B / A - 1), ``None`` unless
  both were measured; ``compare --fail-on-memory-growth PCT`` gates on ``growth``.
- :func:`cost` is ``{"price_per_hour", "per_million_samples"}``: price / 3600 / samples per
  second x 10^6, ``None`` without a price or a throughput.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from tfperf.core.errors import UserError

MIB = 2**20
WORKER = "worker"
DEPLOYED = "deployed"


def mib(nbytes: float | None) -> float | None:
    """Bytes as MiB, to 0.1 (``None`` stays ``None``)."""
    return None if nbytes is None else round(nbytes / MIB, 1)


@dataclass(frozen=True)
class Memory:
    """The memory of one configuration (module docstring)."""

    peak_rss_mb: float | None
    steady_rss_mb: float | None = None
    model_mb: float | None = None
    artifact_mb: float | None = None
    measured_in: str = WORKER
    worker_peak_rss_mb: float | None = None
    not_deployed: str | None = None
    instances: int = 1
    projected: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Memory | None:
        if not data:
            return None
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    def times(self, instances: int) -> Memory:
        """This per-instance figure for ``instances`` of it, before they run: a projection."""
        def scaled(v: float | None) -> float | None:
            return None if v is None else round(v * instances, 1)

        return replace(
            self, peak_rss_mb=scaled(self.peak_rss_mb), steady_rss_mb=scaled(self.steady_rss_mb),
            model_mb=scaled(self.model_mb), worker_peak_rss_mb=scaled(self.worker_peak_rss_mb),
            instances=instances, projected=True,
        )

    def short(self) -> str:
        """``"140 MB"`` (the peak), with where it was measured when not in the worker."""
        if self.peak_rss_mb is None:
            return "-"
        where = " deployed" if self.measured_in == DEPLOYED else ""
        return f"{self.peak_rss_mb:.0f} MB{where}"


def summed(parts: list[Memory]) -> Memory | None:
    """A served layout's instances together: every figure summed (``None`` when one lacks it)."""
    if not parts:
        return None

    def total(name: str) -> float | None:
        values = [getattr(p, name) for p in parts]
        return None if any(v is None for v in values) else round(sum(values), 1)

    return Memory(
        peak_rss_mb=total("peak_rss_mb"), steady_rss_mb=total("steady_rss_mb"),
        model_mb=total("model_mb"), artifact_mb=parts[0].artifact_mb,
        measured_in=parts[0].measured_in, worker_peak_rss_mb=total("worker_peak_rss_mb"),
        not_deployed=parts[0].not_deployed, instances=len(parts),
    )


def over_ceiling(memory: Memory | None, ceiling_mb: float | None) -> str | None:
    """The rejection sentence when ``memory``'s peak exceeds ``ceiling_mb``, else ``None``."""
    if ceiling_mb is None or memory is None or memory.peak_rss_mb is None:
        return None
    if memory.peak_rss_mb <= ceiling_mb:
        return None
    what = "projected peak" if memory.projected else "peak"
    return f"{what} {memory.peak_rss_mb:.0f} MB > ceiling {ceiling_mb:.0f} MB"


def check_limits(memory_limit_bytes: float | None, price_per_hour: float | None) -> None:
    """``--memory-limit`` and ``--price-per-hour``, where given, are positive: else one
    sentence (:class:`UserError`)."""
    if memory_limit_bytes is not None and memory_limit_bytes <= 0:
        raise UserError("--memory-limit must be a positive number of GiB.")
    if price_per_hour is not None and not price_per_hour > 0:
        raise UserError(f"--price-per-hour must be a positive number, not {price_per_hour}.")


def cost(price_per_hour: float | None, samples_per_s: float | None) -> dict[str, Any] | None:
    """What a million samples cost at ``price_per_hour`` (module docstring)."""
    if price_per_hour is None or not samples_per_s:
        return None
    return {
        "price_per_hour": price_per_hour,
        "per_million_samples": price_per_hour / 3600.0 / samples_per_s * 1e6,
    }


def change(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The peak's move from ``a`` to ``b`` (two ``Memory.to_dict()`` records), or ``None``."""
    before = (a or {}).get("peak_rss_mb")
    after = (b or {}).get("peak_rss_mb")
    if not before or after is None:
        return None
    return {"a_peak_rss_mb": before, "b_peak_rss_mb": after, "growth": after / before - 1.0}


def stored_memory(info: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The memory record in a stored trial's ``info``: a bench trial's, or a tune candidate's
    outcome's."""
    info = info or {}
    outcome = (info.get("outcome") or {}).get("info") or {}
    return info.get("memory") or outcome.get("memory")
