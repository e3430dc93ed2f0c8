"""history, report, apply and bench under load as library functions, through ``import tfperf``
only: each takes the command's options as keyword arguments and returns a typed, frozen
result whose ``to_dict()`` is what the command prints with ``--json``.

Real stores filled with real samples, a real profile file, real workers under real load.
"""

from __future__ import annotations

import dataclasses
import json

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
    result = tfperf.bench(workload="mlp", size="tiny", concurrency=[1, 2], slo_ms=1000,
                          level_requests=20, level_seconds=0.2, store=store, progress=False)
    assert isinstance(result, tfperf.LoadResult)
    doc = result.to_dict()
    assert doc["kind"] == "load" and doc["scenario"]["concurrency"] == [1, 2]
    assert [lv["concurrency"] for lv in doc["levels"][:2]] == [1, 2]
    assert all(lv["completed"] >= 20 for lv in doc["levels"][:2])
    assert result.max_qps_at_slo is not None and "requests/s" in repr(result)
    shown = tfperf.history(store=store)
    assert shown.runs[0]["id"] == result.run_id and shown.runs[0]["kind"] == "load"
    with pytest.raises(tfperf.UserError, match="describe a server under load"):
        tfperf.bench(workload="mlp", size="tiny", max_batch=4, store=store, progress=False)
