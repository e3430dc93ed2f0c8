"""history, report, apply and bench under load as library functions, through ``import tfperf``
only: each takes the command's options as keyword arguments and returns a typed, frozen
result whose ``to_dict()`` is what the command prints with ``--json``.

Real stores filled with real samples, a real profile file, real workers under real load.
"""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

import tfperf
from helpers import fill_store, run_cli


def _cli_json(*args: str) -> dict:
    shown = run_cli(*args, "--json", env={"TFPERF_STORE": ""})
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def _frozen(result) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.doc = {}


def test_history_lists_the_runs_and_the_trials_of_one_as_the_command_does(tmp_path):
    store = tmp_path / "s.sqlite"
    ids = fill_store(store)
    runs = tfperf.history(store=store)
    assert isinstance(runs, tfperf.HistoryResult)
    assert [r["id"] for r in runs.runs] == [ids["bench"], ids["run"]]
    assert runs.to_dict() == _cli_json("history", "--store", str(store))
    trials = tfperf.history(ids["run"], store=store, limit=5)
    assert trials.run_id == ids["run"]
    assert {t["label"] for t in trials.trials} >= {"default", "xla=jit", "allocator=broken"}
    assert trials.to_dict() == _cli_json("history", str(ids["run"]), "--store", str(store))
    assert "4 trial(s)" in repr(trials) and "<table>" in runs._repr_html_()
    _frozen(runs)
    with pytest.raises(tfperf.UserError, match="positive number of runs"):
        tfperf.history(store=store, limit=0)


def test_report_says_the_runs_results_and_writes_its_html(tmp_path):
    store = tmp_path / "s.sqlite"
    ids = fill_store(store)
    page = tmp_path / "r.html"
    result = tfperf.report(ids["run"], store=store, html=page)
    assert isinstance(result, tfperf.ReportResult)
    assert result.html == str(page) and page.stat().st_size > 0
    assert result.run_id == ids["run"]
    doc = result.to_dict()
    doc.pop("html")
    assert doc == _cli_json("report", str(ids["run"]), "--store", str(store))
    assert "xla=jit vs default" in result._repr_html_()
    latest = tfperf.report(store=store)  # "latest", as the command's RUN may be
    assert latest.run_id == ids["bench"] and latest.html is None
    with pytest.raises(tfperf.UserError):
        tfperf.report(999, store=store)
    # the report modules stay importable beside the function of the same name
    import tfperf.report.html as html_module

    assert callable(html_module.build_report) and callable(tfperf.report)


def test_apply_gives_each_format_the_command_prints(tmp_path):
    from test_profiles import _profile
    from tfperf.profiles import save_profile

    path = save_profile(_profile({"onednn": False}), tmp_path / "p.json")
    for fmt in ("env", "sh", "python"):
        result = tfperf.apply(path, format=fmt)
        assert isinstance(result, tfperf.ApplyResult)
        printed = run_cli("apply", str(path), "--format", fmt)
        assert result.text == printed.stdout and "TF_ENABLE_ONEDNN_OPTS" in result.text
        assert result.to_dict()["format"] == fmt
    assert tfperf.apply(path).to_dict()["format"] == "sh"  # the command's default
    with pytest.raises(tfperf.UserError, match="not one of env, sh, python, tf-serving"):
        tfperf.apply(path, format="yaml")
    with pytest.raises(tfperf.UserError, match="no profile at"):
        tfperf.apply(tmp_path / "missing.json")


@pytest.mark.tf
@pytest.mark.slow
def test_bench_under_load_returns_the_load_document(tmp_path):
    store = tmp_path / "s.sqlite"
    # levels of up to 4 s: p99 stands on 1000 requests, which a busy machine's 0.8 s missed
    # and a CI machine's 2 s too (1900 requests/s idle; a level beside two other tests' workers
    # ran under 500)
    result = tfperf.bench(workload="mlp", size="tiny", concurrency=[1, 2], slo_ms=1000,
                          level_requests=20, level_seconds=1.0, store=store, progress=False,
                          price_per_hour=3.6, ops=True, no_peak=True)
    assert isinstance(result, tfperf.LoadResult)
    doc = result.to_dict()
    assert doc["kind"] == "load" and doc["scenario"]["concurrency"] == [1, 2]
    assert [lv["concurrency"] for lv in doc["levels"][:2]] == [1, 2]
    assert all(lv["completed"] >= 20 for lv in doc["levels"][:2])
    assert result.max_qps_at_slo is not None and "requests/s" in repr(result)
    # price_per_hour=, ops= and no_peak= as the command applies them: each level priced, one
    # instance profiled after the levels, its roofline without a peak
    assert all(lv["cost"]["per_million_requests"] == pytest.approx(
        3.6 / 3600 / lv["achieved_qps"] * 1e6) for lv in doc["levels"])
    assert doc["cost"]["basis"] == "max_qps_at_slo"
    ops = doc["layouts"][0]["ops"]
    assert ops["roofline"]["peak_gflops"] is None and ops["roofline"]["bandwidth_gbs"] is None
    shown = tfperf.history(store=store)
    assert shown.runs[0]["id"] == result.run_id and shown.runs[0]["kind"] == "load"
    with pytest.raises(tfperf.UserError, match="describe a server under load"):
        tfperf.bench(workload="mlp", size="tiny", max_batch=4, store=store, progress=False)


def test_bench_refuses_a_keyword_its_run_would_ignore_as_the_command_does(tmp_path):
    store = tmp_path / "s.sqlite"
    refused = [
        ({"concurrency": 1, "budget": 5}, "budget= is a steady-state measurement's length"),
        ({"concurrency": 1, "protocol": "v2-rest"}, "protocol= describes the server url="),
        ({"url": "http://127.0.0.1:9/v1/models/m", "workload": "mlp"},
         "url= measures the server you run as it is: leave out workload="),
        ({"url": "http://127.0.0.1:9/v1/models/m", "ops": True}, "ops= profiles the instances"),
        ({"workload": "mlp", "level_seconds": 1}, "level_seconds= describes a load level"),
    ]
    for kwargs, said in refused:
        with pytest.raises(tfperf.UserError, match=re.escape(said)):
            tfperf.bench(**kwargs, store=store, progress=False)
    assert not store.exists()  # refused before anything ran


def test_bench_measures_a_server_you_run_with_url(tmp_path):
    """url=, protocol=, model_name=, rest_format= and batch= as ``tfperf bench --url`` takes
    them, against a TensorFlow Serving REST server on loopback."""
    from serving.restserver import MODEL, summing_server

    with summing_server() as server:
        result = tfperf.bench(
            url=f"http://127.0.0.1:{server.server_address[1]}", protocol="tfserving-rest",
            model_name=MODEL, rest_format="columnar", batch=2, concurrency=1,
            level_requests=20, level_seconds=0.2, store=tmp_path / "s.sqlite", progress=False,
        )
    assert isinstance(result, tfperf.LoadResult)
    doc = result.to_dict()
    assert doc["target"]["model"] == MODEL and not doc["target"]["protocol_guessed"]
    (level,) = doc["levels"]
    assert level["completed"] == level["sent"] > 0 and len(server.rows) > level["sent"]  # + warm-up
    assert set(server.rows) == {(2, "columnar")}
