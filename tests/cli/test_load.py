"""``tfperf bench`` under load from the command line: its JSON, its record, every option
applied or refused, and bad input."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from helpers import require, run_cli
from serving.restserver import MODEL, summing_server

SHORT = ("--level-requests", "100", "--level-seconds", "0.3")
ANSWERING = ("--level-requests", "1000", "--level-seconds", "1.0")
"""Levels whose p99 stands (1000 requests, 10 beyond it), within their cap (4 s), at 400/s:
an SLO answer rests on nothing less. The open level's 1000 arrivals take 2.5 s: a cap of 2.8 s
left a machine busy with other tests 0.3 s to answer the last of them."""
LEVEL_KEYS = {"achieved_qps", "p50_ms", "p90_ms", "p99_ms", "sent", "completed", "failed",
              "timed_out"}
PRICE = 3.6
"""Dollars an hour: a million requests answered at R per second cost PRICE / 3600 / R * 1e6."""


@pytest.fixture(scope="module")
def load_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli-load")
    store = str(folder / "s.sqlite")
    res = run_cli(
        "bench", "--workload", "mlp", "--size", "tiny", "--batch", "2", "--concurrency", "2",
        "--rate", "400", "--slo-ms", "1000", "--instances", "2", "--pin",
        "--threads-per-instance", "1", "--set", "inter_threads=1", "--env", "OMP_NUM_THREADS=1",
        "--timeout", "100", "--request-timeout", "30", "--price-per-hour", str(PRICE), "--ops",
        *ANSWERING, "--json", "--store", store, "--export", str(folder / "run.json"),
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout), store


def test_json_prints_each_level_and_the_slo_answer(load_run):
    doc, _ = load_run
    assert doc["kind"] == "load"
    closed, opened = doc["levels"]
    assert set(closed) >= LEVEL_KEYS and set(opened) >= LEVEL_KEYS
    assert closed["concurrency"] == 2 and opened["offered_qps"] == 400.0
    for level in (closed, opened):
        assert level["sent"] == level["completed"] + level["failed"] + level["timed_out"]
        assert level["layout"] == "2x1t pinned"
        floor = level["harness_floor_ms"]  # beside every level of a layout tfperf serves
        assert floor["p50"] > 0 and level["harness_floor_requests"] >= 1
        # the model call beside the latency, on every level
        assert 0 < level["service_ms"]["p50"] < level["p50_ms"]
        # p99 where it stands: 1000 requests (the open level's 1000 arrivals come in 2.5 s,
        # within its cap; the closed level's as fast as the machine answers them)
        assert (level["p99_ms"] is not None) == (level["completed"] >= 1000)
    assert opened["p99_ms"] is not None
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
    assert "Layout 2x1t pinned" in text.stdout and "achieved/s" in text.stdout
    assert "floor p50/p99 ms" in text.stdout
    # what the command printed below its tables: each level's cost at --price-per-hour
    assert f"2x1t pinned: per million requests at ${PRICE:g}/h" in text.stdout
    assert "at max QPS within the SLO: $" in text.stdout
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
        (("--slo-ms", "20000"), "--request-timeout 10 s is below --slo-ms 20000"),
        (("--slo-ms", "50", "--request-timeout", "0.02"), "give --request-timeout 1 or more"),
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


def test_a_price_gives_each_level_and_the_slo_answer_a_cost_per_request_and_sample(load_run):
    doc, _ = load_run
    layout_levels = [lv for layout in doc["layouts"] for lv in layout["levels"]]
    for level in doc["levels"] + layout_levels:
        priced = level["cost"]
        per_request = PRICE / 3600 / level["achieved_qps"] * 1e6
        assert priced["per_million_requests"] == pytest.approx(per_request)
        assert priced["per_million_samples"] == pytest.approx(per_request / 2)  # --batch 2
        assert priced["batch"] == 2 and priced["basis"] == "achieved_qps"
    at_slo = doc["cost"]
    assert at_slo["basis"] == "max_qps_at_slo"
    assert at_slo["per_million_requests"] == pytest.approx(PRICE / 3600 / doc["max_qps_at_slo"]
                                                           * 1e6)


def test_ops_profiles_one_instance_after_the_levels_against_the_peak(load_run):
    require(importlib.util.find_spec("xprof") is not None, "xprof is not installed")
    doc, _ = load_run
    ops = doc["layouts"][0]["ops"]
    assert ops["available"] and ops["source"].startswith("tensorflow-profiler"), ops
    assert sum(t["self_share"] for t in ops["op_types"]) == pytest.approx(1.0)
    assert ops["roofline"]["peak_gflops"] > 0 and ops["roofline"]["bandwidth_gbs"] > 0
    assert any(o.get("flops") and o.get("bound") for o in ops["ops"])


def test_the_console_says_the_cost_of_each_level_and_the_op_types(load_run):
    from tfperf.cli.load import render_load
    from tfperf.report.console import console

    doc, _ = load_run
    with console().capture() as captured:
        render_load(doc)
    text = captured.get()
    assert f"2x1t pinned: per million requests at ${PRICE:g}/h (2 sample(s) each): " \
           "concurrency 2 $" in text
    assert "at max QPS within the SLO: $" in text
    assert "2x1t pinned: op types (" in text or "2x1t pinned: no op profile" in text


def test_the_instances_run_the_layout_and_config_asked_for(load_run):
    doc, _ = load_run
    (layout,) = doc["layouts"]
    # --threads-per-instance is each TensorFlow instance's intra-op pool
    assert layout["config"]["intra_threads"] == 1 and layout["config"]["inter_threads"] == 1
    assert layout["config"]["env"] == {"OMP_NUM_THREADS": "1"} and layout["batch"] == 2
    assert doc["scenario"]["timeout_s"] == 30.0
    assert json.loads((Path(load_run[1]).parent / "run.json").read_text())["run"]["id"] == \
        doc["run_id"]


@pytest.mark.parametrize(
    ("flags", "said"),
    [(("--memory-limit", "0.05"), "memory limit"), (("--timeout", "0.5"), "0.5 s timeout")],
)
def test_memory_limit_and_timeout_bound_each_instance_of_a_load_run(tmp_path, flags, said):
    """An instance over the limit, or slower to start than the timeout, is stopped: the layout
    is a note and no level is measured."""
    res = run_cli("bench", "--workload", "mlp", "--size", "tiny", "--concurrency", "1", *SHORT,
                  *flags, "--json", "--store", str(tmp_path / "s.sqlite"))
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert doc["levels"] == [] and said in doc["notes"][0], doc["notes"]


URL_SHORT = ("--level-requests", "20", "--level-seconds", "0.2")


def test_a_url_run_prices_each_request_of_its_batch(tmp_path):
    with summing_server() as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/models/{MODEL}"
        res = run_cli("bench", "--url", url, "--batch", "2", "--rest-format", "columnar",
                      "--price-per-hour", str(PRICE), "--rate", "40", "--slo-ms", "1000",
                      *URL_SHORT, "-q", "--json", "--store", str(tmp_path / "s.sqlite"))
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stderr == ""  # -q
    doc = json.loads(res.stdout)
    (level,) = doc["levels"]
    assert level["completed"] == level["sent"] > 0
    assert set(server.rows) == {(2, "columnar")}  # every request: 2 rows, columnar
    per_request = PRICE / 3600 / level["achieved_qps"] * 1e6
    assert level["cost"]["per_million_requests"] == pytest.approx(per_request)
    assert level["cost"]["per_million_samples"] == pytest.approx(per_request / 2)
    # a level this short answers no SLO (its p99 stands on no 1000 requests): no cost at it
    assert doc["max_qps_at_slo"] is None and doc["cost"] is None


# Each option of `tfperf bench` a load run applies, and where that is shown; every other option
# must be refused with one sentence naming it (the walk below types each one).
APPLIED_LOCAL = {
    "workload": "load_run", "size": "load_run", "batch": "load_run (the cost's batch)",
    "sets": "load_run", "envs": "load_run", "timeout": "the limit test above",
    "memory_limit": "the limit test above", "price_per_hour": "the price test above",
    "ops": "the ops test above", "store": "load_run", "as_json": "load_run",
    "export": "load_run", "concurrency": "load_run", "rate": "load_run", "slo_ms": "load_run",
    "instances": "load_run", "threads_per_instance": "load_run", "pin": "load_run",
    "max_batch": "tests/serving/test_load.py", "max_delay_ms": "tests/serving/test_load.py",
    "streams": "the OpenVINO test above", "hint": "the OpenVINO test above",
    "level_requests": "load_run", "level_seconds": "load_run", "request_timeout": "load_run",
    "quiet": "tests/cli/test_verbosity.py", "verbose": "tests/cli/test_verbosity.py",
}
APPLIED_URL = {
    "inputs": "tests/serving/remote/test_kserve.py", "batch": "the url price test above",
    "price_per_hour": "the url price test above", "store": "every url run",
    "as_json": "every url run", "export": "tests/serving/remote/test_kserve.py",
    "concurrency": "tests/serving/remote/test_kserve.py", "rate": "the url price test above",
    "slo_ms": "the url price test above", "level_requests": "every url run",
    "level_seconds": "every url run", "request_timeout": "tests/serving/remote/test_kserve.py",
    "url": "every url run", "protocol": "tests/serving/remote/test_target.py",
    "model_name": "tests/serving/remote/test_target.py",
    "rest_format": "the url price test above", "header": "tests/serving/remote",
    "cacert": "tests/serving/remote", "quiet": "the url price test above",
    "connections": "tests/serving/remote/test_client.py",
    "verbose": "tests/cli/test_verbosity.py",
}


def _typed(param: click.Option, folder) -> list[str]:
    """``param`` as a user would type it, with a value its type takes."""
    flag = max(param.opts, key=len)
    if param.is_flag:
        return [flag]
    if isinstance(param.type, click.Choice):
        return [flag, next(str(c) for c in param.type.choices if c != param.default)]
    if isinstance(param.type, (click.types.IntParamType, click.types.FloatParamType)):
        return [flag, "2"]
    if isinstance(param.type, click.Path):
        path = folder / "some.npz"
        path.write_bytes(b"")
        return [flag, str(path)]
    return [flag, "x=y"]


@pytest.mark.parametrize("remote", [False, True], ids=["local", "url"])
def test_every_bench_option_is_applied_to_a_load_run_or_refused(tmp_path, monkeypatch, remote):
    """Every option of the command itself (one added later too), typed beside a load run: the
    ones not shown applied above must be refused, each in one sentence that names it, before
    anything starts or is stored. The MODEL argument is refused with --url by its own test."""
    from tfperf.cli import app
    from tfperf.core.errors import UserError

    monkeypatch.chdir(tmp_path)  # no configuration file: only what is typed
    store = tmp_path / "s.sqlite"
    server = ["--url", "http://127.0.0.1:9/v1/models/m"] if remote else [
        "--workload", "mlp", "--size", "tiny"]
    base = ["bench", *server, "--concurrency", "1", *SHORT, "--store", str(store)]
    applied = APPLIED_URL if remote else APPLIED_LOCAL
    walked = []
    for param in app.commands["bench"].params:
        if not isinstance(param, click.Option) or param.name in applied:
            continue
        typed = _typed(param, tmp_path)
        result = CliRunner().invoke(app, [*base, *typed])
        refusal = result.exception
        assert isinstance(refusal, UserError), (typed, result.output, refusal)
        assert typed[0] in str(refusal) and "\n" not in str(refusal), (typed, str(refusal))
        walked.append(typed[0])
    assert not store.exists()
    assert {"--budget", "--precision", "--threshold", "--processes", "--parallel-start",
            "--labels"} <= set(walked)
    assert ("--ops" in walked) == remote and ("--protocol" in walked) == (not remote)
    if remote:
        _each_applied_option_changes_what_is_sent(tmp_path)


SHAPES_THE_REQUEST = {
    "inputs": lambda folder: ["--inputs", _npz(folder, rows=1)],
    "batch": lambda folder: ["--batch", "3"],
    "rest_format": lambda folder: ["--rest-format", "columnar"],
    "header": lambda folder: ["--header", "X-Api-Key: k"],
}
"""The url options that shape each request: typed, each must change what the server gets."""


def _npz(folder, rows: int) -> str:
    import numpy as np

    path = folder / f"x{rows}.npz"
    np.savez(path, x=np.arange(4 * rows, dtype=np.float32).reshape(rows, 4) + 7)
    return str(path)


def _each_applied_option_changes_what_is_sent(folder) -> None:
    """The walk's other half: an option applied must be seen by the server, each request
    as it came (path, headers, body) against the requests of a run without it."""
    assert set(SHAPES_THE_REQUEST) <= set(APPLIED_URL)
    seen = {}
    with summing_server() as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/models/{MODEL}"
        for name, typed in (("", lambda f: []), *SHAPES_THE_REQUEST.items()):
            server.sent.clear()
            res = run_cli("bench", "--url", url, "--concurrency", "1", *URL_SHORT,
                          *typed(folder), "-q", "--store", str(folder / "sent.sqlite"))
            assert res.returncode == 0, (name, res.stderr[-2000:])
            seen[name] = {(path, headers.get("X-Api-Key"), body)
                          for path, headers, body in server.sent}
    for name in SHAPES_THE_REQUEST:
        assert seen[name] and seen[name] != seen[""], name


def test_url_inputs_are_sent_at_the_batch_given_their_rows_repeated(tmp_path):
    """--batch with --inputs: the file's one row is sent three times over in each request (it
    used to be left at the file's own rows, --batch dropped without a word)."""
    with summing_server() as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/models/{MODEL}"
        res = run_cli("bench", "--url", url, "--inputs", _npz(tmp_path, rows=1), "--batch", "3",
                      "--concurrency", "1", *URL_SHORT, "--json",
                      "--store", str(tmp_path / "s.sqlite"))
        assert res.returncode == 0, res.stderr[-2000:]
        alone = run_cli("bench", "--url", url, "--inputs", _npz(tmp_path, rows=2),
                        "--concurrency", "1", *URL_SHORT, "--json",
                        "--store", str(tmp_path / "s.sqlite"))
        assert alone.returncode == 0, alone.stderr[-2000:]
    assert {rows for rows, _ in server.rows} == {3, 2}  # warm-up and levels, both runs
    doc = json.loads(res.stdout)
    assert doc["inputs"]["source"].endswith("its rows repeated to 3 (--batch)")
    assert doc["inputs"]["inputs"] == ["x float32[Nx4]"]
    assert json.loads(alone.stdout)["inputs"]["source"] == f"--inputs {tmp_path / 'x2.npz'}"


def test_a_query_string_in_the_url_is_sent_and_stored_redacted(tmp_path):
    store = str(tmp_path / "s.sqlite")
    with summing_server() as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/models/{MODEL}?api_key=s3cret"
        res = run_cli("bench", "--url", url, "--concurrency", "1", *URL_SHORT, "--json",
                      "--store", store)
    assert res.returncode == 0, res.stderr[-2000:]
    assert server.sent and all(path.endswith("?api_key=s3cret") for path, _, _ in server.sent)
    assert "s3cret" not in res.stdout and "s3cret" not in res.stderr
    assert json.loads(res.stdout)["target"]["url"].endswith("?api_key=<redacted>")
    run_id = str(json.loads(res.stdout)["run_id"])
    for args in (("history", "--json"), ("report", run_id, "--json"), ("report", run_id)):
        shown = run_cli(*args, "--store", store)
        assert shown.returncode == 0 and "s3cret" not in shown.stdout, args


def test_rest_format_for_a_v2_server_is_one_sentence_and_exit_2(tmp_path):
    res = run_cli("bench", "--url", "http://127.0.0.1:9/v2/models/m", "--rest-format", "row",
                  "--concurrency", "1", "--store", str(tmp_path / "s.sqlite"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "--rest-format shapes TensorFlow Serving's REST body" in res.stderr
    assert len([ln for ln in res.stderr.splitlines() if ln.strip()]) == 1
