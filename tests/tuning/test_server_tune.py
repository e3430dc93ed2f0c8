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
        level_requests=60, level_s=0.2, level_tail=1, confirm_rounds=14,
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
    # the floor of the layout recommended, from its last search's answering level
    floor = serving["harness_floor_ms"]
    assert floor["p50"] > 0
    (said,) = [n for n in doc["recommendation"]["notes"] if "harness's own floor" in n]
    assert said.startswith(doc["recommendation"]["label"] + ": offered ")


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
    assert "harness's own floor" in shown  # the recommended layout's floor, stated
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
        scenario = LoadScenario(requests=60, seconds=0.2, tail=1, precision=None)
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


def _wide_activations(folder) -> dict:
    """A .keras model whose activations hold 4 MB a row (a 64x64 image upsampled 16 times)
    on weights of a few bytes: its memory grows with the batch it runs at."""
    keras = pytest.importorskip("keras")
    from tfperf.modelref import resolve_model

    x = keras.Input((4096,), name="x")
    image = keras.layers.UpSampling2D(16)(keras.layers.Reshape((64, 64, 1))(x))
    out = keras.layers.Dense(1)(keras.layers.GlobalAveragePooling2D()(image))
    path = folder / "wide.keras"
    keras.Model(x, out).save(path)
    return resolve_model(str(path))


def test_a_batched_layout_is_held_to_the_ceiling_as_it_runs_not_at_batch_one(tmp_path):
    """One LiteRT instance, projected from its deployed process at batch 1, is well under the
    ceiling; batching 16 requests into one call holds 16 rows of 4 MB activations more. The
    layout's memory is measured as it runs (the deployed process at the batch's size), so the
    ceiling rejects the batched layout it once let through on its batch-1 projection."""
    import importlib.util

    from helpers import require

    require(importlib.util.find_spec("ai_edge_litert") is not None, "LiteRT is not installed")
    options = TuneOptions(objective="server", slo_ms=1000.0, runtimes=("litert",))
    evaluator = Evaluator(_wide_activations(tmp_path), options)
    litert = {"runtime": "litert"}
    scenario = LoadScenario(requests=30, seconds=0.2, tail=1, precision=None)
    try:
        evaluator.start_default()
        first = ServerEvaluator(evaluator, options, scenario)
        assert first.accuracy(litert)[0] == MEASURED
        one = first.projected(ServerCandidate(litert, DEFAULT_LAYOUT))
        assert one.measured_in == "deployed"
        ceiling = one.peak_rss_mb + 30.0  # the batch holds ~64 MB more
        judge = ServerEvaluator(evaluator, replace(options, max_memory_mb=ceiling), scenario)
        judge._per_instance = first._per_instance  # the runtime's instance, read once
        batched = ServerCandidate(litert, ServingLayout(max_batch=16, max_delay_ms=5.0))
        assert judge.projected(batched).peak_rss_mb <= ceiling  # the projection lets it in
        single, many = (judge(ServerCandidate(litert, DEFAULT_LAYOUT), None), judge(batched, None))
    finally:
        evaluator.close()
    assert single.status == MEASURED, single.reason
    assert many.status == REJECTED and many.info["over_ceiling"], many
    assert many.reason.endswith("as the layout ran")
    memory = many.info["memory"]
    assert memory["measured_in"] == "deployed" and not memory["projected"]
    assert memory["peak_rss_mb"] > ceiling
