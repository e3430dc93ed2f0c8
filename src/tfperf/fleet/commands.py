"""``tfperf fleet doctor | bench | tune | report``: the library functions behind the commands.

Contract:

- Every command joins the cluster (:func:`tfperf.fleet.cluster.connect`), picks its alive
  nodes (a node Ray gives no CPU is listed as ``skipped``), runs one task per node
  (:func:`tfperf.fleet.dispatch.run_on_nodes`) and files each node in the local store as it
  arrives (:class:`tfperf.fleet.record.FleetRecorder`), telling ``on_node`` (a progress line)
  each time. It returns one JSON-able document, :data:`SCHEMA`: ``run_id`` (the fleet run),
  ``command``, ``status`` (``ok``: every node ok; ``partial``; ``failed``: none), ``workload``,
  ``nodes`` (each ``node_id``, ``host``, ``status``, ``reason``, ``result`` -- the node's own
  command's JSON document -- ``runs`` and ``kind``) and ``kinds``.
- :func:`fleet_doctor` runs ``tfperf doctor`` on every node and adds, per kind of machine, the
  findings that differ between its nodes.
- :func:`fleet_bench` runs ``tfperf doctor`` then ``tfperf bench`` on every node (the model
  shipped by :mod:`tfperf.fleet.payload`) and adds the host x workload ``matrix`` with its
  outliers (:mod:`tfperf.fleet.matrix`).
- :func:`fleet_tune` runs the doctor everywhere, groups the nodes by kind, tunes on one node of
  each kind (the first by host name), saves each kind's profile and converted model under
  ``out_dir``, ships them with the model to the other nodes of the kind and measures the
  profile's config against the default there, side by side (``tfperf bench --set ...``). Each
  kind's entry under ``tunes`` says on which nodes the profile holds (``faster`` there too)
  and where it does not, and why.
- :func:`fleet_report` is the matrix of stored fleet runs (the latest ``fleet-bench`` run by
  default).
- Bad input (no cluster named, an unknown node, a fleet run that is not one) raises
  :class:`~tfperf.core.errors.UserError`; a failed node never does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfperf import __version__
from tfperf.core.codeid import code_identity
from tfperf.core.config import Config
from tfperf.core.errors import UserError
from tfperf.fleet import cluster
from tfperf.fleet.cluster import Node
from tfperf.fleet.dispatch import Outcome, run_on_nodes
from tfperf.fleet.kinds import differing_findings, kind_of
from tfperf.fleet.matrix import DEFAULT_THRESHOLD, fleet_matrix
from tfperf.fleet.node import SHIPPED_PROFILE, Job, Step, config_args
from tfperf.fleet.payload import Payload, stage
from tfperf.fleet.record import FleetRecorder
from tfperf.store import Store

SCHEMA = "tfperf-fleet/1"


@dataclass(frozen=True)
class FleetOptions:
    """Where and how a fleet command runs."""

    address: str | None = None
    """The Ray cluster (``None``: ``RAY_ADDRESS``)."""
    nodes: tuple[str, ...] = ()
    """Only these nodes (host names or node id prefixes); all alive nodes when empty."""
    store: str | None = None
    timeout_s: float = 3600.0
    """How long each node's command may take."""
    command: str = "tfperf fleet"
    threshold: float = DEFAULT_THRESHOLD
    on_node: Callable[[dict[str, Any]], None] = field(default=lambda entry: None, compare=False)


@dataclass
class _Fleet:
    """One fleet command while it runs: the cluster, its nodes and the run in the store."""

    ray: Any
    nodes: list[Node]
    skipped: list[Node]
    recorder: FleetRecorder
    options: FleetOptions
    entries: list[dict[str, Any]] = field(default_factory=list)

    def run(
        self,
        jobs: dict[Node, Job],
        payloads: dict[Node, Payload],
        main: str | None,
        extra: Callable[[Outcome], dict[str, Any]] = lambda outcome: {},
    ) -> list[Outcome]:
        """Run the jobs; each outcome is filed as it arrives (not with ``main`` None)."""

        def filed(outcome: Outcome) -> None:
            if main is not None:
                self.file(outcome, main, extra(outcome))

        if not jobs:
            return []
        steps = max(len(job.steps) for job in jobs.values())
        return run_on_nodes(self.ray, jobs, payloads, filed, self.options.timeout_s * steps + 60)

    def file(self, outcome: Outcome, main: str, extra: dict[str, Any]) -> dict[str, Any]:
        entry = self.recorder.node(outcome, main, extra)
        self.entries.append(entry)
        self.options.on_node(entry)
        return entry

    def finish(self, doc: dict[str, Any]) -> dict[str, Any]:
        ok = sum(e["status"] in ("ok", "skipped") for e in self.entries)
        # A node Ray gives no CPU is listed as not measurable, not counted as a failure: a
        # KubeRay head started with --num-cpus=0 would otherwise make every run partial.
        status = "ok" if ok == len(self.entries) else "partial"
        status = "failed" if ok == 0 else status
        doc.update(schema=SCHEMA, run_id=self.recorder.run_id, status=status)
        doc["nodes"] = sorted(self.entries, key=lambda e: (e["host"], e["node_id"]))
        doc["nodes"] += [_skipped(n) for n in self.skipped]
        summary = {"nodes": len(doc["nodes"]), "ok": ok, "kinds": doc.get("kinds", [])}
        self.recorder.finish(status, summary)
        return doc


def _skipped(node: Node) -> dict[str, Any]:
    return {
        **node.to_dict(),
        "status": "skipped",
        "reason": "not measurable: Ray schedules no CPU on this node (a head started with "
        "--num-cpus=0?), and a measurement beside that node's own work would not be one",
        "result": None,
        "runs": {},
    }


def _open(options: FleetOptions, command: str, workload: dict, settings: dict) -> _Fleet:
    ray = cluster.connect(options.address)
    alive = cluster.nodes(ray, options.nodes)
    usable = [n for n in alive if n.cpus >= 1]
    if not usable:
        raise UserError(
            "the Ray cluster has no alive node with a CPU to run on; "
            "check `ray status` on its head."
        )
    store = Store.open(options.store)
    settings = {**settings, "nodes": [n.to_dict() for n in usable], "tfperf": __version__}
    recorder = FleetRecorder(store, command, options.command, workload, settings)
    skipped = [n for n in alive if n.cpus < 1]
    return _Fleet(ray, usable, skipped, recorder, options)


def _job(node: Node, steps: tuple[Step, ...], options: FleetOptions) -> Job:
    return Job(steps, __version__, options.timeout_s, task_cpus=node.cpus,
               tfperf_code=code_identity())


def _kinds(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The kinds of machine among the nodes (``kind`` set on each entry), with the findings
    that differ between the nodes of each."""
    kinds: dict[str, dict[str, Any]] = {}
    docs: dict[str, dict[str, Any]] = {}
    for entry in entries:
        doc = entry["result"] if entry.get("doctor") is None else entry["doctor"]
        kind = kind_of(doc)
        entry["kind"] = None if kind is None else kind.id
        if kind is not None:
            docs[entry["node_id"]] = doc
            item = kinds.setdefault(
                kind.id,
                {"id": kind.id, "description": kind.description, "facts": kind.facts, "nodes": []},
            )
            item["nodes"].append(entry["node_id"])
    for item in kinds.values():
        item["differences"] = {
            nid: diff
            for nid in item["nodes"]
            if any(
                diff := differing_findings(
                    docs[nid], [docs[o] for o in item["nodes"] if o != nid]
                ).values()
            )
        }
    return list(kinds.values())


def fleet_doctor(options: FleetOptions) -> dict[str, Any]:
    """``tfperf fleet doctor`` (module docstring)."""
    fleet = _open(options, "doctor", {}, {})
    with fleet.recorder:
        jobs = {n: _job(n, (Step("doctor"),), options) for n in fleet.nodes}
        fleet.run(jobs, {}, "doctor")
        return fleet.finish({"command": "doctor", "workload": {}, "kinds": _kinds(fleet.entries)})


def _bench_args(config: Config, budget_s: float, extra: tuple[str, ...]) -> tuple[str, ...]:
    """``tfperf bench`` arguments that measure ``config`` against the default."""
    return (*config_args(config), "--budget", f"{budget_s:g}", *extra)


@dataclass(frozen=True)
class BenchSpec:
    """What ``fleet bench`` measures on every node: the workload (a dict of
    :func:`tfperf.modelref.workload_from_args`), the config against the default, and the
    ``tfperf bench`` options passed on as they are (``--processes 1``, ``--no-peak``)."""

    workload: dict[str, Any]
    config: Config = field(default_factory=Config)
    budget_s: float = 30.0
    extra: tuple[str, ...] = ()


def fleet_bench(spec: BenchSpec, options: FleetOptions) -> dict[str, Any]:
    """``tfperf fleet bench`` (module docstring)."""
    payload = stage(spec.workload)
    try:
        fleet = _open(options, "bench", spec.workload, {"config": spec.config.to_dict()})
        with fleet.recorder:
            bench = Step(
                "bench", (*payload.args, *_bench_args(spec.config, spec.budget_s, spec.extra))
            )
            jobs = {n: _job(n, (Step("doctor"), bench), options) for n in fleet.nodes}
            fleet.run(jobs, dict.fromkeys(fleet.nodes, payload), "bench")
            doc = {"command": "bench", "workload": spec.workload, "kinds": _kinds(fleet.entries)}
            doc = fleet.finish(doc)
    finally:
        payload.cleanup()
    with Store.open(options.store) as store:
        doc["matrix"] = fleet_matrix(store, [doc["run_id"]], options.threshold)
    return doc


def fleet_report(
    store_path: str | None, fleet_runs: tuple[str, ...], threshold: float = DEFAULT_THRESHOLD
) -> dict[str, Any]:
    """The matrix of stored fleet runs (default: the latest ``fleet-bench`` run)."""
    with Store.open(store_path, create=False) as store:
        if fleet_runs:
            ids = [int(store.load_run(ref)["run"]["id"]) for ref in fleet_runs]
        else:
            found = [r["id"] for r in store.list_runs(1000) if r["kind"] == "fleet-bench"]
            if not found:
                raise UserError(
                    f"the store {store.path} has no fleet-bench run yet; run `tfperf fleet "
                    "bench` first, or name fleet runs from `tfperf history`."
                )
            ids = found[:1]
        doc = fleet_matrix(store, ids, threshold)
    doc["schema"] = SCHEMA
    return doc


@dataclass(frozen=True)
class TuneSpec:
    """What ``fleet tune`` tunes: the workload, the ``tfperf tune`` options passed on as they
    are (``--quick``, ``--max-trials 4``), the seconds of each verification, and the folder
    where each kind's profile and converted model are saved."""

    workload: dict[str, Any]
    tune_args: tuple[str, ...] = ()
    verify_budget_s: float = 20.0
    out_dir: str = "fleet-tune"


def _doctors(fleet: _Fleet) -> dict[Node, dict[str, Any]]:
    """Every node's doctor document; a node whose doctor fails is filed as failed."""
    jobs = {n: _job(n, (Step("doctor"),), fleet.options) for n in fleet.nodes}
    docs = {}
    for outcome in fleet.run(jobs, {}, None):
        if outcome.ok:
            docs[outcome.node] = outcome.report["steps"]["doctor"]["doc"]
        else:
            fleet.file(outcome, "doctor", {"role": "doctor"})
    return docs


def _save_tune(outcome: Outcome, kind: str, out_dir: Path, payload: Payload) -> dict[str, Any]:
    """Keep a tune's profile and converted model under ``out_dir``; what a verifying node gets
    (the payload with them in ``tuned/``) and the tune's line of the document."""
    step = (outcome.report.get("steps") or {}).get("tune") or {}
    rec = (step.get("doc") or {}).get("recommendation") or {}
    entry: dict[str, Any] = {
        "kind": kind,
        "tuned_on": outcome.node.name,
        "status": outcome.status,
        "reason": outcome.reason,
        "label": rec.get("label"),
        "keep_default": rec.get("keep_default"),
        "speedup": rec.get("speedup"),
        "config": rec.get("config"),
        "verified": [],
    }
    if not outcome.ok or not step.get("profile"):
        return {"entry": entry, "payload": None}
    out_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps(step["profile"], indent=2)
    profile = out_dir / f"{kind}.profile.json"
    profile.write_text(text, encoding="utf-8")
    shipped = payload.copy().add(SHIPPED_PROFILE, text.encode())
    for name, data in (step.get("files") or {}).items():
        if isinstance(data, bytes):
            (out_dir / f"{kind}-model" / name).parent.mkdir(parents=True, exist_ok=True)
            (out_dir / f"{kind}-model" / name).write_bytes(data)
            shipped = shipped.add(f"tuned/model/{name}", data)
    entry.update(
        profile=str(profile),
        artifacts=str(out_dir / f"{kind}-model") if step.get("files") else None,
    )
    return {"entry": entry, "payload": shipped}


def _verdict(outcome: Outcome) -> dict[str, Any]:
    """Whether a tune's config holds on a verifying node: faster than the default there."""
    doc = (outcome.report.get("steps") or {}).get("bench", {}).get("doc") or {}
    speedup = next((c["speedup"] for c in doc.get("comparisons") or []), None)
    verdict = (speedup or {}).get("verdict")
    why = {
        "faster": None,
        "same": "no faster than the default here",
        "slower": "slower than the default here",
        "inconclusive": "too noisy here to tell",
    }
    reason = (
        outcome.reason if not outcome.ok else why.get(str(verdict), "no comparison was measured")
    )
    return {
        "node": outcome.node.name,
        "node_id": outcome.node.node_id,
        "host": outcome.node.host,
        "verdict": verdict,
        "speedup": speedup,
        "holds": verdict == "faster",
        "reason": reason,
    }


def fleet_tune(spec: TuneSpec, options: FleetOptions) -> dict[str, Any]:
    """``tfperf fleet tune`` (module docstring)."""
    payload = stage(spec.workload)
    shipped: list[Payload] = []
    try:
        settings = {"tune_args": list(spec.tune_args), "verify_budget_s": spec.verify_budget_s}
        fleet = _open(options, "tune", spec.workload, settings)
        with fleet.recorder:
            tunes = _tune_kinds(fleet, spec, payload, shipped)
            doc = {"command": "tune", "workload": spec.workload, "tunes": tunes}
            doc["kinds"] = _kinds(fleet.entries)
            return fleet.finish(doc)
    finally:
        for item in [payload, *shipped]:
            item.cleanup()


def _tune_kinds(
    fleet: _Fleet, spec: TuneSpec, payload: Payload, shipped: list[Payload]
) -> list[dict[str, Any]]:
    """Tune once per kind, then verify each kind's profile on its other nodes."""
    docs = _doctors(fleet)
    members: dict[str, list[Node]] = {}
    for node, doc in docs.items():
        kind = kind_of(doc)
        members.setdefault(kind.id if kind else "unknown", []).append(node)
    tuners = {nodes[0]: kind for kind, nodes in members.items()}
    step = Step("tune", (*payload.args, *spec.tune_args))
    jobs = {node: _job(node, (step,), fleet.options) for node in tuners}

    def tuned(outcome: Outcome) -> dict[str, Any]:
        return {"doctor": docs[outcome.node], "role": "tune"}

    saved = {
        tuners[o.node]: _save_tune(o, tuners[o.node], Path(spec.out_dir), payload)
        for o in fleet.run(jobs, dict.fromkeys(jobs, payload), "tune", tuned)
    }
    verify_jobs, payloads = {}, {}
    for kind, nodes in members.items():
        item = saved[kind]
        for node in nodes[1:]:
            if item["payload"] is None or item["entry"]["keep_default"]:
                why = "the tune kept the default" if item["payload"] else "its kind's tune failed"
                skipped = Outcome(node, "skipped", f"not verified: {why}", {})
                item["entry"]["verified"].append(_verdict(skipped))
                fleet.file(skipped, "bench", {"doctor": docs[node], "role": "verify"})
                continue
            # The node measures the config of the profile it was shipped, against the default.
            args = (*payload.args, *_bench_args(Config(), spec.verify_budget_s, ("--no-peak",)))
            step = Step("bench", args, profile=SHIPPED_PROFILE)
            verify_jobs[node] = _job(node, (step,), fleet.options)
            payloads[node] = item["payload"]
    shipped += [s["payload"] for s in saved.values() if s["payload"] is not None]
    kind_of_node = {node: kind for kind, nodes in members.items() for node in nodes}

    def verified(outcome: Outcome) -> dict[str, Any]:
        check = _verdict(outcome)
        saved[kind_of_node[outcome.node]]["entry"]["verified"].append(check)
        return {"doctor": docs[outcome.node], "role": "verify", "verification": check}

    fleet.run(verify_jobs, payloads, "bench", verified)
    return [_holds(s["entry"]) for s in saved.values()]


def _holds(entry: dict[str, Any]) -> dict[str, Any]:
    """Where the kind's profile holds, where it does not (and why), and where it was not
    checked (the tune kept the default, or failed)."""
    checks = entry["verified"]
    skipped = [c for c in checks if c["verdict"] is None and c["reason"].startswith("not ")]
    entry["holds_on"] = [c["node"] for c in checks if c["holds"]]
    entry["does_not_hold_on"] = [
        {"node": c["node"], "reason": c["reason"]}
        for c in checks
        if not c["holds"] and c not in skipped
    ]
    entry["not_verified"] = [{"node": c["node"], "reason": c["reason"]} for c in skipped]
    return entry
