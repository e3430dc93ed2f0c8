"""The server objective's search: the serving layout and runtime that take the most requests per
second while the 99th-percentile latency stays within a bound (``--objective server``).

Contract
--------

- A :class:`ServerCandidate` is a runtime config (the knobs that differ from the default, as in
  :mod:`tfperf.tuning.space`) served with a :class:`~tfperf.core.serving.ServingLayout`.
  :data:`DEFAULT_CANDIDATE` is what every answer is compared with: TensorFlow's defaults, one
  instance, no batching.
- :class:`ServerSpace` holds the values worth trying on this machine (:func:`server_space`):
  the runtime configs (those of the tune's space, so ``--runtimes`` holds), the instance shapes
  (``instances x threads`` that share the usable CPUs, pinned to contiguous core sets or not),
  the dynamic batch sizes, the batcher's delays (fractions of the SLO) and, on OpenVINO, its
  streams and its performance hint (``THROUGHPUT``, ``LATENCY``; either serves through
  OpenVINO's asynchronous requests, one request per call, so neither is combined with the
  batcher: a batch size tried from an asynchronous layout serves synchronously).
  :meth:`ServerSpace.neighbours` gives a candidate's changes along one dimension.
- :class:`ServerSearch` never measures. It asks ``evaluate(candidate, timeout_s) ->
  ServerOutcome``: ``"measured"`` with ``max_qps_at_slo`` (``None`` when no rate it was offered
  kept p99 within the SLO), ``"rejected"`` (the runtime's outputs are beyond the accuracy
  tolerance) or ``"failed"``. It measures the default first, then visits the dimensions in
  :data:`DIMENSIONS` order from the incumbent, trying each other value and moving to the best
  when its rate beats the incumbent's by more than :data:`MIN_STEP` (OpenVINO's
  ``THROUGHPUT`` hint, :data:`PREFERRED_HINT`, wins a tie in the hint step: it replaces the
  incumbent unless slower by more than that share); it sweeps again while a sweep moved (at
  most ``sweeps`` sweeps). A runtime config that was rejected for its accuracy, or that failed
  before any load (``info["runtime_failed"]``: its conversion, say), is not tried again under
  another layout (neither depends on the layout); a layout over the memory ceiling
  (``info["over_ceiling"]``) rules out that layout alone. Budgets: ``max_trials``
  counts evaluations; no evaluation starts unless the time left holds it and ``reserve`` more
  (what the confirmation will need), each as long as the median one so far.
- :func:`confirmation` decides from alternating SLO searches of the default and the winner
  (pair ``i`` ran one after the other): the ratio of their rates pair by pair
  (:func:`tfperf.core.stats.paired_speedup` on the inverse rates), and whether to recommend the
  winner: only when it met the SLO in every one of its searches *and* the ratio's verdict is
  ``"faster"`` by the rule of every tfperf verdict (:func:`tfperf.core.stats.verdict`: p < 0.05,
  median >= 1 + threshold, the whole 95% interval above 1, at least
  :data:`~tfperf.core.stats.MIN_PAIRS` pairs), or when the default met the SLO at no rate.
  Otherwise the default is kept, and ``reason`` says why, with the rule.

Nothing here imports TensorFlow or measures anything.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tfperf.core.knobs import label, normalize
from tfperf.core.serving import DEFAULT_LAYOUT, HINTS, ServingLayout
from tfperf.core.stats import DEFAULT_THRESHOLD, MIN_PAIRS, paired_speedup

MEASURED, REJECTED, FAILED = "measured", "rejected", "failed"
DIMENSIONS = ("runtime", "hint", "shape", "batch", "delay", "streams")
"""The hint comes right after the runtime: OpenVINO's users serve it with a hint, and a slow
model's budget may end before a later dimension is reached."""
MIN_STEP = 0.05
"""A step must raise the rate within the SLO by more than this share: one SLO search's rate
varies by a few percent from run to run, and the confirmation decides in the end."""
PREFERRED_HINT = "THROUGHPUT"
"""OpenVINO's own way to serve for throughput. The hint step takes it from the incumbent
(served synchronously, or with another hint) unless it is slower by more than
:data:`MIN_STEP`: within that, one SLO search cannot tell the two apart, and this is the
layout OpenVINO's users start from."""
BATCHES = (1, 2, 4, 8)
DELAY_SHARES = (0.05, 0.1, 0.25)
"""The batcher's delays tried, as shares of the SLO (a wait is paid by every request in it)."""


@dataclass(frozen=True)
class ServerCandidate:
    """A runtime config served with a layout."""

    config: Mapping[str, Any]
    layout: ServingLayout

    def key(self) -> str:
        """Its label: the layout's, then the runtime config's where it is not the default
        (``"2x1t pinned batch=4/1ms"``, ``"1x streams=2 + runtime=openvino-f32"``)."""
        config = dict(self.config)
        return self.layout.label() + (f" + {label(config)}" if normalize(config) else "")

    @property
    def openvino(self) -> bool:
        return str(self.config.get("runtime", "tf")).startswith("openvino")


DEFAULT_CANDIDATE = ServerCandidate({}, DEFAULT_LAYOUT)


@dataclass
class ServerOutcome:
    """What evaluating one candidate produced."""

    candidate: ServerCandidate
    status: str
    max_qps_at_slo: float | None = None
    reason: str = ""
    accuracy: dict | None = None
    elapsed_s: float = 0.0
    load: dict | None = None
    """The :class:`tfperf.serving.LoadResult` as a dict (its levels), when measured."""
    speedup: dict | None = None
    """``{"median": its rate over the default's}`` once both are known (progress lines)."""
    info: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.candidate.key()

    @property
    def time_ms(self) -> None:
        """A server candidate has a rate, not a time per call."""
        return None

    @property
    def rate(self) -> float:
        """The rate within the SLO, 0 where none (or not measured)."""
        return float(self.max_qps_at_slo or 0.0) if self.status == MEASURED else 0.0

    def to_dict(self) -> dict:
        return {
            "label": self.candidate.key(),
            "config": dict(self.candidate.config),
            "serving": self.candidate.layout.to_dict(),
            "status": self.status,
            "max_qps_at_slo": self.max_qps_at_slo,
            "reason": self.reason,
            "accuracy": self.accuracy,
            "elapsed_s": self.elapsed_s,
            "load": self.load,
        }


@dataclass(frozen=True)
class ServerSpace:
    """The values of each dimension worth trying (see the module docstring)."""

    runtimes: tuple[Mapping[str, Any], ...]
    shapes: tuple[tuple[int, int | None, bool], ...]
    """``(instances, threads, pinned)``; the first is the default's."""
    cpus: tuple[int, ...]
    batches: tuple[int, ...] = BATCHES
    delays_ms: tuple[float, ...] = ()
    streams: tuple[int | None, ...] = (None,)
    hints: tuple[str | None, ...] = (None, *HINTS)
    """OpenVINO's performance hints tried (``None``: not set)."""
    default_runtime_allowed: bool = True
    """False when ``--runtimes`` leaves TensorFlow out: the default is then measured as the
    baseline only, and the search goes on from the best of the runtimes allowed."""

    def shape_of(self, layout: ServingLayout) -> tuple[int, int | None, bool]:
        return (layout.instances, layout.threads, layout.pinned)

    def layout(self, base: ServingLayout, shape: tuple[int, int | None, bool]) -> ServingLayout:
        """``base`` with the instances, threads and pinning of ``shape``."""
        instances, threads, pinned = shape
        cores = split_cpus(self.cpus, instances) if pinned else ()
        return replace(base, instances=instances, threads=threads, cores=cores)

    def neighbours(self, at: ServerCandidate, dimension: str) -> list[ServerCandidate]:
        """The candidates that change ``at`` along ``dimension`` only."""
        layout = at.layout
        if dimension == "runtime":
            others = [normalize(dict(r)) for r in self.runtimes]
            if not self.default_runtime_allowed:  # the baseline, never a step
                others = [r for r in others if r.get("runtime") not in (None, "tf")]
            current = normalize(dict(at.config))
            return [_on_runtime(r, layout) for r in others if r != current]
        if dimension == "shape":
            here = self.shape_of(layout)
            return [
                replace(at, layout=self.layout(layout, s)) for s in self.shapes if s != here
            ]
        if dimension == "batch":
            synchronous = replace(layout, streams=None, hint=None)
            return [
                replace(at, layout=replace(synchronous, max_batch=b, max_delay_ms=(
                    0.0 if b == 1 else layout.max_delay_ms)))
                for b in self.batches if b != layout.max_batch
            ]
        if dimension == "delay" and layout.batching:
            return [
                replace(at, layout=replace(layout, max_delay_ms=d))
                for d in (0.0, *self.delays_ms) if d != layout.max_delay_ms
            ]
        if dimension == "streams" and at.openvino and not layout.batching:
            return [
                replace(at, layout=replace(layout, streams=s))
                for s in self.streams if s != layout.streams
            ]
        if dimension == "hint" and at.openvino and not layout.batching:
            return [
                replace(at, layout=replace(layout, hint=h))
                for h in self.hints if h != layout.hint
            ]
        return []

    def size(self) -> int:
        """How many candidates the space holds (an upper bound of what a search tries)."""
        delays = 1 + len(self.delays_ms)
        served = len(self.streams) * len(self.hints)  # OpenVINO's ways of serving a call
        per_runtime = len(self.shapes) * (1 + (len(self.batches) - 1) * delays)
        openvino = sum(str(r.get("runtime", "")).startswith("openvino") for r in self.runtimes)
        asynchronous = len(self.shapes) * (served - 1)  # with one call per request only
        return per_runtime * len(self.runtimes) + openvino * asynchronous


def _on_runtime(config: dict, layout: ServingLayout) -> ServerCandidate:
    """``layout`` served by ``config``'s runtime (streams and hints belong to OpenVINO only)."""
    candidate = ServerCandidate(config, layout)
    return candidate if candidate.openvino else replace(
        candidate, layout=replace(layout, streams=None, hint=None)
    )


def split_cpus(cpus: Sequence[int], instances: int) -> tuple[tuple[int, ...], ...]:
    """``cpus`` cut into ``instances`` contiguous sets of equal size (the rest left out)."""
    size = max(1, len(cpus) // instances)
    return tuple(tuple(cpus[i * size:(i + 1) * size]) for i in range(instances))


def server_space(
    cpus: Sequence[int],
    slo_ms: float,
    runtimes: Sequence[Mapping[str, Any]],
    default_runtime_allowed: bool = True,
) -> ServerSpace:
    """The values worth trying with ``cpus`` usable, for ``slo_ms``, over these runtime
    configs (the first is the default's, ``{}``; ``default_runtime_allowed`` False keeps it
    as the baseline only)."""
    n = len(cpus)
    shapes: list[tuple[int, int | None, bool]] = [(1, None, False)]
    if n > 1:
        shapes.append((1, 1, False))
    instances = 2
    while instances <= n:
        threads = n // instances
        shapes += [(instances, threads, True), (instances, threads, False)]
        instances = instances * 2 if instances * 2 <= n or instances == n else n
    delays = tuple(sorted({round(slo_ms * share, 2) for share in DELAY_SHARES} - {0.0}))
    streams = tuple(dict.fromkeys((None, 1, 2, n)))
    return ServerSpace(
        runtimes=tuple(dict(r) for r in runtimes) or ({},),
        shapes=tuple(dict.fromkeys(shapes)),
        cpus=tuple(cpus),
        delays_ms=delays,
        streams=streams,
        default_runtime_allowed=default_runtime_allowed,
    )


Evaluate = Callable[[ServerCandidate, "float | None"], ServerOutcome]


@dataclass
class ServerResult:
    """The end of a server search: the incumbent, every outcome in order, why it stopped."""

    incumbent: ServerCandidate
    default: ServerOutcome | None
    outcomes: list[ServerOutcome] = field(default_factory=list)
    stopped: str = "converged"
    """``"converged"``, ``"max-sweeps"``, ``"max-trials"`` or ``"budget"``."""


class _Stop(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class ServerSearch:
    """One server search over ``space`` (see the module docstring)."""

    def __init__(
        self,
        space: ServerSpace,
        evaluate: Evaluate,
        *,
        max_trials: int | None = None,
        budget_s: float | None = None,
        reserve: float = 0.0,
        sweeps: int = 2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.space = space
        self.evaluate = evaluate
        self.max_trials = max_trials
        self.budget_s = budget_s
        self.reserve = reserve
        self.sweeps = sweeps
        self.clock = clock
        self._start = clock()
        self.outcomes: list[ServerOutcome] = []
        self._seen: dict[str, ServerOutcome] = {}
        self._bad_runtimes: dict[str, ServerOutcome] = {}
        self.best: ServerOutcome | None = None
        """The incumbent's outcome (the default's first)."""

    def time_left(self) -> float | None:
        if self.budget_s is None:
            return None
        return self.budget_s - (self.clock() - self._start)

    def _room(self) -> None:
        """Raise :class:`_Stop` when no evaluation may start."""
        if self.max_trials is not None and len(self.outcomes) >= self.max_trials:
            raise _Stop("max-trials")
        left = self.time_left()
        if left is None:
            return
        spent = [o.elapsed_s for o in self.outcomes if o.status == MEASURED]
        # room for this evaluation and for the confirmation after it
        need = (1 + self.reserve) * statistics.median(spent) if spent else 0.0
        if left <= need:
            raise _Stop("budget")

    def _try(self, candidate: ServerCandidate) -> ServerOutcome:
        key = candidate.key()
        if key in self._seen:
            return self._seen[key]
        runtime = label(normalize(dict(candidate.config)))
        if runtime in self._bad_runtimes:
            return self._bad_runtimes[runtime]
        self._room()
        outcome = self.evaluate(candidate, self.time_left())
        self.outcomes.append(outcome)
        self._seen[key] = outcome
        # the runtime's accuracy and its conversion hold for every layout of it; the memory
        # ceiling does not (fewer instances, a smaller batch may fit)
        layout_only = outcome.info.get("over_ceiling")
        if (outcome.status == REJECTED and not layout_only) or outcome.info.get("runtime_failed"):
            self._bad_runtimes[runtime] = outcome
        return outcome

    def run(self) -> ServerResult:
        """Search until converged, out of trials, or out of time."""
        result = ServerResult(DEFAULT_CANDIDATE, None)
        try:
            result.default = self.best = self._try(DEFAULT_CANDIDATE)
            result.stopped = self._sweep()
        except _Stop as stop:
            result.stopped = stop.why
        if self.best is not None and self.best.status == MEASURED:
            result.incumbent = self.best.candidate
        result.outcomes = list(self.outcomes)
        return result

    def _sweep(self) -> str:
        """Sweep the dimensions while a sweep moves the incumbent."""
        for _ in range(self.sweeps):
            before = self.best
            for dimension in DIMENSIONS:
                self._step(dimension)
            if self.best is before:
                return "converged"
        return "max-sweeps"

    def _step(self, dimension: str) -> None:
        """Move :attr:`best` to the best outcome along ``dimension`` when it beats it by more
        than :data:`MIN_STEP`. Out of budget, the best found so far is still taken."""
        assert self.best is not None
        base = self.best
        tried: list[ServerOutcome] = []
        try:
            for candidate in self.space.neighbours(base.candidate, dimension):
                tried.append(self._try(candidate))
        finally:
            better = [o for o in tried if o.rate > 0 and o.rate > self._floor(base, o, dimension)]
            if better:
                self.best = max(better, key=lambda o: o.rate)

    def _floor(self, base: ServerOutcome, outcome: ServerOutcome, dimension: str) -> float:
        """The rate ``outcome`` must beat to replace ``base`` along ``dimension``."""
        if dimension == "runtime" and self._baseline_only(base):
            return 0.0  # the default's runtime is not the user's to adopt
        if dimension == "hint" and outcome.candidate.layout.hint == PREFERRED_HINT:
            return base.rate * (1 - MIN_STEP)  # a tie goes to OpenVINO's own serving
        return base.rate * (1 + MIN_STEP)

    def _baseline_only(self, outcome: ServerOutcome) -> bool:
        on_default = outcome.candidate.config.get("runtime") in (None, "tf")
        return not self.space.default_runtime_allowed and on_default


def alternating_rates(
    judge: Any, sides: Sequence[tuple[str, ServerCandidate]], pairs: int, role: str
) -> dict[str, list[float | None]]:
    """``pairs`` pairs of SLO searches of the two ``sides`` (name, candidate), the order
    swapped from pair to pair, each recorded under ``role``: each side's rates within the SLO
    (``None`` where a search did not measure)."""
    rates: dict[str, list[float | None]] = {name: [] for name, _ in sides}
    for pair in range(pairs):
        for name, candidate in sides if pair % 2 == 0 else sides[::-1]:
            outcome = judge.measure(candidate, judge.evaluator.run, role=role)
            rates[name].append(outcome.max_qps_at_slo if outcome.status == MEASURED else None)
    return rates


def confirmation(
    default_qps: Sequence[float | None],
    winner_qps: Sequence[float | None],
    threshold: float = DEFAULT_THRESHOLD,
) -> dict:
    """The decision of the module docstring from alternating SLO searches (pair by pair).

    Returns ``{"default_qps", "candidate_qps", "ratio": paired_speedup result | None,
    "missed_slo": bool, "recommend": bool, "reason"}``.
    """
    missed = any(q is None or q <= 0 for q in winner_qps)
    default_none = all(q is None or q <= 0 for q in default_qps)
    ratio = None
    if not missed and not default_none:
        times = [[_inverse(q) for q in default_qps], [_inverse(q) for q in winner_qps]]
        ratio = paired_speedup(times[0], times[1], threshold)
    doc = {
        "default_qps": list(default_qps),
        "candidate_qps": list(winner_qps),
        "ratio": ratio,
        "missed_slo": missed,
    }
    if missed:
        n = sum(q is None or q <= 0 for q in winner_qps)
        reason = (
            f"the best layout missed the SLO in {n} of its {len(winner_qps)} confirmation "
            "searches (no rate it was offered kept p99 within the bound)"
        )
        return doc | {"recommend": False, "reason": reason}
    if default_none:
        reason = "the default met the SLO at no rate it was offered, and the best layout did"
        return doc | {"recommend": True, "reason": reason}
    assert ratio is not None
    if ratio["verdict"] == "faster":
        reason = (
            f"took significantly more requests per second within the SLO than the default "
            f"({ratio['median']:.2f}x over {ratio['n_pairs']} pairs, {_rule(ratio)})"
        )
        return doc | {"recommend": True, "reason": reason}
    low, high = ratio.get("ci95") or [None, None]
    shown = "-" if low is None else f"{low:.2f}-{high:.2f}"
    reason = (
        f"the best layout was not significantly faster than the default in the confirmation "
        f"(verdict {ratio['verdict']}: ratio {ratio['median']:.2f}, 95% interval {shown} over "
        f"{ratio['n_pairs']} pairs; {_rule(ratio)})"
    )
    return doc | {"recommend": False, "reason": reason}


def _rule(ratio: dict) -> str:
    """The verdict rule every tfperf comparison uses, in words."""
    return (
        f"the rule of every verdict: p < 0.05, median >= {1 + ratio['threshold']:.2f} and the "
        f"95% interval above 1, from at least {MIN_PAIRS} pairs"
    )


def _inverse(qps: float | None) -> float:
    """Seconds per request: what :func:`paired_speedup` compares (a missing rate drops the
    pair)."""
    return 1.0 / qps if qps and qps > 0 else math.inf
