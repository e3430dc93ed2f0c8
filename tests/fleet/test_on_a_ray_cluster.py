"""``tfperf fleet`` on a real Ray cluster of two nodes on this machine, over loopback only, and
a third node Ray gives no CPU (as a KubeRay head started with ``--num-cpus=0``).

The cluster (``raycluster.LoopbackCluster``) lives in a network namespace of its own where only
loopback is up; the tfperf driver runs in it too. One cluster serves the whole module: a fleet
tune (a doctor on every node, a tune on one node of the kind that picks another runtime, the
profile and its converted model checked on the other), then a fleet bench of the user's own
factory module (shipped to the nodes, not read from the driver's folder) during which the
second node is killed, then the report of what the store kept, then a fleet bench stopped with
Ctrl-C. Everything the module started is killed by pid at the end.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from helpers import require
from raycluster import LoopbackCluster, can_run, descendants

pytestmark = [pytest.mark.tf, pytest.mark.slow]

FACTORY = """
import numpy as np
import tensorflow as tf


def small():
    inp = tf.keras.Input((8,))
    model = tf.keras.Model(inp, tf.keras.layers.Dense(4)(inp))
    return model, np.random.rand(1, 8).astype("float32")
"""


@pytest.fixture(scope="module")
def cluster():
    require(can_run() is None, str(can_run()))
    made = LoopbackCluster()
    try:
        made.add_node()
        made.add_node()
        made.add_node(cpus=0)  # listed, never measured: nothing may run beside its work
        yield made
    finally:
        made.stop()


def fleet(cluster: LoopbackCluster, *args: str, cwd: Path | None = None) -> subprocess.Popen:
    """``tfperf fleet ARGS --json`` started inside the cluster's namespace."""
    return cluster.popen(
        [sys.executable, "-m", "tfperf", "fleet", *args, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    )


def finished(proc: subprocess.Popen, timeout: float = 240) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out)


def wait_for(predicate, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def runs(cluster, tmp_path_factory):
    """A fleet tune, then a fleet bench during which the second node dies."""
    store = tmp_path_factory.mktemp("fleet") / "store.sqlite"
    user = tmp_path_factory.mktemp("user")
    (user / "usermodels.py").write_text(FACTORY)
    profiles = tmp_path_factory.mktemp("profiles")
    tune = finished(
        fleet(
            cluster,
            "tune",
            "--workload",
            "mlp",
            "--size",
            "tiny",
            "--tune-arg=--knobs=runtime",
            "--tune-arg=--runtimes=tf,litert",
            "--tune-arg=--max-trials=1",
            "--tune-arg=--confirm-rounds=6",
            "--verify-budget",
            "2",
            "--out-dir",
            str(profiles),
            "--store",
            str(store),
        )
    )
    bench = fleet(
        cluster,
        "bench",
        "usermodels:small",
        "--budget",
        "5",
        "--no-peak",
        "--processes",
        "1",
        "--store",
        str(store),
        cwd=user,
    )
    victim = cluster.raylet(cluster.nodes[1])
    victim_id = cluster.node_id(cluster.nodes[1])
    wait_for(lambda: descendants(victim, "tfperf.worker --cmd-fd"))
    cluster.kill_node(cluster.nodes[1])
    return {
        "tune": tune,
        "profiles": profiles,
        "bench": finished(bench),
        "store": store,
        "user": user,
        "victim": victim_id,
    }


def by_id(doc: dict) -> dict[str, dict]:
    """The nodes a fleet command measured, by Ray node id (the 0-CPU node left out)."""
    return {n["node_id"]: n for n in doc["nodes"] if n["status"] != "skipped"}


def measurable(cluster: LoopbackCluster) -> set[str]:
    return {cluster.node_id(temp) for temp in cluster.nodes[:2]}


def assert_not_measured(cluster: LoopbackCluster, doc: dict) -> None:
    """The 0-CPU node is in the document, not measurable, with no result."""
    zero = cluster.node_id(cluster.nodes[2])
    (entry,) = [n for n in doc["nodes"] if n["node_id"] == zero]
    assert entry["status"] == "skipped" and entry["result"] is None
    assert entry["reason"].startswith("not measurable: Ray schedules no CPU on this node")


def test_fleet_doctor_through_ray_client_audits_every_node_grouped_by_kind(cluster, tmp_path):
    # Before `runs` kills a node: both are alive. ray:// is how a driver outside the cluster
    # (a laptop, a KubeRay port-forward) joins it.
    client = "ray://127.0.0.1:10001"
    doc = finished(
        fleet(cluster, "doctor", "--ray-address", client, "--store", str(tmp_path / "s.sqlite"))
    )
    ids = measurable(cluster)
    assert set(by_id(doc)) == ids and doc["status"] == "ok"  # a 0-CPU node is not a failure
    assert_not_measured(cluster, doc)
    for node in by_id(doc).values():
        assert node["result"]["install"]["status"] == "ok"
        assert node["result"]["machine"]["cores"]["logical"] >= 1
    assert [sorted(k["nodes"]) for k in doc["kinds"]] == [sorted(ids)]


def test_fleet_tune_tunes_once_per_kind_and_checks_the_profile_on_the_other_node(cluster, runs):
    doc = runs["tune"]
    ids = measurable(cluster)
    nodes = by_id(doc)
    assert set(nodes) == ids
    assert_not_measured(cluster, doc)
    # Two nodes of one machine are one kind, audited by the doctor on each node.
    assert [sorted(k["nodes"]) for k in doc["kinds"]] == [sorted(ids)]
    assert all(n["doctor"]["install"]["status"] == "ok" for n in nodes.values())
    assert sorted(n["role"] for n in nodes.values()) == ["tune", "verify"]
    (tuned,) = doc["tunes"]
    assert tuned["status"] == "ok" and tuned["kind"] == doc["kinds"][0]["id"]
    saved = json.loads(Path(tuned["profile"]).read_text())
    assert Path(tuned["profile"]).parent == runs["profiles"]
    assert saved["label"] == tuned["label"]
    # LiteRT runs the tiny MLP many times faster than TensorFlow: the tune picks it, so the
    # profile and its converted model travel to the other node and are verified there.
    assert not tuned["keep_default"] and tuned["label"].startswith("runtime=litert")
    (check,) = tuned["verified"]
    verify = nodes[check["node_id"]]
    assert verify["role"] == "verify" and verify["status"] == "ok", verify["reason"]
    # Default and the profile's config, side by side on the verifying node.
    assert [r["label"] for r in verify["result"]["results"]] == ["default", tuned["label"]]
    assert all(r["status"] == "ok" and r["n"] > 0 for r in verify["result"]["results"])
    assert check["verdict"] == verify["result"]["comparisons"][0]["speedup"]["verdict"]
    assert (check["node"] in tuned["holds_on"]) == (check["verdict"] == "faster")


def test_a_node_killed_mid_bench_is_recorded_with_its_reason_and_the_other_kept(runs):
    doc = runs["bench"]
    nodes = by_id(doc)
    dead = nodes.pop(runs["victim"])
    assert dead["status"] == "lost"
    assert "died" in dead["reason"] and dead["runs"] == {}
    (alive,) = nodes.values()
    assert alive["status"] == "ok" and doc["status"] == "partial"
    (result,) = alive["result"]["results"]
    assert result["status"] == "ok" and result["n"] > 0
    assert alive["doctor"]["install"]["status"] == "ok"


def test_the_users_module_travels_to_the_node_rather_than_being_read_from_the_driver(runs):
    from tfperf.store import Store

    (alive,) = [n for n in runs["bench"]["nodes"] if n["status"] == "ok"]
    with Store.open(runs["store"]) as store:
        run = store.load_run(alive["runs"]["bench"])["run"]
    assert run["workload"]["path"] == "usermodels:small"
    shipped = Path(run["workload"]["search_path"])
    assert shipped != runs["user"] and shipped.name == "work"  # where the node unpacked it


def test_each_nodes_run_is_stored_tagged_with_its_node_host_and_fleet_run(runs):
    from tfperf.store import Store

    doc = runs["bench"]
    (alive,) = [n for n in doc["nodes"] if n["status"] == "ok"]
    with Store.open(runs["store"]) as store:
        tagged = store.list_runs(fleet_run=doc["run_id"])
        fleet = store.load_run(doc["run_id"])
    assert [(r["node_id"], r["host"], r["kind"]) for r in tagged] == [
        (alive["node_id"], alive["host"], "bench")
    ]
    assert fleet["run"]["kind"] == "fleet-bench" and fleet["run"]["status"] == "partial"
    statuses = {t["info"]["node_id"]: t["status"] for t in fleet["trials"]}
    assert statuses == {alive["node_id"]: "ok", runs["victim"]: "failed"}


def test_fleet_report_shows_the_kept_node_in_the_matrix_as_json_and_html(runs, tmp_path):
    from helpers import run_cli

    page = tmp_path / "fleet.html"
    res = run_cli("fleet", "report", "--store", str(runs["store"]), "--json", "--html", str(page))
    assert res.returncode == 0, res.stderr
    matrix = json.loads(res.stdout)
    rows = {r["node_id"]: r for r in matrix["rows"]}
    assert rows[runs["victim"]]["cells"] == {} and rows[runs["victim"]]["status"] == "lost"
    kept = next(r for r in matrix["rows"] if r["status"] == "ok")
    assert list(kept["cells"]) == matrix["columns"] == ["usermodels:small (factory)"]
    assert "usermodels:small (factory)" in page.read_text()


def test_ctrl_c_stops_the_remote_command_on_every_node(cluster, runs, tmp_path):
    head = cluster.raylet(cluster.nodes[0])
    store = tmp_path / "s.sqlite"
    proc = fleet(
        cluster,
        "bench",
        "--workload",
        "mlp",
        "--size",
        "tiny",
        "--budget",
        "60",
        "--no-peak",
        "--store",
        str(store),
        # The node killed before may still be listed alive for a while: name the head.
        "--node",
        cluster.node_id(cluster.nodes[0])[:12],
    )
    wait_for(lambda: descendants(head, "tfperf.worker --cmd-fd"))
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    wait_for(lambda: not descendants(head, "-m tfperf bench"), timeout=30)
    assert psutil.Process(head.pid).is_running()  # the node itself lives on
    from tfperf.store import Store

    with Store.open(store) as opened:
        fleet_run = opened.load_run("latest")
    assert fleet_run["run"]["kind"] == "fleet-bench"
    assert fleet_run["run"]["status"] == "interrupted"
    (node,) = fleet_run["trials"]
    assert node["status"] == "failed" and node["info"]["status"] == "cancelled"


LATE_NEWS = """
import ray
from ray._private.utils import publish_error_to_driver

from tfperf.cli.fleet import _ray_on_stderr
from tfperf.fleet.cluster import connect

with _ray_on_stderr():
    connect(None)
    gcs = ray._private.worker.global_worker.gcs_client
    # What a raylet's watcher publishes when its node dies: here as the command ends.
    publish_error_to_driver("raylet_died", "Raylet is terminated (a late death)", gcs_client=gcs)
print('{"document": true}')
"""


def test_ray_s_news_of_a_node_that_dies_as_a_command_ends_stays_out_of_its_json(cluster):
    # Ray's listener may stop before the news reaches it (then nothing is printed at all):
    # every run's stdout must be the one document, and one run at least must have had the
    # news printed, to stderr, for the check to have been made.
    delivered = []
    for _ in range(4):
        proc = cluster.popen(
            [sys.executable, "-c", LATE_NEWS], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
        assert json.loads(out) == {"document": True}
        delivered.append("Raylet is terminated (a late death)" in err)
        if delivered[-1]:
            break
    assert any(delivered), "Ray never printed the news in 4 runs: the check was not made"
