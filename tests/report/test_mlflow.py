"""tfperf.report.mlflow_log: stored runs logged to a real local MLflow tracking store (SQLite)
and read back through MLflow's own client; a real unreachable tracking server; MLflow missing.

The documents are those ``tfperf compare --json`` and ``tfperf bench --json`` print, their
figures taken from real stored samples (``fill_store``); the measured runs through the CLI are
in tests/cli/test_mlflow.py.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from helpers import fill_store, load, mlflow_files, mlflow_tracking
from tfperf.core.errors import UserError
from tfperf.report.html import build_report
from tfperf.report.mlflow_log import NotLogged, log_run, metric_key, require_mlflow, run_record
from tfperf.store import Store

INSTALL = {
    "tf_version": "2.21.0",
    "keras_version": "3.15.1",
    "distribution": {"name": "tensorflow-cpu", "version": "2.21.0", "channel": "pypi"},
    "onednn": {"enabled": True},
    "python": {"version": "3.11.7"},
}


@pytest.fixture(scope="module")
def tracking(tmp_path_factory):
    """One tracking store for the module (creating its tables takes seconds)."""
    with mlflow_tracking(tmp_path_factory.mktemp("mlflow")) as uri:
        yield uri


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> tuple[Path, dict[str, int]]:
    path = tmp_path_factory.mktemp("store") / "store.sqlite"
    return path, fill_store(path)


def measured_doc(path: Path, run: int, kind: str) -> dict:
    """The document bench/compare printed for stored run ``run``, its figures from the store."""
    report = build_report(load(path, run))
    results = [
        {
            "label": r["label"],
            "role": r["role"],
            "status": r["status"],
            "config": r["config"],
            "n": r["n"],
            "latency_ms": r["latency_ms"],
            "throughput_per_s": r["throughput_per_s"],
            "install": INSTALL,
        }
        for r in report["results"]
    ]
    comparisons = [
        {
            "baseline": c["baseline"]["label"],
            "candidate": c["candidate"]["label"],
            "speedup": c["speedup"],
        }
        for c in report["comparisons"]
    ]
    return {
        "schema_version": 1,
        "run_id": run,
        "kind": kind,
        "workload": report["run"]["workload"],
        "machine": {"fingerprint": "c8481ba989b2", "cpu": "test cpu", "cores": 2},
        "rounds": 10,
        "results": results,
        "comparisons": comparisons,
    }


def test_a_compare_run_is_logged_with_its_figures_report_and_document(tracking, stored):
    from mlflow.tracking import MlflowClient

    # Another test file run earlier in this process may have imported TensorFlow itself.
    tensorflow_before = "tensorflow" in sys.modules
    path, ids = stored
    doc = measured_doc(path, ids["run"], "compare")
    run_id = log_run(doc, store=path)
    client = MlflowClient()
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    params, metrics, tags = run.data.params, run.data.metrics, run.data.tags
    assert params["tfperf.run_id"] == str(ids["run"]) and params["tfperf.store"] == str(path)
    assert params["workload.name"] == "mlp" and params["workload.batch"] == "4"
    assert params["machine.cpu"] == "test cpu" and params["tensorflow.version"] == "2.21.0"
    assert params["tensorflow.variant"] == "tensorflow-cpu"
    assert params["settings.threshold"] == "0.03"
    speedups = {c["candidate"]: c["speedup"] for c in doc["comparisons"]}
    assert metrics["xla-jit.speedup"] == speedups["xla=jit"]["median"]
    assert metrics["xla-jit.speedup_low"] == speedups["xla=jit"]["ci95"][0]
    assert metrics["threads-2.speedup_high"] == speedups["threads=2"]["ci95"][1]
    by_label = {r["label"]: r for r in doc["results"]}
    assert metrics["default.p50_ms"] == by_label["default"]["latency_ms"]["p50"]
    assert metrics["default.p99_ms"] == by_label["default"]["latency_ms"]["p99"]
    assert metrics["xla-jit.samples_per_s"] == by_label["xla=jit"]["throughput_per_s"]
    # the segfaulted config measured nothing: no figure rather than a made-up one
    assert not [k for k in metrics if k.startswith("allocator-broken")]
    # several candidates: no single answer to put at the top of the run
    assert "speedup" not in metrics and "tfperf.verdict" not in tags
    assert tags["tfperf.kind"] == "compare" and tags["tfperf.verdict.xla-jit"] == "faster"
    assert tags["mlflow.note.content"] == "tfperf compare --workload mlp --set xla=jit"
    assert mlflow_files(client, run_id) == ["report.html", "tfperf.json"]
    folder = client.download_artifacts(run_id, "", str(Path.cwd() / f"down-{run_id}"))
    assert f"tfperf run {ids['run']}" in (Path(folder) / "report.html").read_text()
    assert json.loads((Path(folder) / "tfperf.json").read_text()) == doc
    # logging imports neither TensorFlow nor anything that pulls it in
    assert tensorflow_before or "tensorflow" not in sys.modules


def test_a_bench_of_the_default_alone_puts_its_figures_at_the_top(tracking, stored):
    from mlflow.tracking import MlflowClient

    path, ids = stored
    doc = measured_doc(path, ids["bench"], "bench")
    run = MlflowClient().get_run(log_run(doc, store=path))
    metrics = run.data.metrics
    (result,) = doc["results"]
    assert metrics["p50_ms"] == metrics["default.p50_ms"] == result["latency_ms"]["p50"]
    assert metrics["samples_per_s"] == result["throughput_per_s"]
    assert "speedup" not in metrics
    assert run.data.params["config.label"] == "default"
    assert run.data.params["workload.format"] == "keras"
    assert run.data.tags["tfperf.kind"] == "bench"


def test_labels_become_distinct_valid_metric_keys(tracking, stored):
    from mlflow.tracking import MlflowClient

    assert metric_key("xla=jit") == "xla-jit"
    assert metric_key("onednn=off,intra_threads=2") == "onednn-off_intra_threads-2"
    assert metric_key("env:A=/x/../y") == "env_A-_x_.._y"
    assert metric_key("..") == "config"
    path, ids = stored
    doc = measured_doc(path, ids["run"], "compare")
    labels = ["a=1,b=2", "a-1_b-2", "env:P=/a/../b", "failed"]  # the last one measured nothing
    for result, label in zip(doc["results"], labels, strict=True):
        result["label"] = label
    doc["comparisons"] = []
    record = run_record(doc, load(path, ids["run"]), path)
    p50 = sorted(k for k in record.metrics if k.endswith(".p50_ms"))
    assert p50 == ["a-1_b-2-2.p50_ms", "a-1_b-2.p50_ms", "env_P-_a_.._b.p50_ms"]
    logged = MlflowClient().get_run(log_run(doc, store=path)).data.metrics
    assert set(record.metrics) == set(logged)  # MLflow took every key


def test_inside_an_active_run_the_tfperf_run_is_its_child(tracking, stored):
    import mlflow

    path, ids = stored
    with mlflow.start_run(run_name="training") as parent:
        child = log_run(measured_doc(path, ids["bench"], "bench"), store=path)
        assert mlflow.active_run().info.run_id == parent.info.run_id  # still the user's
    run = mlflow.tracking.MlflowClient().get_run(child)
    assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert run.info.experiment_id == parent.info.experiment_id


def test_a_run_named_by_mlflow_run_id_gets_a_child(tracking, stored, monkeypatch):
    from mlflow.tracking import MlflowClient

    path, ids = stored
    client = MlflowClient()
    parent = client.create_run("0", run_name="pipeline").info.run_id
    monkeypatch.setenv("MLFLOW_RUN_ID", parent)
    child = log_run(measured_doc(path, ids["bench"], "bench"), store=path)
    assert client.get_run(child).data.tags["mlflow.parentRunId"] == parent
    assert client.get_run(parent).data.params == {}  # nothing logged into the user's run
    assert os.environ["MLFLOW_RUN_ID"] == parent


def test_an_unreachable_server_raises_not_logged_and_the_stored_run_stays(
    tracking, stored, monkeypatch
):
    path, ids = stored
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    with pytest.raises(NotLogged) as caught:
        log_run(measured_doc(path, ids["bench"], "bench"), store=path)
    text = str(caught.value)
    assert f"kept as run {ids['bench']} in the store {path}" in text
    assert "Connection refused" in text and "\n" not in text
    with Store.open(path, create=False) as store:
        assert store.load_run(ids["bench"])["run"]["status"] == "ok"


def test_a_missing_artifact_is_a_user_error_before_anything_is_logged(tracking, stored, tmp_path):
    import mlflow

    path, ids = stored
    before = len(mlflow.search_runs(search_all_experiments=True, output_format="list"))
    with pytest.raises(UserError, match="does not exist"):
        log_run(measured_doc(path, ids["bench"], "bench"), store=path, artifacts=[tmp_path / "x"])
    assert len(mlflow.search_runs(search_all_experiments=True, output_format="list")) == before


def test_without_mlflow_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # what Python does for a missing package
    with pytest.raises(UserError) as caught:
        require_mlflow()
    assert str(caught.value).endswith('install it: pip install "tfperf[mlflow]".')
