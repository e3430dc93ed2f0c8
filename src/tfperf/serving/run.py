"""``tfperf bench`` under load as a library function: layouts measured, recorded, summarised.

Contract:

- :func:`run_load` measures one workload under one config with each of ``layouts`` in turn
  (:func:`tfperf.serving.load.measure_load`), records the run in the store as kind ``load``
  (a trial per layout, a ``load`` block per level, committed as each level ends), and returns
  the document ``tfperf bench --json`` prints for it::

    {"schema_version", "run_id", "kind": "load", "workload", "machine", "config",
     "scenario", "slo_ms", "max_qps_at_slo", "best_layout", "cost",
     "generator": "where the load generator runs",
     "levels": [LoadLevel.to_dict() + {"layout"}],
     "layouts": [LoadResult.to_dict()], "notes": [...]}

  ``max_qps_at_slo`` is the highest of the layouts' answers (``None`` without an SLO or when
  no layout meets it) and ``best_layout`` the label of the layout that gave it.
- :class:`LoadRunOptions` (frozen) holds what a load run takes besides its load and layouts:
  each instance's start ``timeout_s`` and ``memory_limit_bytes``, ``price_per_hour``, ``ops``
  and ``peak``. With a price, every level (in ``levels`` and in each layout's) and the document
  itself (at ``max_qps_at_slo``) carry ``cost: {"price_per_hour", "per_million_requests",
  "per_million_samples", "batch", "basis"}``: the price of an hour spread over the requests
  answered in it (a level's achieved rate), each request ``batch`` samples, as the server tune
  prices a layout (:func:`load_cost`); ``None`` where nothing was answered. With ``ops``, each
  layout's first instance profiles about :data:`tfperf.report.ops.OPS_SECONDS` of calls after
  its levels (the worker that served them, its runtime already prepared; its memory was read
  before), and the layout's ``ops`` is that profile read against this machine's peak
  (:func:`tfperf.report.ops.read_roofline`; without ``peak``, no peak is probed and the
  roofline has none).
- :func:`refuse_dropped` is the one rule for options a load run cannot apply (a steady-state
  measurement's, training's, or those of the other kind of server under test): each is one
  sentence (:class:`~tfperf.core.errors.UserError`) naming it, before anything starts, so no
  option given is ignored; :func:`refuse_without_load` does the same for a load level's or
  ``--url``'s options given to a run that is not under load.
- A layout whose instances cannot start for a reason the user caused raises
  :class:`~tfperf.core.errors.UserError` (the run is stored as ``failed``); one whose
  instances crash at start is a note, and the other layouts are measured. Ctrl-C stores the
  run as ``interrupted`` with every level finished so far and raises :class:`LoadInterrupted`
  (a ``KeyboardInterrupt`` naming the run and how many levels it keeps).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tfperf.core.config import Config
from tfperf.core.errors import UserError
from tfperf.core.memory import check_limits, cost
from tfperf.core.serving import ServingLayout
from tfperf.machine.facts import collect_machine, machine_summary
from tfperf.peak import get_peak
from tfperf.report.ops import OPS_SECONDS, read_roofline
from tfperf.runner.handle import WorkerFailed
from tfperf.runner.recorder import RunRecorder
from tfperf.serving.levels import LoadResult
from tfperf.serving.load import LoadScenario, measure_load

SCHEMA_VERSION = 1
KIND = "load"
GENERATOR = (
    "the load generator runs in the tfperf process, unpinned, on the same cores as the "
    "instances; generator_cpu is its own CPU use per level (share of one core)"
)


@dataclass(frozen=True)
class LoadRunOptions:
    """What a load run takes besides its load and layouts (module docstring)."""

    timeout_s: float = 120.0
    """Seconds each instance may take to start (and to answer one op profile)."""
    memory_limit_bytes: int | None = None
    """An instance whose RSS exceeds this is killed (its layout is then a note)."""
    price_per_hour: float | None = None
    ops: bool = False
    peak: bool = True
    """With ``ops``: read the profile against this machine's measured peak."""
    python: str = sys.executable

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise UserError(f"--timeout must be a positive number, not {self.timeout_s}.")
        check_limits(self.memory_limit_bytes, self.price_per_hour)


def load_cost(price_per_hour: float | None, qps: float | None, batch: int | None,
              basis: str) -> dict[str, Any] | None:
    """What a million requests and a million samples cost when the server answers ``qps``
    requests per second of ``batch`` samples each; ``None`` without a price or an answer."""
    if price_per_hour is None or not qps:
        return None
    samples = batch or 1
    priced = cost(price_per_hour, qps * samples) or {}
    return {**priced, "per_million_requests": price_per_hour / 3600.0 / qps * 1e6,
            "batch": samples, "basis": basis}


_REFUSED_IN_LOAD = {
    "train": "measures training steps, not a served model",
    "mlflow": "does not take a load run yet",
    "budget": "is a steady-state measurement's length; a load run's levels last {level_seconds} "
    "and {level_requests} each",
    "precision": "stops a steady-state measurement early; a load run's levels last "
    "{level_seconds} and {level_requests} each",
    "threshold": "judges a speedup between configs measured side by side; a load run measures "
    "one (compare two load runs with tfperf compare A B)",
    "processes": "restarts a steady-state measurement's worker; a load run's processes are its "
    "{instances}",
    "parallel_start": "starts a steady-state measurement's workers at once; a load run always "
    "starts its instances at once",
    "guard_steps": "guards a training run ({train}); a load run serves the model",
    "validation": "guards a training run ({train}); a load run serves the model",
    "labels": "gives a training run ({train}) its targets; a load run serves the model",
}
_REFUSED_WITH_URL = {
    "timeout": "bounds the start of the instances tfperf serves; with {url}, {request_timeout} "
    "bounds each request",
    "memory_limit": "limits the instances tfperf serves; the server {url} names is not tfperf's "
    "to limit",
    "ops": "profiles the instances tfperf serves; the server {url} names is not tfperf's to "
    "profile (profile the same model without {url})",
    "no_peak": "only applies to {ops}, which profiles the instances tfperf serves, not the "
    "server {url} names",
    "size": "sizes a built-in workload; {url} measures the model its server serves",
}
_URL_ONLY = ("protocol", "model_name", "rest_format", "header", "cacert", "connections")


def refuse_dropped(given: Collection[str], *, remote: bool, spell: Callable[[str], str]) -> None:
    """Raise :class:`UserError` for the first option in ``given`` (option names) that a load
    run (against ``--url`` when ``remote``) cannot apply; ``spell`` writes a name as the
    caller's user typed it (``--no-peak`` or ``no_peak=``)."""
    refused = dict(_REFUSED_IN_LOAD)
    if remote:
        refused |= _REFUSED_WITH_URL
    else:
        refused |= {k: "describes the server {url} names: add {url} or leave it out"
                    for k in _URL_ONLY}
        if "ops" not in given:
            refused["no_peak"] = "skips the peak probe a load run takes only for {ops}'s " \
                                 "roofline: add {ops} or leave it out"
    for name in refused:
        if name in given:
            why = refused[name].format_map(_Spelled(spell))
            raise UserError(f"{spell(name)} {why}: leave it out." if "leave it out" not in why
                            else f"{spell(name)} {why}.")


_LEVEL_LIMITS = ("level_requests", "level_seconds", "request_timeout")


def refuse_without_load(given: Collection[str], spell: Callable[[str], str]) -> None:
    """Raise :class:`UserError` for a load level's or ``--url``'s option in ``given`` when no
    load is asked for (a steady-state run would ignore it)."""
    for name in (*_LEVEL_LIMITS, *_URL_ONLY):
        if name in given:
            level = name in _LEVEL_LIMITS
            template = ("describes a load level: add one of {concurrency}, {rate}, {slo_ms}"
                        if level else "describes the server {url} names: add {url}")
            why = template.format_map(_Spelled(spell))
            raise UserError(f"{spell(name)} {why} or leave it out.")


class _Spelled(dict):
    """``{name}`` in a refusal, written as the caller spells that option."""

    def __init__(self, spell: Callable[[str], str]) -> None:
        super().__init__()
        self.spell = spell

    def __missing__(self, key: str) -> str:
        return self.spell(key)


class LoadInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`run_load` (or a remote run): run ``run_id`` is stored as
    ``interrupted`` with its ``levels`` finished levels."""

    def __init__(self, run_id: int, levels: int) -> None:
        super().__init__(run_id, levels)
        self.run_id = run_id
        self.levels = levels


def levels_kept(store: Any, run_id: int) -> int:
    trials = store.load_run(run_id)["trials"]
    return sum(b["phase"] == "load" for t in trials for b in t["blocks"])


def load_document(
    results: Sequence[LoadResult],
    scenario: LoadScenario,
    config: Config,
    failed: Sequence[str] = (),
    generator: str = GENERATOR,
    price_per_hour: float | None = None,
) -> dict[str, Any]:
    """The ``levels`` / ``max_qps_at_slo`` / ``cost`` part of the document (module docstring)."""
    answered = [r for r in results if r.max_qps_at_slo is not None]
    best = max(answered, key=lambda r: r.max_qps_at_slo or 0.0) if answered else None
    layouts = [_priced(r, price_per_hour) for r in results]
    return {
        "config": config.to_dict(),
        "scenario": scenario.to_dict(),
        "slo_ms": scenario.slo_ms,
        "max_qps_at_slo": best.max_qps_at_slo if best else None,
        "best_layout": best.label() if best else None,
        "cost": load_cost(price_per_hour, best.max_qps_at_slo, best.batch, "max_qps_at_slo")
        if best else None,
        "generator": generator,
        "levels": [
            {"layout": r.label(), **lv} for r, lay in zip(results, layouts, strict=True)
            for lv in lay["levels"]
        ],
        "layouts": layouts,
        "notes": [f"{r.label()}: {note}" for r in results for note in r.notes]
        + list(failed),
    }


def _priced(result: LoadResult, price_per_hour: float | None) -> dict[str, Any]:
    """``result.to_dict()`` with each level's ``cost`` at its achieved rate."""
    out = result.to_dict()
    for level in out["levels"]:
        level["cost"] = load_cost(price_per_hour, level["achieved_qps"], result.batch,
                                  "achieved_qps")
    return out


def run_load(
    workload: Mapping[str, Any],
    config: Config,
    layouts: Sequence[ServingLayout],
    scenario: LoadScenario,
    *,
    store: Any,
    command: str = "bench",
    progress: Callable[[str], None] | None = None,
    options: LoadRunOptions | None = None,
) -> dict[str, Any]:
    """Measure, record and summarise (module docstring); ``store`` is an open Store."""
    options = options or LoadRunOptions()
    machine = collect_machine()
    settings = {"scenario": scenario.to_dict(), "layouts": [lay.to_dict() for lay in layouts],
                "options": dataclasses.asdict(options)}
    results: list[LoadResult] = []
    failed: list[str] = []
    price = options.price_per_hour
    with RunRecorder(store, KIND, command, dict(workload), machine, settings) as run:
        try:
            for layout in layouts:
                if progress is not None:
                    progress(f"layout {layout.label()}:")
                try:
                    result = measure_load(
                        workload, config, layout, scenario, progress=progress, recorder=run,
                        timeout_s=options.timeout_s,
                        memory_limit_bytes=options.memory_limit_bytes,
                        ops_s=OPS_SECONDS if options.ops else None,
                    )
                except WorkerFailed as exc:  # this layout could not serve; the others may
                    failed.append(f"{layout.label()}: its instances could not start ({exc.reason})")
                    continue
                results.append(result)
        except KeyboardInterrupt as exc:
            run.finish("interrupted", load_document(results, scenario, config, failed,
                                                    price_per_hour=price))
            raise LoadInterrupted(run.run_id, levels_kept(store, run.run_id)) from exc
        results = _read_profiles(results, machine, options)
        doc = load_document(results, scenario, config, failed, price_per_hour=price)
        run.finish("ok" if not failed else ("partial" if results else "failed"), doc)
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run.run_id,
        "kind": KIND,
        "workload": dict(workload),
        "machine": machine_summary(machine),
        **doc,
    }


def _read_profiles(results: list[LoadResult], machine: dict[str, Any],
                   options: LoadRunOptions) -> list[LoadResult]:
    """Each layout's op profile read against this machine's peak (probed once, and only when
    a profile is there to read)."""
    if not any(r.ops for r in results):
        return results
    peak = get_peak(machine, python=options.python) if options.peak else None
    return [
        dataclasses.replace(r, ops=read_roofline(dict(r.ops), peak, r.config.precision))
        if r.ops else r
        for r in results
    ]
