"""``tfperf bench`` under load from the command line: its JSON, its record, and bad input."""

from __future__ import annotations

import json

import pytest

from helpers import run_cli

SHORT = ("--level-requests", "100", "--level-seconds", "0.3")
LEVEL_KEYS = {"achieved_qps", "p50_ms", "p90_ms", "p99_ms", "sent", "completed", "failed",
              "timed_out"}


@pytest.fixture(scope="module")
def load_run(tmp_path_factory):
    store = str(tmp_path_factory.mktemp("cli-load") / "s.sqlite")
    res = run_cli(
        "bench", "--workload", "mlp", "--size", "tiny", "--concurrency", "2", "--rate", "100",
        "--slo-ms", "1000", "--instances", "2", "--pin", *SHORT, "--json", "--store", store,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout), store


def test_json_prints_each_level_and_the_slo_answer(load_run):
    doc, _ = load_run
    assert doc["kind"] == "load"
    closed, opened = doc["levels"]
    assert set(closed) >= LEVEL_KEYS and set(opened) >= LEVEL_KEYS
    assert closed["concurrency"] == 2 and opened["offered_qps"] == 100.0
    for level in (closed, opened):
        assert level["sent"] == level["completed"] + level["failed"] + level["timed_out"]
        assert level["layout"] == "2x pinned"
    assert doc["max_qps_at_slo"] == opened["achieved_qps"]
    assert doc["layouts"][0]["layout"]["cores"]
    assert "load generator" in doc["generator"]


def test_the_levels_are_in_the_store_for_report_and_history(load_run):
    doc, store = load_run
    report = run_cli("report", str(doc["run_id"]), "--json", "--store", store)
    assert report.returncode == 0, report.stderr
    (section,) = json.loads(report.stdout)["load"]
    assert [lv["sent"] for lv in section["levels"]] == [lv["sent"] for lv in doc["levels"]]
    assert section["max_qps_at_slo"] == doc["max_qps_at_slo"]
    text = run_cli("report", str(doc["run_id"]), "--store", store)
    assert text.returncode == 0, text.stderr
    assert "Layout 2x pinned" in text.stdout and "achieved/s" in text.stdout
    history = run_cli("history", "--json", "--store", store)
    (run,) = json.loads(history.stdout)["runs"]
    assert run["kind"] == "load" and run["summary"]["max_qps_at_slo"] == doc["max_qps_at_slo"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--rate", "fast"), "--rate takes comma-separated numbers"),
        (("--concurrency", "0"), "--concurrency takes counts of 1 or more"),
        (("--slo-ms", "-3"), "--slo-ms must be a positive"),
        (("--max-batch", "4"), "add --concurrency N, --rate QPS or --slo-ms X"),
        (("--concurrency", "1", "--max-batch", "0"), "dynamic batch must be at least 1"),
        (("--concurrency", "1", "--max-delay-ms", "2"), "0 when the batch is 1"),
        (("--concurrency", "1", "--streams", "2"), "streams are OpenVINO's"),
        (("--concurrency", "1", "--hint", "LATENCY"), "the performance hint is OpenVINO's"),
    ],
)
def test_bad_load_options_are_one_sentence_and_exit_2(tmp_path, args, needle):
    res = run_cli("bench", "--workload", "mlp", *args, "--store", str(tmp_path / "s.sqlite"))
    assert res.returncode == 2, res.stderr
    assert needle in res.stderr and "Traceback" not in res.stderr
    assert len([ln for ln in res.stderr.splitlines() if ln.strip()]) == 1, res.stderr
    assert not (tmp_path / "s.sqlite").exists()


def test_ctrl_c_keeps_the_levels_measured_names_the_run_and_exits_130(tmp_path):
    """SIGINT to a real load run once a level is stored: one sentence, exit 130, the run
    stored as interrupted with that level."""
    from helpers import assert_load_interrupted

    args = ["bench", "--workload", "mlp", "--size", "tiny", "--concurrency", "1,1,1,1,1,1", *SHORT]
    assert_load_interrupted(args, tmp_path / "s.sqlite", "concurrency 1:")


@pytest.mark.parametrize(
    ("flags", "layout", "in_flight"),
    [
        (("--streams", "2"), "1x streams=2", 2),
        (("--hint", "THROUGHPUT"), "1x hint=THROUGHPUT", None),
        (("--hint", "LATENCY"), "1x hint=LATENCY", 1),
    ],
)
def test_openvino_is_served_by_its_asynchronous_requests(tmp_path, flags, layout, in_flight):
    """One OpenVINO instance compiled with streams or a performance hint serves through an
    AsyncInferQueue of the requests the compiled model asks for, under a closed loop of four:
    every request answered, the layout named, the requests in flight reported."""
    import importlib.util

    from helpers import require

    require(importlib.util.find_spec("openvino") is not None, "OpenVINO is not installed")
    res = run_cli(
        "bench", "--workload", "mlp", "--size", "tiny", "--set", "runtime=openvino-f32",
        *flags, "--concurrency", "4", *SHORT, "--json",
        "--store", str(tmp_path / "s.sqlite"),
    )
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    (level,) = doc["levels"]
    assert level["layout"] == layout
    assert level["completed"] == level["sent"] > 0 and level["failed"] == 0
    (requests,) = doc["layouts"][0]["infer_requests"]
    # THROUGHPUT asks for as many as OpenVINO's streams for this machine: one or more
    assert requests == in_flight if in_flight else requests >= 1
