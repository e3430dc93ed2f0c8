"""Kinds of machine and outliers, from fleet runs in a real store (no cluster needed).

The store holds what ``tfperf fleet bench`` files: a fleet run with one trial per node (its
doctor document, the id of the run it measured) and each node's bench run with its blocks.
"""

from __future__ import annotations

import numpy as np

from tfperf.fleet.kinds import differing_findings, kind_of
from tfperf.fleet.matrix import fleet_matrix
from tfperf.store import Store


def doctor(cores: int = 2, findings: tuple[str, ...] = ("isa-gap",), tf: str = "2.21.0") -> dict:
    return {
        "machine": {
            "fingerprint": f"hw-{cores}",
            "cpu": {"model": "AMD EPYC", "microarchitecture": "zen5"},
            "cores": {"usable": cores, "cgroup_quota": None},
            "memory": {"total_bytes": 16 * 2**30},
        },
        "install": {"tf_version": tf, "distribution": {"name": "tensorflow-cpu"}},
        "findings": [{"id": f, "severity": "warn"} for f in findings],
    }


def test_hosts_alike_are_one_kind_and_quota_or_install_makes_another():
    same = kind_of(doctor()), kind_of(doctor())
    assert same[0] == same[1]
    assert kind_of(doctor(cores=4)).id != same[0].id
    assert kind_of(doctor(tf="2.20.0")).id != same[0].id
    assert "2 CPUs" in same[0].description and "TF 2.21.0" in same[0].description
    assert kind_of(None) is None


def test_the_findings_that_set_a_host_apart_from_its_kind_are_named():
    mine = doctor(findings=("governor-powersave",))
    others = [doctor(findings=("isa-gap",)), doctor(findings=("isa-gap", "x"))]
    assert differing_findings(mine, others) == {
        "only_here": ["governor-powersave"],
        "missing_here": ["isa-gap"],
    }


def _fleet_bench(store: Store, nodes: dict[str, tuple[dict, float]]) -> int:
    """A fleet-bench run whose nodes measured ``mlp`` at the given median seconds per call."""
    rng = np.random.default_rng(0)
    workload = {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1}
    fleet = store.new_run("fleet-bench", "tfperf fleet bench", workload, {}, {})
    for name, (doc, seconds) in nodes.items():
        run = store.new_run("bench", "tfperf bench", workload, {}, {}, {"host": name})
        trial = store.new_trial(run, "default", {}, "baseline")
        for _ in range(12):
            store.add_block(trial, list(seconds * rng.uniform(0.98, 1.02, 20)), "steady")
        store.finish_trial(trial, "ok", {}, None)
        store.finish_run(run, "ok", {})
        info = {
            "node_id": name * 8,
            "host": name,
            "status": "ok",
            "runs": {"bench": run},
            "doctor": doc,
        }
        node = store.new_trial(fleet, f"{name} ({name * 8})", {}, "node")
        store.finish_trial(node, "ok", info, None)
    store.finish_run(fleet, "ok", {})
    return fleet


def test_a_host_slower_than_its_kind_is_an_outlier_with_the_findings_that_differ(store_path):
    with Store.open(store_path) as store:
        fleet = _fleet_bench(
            store,
            {
                "a": (doctor(), 0.001),
                "b": (doctor(), 0.001),
                "c": (doctor(findings=("governor-powersave", "isa-gap")), 0.0015),
                "d": (doctor(cores=8), 0.0005),
            },
        )
        matrix = fleet_matrix(store, [fleet])
    assert matrix["columns"] == ["mlp (tiny, batch 1)"]
    assert {
        r["host"]: round(r["cells"]["mlp (tiny, batch 1)"]["p50_ms"], 2) for r in matrix["rows"]
    } == {"a": 1.0, "b": 1.0, "c": 1.5, "d": 0.5}
    (outlier,) = matrix["outliers"]
    assert outlier["host"] == "c" and outlier["speedup"]["verdict"] == "slower"
    assert outlier["findings"]["only_here"] == ["governor-powersave"]
    # The 8-core host is faster, but alone in its kind: nothing to compare it with.
    assert any("has one node (d (dddddddd))" in n for n in matrix["notes"])
