"""Measuring a layout under load: the sweep of levels, the SLO search, and their record.

Contract:

- :class:`LoadScenario` (frozen) says what load to offer: closed-loop ``concurrency`` levels,
  open-loop ``rates`` (requests per second, Poisson arrivals) and an optional ``slo_ms``. Each
  level runs until at least ``requests`` requests were sent *and* ``seconds`` passed, then on
  while its p99 does not stand on ``tail`` requests beyond it or (``precision``) its 95%
  interval is wider than that share of it, never longer than ``max_seconds``
  (:class:`tfperf.serving.tail.LevelLength`); a request unanswered ``timeout_s`` after its
  arrival is timed out. Bad values raise :class:`~tfperf.core.errors.UserError`, a timeout
  below the SLO among them (a request given up before the SLO would read as within it).
- :func:`measure_load` starts a :class:`tfperf.serving.harness.Harness` for (workload, config,
  layout), offers the closed levels, then the open ones, and returns a
  :class:`tfperf.serving.levels.LoadResult`. With ``slo_ms`` it also answers
  ``max_qps_at_slo``: over the given rates when there are any; otherwise by the SLO search: a
  closed-loop probe at a saturating concurrency measures the capacity (where the server under
  test cannot say what saturates it, a server the user runs, the probe doubles its concurrency
  while the rate still rises by more than :data:`PROBE_GAIN`, so that the client never caps
  it), then :data:`SEARCH_STEPS` open-loop levels bisect the rate between 0 and that capacity.
  Both sides are treated alike (with ``confirm``): a level whose verdict is unsure -- a miss,
  which one stall of a shared machine can make, or a pass whose p99 interval reaches past the
  SLO -- is measured again, and a third time when the two disagree; the majority decides.
  The direction of each step reads p99 where it stands and its estimate where it does not;
  the answer is the achieved rate of the highest offered rate within the SLO, from levels
  whose p99 stands, at rates the search did not decide against
  (:func:`tfperf.serving.levels.slo_answer`). :func:`search_slo` is that search by name.
- A layout with ``streams`` for a runtime other than OpenVINO raises
  :class:`~tfperf.core.errors.UserError`.
- Before each level, an instance that died is restarted (:meth:`Harness.restart_dead`) and the
  result's ``notes`` say which died, why, and how many requests it lost; the levels already
  measured are kept.
- :func:`measure_on` measures any server under test (:class:`UnderTest`: the harness, or a
  server the user runs, :mod:`tfperf.serving.remote`) with the same levels and search. The
  server is told when each level begins and asked what it saw of it after
  (:class:`tfperf.serving.levels.ServerSide`: resends, reconnects, its own statistics). A level
  where the generator itself may have been the limit, whose drain was long, whose requests
  waited for a client's connection, or that its cap ended before it sent the requests it was
  asked for adds a note saying so; levels whose p99 did not stand are
  summed up in one note that says how long a level would need to be.
- With ``floor`` (the default), each level of a :class:`Harness` is preceded by its harness
  floor (:func:`tfperf.serving.floor.measure_floor`, once per distinct load), kept as the
  level's ``harness_floor``, with a note where it is a real share of the level's p50
  (:func:`tfperf.serving.levels.floor_note`). With ``floor_at_answer`` instead, only the level
  that answers the SLO gets its floor, measured once the levels are over (what a server tune
  states of the layout it recommends). A server tfperf did not start has none.
- With ``ops_s``, :func:`measure_load` asks the layout's first live instance for its op profile
  (:func:`profile_after_levels`, the worker protocol's ``profile``) once the levels are over
  and the memory read, so no level runs under a profiler; the result's ``ops`` holds it, or
  ``{"available": False, "reason"}``. ``batch`` is the samples in each request, as the server
  under test reports it.
- ``recorder`` (a :class:`tfperf.runner.recorder.RunRecorder`) records a trial for the layout
  and one ``load`` block per level as soon as it is measured (its latencies in seconds, the
  level's dict as the block's info), so a run stopped later keeps every finished level.
  ``progress`` is called with one line of text per level.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from tfperf.core.config import Config
from tfperf.core.errors import UserError
from tfperf.core.memory import Memory
from tfperf.core.serving import ServingLayout
from tfperf.runner.handle import WorkerFailed
from tfperf.serving.floor import measure_floor
from tfperf.serving.generator import ClosedLoop, OpenLoop, Server, run_level
from tfperf.serving.harness import OPENVINO_PREFIX, Harness
from tfperf.serving.levels import (
    HarnessFloor,
    LevelFacts,
    LoadLevel,
    LoadResult,
    ServerSide,
    capped_note,
    drain_note,
    floor_note,
    generator_limited,
    level_of,
    queue_note,
    short_note,
    slo_answer,
)
from tfperf.serving.tail import PRECISION, TAIL_REQUESTS, LevelLength

SEARCH_STEPS = 5
"""Open-loop levels of the SLO search after its capacity probe (1/32 of the capacity apart)."""
PROBE_GAIN = 0.10
"""A doubled probe concurrency must raise the rate by more than this share to be doubled again."""
PROBE_MAX_CONCURRENCY = 1024
ROLE = "serving"
LEVEL_CAP = 4.0
"""``bench``'s levels run at most this many times ``--level-seconds``: by default long enough
at 100 requests per second for p99 to stand (12 s, 1200 requests), short enough that ``bench
--rate 100,200`` stays under a minute even when neither level's p99 settles."""


def level_cap(seconds: float) -> float:
    """The longest a level of at least ``seconds`` runs (:data:`LEVEL_CAP`)."""
    return LEVEL_CAP * seconds


@dataclass(frozen=True)
class LoadScenario:
    """The load to offer (see the module docstring)."""

    concurrency: tuple[int, ...] = ()
    rates: tuple[float, ...] = ()
    slo_ms: float | None = None
    requests: int = 300
    seconds: float = 3.0
    max_seconds: float = 30.0
    timeout_s: float = 10.0
    seed: int = 0
    confirm: bool = True
    """The SLO search measures an unsure level again (module docstring)."""
    floor: bool = True
    """Each level of a served layout is preceded by its harness floor (module docstring)."""
    floor_at_answer: bool = False
    """Without ``floor``: the answering level alone gets its floor, after the levels."""
    precision: float | None = PRECISION
    """A level runs on until p99's 95% interval lies within this share of it (``None``: until
    p99 stands)."""
    tail: int = TAIL_REQUESTS
    """Requests beyond a percentile for it to be shown (0: every percentile is shown, and a
    level stops at its minimums)."""

    def __post_init__(self) -> None:
        if any(c < 1 for c in self.concurrency):
            raise UserError(f"--concurrency takes counts of 1 or more, not {self.concurrency}.")
        if any(not (r > 0 and math.isfinite(r)) for r in self.rates):
            raise UserError(f"--rate takes positive requests per second, not {self.rates}.")
        if self.slo_ms is not None and not self.slo_ms > 0:
            raise UserError(f"--slo-ms must be a positive number of ms, not {self.slo_ms}.")
        if self.requests < 1 or not self.seconds > 0 or self.max_seconds < self.seconds:
            raise UserError(
                "each load level needs at least 1 request, a positive duration, and a maximum "
                f"duration no shorter than it (got {self.requests}, {self.seconds} s, "
                f"{self.max_seconds} s)."
            )
        if not self.timeout_s > 0:
            raise UserError(f"the request timeout must be positive, not {self.timeout_s}.")
        if self.slo_ms is not None and self.timeout_s * 1000.0 < self.slo_ms:
            raise UserError(
                f"--request-timeout {self.timeout_s:g} s is below --slo-ms {self.slo_ms:g}: a "
                "request given up before the SLO would read as within it; give "
                f"--request-timeout {math.ceil(self.slo_ms / 1000.0)} or more."
            )
        self.length  # noqa: B018 - checks the level length's own values

    @property
    def length(self) -> LevelLength:
        """How long each level runs."""
        return LevelLength(self.requests, self.seconds, self.max_seconds, self.precision,
                           self.tail)

    @property
    def searching(self) -> bool:
        """Whether the SLO search chooses the rates."""
        return self.slo_ms is not None and not self.rates

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {
            "concurrency": list(self.concurrency),
            "rates": list(self.rates),
        }


class UnderTest(Server, Protocol):
    """A server the sweep measures: the generator's :class:`Server`, and what the trial records
    of it (the harness's instances, or a remote server's address)."""

    config: Config
    layout: ServingLayout
    faults: list[str]
    target: Mapping[str, Any] | None
    """Where a server tfperf did not start listens (``None`` for the harness)."""
    client_queue: bool
    """Whether the generator's queue is a client's (requests waiting for a connection) rather
    than the server's own dispatcher."""
    saturation_known: bool
    """Whether :meth:`saturating_concurrency` surely saturates it (else the probe doubles)."""

    def label(self) -> str: ...

    def sweep_info(self) -> dict[str, Any]: ...

    def saturating_concurrency(self) -> int: ...

    def restart_dead(self) -> int: ...

    def begin_level(self, load: OpenLoop | ClosedLoop, probe: bool = False) -> None: ...

    def end_level(self) -> ServerSide | None: ...

    def memory(self) -> Memory | None: ...


class _Sweep:
    """One server's levels under way: measured, told, recorded."""

    def __init__(
        self,
        harness: UnderTest,
        scenario: LoadScenario,
        progress: Callable[[str], None] | None,
        recorder: Any,
    ) -> None:
        self.harness = harness
        self.scenario = scenario
        self.progress = progress or (lambda line: None)
        self.recorder = recorder
        self.levels: list[LoadLevel] = []
        self.loads: list[OpenLoop | ClosedLoop] = []
        self.notes: list[str] = []
        self.floors: dict[tuple[str, float], HarnessFloor | None] = {}
        self.trial_id: int | None = None
        if recorder is not None:
            self.trial_id = recorder.trial(harness.label(), harness.config.to_dict(), ROLE)
            recorder.trial_info(self.trial_id, self.info())

    def info(self) -> dict[str, Any]:
        return {**self.harness.sweep_info(), "scenario": self.scenario.to_dict()}

    def facts(self, load: OpenLoop | ClosedLoop, floor: HarnessFloor | None) -> LevelFacts:
        side = self.harness.end_level() or ServerSide()
        return LevelFacts(
            concurrency=load.concurrency if isinstance(load, ClosedLoop) else None,
            offered_qps=load.rate if isinstance(load, OpenLoop) else None,
            harness_floor=floor, tail=self.scenario.tail,
            client_queue=self.harness.client_queue, retried=side.retried,
            reconnects=side.reconnects, server_ms=side.server_ms,
        )

    def level(self, load: OpenLoop | ClosedLoop, probe: bool = False) -> LoadLevel:
        if self.harness.restart_dead():
            self.notes.append("the instances that died were restarted before the next level")
        seen = len(self.harness.faults)
        floor = self.floor(load)
        self.harness.begin_level(load, probe)
        record = run_level(self.harness, load, self.scenario.timeout_s)
        level = level_of(record, self.facts(load, floor))
        self.levels.append(level)
        self.loads.append(load)
        if self.recorder is not None:
            samples = record.latencies_s + record.waited_s
            self.recorder.block(self.trial_id, samples, "load", level.to_dict())
        self.progress(describe_level(level))
        short = short_note(level)
        if short:
            self.progress(short)
        notes = (generator_limited(level), floor_note(level), drain_note(level),
                 queue_note(level), capped_note(level, self.scenario.length),
                 *self.harness.faults[seen:])
        for note in notes:
            if note:
                self.notes.append(note)
                self.progress(note)
        return level

    def floor(self, load: OpenLoop | ClosedLoop, every: bool = False) -> HarnessFloor | None:
        """The harness floor at ``load``, measured once per distinct load (``None`` without
        one: a server tfperf did not start, or ``floor`` off unless ``every``)."""
        if not (self.scenario.floor or every) or not isinstance(self.harness, Harness):
            return None
        key = ("open", load.rate) if isinstance(load, OpenLoop) else ("closed", load.concurrency)
        if key not in self.floors:
            self.floors[key] = measure_floor(self.harness, load, self.scenario.timeout_s)
        return self.floors[key]

    def closed(self, concurrency: int, probe: bool = False) -> LoadLevel:
        return self.level(ClosedLoop(concurrency, self.scenario.length), probe)

    def open(self, rate: float) -> LoadLevel:
        seed = self.scenario.seed + len(self.levels)
        return self.level(OpenLoop(rate, self.scenario.length, seed=seed))


def describe_level(level: LoadLevel) -> str:
    """One line for a measured level."""
    what = (
        f"concurrency {level.concurrency}"
        if level.scenario == "closed"
        else f"offered {level.offered_qps:.4g}/s"
    )
    p99 = "-" if level.p99_ms is None else f"{level.p99_ms:.3g}"
    p50 = "-" if level.p50_ms is None else f"{level.p50_ms:.3g}"
    floor = level.harness_floor
    service = level.service_ms or {}
    return (
        f"{what}: achieved {level.achieved_qps:.4g}/s, p50 {p50} ms, p99 {p99} ms, "
        f"{level.completed}/{level.sent} completed, {level.failed} failed, "
        f"{level.timed_out} timed out"
        + (f", {level.retried} retried" if level.retried else "")
        + (f", {level.reconnects} reconnects" if level.reconnects else "")
        + ("" if service.get("p50") is None else f"; service p50 {service['p50']:.3g} ms")
        + ("" if floor is None else
           f"; harness floor p50 {floor.p50_ms:.3g} ms"
           + ("" if floor.p99_ms is None else f", p99 {floor.p99_ms:.3g} ms"))
    )


def saturating_concurrency(harness: UnderTest) -> int:
    """A concurrency that keeps the server busy (for the harness: twice what its instances
    serve at once)."""
    return harness.saturating_concurrency()


def _probe(sweep: _Sweep) -> float:
    """The capacity: the closed-loop probe's achieved rate, its concurrency doubled while that
    still pays where the server's saturation is not known (module docstring)."""
    concurrency = saturating_concurrency(sweep.harness)
    best = sweep.closed(concurrency, probe=True).achieved_qps
    while not sweep.harness.saturation_known and concurrency < PROBE_MAX_CONCURRENCY:
        concurrency *= 2
        rate = sweep.closed(concurrency, probe=True).achieved_qps
        gained = rate > best * (1.0 + PROBE_GAIN)
        best = max(best, rate)
        if not gained:
            break
    return best


def _leans_within(level: LoadLevel, slo_ms: float) -> bool:
    """Which way a level points the search: its p99 (or, where it does not stand, its
    estimate) within the SLO and its failures within the rule."""
    p99 = level.p99_estimate_ms
    return p99 is not None and p99 <= slo_ms and level.failures_ok()


def _unsure(level: LoadLevel, slo_ms: float) -> bool:
    """A miss, or a pass whose p99 interval reaches past the SLO."""
    high = level.p99_ci_ms[1]
    return not _leans_within(level, slo_ms) or (high is not None and high > slo_ms)


def _decide(sweep: _Sweep, rate: float, slo_ms: float) -> bool:
    """Whether ``rate`` is within the SLO: one level, or the majority of up to three where the
    first is unsure (module docstring)."""
    first = sweep.open(rate)
    votes = [_leans_within(first, slo_ms)]
    if sweep.scenario.confirm and _unsure(first, slo_ms):
        votes.append(_leans_within(sweep.open(rate), slo_ms))
        if votes[0] != votes[1]:
            votes.append(_leans_within(sweep.open(rate), slo_ms))
    return 2 * sum(votes) > len(votes)


def _search(sweep: _Sweep, slo_ms: float) -> tuple[float | None, set[float]]:
    """The SLO search of the module docstring: the capacity it probed, and the rates it
    decided are beyond the SLO."""
    capacity = _probe(sweep)
    beyond: set[float] = set()
    if capacity <= 0:
        return None, beyond
    lo, hi = 0.0, capacity
    for _ in range(SEARCH_STEPS):
        rate = (lo + hi) / 2.0
        if _decide(sweep, rate, slo_ms):
            lo = rate
        else:
            hi = rate
            beyond.add(rate)
    return capacity, beyond


def _unstood(levels: tuple[LoadLevel, ...]) -> str | None:
    """One note for the levels whose p99 did not stand, and how long a level would need."""
    short = [lv for lv in levels if "p99" in lv.needs]
    if not short:
        return None
    need = short[0].needs["p99"]
    seconds = max(need / (lv.offered_qps or lv.achieved_qps or math.inf) for lv in short)
    longer = (f": a level needs about {seconds:.3g} s at the slowest of their rates "
              f"(--level-seconds {math.ceil(seconds)})" if math.isfinite(seconds) else "")
    return (
        f"{len(short)} of {len(levels)} level(s) had fewer than {need} requests, too few for "
        f"their p99 to stand (10 beyond it): it is not shown and they answer no SLO{longer}"
    )


def measure_on(
    harness: UnderTest,
    scenario: LoadScenario,
    *,
    progress: Callable[[str], None] | None = None,
    recorder: Any = None,
) -> LoadResult:
    """:func:`measure_load` on a harness already started (it stays started)."""
    sweep = _Sweep(harness, scenario, progress, recorder)
    capacity, beyond = None, set()
    for concurrency in scenario.concurrency:
        sweep.closed(concurrency)
    for rate in scenario.rates:
        sweep.open(rate)
    if scenario.searching:
        capacity, beyond = _search(sweep, scenario.slo_ms)  # type: ignore[arg-type]
    answer = None
    if scenario.slo_ms is not None:
        opened = [lv for lv in sweep.levels if lv.scenario == "open"]
        answer = slo_answer(opened or sweep.levels, scenario.slo_ms, beyond)
        if scenario.floor_at_answer and answer is not None:
            _floor_at_answer(sweep, answer)
    levels = tuple(sweep.levels)
    unstood = _unstood(levels)
    if unstood:
        sweep.notes.append(unstood)
    result = LoadResult(
        config=harness.config,
        layout=harness.layout,
        target=harness.target,
        levels=levels,
        slo_ms=scenario.slo_ms,
        max_qps_at_slo=answer,
        capacity_qps=capacity,
        notes=tuple(sweep.notes),
        memory=harness.memory(),
        infer_requests=tuple(getattr(harness, "infer_requests", tuple)()),
        batch=sweep.info().get("batch"),
    )
    if recorder is not None:
        recorder.finish_trial(sweep.trial_id, "ok", {**sweep.info(), "result": result.to_dict()})
    return result


def _floor_at_answer(sweep: _Sweep, answer: float) -> None:
    """The answering level's harness floor, measured now at its load, kept in its place."""
    for i, (level, load) in enumerate(zip(sweep.levels, sweep.loads, strict=True)):
        if level.scenario == "open" and level.achieved_qps == answer and level.within(
            sweep.scenario.slo_ms or 0.0
        ):
            floor = sweep.floor(load, every=True)
            sweep.levels[i] = dataclasses.replace(level, harness_floor=floor)
            note = floor_note(sweep.levels[i])
            if note:
                sweep.notes.append(note)
            return


def check_layout(config: Config, layout: ServingLayout) -> None:
    """Raise :class:`UserError` for a layout this config cannot be served with."""
    for flag, value in (("streams", layout.streams), ("hint", layout.hint)):
        if value and not config.runtime.startswith(OPENVINO_PREFIX):
            raise UserError(
                f"{'streams are' if flag == 'streams' else 'the performance hint is'} "
                f"OpenVINO's; this config runs {config.runtime}: add --set "
                f"runtime=openvino-f32 or leave --{flag} out."
            )


def measure_load(
    workload: Mapping[str, Any],
    config: Config,
    layout: ServingLayout,
    scenario: LoadScenario,
    *,
    progress: Callable[[str], None] | None = None,
    recorder: Any = None,
    timeout_s: float = 120.0,
    memory_limit_bytes: int | None = None,
    environ: Mapping[str, str] | None = None,
    ops_s: float | None = None,
) -> LoadResult:
    """Serve ``workload`` under ``config`` with ``layout`` and offer it ``scenario``'s load
    (module docstring). ``timeout_s`` bounds each instance's start; with ``ops_s``, the
    result's ``ops`` is one instance's op profile of about that many seconds of calls, taken
    after the levels (and after the memory was read)."""
    check_layout(config, layout)
    if not scenario.concurrency and not scenario.rates and scenario.slo_ms is None:
        scenario = dataclasses.replace(scenario, concurrency=(1,))
    harness = Harness(
        workload,
        config,
        layout,
        timeout_s=timeout_s,
        memory_limit_bytes=memory_limit_bytes,
        environ=environ,
    )
    with harness:
        result = measure_on(harness, scenario, progress=progress, recorder=recorder)
        if ops_s:
            result = dataclasses.replace(result, ops=profile_after_levels(harness, ops_s))
        return result


def profile_after_levels(harness: Harness, seconds: float) -> dict[str, Any]:
    """The op profile of about ``seconds`` of calls in the first live instance, once it has
    answered every request it held (an answer arriving during the profile would be read as
    the profile's); ``{"available": False, "reason"}`` where it cannot be had."""
    live = [inst for inst in harness.instances if inst.alive]
    if not live:
        return _no_profile("no instance was alive after the levels")
    inst = live[0]
    deadline = time.monotonic() + harness.timeout_s
    while inst.held and inst.alive and time.monotonic() < deadline:
        harness.poll(0.1)  # the levels are over: these answers are counted nowhere
    if inst.held or not inst.alive:
        return _no_profile(f"instance {inst.index} did not finish the levels' requests")
    try:
        return inst.worker.profile(seconds)
    except WorkerFailed as exc:
        return _no_profile(f"the profile failed: {exc.reason}")


def _no_profile(reason: str) -> dict[str, Any]:
    return {"available": False, "reason": reason, "ops": [], "op_types": []}


def search_slo(
    workload: Mapping[str, Any],
    config: Config,
    layout: ServingLayout,
    slo_ms: float,
    scenario: LoadScenario | None = None,
    **kwargs: Any,
) -> LoadResult:
    """The highest rate within ``slo_ms`` (the search of the module docstring): ``scenario``'s
    level lengths and timeout, its rates and concurrency levels left out."""
    base = scenario or LoadScenario()
    searching = dataclasses.replace(base, concurrency=(), rates=(), slo_ms=slo_ms)
    return measure_load(workload, config, layout, searching, **kwargs)
