"""The results of load measurement: one :class:`LoadLevel` per point, one :class:`LoadResult`.

Contract:

- :class:`LoadLevel` is frozen and JSON-able (:meth:`LoadLevel.to_dict`; the keys are those of
  ``docs/results-schema.md``'s ``levels``). ``scenario`` is ``"closed"`` (``concurrency`` set,
  ``offered_qps`` ``None``) or ``"open"`` (``offered_qps`` the asked rate). ``achieved_qps`` is
  completed requests over the level's duration (first arrival to last answer), so a level
  offered beyond capacity shows ``achieved_qps < offered_qps``.
- ``achieved_qps`` is the requests completed within the level's *window* (its first arrival to
  its last: the time in which requests were offered) over that window, so a straggler answered
  long after it does not dilute the rate. ``drain_s`` is the time from the window's end to the
  level's last answer or give-up, ``open_at_close`` the requests still open when it ended and
  ``straggler`` the slowest of those that ended after it (when it arrived, its latency, how it
  ended); :func:`drain_note` names it where the drain is long against the level's p99.
- Latencies (ms) count from each request's scheduled arrival. The percentiles are those of
  the completed requests together with the timed-out ones, each of those counted with the
  time it had waited when it was given up (at least the timeout: a lower bound of its
  latency), so a backlog shows in p99 instead of vanishing from it. Failed requests have no
  latency. A percentile is shown only where at least ``tail`` requests lie beyond it
  (:mod:`tfperf.serving.tail`); otherwise it is ``None``, its estimate is kept apart under
  ``rough_ms`` and ``needs`` says how many requests it would take (:func:`short_note` says it
  for p99). ``p99_ci_ms`` is the distribution-free 95% interval of p99
  (:func:`tfperf.core.stats.quantile_ci`), ``ci_ms`` that of each percentile.
- ``service_ms`` is the server's own time per request where it says (tfperf's instances: the
  model call that served it), p50 and p99 by the same rule; ``client_queue_ms`` (a server the
  user runs) how long requests waited in tfperf's client for a free connection, with
  :func:`queue_note` where that is a real share of the latency; ``reconnects`` the connections
  the client had to make during the level and ``server_ms`` the server's own queue and compute
  time per request from its statistics (:mod:`tfperf.serving.remote.stats`), where it keeps
  them.
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
  :data:`FLOOR_SHARE` of the level's, naming the batcher's delay where the layout batches (a
  null request waits for a batch to fill as any other does).
- :meth:`LoadLevel.within` is the SLO rule: p99 shown (it stands on enough requests) and its
  point estimate within ``slo_ms``, and at most 1% of the requests failed or timed out (a
  request given up is outside the SLO whatever it had waited).
- :func:`generator_limited` is the warning of a level where the generator may have been the
  limit: more than :data:`GENERATOR_CPU_LIMIT` of a core busy, or its arrival lag's p99 above
  :data:`GENERATOR_LAG_LIMIT_MS` and a tenth of the level's p99.
- :class:`LoadResult` holds one layout's levels and, when an SLO was given, the answer
  ``max_qps_at_slo``: the *achieved* rate of the level of highest offered rate (or
  concurrency) that is within the SLO, ``None`` when none is (:func:`slo_answer`; the SLO
  search passes the rates it decided against, so a level that passed once at a rate the
  search's repeats failed does not answer).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfperf.core.config import Config
from tfperf.core.memory import Memory
from tfperf.core.serving import ServingLayout
from tfperf.core.stats import quantile_ci
from tfperf.serving.generator import LevelRecord
from tfperf.serving.tail import TAIL_REQUESTS, LevelLength, needed, stands

MAX_FAILED_SHARE = 0.01
"""A level with more failed requests than this share is never within an SLO."""


@dataclass(frozen=True)
class HarnessFloor:
    """The harness's own latency at one level: its p50 and p99 (ms, from each request's
    scheduled arrival, as the level's; p99 ``None`` where it does not stand) over
    ``requests`` null requests."""

    p50_ms: float
    p99_ms: float | None
    requests: int
    batch_delay_ms: float = 0.0
    """The layout's batcher delay: every null request of a batching layout waits up to it."""


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
    window_s: float = 0.0
    """From the first arrival to the last: the time ``achieved_qps`` is taken over."""
    drain_s: float = 0.0
    open_at_close: int = 0
    straggler: Mapping[str, Any] | None = None
    """``{"arrived_s", "latency_ms", "ended"}`` (module docstring)."""
    stopped: str = "minimum"
    """Why the level's arrivals ended: ``minimum``, ``stable`` or ``cap``
    (:class:`tfperf.serving.generator.LevelRecord`)."""
    needs: Mapping[str, int] = field(default_factory=dict)
    """Each percentile not shown: the requests it would need."""
    rough_ms: Mapping[str, float] = field(default_factory=dict)
    """Each percentile not shown: its estimate from too few requests (never an answer)."""
    service_ms: Mapping[str, float | None] | None = None
    client_queue_ms: Mapping[str, float | None] | None = None
    reconnects: int | None = None
    server_ms: Mapping[str, Any] | None = None

    def within(self, slo_ms: float) -> bool:
        """The SLO rule of the module docstring."""
        if self.p99_ms is None:
            return False
        return self.p99_ms <= slo_ms and self.failures_ok()

    def failures_ok(self) -> bool:
        """At most :data:`MAX_FAILED_SHARE` of the requests failed or timed out."""
        return self.sent > 0 and self.failed + self.timed_out <= MAX_FAILED_SHARE * self.sent

    @property
    def p99_estimate_ms(self) -> float | None:
        """p99, shown or rough: which way an SLO search goes on from this level."""
        return self.p99_ms if self.p99_ms is not None else self.rough_ms.get("p99")

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
            "window_s": self.window_s,
            "drain_s": self.drain_s,
            "open_at_close": self.open_at_close,
            "straggler": dict(self.straggler) if self.straggler else None,
            "stopped": self.stopped,
            "needs": dict(self.needs),
            "rough_ms": dict(self.rough_ms),
            "service_ms": _plain(self.service_ms),
            "client_queue_ms": _plain(self.client_queue_ms),
            "reconnects": self.reconnects,
            "server_ms": _plain(self.server_ms),
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
            window_s=float(data.get("window_s") or 0.0),
            drain_s=float(data.get("drain_s") or 0.0),
            open_at_close=int(data.get("open_at_close") or 0),
            straggler=data.get("straggler"),
            stopped=str(data.get("stopped") or "minimum"),
            needs=dict(data.get("needs") or {}),
            rough_ms=dict(data.get("rough_ms") or {}),
            service_ms=data.get("service_ms"),
            client_queue_ms=data.get("client_queue_ms"),
            reconnects=data.get("reconnects"),
            server_ms=data.get("server_ms"),
        )


def _plain(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if value is None else dict(value)


def _floor_dict(floor: HarnessFloor | None) -> dict[str, Any]:
    if floor is None:
        return {"harness_floor_ms": None, "harness_floor_requests": None,
                "harness_floor_batch_delay_ms": None}
    return {
        "harness_floor_ms": {"p50": floor.p50_ms, "p99": floor.p99_ms},
        "harness_floor_requests": floor.requests,
        "harness_floor_batch_delay_ms": floor.batch_delay_ms,
    }


def _floor_of(data: Mapping[str, Any]) -> HarnessFloor | None:
    ms = data.get("harness_floor_ms")
    if not ms:
        return None
    p99 = ms.get("p99")
    return HarnessFloor(float(ms["p50"]), None if p99 is None else float(p99),
                        int(data["harness_floor_requests"]),
                        float(data.get("harness_floor_batch_delay_ms") or 0.0))


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


def _shown(values_s: Sequence[float], q: float, tail: int) -> float | None:
    """The ``q`` quantile in ms where it stands on ``tail`` requests beyond it, else ``None``."""
    return _ms(np.asarray(values_s, dtype=float), q) if stands(len(values_s), q, tail) else None


def _p50_p99(values_s: Sequence[float], tail: int) -> dict[str, float | None] | None:
    """p50 and p99 in ms by the tail rule; ``None`` without values."""
    if not values_s:
        return None
    return {"p50": _shown(values_s, 0.50, tail), "p99": _shown(values_s, 0.99, tail)}


def _percentiles(lat_s: np.ndarray, tail: int) -> tuple[dict, dict, dict]:
    """``(shown, rough, needs)``: each percentile shown where it stands, else its estimate
    and the requests it would need."""
    shown: dict[str, float | None] = {}
    rough: dict[str, float] = {}
    needs: dict[str, int] = {}
    for name, q in _QUANTILES.items():
        value = _ms(lat_s, q)
        if stands(lat_s.size, q, tail):
            shown[name] = value
            continue
        shown[name] = None
        needs[name] = needed(q, tail)
        if value is not None:
            rough[name] = value
    return shown, rough, needs


def _window_rate(record: LevelRecord) -> float:
    """Completions within the window over the window (module docstring); over the whole
    level where the window is a single instant."""
    window = record.arrivals_s
    if window <= 0:
        return record.completed / max(record.duration_s, 1e-9)
    return sum(1 for at in record.answered_s if at <= window + 1e-9) / window


def _straggler(record: LevelRecord) -> dict[str, Any] | None:
    if record.straggler is None:
        return None
    arrived, latency, how = record.straggler
    return {"arrived_s": arrived, "latency_ms": latency * 1000.0, "ended": how}


@dataclass(frozen=True)
class ServerSide:
    """What the server under test (its client, for a server the user runs) saw of one level:
    requests sent again, connections made again, and the server's own time per request
    (``{"queue_ms", "compute_ms", "requests"}``) where it keeps statistics."""

    retried: int = 0
    reconnects: int | None = None
    server_ms: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class LevelFacts:
    """What a level is, beside its record: its load, its floor, the tail rule it is read by,
    whether the generator's queue is a client's (a server the user runs), and what the server
    under test told of it."""

    concurrency: int | None = None
    offered_qps: float | None = None
    harness_floor: HarnessFloor | None = None
    tail: int = TAIL_REQUESTS
    client_queue: bool = False
    retried: int = 0
    reconnects: int | None = None
    server_ms: Mapping[str, Any] | None = None


def level_of(record: LevelRecord, facts: LevelFacts | None = None, **given: Any) -> LoadLevel:
    """The :class:`LoadLevel` of one measured level (closed with ``concurrency``, open with
    ``offered_qps``; ``given`` are :class:`LevelFacts`' fields, for a caller without one)."""
    facts = facts or LevelFacts(**given)
    tail = facts.tail
    lat = np.asarray(record.latencies_s + record.waited_s, dtype=float)
    shown, rough, needs = _percentiles(lat, tail)
    intervals = _intervals(lat)
    duration = max(record.duration_s, 1e-9)
    window = record.arrivals_s
    return LoadLevel(
        scenario="closed" if facts.offered_qps is None else "open",
        concurrency=facts.concurrency, offered_qps=facts.offered_qps,
        achieved_qps=_window_rate(record),
        p50_ms=shown["p50"], p90_ms=shown["p90"], p99_ms=shown["p99"], p999_ms=shown["p99.9"],
        p99_ci_ms=intervals["p99"], ci_ms=intervals,
        sent=record.sent, completed=record.completed, failed=record.failed,
        timed_out=record.timed_out, duration_s=record.duration_s,
        generator_cpu=record.cpu_s / duration,
        arrival_qps=(record.sent - 1) / window if window > 0 else None,
        p99_from_send_ms=_shown(record.from_send_s, 0.99, tail),
        mean_ms=float(lat.mean()) * 1000.0 if lat.size else None,
        failures=dict(record.failures),
        generator_lag_p99_ms=_shown(record.lags_s, 0.99, tail),
        harness_floor=facts.harness_floor, retried=facts.retried,
        window_s=window, drain_s=record.drain_s, open_at_close=record.open_at_close,
        straggler=_straggler(record), stopped=record.stopped, needs=needs, rough_ms=rough,
        service_ms=_p50_p99(record.service_s, tail),
        client_queue_ms=_p50_p99(record.queued_s, tail) if facts.client_queue else None,
        reconnects=facts.reconnects, server_ms=facts.server_ms,
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
    """A note when the harness's own floor is a real share of the level's p50, else ``None``
    (naming the batcher's delay where the layout batches)."""
    floor = level.harness_floor
    if floor is None or not level.p50_ms or floor.p50_ms <= FLOOR_SHARE * level.p50_ms:
        return None
    share = (
        f"the dynamic batcher's delay (a request waits up to {floor.batch_delay_ms:g} ms for a "
        "batch to fill), tfperf's dispatch and this machine's wake-ups, not the model"
        if floor.batch_delay_ms > 0
        else "tfperf's dispatch and this machine's wake-ups, not the model"
    )
    return (
        f"{_what(level)}: the harness's own floor (the same load with every model call "
        f"skipped) has a p50 of {floor.p50_ms:.3g} ms, {floor.p50_ms / level.p50_ms:.0%} of "
        f"this level's {level.p50_ms:.3g} ms: that share is {share}"
    )


def floor_statement(level: LoadLevel) -> str | None:
    """The level's floor in one sentence, whatever its share (:func:`floor_note`'s where it
    is large); ``None`` without a floor."""
    floor = level.harness_floor
    if floor is None or not level.p50_ms:
        return None
    return floor_note(level) or (
        f"{_what(level)}: the harness's own floor (the same load with every model call "
        f"skipped) has a p50 of {floor.p50_ms:.3g} ms, {floor.p50_ms / level.p50_ms:.0%} of "
        f"this level's {level.p50_ms:.3g} ms"
    )


DRAIN_FACTOR = 2.0
"""A drain longer than this many times the level's p99 is named in a note."""


def drain_note(level: LoadLevel) -> str | None:
    """A note naming the straggler when the level waited long after its window for it."""
    p99 = level.p99_estimate_ms
    worst = level.straggler
    if worst is None or p99 is None or level.drain_s * 1000.0 <= DRAIN_FACTOR * p99:
        return None
    ended = {"completed": "answered", "failed": "failed", "timed_out": "was given up"}
    return (
        f"{_what(level)}: {level.open_at_close} request(s) still open when the arrivals ended; "
        f"the level waited {level.drain_s:.3g} s more for them (drain_s): the slowest, arrived "
        f"{worst['arrived_s']:.3g} s into the level, {ended.get(worst['ended'], 'ended')} after "
        f"{worst['latency_ms'] / 1000.0:.3g} s. achieved_qps counts the {level.window_s:.3g} s "
        "window of arrivals alone"
    )


def short_note(level: LoadLevel) -> str | None:
    """A note for a level whose p99 did not stand: the requests (and the seconds at its rate)
    it would need."""
    need = level.needs.get("p99")
    if need is None:
        return None
    rate = level.offered_qps or level.achieved_qps
    seconds = f" ({need / rate:.3g} s at this rate: --level-seconds)" if rate else ""
    return (
        f"{_what(level)}: p99 needs {need} requests ({round(need * 0.01)} beyond it) and this "
        f"level had {level.completed + level.timed_out}{seconds}: it is not shown, and the "
        "level answers no SLO"
    )


def capped_note(level: LoadLevel, length: LevelLength) -> str | None:
    """A note for a level its cap ended before it sent the requests it was asked for at least:
    the cap bounds every level, so a slow server's level ends short of ``--level-requests``
    rather than running on, and says so."""
    asked = length.min_requests
    if level.stopped != "cap" or level.sent >= asked:
        return None
    rate = level.achieved_qps
    takes = f"; at this rate they take {asked / rate:.3g} s" if rate else ""
    return (
        f"{_what(level)}: ended at its cap of {length.max_s:.3g} s after {level.sent} of the "
        f"{asked} requests asked for (--level-requests){takes}: a longer --level-seconds "
        "raises the cap"
    )


def queue_note(level: LoadLevel) -> str | None:
    """A note when requests waited in tfperf's client for a connection for a real share of the
    level's latency (a tenth of its p50, or of its p99)."""
    waited = level.client_queue_ms
    if not waited:
        return None
    for key, against in (("p50", level.p50_ms), ("p99", level.p99_ms)):
        wait = waited.get(key)
        if wait is not None and against and wait > FLOOR_SHARE * against:
            return (
                f"{_what(level)}: requests waited in tfperf's client for a free connection "
                f"({key} {wait:.3g} ms, {wait / against:.0%} of the level's {key}): raise "
                "--connections, or leave it out for as many as the load needs"
            )
    return None


def slo_answer(
    levels: Sequence[LoadLevel], slo_ms: float, failed_rates: Collection[float] = ()
) -> float | None:
    """The achieved rate of the highest level within ``slo_ms`` (module docstring); a level at
    one of ``failed_rates`` (rates the SLO search decided are beyond it) never answers, and of
    the levels at one rate that do, the lowest achieved rate is the answer."""
    passing = [lv for lv in levels if lv.within(slo_ms) and lv.offered_qps not in failed_rates]
    if not passing:
        return None
    top = max(passing, key=lambda lv: (lv.offered_qps or 0.0, lv.concurrency or 0))
    same = [lv for lv in passing if (lv.offered_qps, lv.concurrency) ==
            (top.offered_qps, top.concurrency)]
    return min(lv.achieved_qps for lv in same)


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
