"""A load run in the report: its levels read back from the store, the tables and the picture of
latency percentiles against achieved throughput with the SLO line. Levels are built from
records the test sets, so no worker runs."""

from __future__ import annotations

import json
from pathlib import Path

from tfperf.core.config import Config
from tfperf.core.serving import ServingLayout
from tfperf.report.html import build_report, write_html
from tfperf.report.load import load_lines
from tfperf.runner.recorder import RunRecorder
from tfperf.serving.generator import LevelRecord
from tfperf.serving.levels import level_of
from tfperf.store import Store

WORKLOAD = {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1}


def _level(rate: float, latency_ms: float, n: int = 300):
    lat = [latency_ms / 1000.0] * n
    record = LevelRecord(sent=n, completed=n, latencies_s=lat, from_send_s=lat,
                         answered_s=[i / rate for i in range(n)], service_s=[0.0005] * n,
                         arrivals_s=n / rate, duration_s=n / rate + 0.5, drain_s=0.5,
                         cpu_s=0.01)
    return level_of(record, offered_qps=rate)


def _stored_load_run(path: Path, finished: bool = True) -> dict:
    with Store.open(path) as store:
        with RunRecorder(store, "load", "tfperf bench --slo-ms 10", WORKLOAD, {}, {}) as run:
            for instances in (1, 2):
                layout = ServingLayout(instances=instances)
                info = {"layout": layout.to_dict(), "layout_label": layout.label(),
                        "scenario": {"slo_ms": 10.0}}
                trial = run.trial(layout.label(), Config().to_dict(), "serving")
                run.trial_info(trial, info)
                levels = [_level(100.0 * instances, 2.0), _level(400.0 * instances, 30.0)]
                for level in levels:
                    run.block(trial, [level.p50_ms / 1000.0] * 300, "load", level.to_dict())
                if finished:
                    result = {"slo_ms": 10.0, "max_qps_at_slo": levels[0].achieved_qps}
                    run.finish_trial(trial, "ok", {**info, "result": result})
            if finished:
                run.finish("ok", {})
        return store.load_run(run.run_id)


def test_the_report_document_holds_each_layouts_levels_and_answer(tmp_path):
    report = build_report(_stored_load_run(tmp_path / "s.sqlite"))
    assert report["results"] == []
    one, two = report["load"]
    assert (one["layout_label"], two["layout_label"]) == ("1x", "2x")
    assert [lv["offered_qps"] for lv in two["levels"]] == [200.0, 800.0]
    assert two["slo_ms"] == 10.0 and two["max_qps_at_slo"] == two["levels"][0]["achieved_qps"]
    lines = load_lines(report)
    assert lines[0] == "layout 1x:" and any("max QPS within p99 10 ms" in ln for ln in lines)


def test_a_run_stopped_mid_sweep_keeps_its_finished_levels(tmp_path):
    report = build_report(_stored_load_run(tmp_path / "s.sqlite", finished=False))
    assert [len(s["levels"]) for s in report["load"]] == [2, 2]
    assert report["load"][0]["max_qps_at_slo"] is None and report["load"][0]["slo_ms"] == 10.0


def test_the_html_page_draws_percentiles_against_achieved_rate_per_layout_with_the_slo(tmp_path):
    doc = _stored_load_run(tmp_path / "s.sqlite")
    page = write_html(doc, tmp_path / "r.html").read_text()
    assert "Latency under load" in page and "SLO p99 10 ms" in page
    assert "Layout 2x: max 200 requests/s with p99 within 10 ms" in page
    for name in ("1x p50", "1x p90", "1x p99", "2x p50", "2x p99"):
        assert json.dumps(name) in page
    assert "Speedups" not in page  # the sections of other runs are left out


def test_each_level_line_shows_the_model_call_the_drain_and_what_a_percentile_needs(tmp_path):
    report = build_report(_stored_load_run(tmp_path / "s.sqlite"))
    lines = load_lines(report)
    header = lines[1]
    assert "service p50/p99 ms" in header and "drain s" in header
    first = lines[2].split(" | ")
    assert first[4].startswith("- (n<1000)")  # 300 requests: p99 needs 1000
    assert first[5] == "- (n<10000)"
    assert first[9] == "0.5" and first[11] == "0.5 / -"  # drain; service p50, its p99 needs more


def test_a_remote_server_s_levels_show_the_client_s_wait_reconnects_and_the_server_s_time():
    from rich.console import Console

    from tfperf.report.load import load_table

    level = _level(100.0, 2.0, n=1000).to_dict() | {
        "client_queue_ms": {"p50": 0.01, "p99": 0.2}, "reconnects": 3,
        "server_ms": {"queue_ms": 0.4, "compute_ms": 1.2, "requests": 1000}}
    section = {"layout_label": "v2-rest m", "target": {"url": "http://127.0.0.1:1/v2/models/m"},
               "levels": [level]}
    wide = Console(width=400)
    with wide.capture() as captured:
        wide.print(load_table(section))
    text = captured.get()
    for shown in ("client queue p50/p99 ms", "reconnects", "server queue/compute ms",
                  "0.01 / 0.2", "0.4 / 1.2"):
        assert shown in text
    assert "floor" not in text
