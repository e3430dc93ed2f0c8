"""When a level's percentiles stand on enough requests, and when a level has run long enough.

Contract:

- A percentile ``q`` of a level's latencies is shown only where at least ``tail`` requests
  (:data:`TAIL_REQUESTS`, 10) lie beyond it: :func:`needed` is the requests that takes
  (``ceil(tail / (1 - q))``: p50 20, p90 100, p99 1000, p99.9 10000). Below that, the figure is
  an order statistic of a handful of requests (300 requests put p99 on three), not a percentile
  anyone can sign.
- :class:`LevelLength` (frozen) says how long one level runs: at least ``min_requests``
  requests and ``min_s`` seconds; then, where ``tail`` is set, on while its p99 does not stand,
  and, where ``precision`` is set too, while p99's distribution-free 95% interval
  (:func:`tfperf.core.stats.quantile_ci`) reaches further than ``precision`` of p99 on either
  side (perf_analyzer's stability windows; MLPerf LoadGen's minimum query count); never past
  ``max_s`` seconds, whatever else holds. :func:`settled` is that rule on a level's latencies so
  far; :func:`ready` loads what it needs before a level starts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tfperf.core.errors import UserError
from tfperf.core.stats import quantile_ci, scipy_stats

TAIL_REQUESTS = 10
"""Requests that must lie beyond a percentile for it to be shown."""
PRECISION = 0.10
"""A level stops once p99's 95% interval lies within this share of p99 on both sides."""
STOP_QUANTILE = 0.99
"""The percentile whose standing and interval end a level: the one an SLO is written on."""


def needed(q: float, tail: int = TAIL_REQUESTS) -> int:
    """Requests a level needs for ``tail`` of them to lie beyond its ``q`` quantile."""
    return math.ceil(tail / (1.0 - q) - 1e-6)


def stands(count: int, q: float, tail: int = TAIL_REQUESTS) -> bool:
    """Whether ``count`` latencies put at least ``tail`` beyond the ``q`` quantile."""
    return count >= needed(q, tail)


@dataclass(frozen=True)
class LevelLength:
    """How long one level runs (module docstring)."""

    min_requests: int
    min_s: float
    max_s: float
    precision: float | None = None
    """p99's 95% interval must lie within this share of p99 (``None``: its standing is enough)."""
    tail: int = 0
    """Requests beyond p99 before the level may stop (0: it stops at its minimums)."""

    def __post_init__(self) -> None:
        if self.min_requests < 1 or self.min_s < 0 or self.max_s < self.min_s:
            raise UserError(
                "each load level needs at least 1 request, a duration of 0 or more, and a "
                f"maximum duration no shorter than it (got {self.min_requests}, {self.min_s} s, "
                f"{self.max_s} s)."
            )
        if self.precision is not None and not 0 < self.precision < 1:
            raise UserError(
                f"a level's precision is a share between 0 and 1, not {self.precision}."
            )

    @property
    def extends(self) -> bool:
        """Whether the level may run past its minimums (for its p99)."""
        return self.tail > 0


def ready(length: LevelLength) -> None:
    """Load what :func:`settled` needs (scipy's statistics) before a level's clock starts:
    imported at the rule's first reading, it would stall the generator half a second
    mid-level, and every arrival due meanwhile would count it."""
    if length.extends and length.precision is not None:
        scipy_stats()


def settled(latencies_s: Sequence[float], length: LevelLength) -> bool:
    """Whether a level with these latencies (completed and given up) may stop: its p99 stands
    and, with a ``precision``, its 95% interval lies within that share of it."""
    if not length.extends:
        return True
    if not stands(len(latencies_s), STOP_QUANTILE, length.tail):
        return False
    if length.precision is None:
        return True
    lat = np.asarray(latencies_s, dtype=float)
    p99 = float(np.quantile(lat, STOP_QUANTILE))
    lo, hi = quantile_ci(lat, STOP_QUANTILE)
    return p99 > 0 and lo >= p99 * (1 - length.precision) and hi <= p99 * (1 + length.precision)
