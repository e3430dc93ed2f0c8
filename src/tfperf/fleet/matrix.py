"""The host x workload matrix of fleet runs, and the hosts slower than their kind.

Contract:

- :func:`fleet_matrix` reads fleet runs back from the store (their node trials, each node's
  doctor document and the runs it measured) and returns a JSON-able document: ``kinds`` (id,
  description, nodes), ``columns`` (one per workload and config measured: ``mlp (tiny, batch
  1)``, ``... [onednn=off]``), ``rows`` (one per node: its name, host, node id, kind, status
  and per column the median ms per call and the stored run's id), and ``outliers``.
- An outlier is a node significantly slower than the other nodes of its kind on the same
  column: its steady blocks' medians against theirs pooled,
  :func:`tfperf.benchmark.unpaired_speedup` (a Mann-Whitney test and a size threshold, so both
  significance and size count), verdict ``slower``. Each names the speedup (the kind's time
  over the node's: below 1 is slower) and the doctor findings that differ between the node
  and the rest of its kind (:func:`tfperf.fleet.kinds.differing_findings`). A kind of one node
  has no outliers; the matrix says so in ``notes``.
"""

from __future__ import annotations

import statistics
from typing import Any

from tfperf.benchmark import unpaired_speedup
from tfperf.core.errors import UserError
from tfperf.fleet.kinds import differing_findings, kind_of
from tfperf.report.html import block_medians, describe_workload

DEFAULT_THRESHOLD = 0.05
"""A node counts as an outlier when it is at least this much slower than its kind."""


def _doctor(run_kind: str, info: dict[str, Any]) -> dict[str, Any] | None:
    return info.get("result") if run_kind == "fleet-doctor" else info.get("doctor")


def _cells(store: Any, info: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Column -> ``{p50_ms, run_id, blocks}`` for every ok trial of the node's measured runs."""
    cells: dict[str, dict[str, Any]] = {}
    for run_id in (info.get("runs") or {}).values():
        loaded = store.load_run(run_id)
        workload = describe_workload(loaded["run"].get("workload"))
        for trial in loaded["trials"]:
            if trial["status"] != "ok" or not trial["samples_s"]:
                continue
            column = workload + ("" if trial["label"] == "default" else f" [{trial['label']}]")
            cells[column] = {
                "p50_ms": statistics.median(trial["samples_s"]) * 1e3,
                "run_id": run_id,
                "blocks": block_medians(trial),
            }
    return cells


def _rows(store: Any, fleet_ids: list[int]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    kinds: dict[str, Any] = {}
    for fleet_id in fleet_ids:
        loaded = store.load_run(fleet_id)
        run_kind = str(loaded["run"]["kind"])
        if not run_kind.startswith("fleet-"):
            raise UserError(
                f"run {fleet_id} is a {run_kind} run, not a fleet run; "
                "`tfperf history` lists the fleet-bench runs."
            )
        for trial in loaded["trials"]:
            info = trial["info"] or {}
            row = rows.setdefault(
                trial["label"],
                {
                    "node": trial["label"],
                    "host": info.get("host"),
                    "node_id": info.get("node_id"),
                    "kind": None,
                    "status": info.get("status"),
                    "reason": info.get("reason"),
                    "cells": {},
                    "doctor": None,
                },
            )
            doc = _doctor(run_kind, info)
            kind = kind_of(doc)
            if kind is not None:
                row.update(kind=kind.id, doctor=doc)
                kinds.setdefault(kind.id, {"id": kind.id, "description": kind.description})
            row["cells"].update(_cells(store, info))
    return list(rows.values()), kinds


def _outliers(rows: list[dict[str, Any]], columns: list[str], threshold: float) -> list[dict]:
    found = []
    for row in rows:
        peers = [r for r in rows if r is not row and r["kind"] and r["kind"] == row["kind"]]
        for column in columns:
            mine = row["cells"].get(column)
            theirs = [p for p in peers if column in p["cells"]]
            if not mine or not theirs:
                continue
            pooled = [m for p in theirs for m in p["cells"][column]["blocks"]]
            speedup = unpaired_speedup(pooled, mine["blocks"], threshold)
            if speedup["verdict"] != "slower":
                continue
            found.append(
                {
                    "node": row["node"],
                    "host": row["host"],
                    "kind": row["kind"],
                    "column": column,
                    "speedup": speedup,
                    "findings": differing_findings(row["doctor"], [p["doctor"] for p in theirs]),
                }
            )
    return found


def fleet_matrix(
    store: Any, fleet_ids: list[int], threshold: float = DEFAULT_THRESHOLD
) -> dict[str, Any]:
    """The matrix document of the fleet runs ``fleet_ids`` (module docstring)."""
    rows, kinds = _rows(store, fleet_ids)
    columns = sorted({c for r in rows for c in r["cells"]})
    for kind in kinds.values():
        kind["nodes"] = [r["node"] for r in rows if r["kind"] == kind["id"]]
    notes = [
        f"kind {k['id']} has one node ({k['nodes'][0]}): nothing to compare it with"
        for k in kinds.values()
        if len(k["nodes"]) == 1
    ]
    outliers = _outliers(rows, columns, threshold)
    for row in rows:
        row.pop("doctor")
        for cell in row["cells"].values():
            cell.pop("blocks")
    return {
        "fleet_runs": fleet_ids,
        "kinds": list(kinds.values()),
        "columns": columns,
        "rows": rows,
        "outliers": outliers,
        "threshold": threshold,
        "notes": notes,
    }
