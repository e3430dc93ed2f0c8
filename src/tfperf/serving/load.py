"""Measuring a layout under load: the sweep of levels, the SLO search, and their record.

Contract:

- :class:`LoadScenario` (frozen) says what load to offer: closed-loop ``concurrency`` levels,
  open-loop ``rates`` (requests per second, Poisson arrivals) and an optional ``slo_ms``. Each
  level runs until at least ``requests`` requests were sent *and* ``seconds`` passed, never
  longer than ``max_seconds``; a request unanswered ``timeout_s`` after its arrival is timed
  out. Bad values raise :class:`~tfperf.core.errors.UserError`.
- :func:`measure_load` starts a :class:`tfperf.serving.harness.Harness` for (workload, config,
  layout), offers the closed levels, then the open ones, and returns a
  :class:`tfperf.serving.levels.LoadResult`. With ``slo_ms`` it also answers
  ``max_qps_at_slo``: over the given rates when there are any; otherwise by the SLO search:
  a closed-loop probe at a saturating concurrency measures the capacity, then
  :data:`SEARCH_STEPS` open-loop levels bisect the rate between 0 and that capacity (each
  level within the SLO raises the lower end, each beyond it lowers the upper one; with
  ``confirm_misses`` a level beyond it is measured once more first, and either within counts,
  since one stall of a shared machine can push a single level's p99 over). The answer is the
  achieved rate of the highest offered rate within the SLO
  (:func:`tfperf.serving.levels.slo_answer`). :func:`search_slo` is that search by name.
- A layout with ``streams`` for a runtime other than OpenVINO raises
  :class:`~tfperf.core.errors.UserError`.
- Before each level, an instance that died is restarted (:meth:`Harness.restart_dead`) and the
  result's ``notes`` say which died, why, and how many requests it lost; the levels already
  measured are kept.
- :func:`measure_on` measures any server under test (:class:`UnderTest`: the harness, or a
  server the user runs, :mod:`tfperf.serving.remote`) with the same levels and search. A level
  where the generator itself may have been the limit
  (:func:`tfperf.serving.levels.generator_limited`) adds a note saying so.
- With ``floor`` (the default), each level of a :class:`Harness` is preceded by its harness
  floor (:func:`tfperf.serving.floor.measure_floor`, once per distinct load), kept as the
  level's ``harness_floor``, with a note where it is a real share of the level's p50
  (:func:`tfperf.serving.levels.floor_note`). A server tfperf did not start has none.
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
    LoadLevel,
    LoadResult,
    floor_note,
    generator_limited,
    level_of,
    slo_answer,
)

SEARCH_STEPS = 5
"""Open-loop levels of the SLO search after its capacity probe (1/32 of the capacity apart)."""
ROLE = "serving"


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
    confirm_misses: bool = True
    """The SLO search measures a level beyond the SLO once more before it lowers the rate."""
    floor: bool = True
    """Each level of a served layout is preceded by its harness floor (module docstring)."""

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

    def label(self) -> str: ...

    def sweep_info(self) -> dict[str, Any]: ...

    def saturating_concurrency(self) -> int: ...

    def restart_dead(self) -> int: ...

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
        self.notes: list[str] = []
        self.floors: dict[tuple[str, float], HarnessFloor | None] = {}
        self.trial_id: int | None = None
        if recorder is not None:
            self.trial_id = recorder.trial(harness.label(), harness.config.to_dict(), ROLE)
            recorder.trial_info(self.trial_id, self.info())

    def info(self) -> dict[str, Any]:
        return {**self.harness.sweep_info(), "scenario": self.scenario.to_dict()}

    def level(self, load: OpenLoop | ClosedLoop) -> LoadLevel:
        if self.harness.restart_dead():
            self.notes.append("the instances that died were restarted before the next level")
        seen = len(self.harness.faults)
        floor = self.floor(load)
        record = run_level(self.harness, load, self.scenario.timeout_s)
        if isinstance(load, OpenLoop):
            level = level_of(record, offered_qps=load.rate, harness_floor=floor)
        else:
            level = level_of(record, concurrency=load.concurrency, harness_floor=floor)
        retried = getattr(self.harness, "retried", None)  # a remote server's resends
        if retried is not None:
            level = dataclasses.replace(level, retried=retried())
        self.levels.append(level)
        if self.recorder is not None:
            samples = record.latencies_s + record.waited_s
            self.recorder.block(self.trial_id, samples, "load", level.to_dict())
        self.progress(describe_level(level))
        for note in (generator_limited(level), floor_note(level), *self.harness.faults[seen:]):
            if note:
                self.notes.append(note)
                self.progress(note)
        return level

    def floor(self, load: OpenLoop | ClosedLoop) -> HarnessFloor | None:
        """The harness floor at ``load``, measured once per distinct load (``None`` without
        one: a server tfperf did not start, or ``floor`` off)."""
        if not self.scenario.floor or not isinstance(self.harness, Harness):
            return None
        key = ("open", load.rate) if isinstance(load, OpenLoop) else ("closed", load.concurrency)
        if key not in self.floors:
            self.floors[key] = measure_floor(self.harness, load, self.scenario.timeout_s)
        return self.floors[key]

    def closed(self, concurrency: int) -> LoadLevel:
        s = self.scenario
        return self.level(ClosedLoop(concurrency, s.requests, s.seconds, s.max_seconds))

    def open(self, rate: float) -> LoadLevel:
        s = self.scenario
        return self.level(
            OpenLoop(rate, s.requests, s.seconds, s.max_seconds, seed=s.seed + len(self.levels))
        )


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
    return (
        f"{what}: achieved {level.achieved_qps:.4g}/s, p50 {p50} ms, p99 {p99} ms, "
        f"{level.completed}/{level.sent} completed, {level.failed} failed, "
        f"{level.timed_out} timed out"
        + (f", {level.retried} retried" if level.retried else "")
        + ("" if floor is None else
           f"; harness floor p50 {floor.p50_ms:.3g} ms, p99 {floor.p99_ms:.3g} ms")
    )


def saturating_concurrency(harness: UnderTest) -> int:
    """A concurrency that keeps the server busy (for the harness: twice what its instances
    serve at once)."""
    return harness.saturating_concurrency()


def _search(sweep: _Sweep, slo_ms: float) -> float | None:
    """The SLO search of the module docstring; the capacity it probed."""
    probe = sweep.closed(saturating_concurrency(sweep.harness))
    capacity = probe.achieved_qps
    if capacity <= 0:
        return None
    lo, hi = 0.0, capacity
    for _ in range(SEARCH_STEPS):
        rate = (lo + hi) / 2.0
        within = sweep.open(rate).within(slo_ms)
        if not within and sweep.scenario.confirm_misses:
            within = sweep.open(rate).within(slo_ms)
        if within:
            lo = rate
        else:
            hi = rate
    return capacity


def measure_on(
    harness: UnderTest,
    scenario: LoadScenario,
    *,
    progress: Callable[[str], None] | None = None,
    recorder: Any = None,
) -> LoadResult:
    """:func:`measure_load` on a harness already started (it stays started)."""
    sweep = _Sweep(harness, scenario, progress, recorder)
    capacity = None
    for concurrency in scenario.concurrency:
        sweep.closed(concurrency)
    for rate in scenario.rates:
        sweep.open(rate)
    if scenario.searching:
        capacity = _search(sweep, scenario.slo_ms)  # type: ignore[arg-type]
    levels = tuple(sweep.levels)
    answer = None
    if scenario.slo_ms is not None:
        opened = [lv for lv in levels if lv.scenario == "open"]
        answer = slo_answer(opened or list(levels), scenario.slo_ms)
    short = [lv for lv in levels if lv.sent < scenario.requests]
    if short:
        sweep.notes.append(
            f"{len(short)} level(s) sent fewer than {scenario.requests} requests within "
            f"{scenario.max_seconds:g} s: their tail percentiles are rough"
        )
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
