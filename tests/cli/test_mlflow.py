"""``tfperf bench --mlflow`` and ``tfperf tune --mlflow`` for real: tiny measured runs logged to
a real local MLflow tracking store (SQLite) and read back through MLflow's client, a real
tracking server out of reach, and MLflow missing (found before anything is measured)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers import mlflow_files, mlflow_tracking, run_cli
from tfperf.store import Store

UNREACHABLE = {
    "MLFLOW_TRACKING_URI": "http://127.0.0.1:9",  # loopback, where nothing listens
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "5",
}
BENCH = ("bench", "--workload", "mlp", "--size", "tiny", "--budget", "2", "--no-peak")


@pytest.fixture(scope="module")
def tracking(tmp_path_factory):
    """One tracking store for the module; the commands run in its folder."""
    folder = tmp_path_factory.mktemp("mlflow")
    with mlflow_tracking(folder):
        yield folder


def logged(res) -> tuple[dict, object, list[str]]:
    """The document a command printed, the MLflow run it said it logged, and that run's files."""
    from mlflow.tracking import MlflowClient

    assert res.returncode == 0, res.stderr[-3000:]
    (line,) = [x for x in res.stderr.splitlines() if x.startswith("logged to MLflow: run ")]
    run_id = line.split()[4]
    client = MlflowClient()
    return json.loads(res.stdout), client.get_run(run_id), mlflow_files(client, run_id)


@pytest.mark.tf
@pytest.mark.slow
def test_bench_mlflow_logs_the_measured_run(tracking):
    store = tracking / "bench.sqlite"
    res = run_cli(
        *BENCH, "--processes", "1", "--set", "intra_threads=1", "--store", str(store),
        "--json", "--mlflow", "--price-per-hour", "0.5", cwd=tracking,
    )
    doc, run, files = logged(res)
    params, metrics, tags = run.data.params, run.data.metrics, run.data.tags
    default, candidate = doc["results"]
    assert metrics["default.p50_ms"] == default["latency_ms"]["p50"]
    assert metrics["default.peak_rss_mb"] == default["memory"]["peak_rss_mb"]
    assert metrics["model_mb"] == candidate["memory"]["model_mb"]
    assert metrics["cost_per_million_samples"] == candidate["cost"]["per_million_samples"]
    assert metrics["p50_ms"] == metrics["intra_threads-1.p50_ms"] == candidate["latency_ms"]["p50"]
    assert metrics["p99_ms"] == candidate["latency_ms"]["p99"]
    assert metrics["samples_per_s"] == candidate["throughput_per_s"]
    speedup = doc["comparisons"][0]["speedup"]
    assert [metrics["speedup"], metrics["speedup_low"], metrics["speedup_high"]] == [
        speedup["median"], *speedup["ci95"],
    ]
    assert tags["tfperf.kind"] == "bench" and tags["tfperf.verdict"] == speedup["verdict"]
    assert params["config.intra_threads"] == "1" and params["config.label"] == "intra_threads=1"
    assert params["tensorflow.version"] == default["install"]["tf_version"]
    assert params["machine.cpu"] == doc["machine"]["cpu"] and params["machine.isa"]
    assert params["tfperf.run_id"] == str(doc["run_id"])
    assert params["tfperf.store"] == str(store.resolve())
    assert files == ["report.html", "tfperf.json"]


@pytest.mark.tf
@pytest.mark.slow
def test_tune_mlflow_logs_the_recommendation_profile_and_converted_model(tracking):
    res = run_cli(
        "tune", "--workload", "mlp", "--size", "tiny", "--quick", "--max-trials", "2",
        "--knobs", "runtime", "--runtimes", "tf,litert", "--confirm-rounds", "6",
        "--store", str(tracking / "tune.sqlite"), "--profile-out", str(tracking / "p.json"),
        "--out-dir", str(tracking / "model"), "--json", "--mlflow",
        cwd=tracking, timeout=500,
    )
    doc, run, files = logged(res)
    params, metrics, tags = run.data.params, run.data.metrics, run.data.tags
    rec = doc["recommendation"]
    assert tags["tfperf.kind"] == "tune" and tags["tfperf.recommendation"] == rec["label"]
    assert tags["tfperf.keep_default"] == str(rec["keep_default"]).lower()
    assert params["config.label"] == rec["label"]
    assert params["config.runtime"] == rec["config"]["runtime"]
    assert metrics["default.p50_ms"] == doc["default"]["time_ms"]
    assert metrics["p50_ms"] == rec["time_ms"]
    for row in doc["candidates"]:
        if row["status"] == "measured":
            key = row["label"].replace("=", "-")
            assert metrics[f"{key}.speedup"] == row["speedup"]["median"]
            assert metrics[f"{key}.max_rel_error"] == row["max_rel_error"]
    assert {"report.html", "tfperf.json", "profile/p.json"} <= set(files)
    if rec["speedup"]:
        assert metrics["speedup_low"] == rec["speedup"]["ci95"][0]
    if doc["artifacts_dir"]:  # LiteRT won: its converted model is attached
        assert "model/model.tflite" in files and "model/run_model.py" in files


@pytest.mark.tf
@pytest.mark.slow
def test_an_unreachable_tracking_server_warns_and_keeps_the_run(tmp_path):
    store = tmp_path / "store.sqlite"
    res = run_cli(
        *BENCH, "--processes", "1", "--store", str(store), "--json", "--mlflow",
        env=UNREACHABLE, cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)  # the measurement is printed whole
    (warning,) = [x for x in res.stderr.splitlines() if x.startswith("warning: the run was not")]
    assert f"kept as run {doc['run_id']} in the store {store}" in warning
    assert "Connection refused" in warning
    with Store.open(store, create=False) as db:
        assert db.load_run(doc["run_id"])["run"]["status"] == "ok"


@pytest.mark.parametrize("command", ["bench", "tune"])
def test_without_mlflow_the_command_stops_before_measuring(tmp_path, command):
    # A package that fails to import, as a missing one does, shadows the installed MLflow.
    (tmp_path / "hide" / "mlflow").mkdir(parents=True)
    (tmp_path / "hide" / "mlflow" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'mlflow'\", name='mlflow')\n"
    )
    path = os.pathsep.join([str(tmp_path / "hide"), os.environ.get("PYTHONPATH", "")])
    store = tmp_path / "store.sqlite"
    res = run_cli(
        command, "--workload", "mlp", "--store", str(store), "--mlflow",
        env={"PYTHONPATH": path},
    )
    assert res.returncode == 2
    assert res.stderr.strip().endswith('install it: pip install "tfperf[mlflow]".')
    assert "Traceback" not in res.stderr
    assert not Path(store).exists()  # nothing was measured, nothing recorded
