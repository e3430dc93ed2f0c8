"""The results of load measurement: one :class:`LoadLevel` per point, one :class:`LoadResult`.

Contract:

- :class:`LoadLevel` is frozen and JSON-able (:meth:`LoadLevel.to_dict`; the keys are those of
  ``docs/results-schema.md``'s ``levels``). ``scenario`` is ``"closed"`` (``concurrency`` set,
  ``offered_qps`` ``None``) or ``"open"`` (``offered_qps`` the asked rate). ``achieved_qps`` is
  completed requests over the level's duration (first arrival to last answer), so a level
  offered beyond capacity shows ``achieved_qps < offered_qps``.
- Latencies (ms) count from each request's scheduled arrival. The percentiles are those of
  the completed requests together with the timed-out ones, each of those counted with the
  time it had waited when it was given up (at least the timeout: a lower bound of its
  latency), so a backlog shows in p99 instead of vanishing from it. Failed requests have no
  latency. ``p99_ci_ms`` is the distribution-free 95% interval of p99
  (:func:`tfperf.core.stats.quantile_ci`), ``ci_ms`` that of each percentile; where there are
  too few requests for one (p99.9 under a thousand) its upper end is the largest latency.
- ``sent == completed + failed + timed_out``. ``failures`` names each instance's failures
  (``{"instance N: reason": count}``), so requests lost to a crashed instance are told apart.
- ``generator_cpu`` is the load generator's own CPU time over the level's duration, as a
  share of one core (it runs in the ``tfperf`` process, on the same cores as the instances);
  ``generator_lag_p99_ms`` (open loop) is how late it noticed its arrivals: its own share of
  the latencies, which a saturated generator would make large.
- ``harness_floor`` (a :class:`HarnessFloor`, ``None`` where none was measured: a server
  tfperf did not start) is the same load offered to the same instances with every model call
  skipped (:mod:`tfperf.serving.floor`): the latency that tfperf's harness and this machine's
  wake-ups alone give at that level. :func:`floor_note` says so when its p50 is more than
  :data:`FLOOR_SHARE` of the level's.
- :meth:`LoadLevel.within` is the SLO rule: p99 point estimate within ``slo_ms`` and at most
  1% of the requests failed.
- :func:`generator_limited` is the warning of a level where the generator may have been the
  limit: more than :data:`GENERATOR_CPU_LIMIT` of a core busy, or its arrival lag's p99 above
  :data:`GENERATOR_LAG_LIMIT_MS` and a tenth of the level's p99.
- :class:`LoadResult` holds one layout's levels and, when an SLO was given, the answer
  ``max_qps_at_slo``: the *achieved* rate of the level of highest offered rate (or
  concurrency) that is within the SLO, ``None`` when none is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfperf.core.config import Config
from tfperf.core.memory import Memory
from tfperf.core.serving import ServingLayout
from tfperf.core.stats import quantile_ci
from tfperf.serving.generator import LevelRecord

MAX_FAILED_SHARE = 0.01
"""A level with more failed requests than this share is never within an SLO."""


@dataclass(frozen=True)
class HarnessFloor:
    """The harness's own latency at one level: its p50 and p99 (ms, from each request's
    scheduled arrival, as the level's) over ``requests`` null requests."""

    p50_ms: float
    p99_ms: float
    requests: int


@dataclass(frozen=True)
class LoadLevel:
    """One point of a load sweep (see the module docstring)."""

    scenario: str
    concurrency: int | None
    offered_qps: float | None
    achieved_qps: float
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    p999_ms: float | None
    p99_ci_ms: tuple[float | None, float | None]
    sent: int
    completed: int
    failed: int
    timed_out: int
    duration_s: float
    generator_cpu: float
    arrival_qps: float | None = None
    """Arrivals per second the generator really offered (sent over the arrival window)."""
    p99_from_send_ms: float | None = None
    """p99 counted from each request's actual send (for comparison only)."""
    mean_ms: float | None = None
    failures: Mapping[str, int] = field(default_factory=dict)
    ci_ms: Mapping[str, tuple[float | None, float | None]] = field(default_factory=dict)
    """The 95% interval of each percentile: ``{"p50", "p90", "p99", "p99.9"}``."""
    generator_lag_p99_ms: float | None = None
    """Open loop: p99 of how late the generator itself noticed an arrival."""
    harness_floor: HarnessFloor | None = None
    retried: int = 0
    """Requests the client sent again because the server cannot have read them whole (a
    server the user runs, :mod:`tfperf.serving.remote.rest`); each still counts once."""

    def within(self, slo_ms: float) -> bool:
        """The SLO rule of the module docstring."""
        if self.p99_ms is None or self.sent == 0:
            return False
        return self.p99_ms <= slo_ms and self.failed <= MAX_FAILED_SHARE * self.sent

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "concurrency": self.concurrency,
            "offered_qps": self.offered_qps,
            "arrival_qps": self.arrival_qps,
            "achieved_qps": self.achieved_qps,
            "p50_ms": self.p50_ms,
            "p90_ms": self.p90_ms,
            "p99_ms": self.p99_ms,
            "p999_ms": self.p999_ms,
            "p99_ci_ms": list(self.p99_ci_ms),
            "mean_ms": self.mean_ms,
            "p99_from_send_ms": self.p99_from_send_ms,
            "sent": self.sent,
            "completed": self.completed,
            "failed": self.failed,
            "timed_out": self.timed_out,
            "failures": dict(self.failures),
            "ci_ms": {k: list(v) for k, v in self.ci_ms.items()},
            "generator_lag_p99_ms": self.generator_lag_p99_ms,
            "duration_s": self.duration_s,
            "generator_cpu": self.generator_cpu,
            "retried": self.retried,
            **_floor_dict(self.harness_floor),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoadLevel:
        """Read :meth:`to_dict`'s form back (a stored run's levels)."""
        ci = list(data.get("p99_ci_ms") or [None, None])
        return cls(
            scenario=str(data["scenario"]),
            concurrency=data.get("concurrency"),
            offered_qps=data.get("offered_qps"),
            achieved_qps=float(data.get("achieved_qps") or 0.0),
            p50_ms=data.get("p50_ms"),
            p90_ms=data.get("p90_ms"),
            p99_ms=data.get("p99_ms"),
            p999_ms=data.get("p999_ms"),
            p99_ci_ms=(ci[0], ci[1]),
            sent=int(data.get("sent", 0)),
            completed=int(data.get("completed", 0)),
            failed=int(data.get("failed", 0)),
            timed_out=int(data.get("timed_out", 0)),
            duration_s=float(data.get("duration_s") or 0.0),
            generator_cpu=float(data.get("generator_cpu") or 0.0),
            arrival_qps=data.get("arrival_qps"),
            p99_from_send_ms=data.get("p99_from_send_ms"),
            mean_ms=data.get("mean_ms"),
            failures=dict(data.get("failures") or {}),
            ci_ms={k: (v[0], v[1]) for k, v in (data.get("ci_ms") or {}).items()},
            generator_lag_p99_ms=data.get("generator_lag_p99_ms"),
            harness_floor=_floor_of(data),
            retried=int(data.get("retried") or 0),
        )


def _floor_dict(floor: HarnessFloor | None) -> dict[str, Any]:
    if floor is None:
        return {"harness_floor_ms": None, "harness_floor_requests": None}
    return {
        "harness_floor_ms": {"p50": floor.p50_ms, "p99": floor.p99_ms},
        "harness_floor_requests": floor.requests,
    }


def _floor_of(data: Mapping[str, Any]) -> HarnessFloor | None:
    ms = data.get("harness_floor_ms")
    if not ms:
        return None
    return HarnessFloor(float(ms["p50"]), float(ms["p99"]), int(data["harness_floor_requests"]))


def _ms(values: np.ndarray, q: float) -> float | None:
    return float(np.quantile(values, q)) * 1000.0 if values.size else None


_QUANTILES = {"p50": 0.50, "p90": 0.90, "p99": 0.99, "p99.9": 0.999}


def _intervals(lat_s: np.ndarray) -> dict[str, tuple[float | None, float | None]]:
    if not lat_s.size:
        return {name: (None, None) for name in _QUANTILES}
    out = {}
    for name, q in _QUANTILES.items():
        lo, hi = quantile_ci(lat_s, q)
        out[name] = (lo * 1000.0, hi * 1000.0)
    return out


def level_of(
    record: LevelRecord,
    *,
    concurrency: int | None = None,
    offered_qps: float | None = None,
    harness_floor: HarnessFloor | None = None,
) -> LoadLevel:
    """The :class:`LoadLevel` of one measured level (closed with ``concurrency``, open with
    ``offered_qps``)."""
    lat = np.asarray(record.latencies_s + record.waited_s, dtype=float)
    intervals = _intervals(lat)
    duration = max(record.duration_s, 1e-9)
    sent_window = record.arrivals_s
    return LoadLevel(
        scenario="closed" if offered_qps is None else "open",
        concurrency=concurrency,
        offered_qps=offered_qps,
        achieved_qps=record.completed / duration,
        p50_ms=_ms(lat, 0.50),
        p90_ms=_ms(lat, 0.90),
        p99_ms=_ms(lat, 0.99),
        p999_ms=_ms(lat, 0.999),
        p99_ci_ms=intervals["p99"],
        sent=record.sent,
        completed=record.completed,
        failed=record.failed,
        timed_out=record.timed_out,
        duration_s=record.duration_s,
        generator_cpu=record.cpu_s / duration,
        arrival_qps=(record.sent - 1) / sent_window if sent_window > 0 else None,
        p99_from_send_ms=_ms(np.asarray(record.from_send_s, dtype=float), 0.99),
        mean_ms=float(lat.mean()) * 1000.0 if lat.size else None,
        failures=dict(record.failures),
        ci_ms=intervals,
        generator_lag_p99_ms=_ms(np.asarray(record.lags_s, dtype=float), 0.99),
        harness_floor=harness_floor,
    )


GENERATOR_CPU_LIMIT = 0.5
"""Share of one core the generator may use before a level warns that it may be the limit."""
GENERATOR_LAG_LIMIT_MS = 1.0
"""p99 of the generator's lag (open loop) above which a level warns that it may be the limit,
when that lag is also more than a tenth of the level's p99."""


def _what(level: LoadLevel) -> str:
    if level.scenario == "closed":
        return f"concurrency {level.concurrency}"
    return f"offered {level.offered_qps:.4g}/s"


def generator_limited(level: LoadLevel) -> str | None:
    """A warning when the load generator rather than the server may have set a level's figures
    (more than half a core busy, or its arrival lag a real share of the p99), else ``None``."""
    what = _what(level)
    if level.generator_cpu > GENERATOR_CPU_LIMIT:
        return (
            f"{what}: the load generator used {level.generator_cpu:.0%} of a core, so it may "
            "be the limit rather than the server (run it on cores the server does not use)"
        )
    lag = level.generator_lag_p99_ms
    if lag is not None and lag > GENERATOR_LAG_LIMIT_MS and lag > 0.1 * (level.p99_ms or 0.0):
        return (
            f"{what}: the load generator noticed its arrivals up to {lag:.3g} ms late (p99), "
            "a real share of the latency: the generator may be the limit, not the server"
        )
    return None


FLOOR_SHARE = 0.1
"""A level whose harness floor's p50 is above this share of its own p50 carries a note."""


def floor_note(level: LoadLevel) -> str | None:
    """A note when the harness's own floor is a real share of the level's p50, else ``None``."""
    floor = level.harness_floor
    if floor is None or not level.p50_ms or floor.p50_ms <= FLOOR_SHARE * level.p50_ms:
        return None
    return (
        f"{_what(level)}: the harness's own floor (the same load with every model call "
        f"skipped) has a p50 of {floor.p50_ms:.3g} ms, {floor.p50_ms / level.p50_ms:.0%} of "
        f"this level's {level.p50_ms:.3g} ms: that share is tfperf's dispatch and this "
        "machine's wake-ups, not the model"
    )


def slo_answer(levels: Sequence[LoadLevel], slo_ms: float) -> float | None:
    """The achieved rate of the highest level within ``slo_ms`` (module docstring)."""
    passing = [lv for lv in levels if lv.within(slo_ms)]
    if not passing:
        return None
    return max(passing, key=lambda lv: (lv.offered_qps or 0.0, lv.concurrency or 0)).achieved_qps


@dataclass(frozen=True)
class LoadResult:
    """One layout's load sweep (see the module docstring)."""

    config: Config
    layout: ServingLayout
    levels: tuple[LoadLevel, ...]
    slo_ms: float | None = None
    max_qps_at_slo: float | None = None
    capacity_qps: float | None = None
    """The achieved rate of the saturating closed-loop probe, when the SLO search ran one."""
    notes: tuple[str, ...] = ()
    target: Mapping[str, Any] | None = None
    """A server the user runs (``tfperf bench --url``): its address, protocol and model, with
    ``label``; ``None`` for a layout tfperf served."""
    infer_requests: tuple[int, ...] = ()
    """Per instance, the infer requests OpenVINO kept in flight where it served asynchronously
    (a hint or streams; what the compiled model asked for); empty otherwise."""
    memory: Memory | None = None
    """A served layout's memory: the sum over its instances after the sweep (``None`` for a
    remote server, whose processes tfperf cannot see)."""
    batch: int | None = None
    """Samples in each request (the model's batch), where the server under test says."""
    ops: Mapping[str, Any] | None = None
    """The op profile of one instance after the levels (``bench --ops`` under load)."""

    def label(self) -> str:
        """The layout's label, or the remote target's."""
        return str(self.target["label"]) if self.target else self.layout.label()

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config.to_dict(),
            "config_label": self.config.label(),
            "layout": self.layout.to_dict(),
            "layout_label": self.label(),
            "target": dict(self.target) if self.target else None,
            "levels": [lv.to_dict() for lv in self.levels],
            "slo_ms": self.slo_ms,
            "max_qps_at_slo": self.max_qps_at_slo,
            "capacity_qps": self.capacity_qps,
            "notes": list(self.notes),
            "memory": self.memory.to_dict() if self.memory else None,
            "infer_requests": list(self.infer_requests),
            "batch": self.batch,
            **({"ops": dict(self.ops)} if self.ops is not None else {}),
        }
