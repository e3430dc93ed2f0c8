"""``tfperf bench`` under load as a library function: layouts measured, recorded, summarised.

Contract:

- :func:`run_load` measures one workload under one config with each of ``layouts`` in turn
  (:func:`tfperf.serving.load.measure_load`), records the run in the store as kind ``load``
  (a trial per layout, a ``load`` block per level, committed as each level ends), and returns
  the document ``tfperf bench --json`` prints for it::

    {"schema_version", "run_id", "kind": "load", "workload", "machine", "config",
     "scenario", "slo_ms", "max_qps_at_slo", "best_layout",
     "generator": "where the load generator runs",
     "levels": [LoadLevel.to_dict() + {"layout"}],
     "layouts": [LoadResult.to_dict()], "notes": [...]}

  ``max_qps_at_slo`` is the highest of the layouts' answers (``None`` without an SLO or when
  no layout meets it) and ``best_layout`` the label of the layout that gave it.
- A layout whose instances cannot start for a reason the user caused raises
  :class:`~tfperf.core.errors.UserError` (the run is stored as ``failed``); one whose
  instances crash at start is a note, and the other layouts are measured. Ctrl-C stores the
  run as ``interrupted`` with every level finished so far and raises :class:`LoadInterrupted`
  (a ``KeyboardInterrupt`` naming the run and how many levels it keeps).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tfperf.core.config import Config
from tfperf.core.serving import ServingLayout
from tfperf.machine.facts import collect_machine, machine_summary
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
) -> dict[str, Any]:
    """The ``levels`` / ``max_qps_at_slo`` part of the document (module docstring)."""
    answered = [r for r in results if r.max_qps_at_slo is not None]
    best = max(answered, key=lambda r: r.max_qps_at_slo or 0.0) if answered else None
    return {
        "config": config.to_dict(),
        "scenario": scenario.to_dict(),
        "slo_ms": scenario.slo_ms,
        "max_qps_at_slo": best.max_qps_at_slo if best else None,
        "best_layout": best.label() if best else None,
        "generator": generator,
        "levels": [
            {"layout": r.label(), **lv.to_dict()} for r in results for lv in r.levels
        ],
        "layouts": [r.to_dict() for r in results],
        "notes": [f"{r.label()}: {note}" for r in results for note in r.notes]
        + list(failed),
    }


def run_load(
    workload: Mapping[str, Any],
    config: Config,
    layouts: Sequence[ServingLayout],
    scenario: LoadScenario,
    *,
    store: Any,
    command: str = "bench",
    progress: Callable[[str], None] | None = None,
    timeout_s: float = 120.0,
    memory_limit_bytes: int | None = None,
) -> dict[str, Any]:
    """Measure, record and summarise (module docstring); ``store`` is an open Store."""
    machine = collect_machine()
    settings = {"scenario": scenario.to_dict(), "layouts": [lay.to_dict() for lay in layouts]}
    results: list[LoadResult] = []
    failed: list[str] = []
    with RunRecorder(store, KIND, command, dict(workload), machine, settings) as run:
        try:
            for layout in layouts:
                if progress is not None:
                    progress(f"layout {layout.label()}:")
                try:
                    result = measure_load(
                        workload,
                        config,
                        layout,
                        scenario,
                        progress=progress,
                        recorder=run,
                        timeout_s=timeout_s,
                        memory_limit_bytes=memory_limit_bytes,
                    )
                except WorkerFailed as exc:  # this layout could not serve; the others may
                    failed.append(f"{layout.label()}: its instances could not start ({exc.reason})")
                    continue
                results.append(result)
        except KeyboardInterrupt as exc:
            run.finish("interrupted", load_document(results, scenario, config, failed))
            raise LoadInterrupted(run.run_id, levels_kept(store, run.run_id)) from exc
        doc = load_document(results, scenario, config, failed)
        run.finish("ok" if not failed else ("partial" if results else "failed"), doc)
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run.run_id,
        "kind": KIND,
        "workload": dict(workload),
        "machine": machine_summary(machine),
        **doc,
    }
