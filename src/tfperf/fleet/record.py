"""A fleet command in the local store, written node by node as the results arrive.

Contract:

- :class:`FleetRecorder` is one run of kind ``fleet-doctor``, ``fleet-bench`` or
  ``fleet-tune`` (a :class:`~tfperf.runner.recorder.RunRecorder`: always closed, Ctrl-C
  recorded as ``interrupted``). :meth:`FleetRecorder.node` files one node's
  :class:`~tfperf.fleet.dispatch.Outcome` the moment it arrives: every run its commands
  measured (a bench, a tune, a verification) becomes a run of the store of its own, tagged with
  the Ray node id, the host and this fleet run (:data:`tfperf.store.RUN_TAGS`), so
  ``tfperf history``, ``report`` and ``compare`` read it like any other; and the fleet run gets
  one trial per node (label: the node's name, role ``node``, status ``ok`` or ``failed`` with
  the reason) whose info holds the node id, host, status, the ids of its runs, its doctor's
  document and each command's own JSON document. A node that died is recorded like that too,
  and the others are kept.
- :func:`import_result` writes a portable result (``--export``'s document) into the store as
  a run through the one run recorder.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfperf.fleet.cluster import Node
from tfperf.fleet.dispatch import Outcome
from tfperf.machine.facts import collect_machine, machine_summary
from tfperf.report.export import RunResult
from tfperf.runner.recorder import RunRecorder

_TRIAL_STATUS = {"ok": "ok", "rejected": "rejected"}


def import_result(store: Any, result: RunResult, tags: Mapping[str, Any]) -> int:
    """Write ``result`` into ``store`` as a run tagged with ``tags``; its id."""
    run = result.run
    recorder = RunRecorder(
        store,
        str(run.get("kind")),
        str(run.get("command")),
        run.get("workload") or {},
        result.machine,
        run.get("settings") or {},
        tags,
    )
    ids: dict[str, int] = {}
    for trial in result.trials:
        trial_id = recorder.trial(trial.label, trial.config, trial.role)
        ids[trial.label] = trial_id
        for block in trial.blocks:
            recorder.block(trial_id, block["samples_s"], block["phase"], block.get("info"))
        info = {"install": trial.install or result.install, "batch": trial.batch}
        status = _TRIAL_STATUS.get(trial.status, "failed")
        recorder.finish_trial(trial_id, status, info, trial.error)
    for trial in result.trials:
        base = (trial.speedup or {}).get("baseline")
        if base in ids:
            recorder.comparison(ids[base], ids[trial.label], trial.speedup or {})
    recorder.finish(str(run.get("status") or "ok"), run.get("summary") or {})
    return recorder.run_id


class FleetRecorder(RunRecorder):
    """One fleet command's run, one trial per node (module docstring)."""

    def __init__(
        self, store: Any, command: str, line: str, workload: Mapping[str, Any], settings: dict
    ) -> None:
        machine = machine_summary(collect_machine())
        super().__init__(store, f"fleet-{command}", line, workload, machine, settings)

    def node(
        self, outcome: Outcome, main: str, extra: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """File one node's outcome; its entry under ``nodes`` of the command's document
        (``result``: the JSON document of its command ``main``)."""
        node: Node = outcome.node
        tags = {"node_id": node.node_id, "host": node.host, "fleet_run": self.run_id}
        steps = outcome.report.get("steps") or {}
        runs = {
            name: import_result(self.store, RunResult.from_dict(step["result"]), tags)
            for name, step in steps.items()
            if step.get("result")
        }
        entry = {
            "node_id": node.node_id,
            "host": node.host,
            "status": outcome.status,
            "reason": outcome.reason,
            "tfperf_version": outcome.report.get("tfperf_version"),
            "tfperf_code": outcome.report.get("tfperf_code"),
            "result": (steps.get(main) or {}).get("doc"),
            "runs": runs,
            "doctor": (steps.get("doctor") or {}).get("doc") if main != "doctor" else None,
            **dict(extra or {}),
        }
        trial_id = self.trial(node.name, {}, "node")
        error = None if outcome.ok else {"reason": outcome.reason, "status": outcome.status}
        self.finish_trial(trial_id, "ok" if outcome.ok else "failed", entry, error)
        return entry
