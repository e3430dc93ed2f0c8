"""``tune --objective server`` end to end: real instances of the tiny ``mlp`` workload under real
load, the winner confirmed against the default, the answer in the document, the store and the
profile; and the options it refuses."""

from __future__ import annotations

from dataclasses import replace

import pytest

from helpers import run_cli
from tfperf.api.results import TuneResult
from tfperf.cli.runs import report
from tfperf.cli.tune import render_server
from tfperf.core.errors import UserError
from tfperf.core.serving import DEFAULT_LAYOUT, ServingLayout
from tfperf.core.workloads import builtin_workload
from tfperf.profiles import load_profile, render, serving_layout
from tfperf.serving import LoadScenario
from tfperf.store import Store
from tfperf.tuning import tune
from tfperf.tuning.evaluate import Evaluator
from tfperf.tuning.options import TuneOptions
from tfperf.tuning.server import (
    DEFAULT_CANDIDATE,
    MEASURED,
    REJECTED,
    ServerCandidate,
    ServerResult,
)
from tfperf.tuning.servertune import ServerEvaluator, conclude_server

MLP = {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("server-tune")
    options = TuneOptions(
        objective="server", slo_ms=50.0, budget_s=25.0, runtimes=("tf",),
        store_path=str(folder / "store.db"), profile_out=str(folder / "profile.json"),
        level_requests=60, level_s=0.2, confirm_rounds=14,
    )
    return tune(MLP, options), folder


def test_a_server_tune_answers_with_a_layout_and_the_default_s_rate(served):
    doc, _ = served
    assert doc["objective"] == "server" and doc["slo_ms"] == 50.0
    assert doc["default"]["serving"]["max_qps_at_slo"] > 0
    assert doc["default"]["serving"]["instances"] == 1
    serving = doc["recommendation"]["serving"]
    for key in ("instances", "threads", "max_batch", "max_delay_ms", "max_qps_at_slo"):
        assert key in serving
    # --runtimes tf: every candidate is TensorFlow, the gain (if any) from the layout alone
    assert all(row["config"].get("runtime", "tf") == "tf" for row in doc["candidates"])
    assert any(row["status"] == "measured" for row in doc["candidates"])
    confirmation = doc["recommendation"]["confirmation"]
    if not doc["recommendation"]["keep_default"]:
        assert confirmation["recommend"] and all(confirmation["candidate_qps"])
        assert serving["max_qps_at_slo"] > 0


def test_the_run_keeps_every_load_level_and_the_profile_the_layout(served):
    doc, folder = served
    with Store.open(folder / "store.db", create=False) as store:
        loaded = store.load_run(doc["run_id"])
    roles = {t["role"] for t in loaded["trials"]}
    assert "serving" in roles
    assert loaded["run"]["summary"]["recommendation"]["serving"] == doc["recommendation"]["serving"]
    if doc["recommendation"]["confirmation"]:
        assert "confirmation" in roles
    profile = load_profile(doc["profile"])
    assert profile["objective"] == "server"
    layout = serving_layout(profile)
    assert layout is not None and layout.instances == doc["recommendation"]["serving"]["instances"]
    assert "tensorflow_model_server" in render(profile, "tf-serving")


def test_the_html_report_answers_with_the_layout_beside_the_default(served):
    doc, folder = served
    shown = report(run=doc["run_id"], store=folder / "store.db", html=folder / "run.html")
    page = (folder / "run.html").read_text()
    assert "requests/s within p99 50 ms" in page
    assert ("serve it as" in page) != doc["recommendation"]["keep_default"]
    assert shown["load"], "each measured layout's levels are in the report"


def test_the_console_shows_each_layout_s_rate_and_the_answer(served, capsys):
    doc, _ = served
    render_server(doc)
    shown = capsys.readouterr().out
    assert "req/s" in shown and "p99 within 50 ms" in shown
    assert ("Serve it as" in shown) != doc["recommendation"]["keep_default"]
    rows = dict(TuneResult(doc).rows())
    assert "req/s within p99 50 ms" in rows


def test_bad_server_options_are_one_sentence_and_exit_2(tmp_path):
    for args, words in (
        (["--objective", "server"], "needs the latency bound: add --slo-ms"),
        (["--objective", "server", "--slo-ms", "5", "--throughput"], "drop one of it"),
    ):
        result = run_cli(
            "tune", "-w", "mlp", "--size", "tiny", *args, "--store", str(tmp_path / "s.db")
        )
        assert result.returncode == 2, result.stderr
        assert words in result.stderr and "Traceback" not in result.stderr
    for options, words in (
        (TuneOptions(slo_ms=5.0), "--slo-ms applies to --objective server"),
        (TuneOptions(objective="server", slo_ms=-1.0), "positive number of milliseconds"),
        (TuneOptions(objective="server", slo_ms=5.0, resume="latest"), "cannot be resumed"),
        (TuneOptions(objective="server", slo_ms=5.0, strategy="optuna"), "drop --strategy"),
    ):
        with pytest.raises(UserError, match=words):
            options.check()
    assert TuneOptions(objective="throughput").throughput
    train = builtin_workload("cnn-train", "tiny")
    options = TuneOptions(objective="server", slo_ms=5.0, store_path=str(tmp_path / "s.db"))
    with pytest.raises(UserError, match="cnn-train is a training workload"):
        tune(train, options)


def test_a_ceiling_between_a_litert_layout_and_tensorflow_s_passes_the_litert_layout():
    """Each runtime's instance is projected at the process that serves it: LiteRT's deployed
    process (the artifact alone), not the TensorFlow worker that converted it. A ceiling just
    under one TensorFlow instance's peak is under two TensorFlow instances and far over two
    LiteRT ones; the default, over it too, is measured all the same, with a warning."""
    options = TuneOptions(objective="server", slo_ms=50.0, runtimes=("tf", "litert"))
    evaluator = Evaluator(MLP, options)
    two = ServingLayout(instances=2, threads=1)
    try:
        ready = evaluator.start_default()
        ceiling = evaluator.default_memory.peak_rss_mb - 1
        scenario = LoadScenario(requests=60, seconds=0.2)
        judge = ServerEvaluator(evaluator, replace(options, max_memory_mb=ceiling), scenario)
        outcomes = [judge(ServerCandidate(config, layout), None) for config, layout in
                    (({}, DEFAULT_LAYOUT), ({}, two), ({"runtime": "litert"}, two))]
        default, tensorflow, litert = outcomes
        doc = conclude_server(judge, ServerResult(DEFAULT_CANDIDATE, default, outcomes), 1, ready)
    finally:
        evaluator.close()
    assert default.status == MEASURED and default.max_qps_at_slo, default.reason
    assert any("default itself is over the memory ceiling" in w for w in doc["warnings"])
    assert tensorflow.status == REJECTED and tensorflow.info["over_ceiling"], tensorflow
    assert tensorflow.info["memory"]["peak_rss_mb"] > ceiling  # projected: never started
    assert tensorflow.info["memory"]["projected"] and tensorflow.load is None
    assert litert.status == MEASURED, litert.reason
    row = next(r for r in doc["candidates"] if r["config"].get("runtime") == "litert")
    memory = row["memory"]  # measured after its sweep, summed over its instances
    assert memory["measured_in"] == "deployed" and memory["instances"] == 2
    assert not memory["projected"] and memory["peak_rss_mb"] <= ceiling
    assert memory["worker_peak_rss_mb"] > ceiling  # what this machine ran to measure it
