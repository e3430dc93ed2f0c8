"""tfperf.report.html: the report document and the HTML page, rendered in a real browser."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tfperf
from helpers import fill_store, load, require
from tfperf.core.errors import UserError
from tfperf.report.html import build_report, describe_workload, write_html
from tfperf.store import Store

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"



def test_report_document_names_and_values(store_path: Path) -> None:
    ids = fill_store(store_path)
    doc = load(store_path, ids["run"])
    report = build_report(doc)
    assert report["schema_version"] == 1
    assert report["run"]["kind"] == "compare" and report["run"]["status"] == "ok"
    assert report["run"]["uuid"] == doc["run"]["uuid"] and len(report["run"]["uuid"]) == 36
    assert report["run"]["tfperf_version"] == tfperf.__version__
    results = {r["label"]: r for r in report["results"]}
    base = results["default"]
    assert base["n"] == 150 and base["batch"] == 4
    lat = base["latency_ms"]
    samples = next(t["samples_s"] for t in doc["trials"] if t["label"] == "default")
    assert lat["p50"] == pytest.approx(np.median(samples) * 1e3)
    assert lat["p50_ci95"][0] <= lat["p50"] <= lat["p50_ci95"][1]
    assert {"p90", "p99", "mean"} <= set(lat)
    assert base["throughput_per_s"] == pytest.approx(4 / np.median(samples))
    assert base["warmup"] == {"n": 3, "seconds": pytest.approx(0.064), "steady_from": 0}
    assert results["xla=jit"]["peak_share"] == pytest.approx(4.5 / 60.0)
    failed = results["allocator=broken"]
    assert failed["status"] == "failed" and failed["n"] == 0
    assert "SIGSEGV" in failed["warnings"][0]
    comps = {c["candidate"]["label"]: c for c in report["comparisons"]}
    assert set(comps) == {"xla=jit", "threads=2"}
    fast = comps["xla=jit"]["speedup"]
    assert fast["verdict"] == "faster"
    assert fast["ci95"][0] <= 1.5 <= fast["ci95"][1]
    assert comps["threads=2"]["speedup"]["verdict"] in ("same", "inconclusive")
    assert comps["xla=jit"]["source"] == "stored"


def test_comparisons_recomputed_from_blocks_when_none_were_stored(store_path: Path) -> None:
    ids = fill_store(store_path, compare=False)
    report = build_report(load(store_path, ids["run"]))
    comps = {c["candidate"]["label"]: c for c in report["comparisons"]}
    assert set(comps) == {"xla=jit", "threads=2", "allocator=broken"}
    assert comps["xla=jit"]["source"] == "recomputed"
    assert comps["xla=jit"]["speedup"]["verdict"] == "faster"
    assert comps["xla=jit"]["speedup"]["n_pairs"] == 10
    assert comps["allocator=broken"]["speedup"]["median"] is None


def test_run_without_comparisons(store_path: Path) -> None:
    ids = fill_store(store_path)
    report = build_report(load(store_path, ids["bench"]))
    assert report["comparisons"] == []
    assert report["results"][0]["peak_share"] is None


def test_flop_rates_from_each_kind_of_trial_info(store_path: Path) -> None:
    infos = {
        "top": {"gflops": 2.0, "peak_gflops": 40.0},
        "measured": {"summary": {"flops": {"gflops_per_s": 3.0, "peak_gflops": 60.0}}},
        "per_call": {"flops": {"per_call": 2e6, "source": "analytic"}},
        "unknown": {"flops": {"per_call": None, "source": "unknown"}},
    }
    with Store.open(store_path) as store:
        run = store.new_run("bench", "x", {}, {}, {})
        for label, info in infos.items():
            trial = store.new_trial(run, label, {}, "candidate")
            store.add_block(trial, [0.001] * 8, "steady")
            store.finish_trial(trial, "ok", info, None)
        store.finish_run(run, "ok", {"peak": {"fp32_gflops": 50.0, "bf16_gflops": None}})
        results = {r["label"]: r for r in build_report(store.load_run(run))["results"]}
    assert results["top"]["peak_share"] == pytest.approx(0.05)
    assert results["measured"]["peak_share"] == pytest.approx(0.05)
    assert results["per_call"]["gflops"] == pytest.approx(2.0)  # 2 MFLOP in 1 ms
    assert results["per_call"]["peak_share"] == pytest.approx(2.0 / 50.0)
    assert results["unknown"]["gflops"] is None and results["unknown"]["peak_share"] is None


def test_latency_plot_uses_boxes_on_a_log_axis_for_heavy_tails() -> None:
    from tfperf.report.html import latency_figure

    rng = np.random.default_rng(12)
    report = {"results": [{"trial_id": 1, "label": "a"}, {"trial_id": 2, "label": "b"}]}
    tight = {1: list(rng.lognormal(0, 0.05, 200)), 2: list(rng.lognormal(0.1, 0.05, 200))}
    fig = latency_figure(report, tight)
    assert [t.type for t in fig.data] == ["violin", "violin"]
    assert fig.layout.yaxis.type == "linear"
    tailed = {k: [*v, 30.0] for k, v in tight.items()}  # one 30x stall per config
    fig = latency_figure(report, tailed)
    assert [t.type for t in fig.data] == ["box", "box"]
    assert fig.layout.yaxis.type == "log"


def test_describe_workload() -> None:
    assert describe_workload({"kind": "builtin", "name": "lstm", "size": "tiny", "batch": 1}) == (
        "lstm (tiny, batch 1)"
    )
    assert describe_workload({"kind": "model", "path": "/a/b/", "format": "savedmodel"}) == (
        "b (savedmodel)"
    )
    assert describe_workload(None) == "-"


def test_html_is_self_contained(store_path: Path, tmp_path: Path) -> None:
    ids = fill_store(store_path)
    out = write_html(load(store_path, ids["run"]), tmp_path / "r.html")
    text = out.read_text()
    markup = re.sub(r"<script[^>]*>.*?</script>", "<script></script>", text, flags=re.DOTALL)
    assert not re.search(r"<script[^>]+src=|<link|<img|@import|url\(", markup)
    assert text.count("Plotly.newPlot") == 3
    assert len(text) > 1_000_000  # plotly.js itself is embedded
    assert "SIGSEGV" in text and "xla=jit" in text


def test_html_escapes_labels(store_path: Path, tmp_path: Path) -> None:
    with Store.open(store_path) as store:
        run = store.new_run("bench", "<b>cmd</b>", {}, {}, {})
        trial = store.new_trial(run, "<script>alert(1)</script>", {}, "baseline")
        store.add_block(trial, [0.001] * 10, "steady")
        store.finish_trial(trial, "ok", {}, None)
        doc = store.load_run(run)
    text = write_html(doc, tmp_path / "r.html").read_text()
    assert "<script>alert(1)</script>" not in text
    assert "&lt;b&gt;cmd&lt;/b&gt;" in text


def test_html_unwritable_path_is_a_user_error(store_path: Path, tmp_path: Path) -> None:
    ids = fill_store(store_path)
    with pytest.raises(UserError, match="--html"):
        write_html(load(store_path, ids["run"]), tmp_path / "missing" / "r.html")


def rendered_dom(html_file: Path, profile: Path) -> str:
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            html_file.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return re.sub(r"<script.*?</script>", "", proc.stdout, flags=re.DOTALL)


def test_html_renders_in_headless_chromium(store_path: Path, tmp_path: Path) -> None:
    require(Path(CHROMIUM).exists(), "chromium is not installed (apt-get install chromium)")
    ids = fill_store(store_path)
    out = write_html(load(store_path, ids["run"]), tmp_path / "r.html")
    dom = rendered_dom(out, tmp_path / "profile")
    # Each plot becomes plotly SVG: 3 figures, 3 violins (failed trial has none), 2 bar traces.
    assert dom.count('class="plot-container plotly"') == 3
    assert len(re.findall(r'<path class="violin"[^>]* d="M', dom)) == 3
    assert dom.count('class="trace bars"') == 2
    assert len(re.findall(r'<g class="point">', dom)) == 2 + 3
    assert "1.5" in dom and "faster" in dom


REPORT_LIMIT = 5_000_000
"""A report must stay small enough to open at once and to attach to a ticket."""


def _many_calls(path: Path, configs: int, calls: int) -> int:
    """A run of ``configs`` trials of ``calls`` sub-millisecond calls each, in blocks of 5000."""
    rng = np.random.default_rng(3)
    with Store.open(path) as store:
        run = store.new_run("bench", "tfperf bench --workload mlp", {"name": "mlp"}, {}, {})
        for index in range(configs):
            trial = store.new_trial(run, f"c{index}", {}, "baseline" if index == 0 else "candidate")
            for _ in range(calls // 5000):
                store.add_block(trial, (2e-4 * rng.lognormal(0, 0.1, 5000)).tolist(), "steady")
            store.finish_trial(trial, "ok", {"batch": 1}, None)
        store.finish_run(run, "ok", {})
    return run


def test_a_report_of_many_calls_stays_small_and_states_the_count(
    store_path: Path, tmp_path: Path
) -> None:
    run = _many_calls(store_path, configs=4, calls=150_000)
    page = write_html(load(store_path, run), tmp_path / "r.html")
    text = page.read_text()
    assert page.stat().st_size < REPORT_LIMIT
    assert text.count("Plotly.newPlot") == 2 and text.count("window.PlotlyConfig") == 1
    assert "c0 (n=150,000)" in text and "101 percentiles" in text


def test_speedup_plot_names_the_baseline_of_each_bar() -> None:
    from tfperf.report.html import speedup_figure

    def comp(base: str, cand: str, median: float) -> dict:
        return {
            "baseline": {"label": base},
            "candidate": {"label": cand},
            "speedup": {
                "median": median,
                "ci95": [median - 0.1, median + 0.2],
                "verdict": "faster",
                "threshold": 0.03,
            },
        }

    one = speedup_figure({"comparisons": [comp("default", "a", 1.2)]})
    assert list(one.data[0].x) == ["a"] and "vs default" in one.layout.title.text
    assert list(one.data[0].error_y.array) == pytest.approx([0.2])
    assert list(one.data[0].error_y.arrayminus) == pytest.approx([0.1])
    two = speedup_figure({"comparisons": [comp("default", "a", 1.2), comp("a", "b", 1.1)]})
    assert list(two.data[0].x) == ["a vs default", "b vs a"]


def test_every_report_opens_with_its_answer(store_path: Path, tmp_path: Path) -> None:
    ids = fill_store(store_path)
    text = write_html(load(store_path, ids["run"]), tmp_path / "r.html").read_text()
    headings = re.findall(r"<h2>(.*?)</h2>", text)
    assert headings[:2] == ["Answer", "Results"]
    answer = text[text.index("<h2>Answer</h2>") : text.index("<h2>Results</h2>")]
    assert "xla=jit vs default" in answer and "(faster)" in answer
    assert "threads=2 vs default" in answer


@pytest.mark.tf
@pytest.mark.slow
def test_a_tune_report_opens_with_the_answer_in_chromium(tmp_path: Path) -> None:
    from helpers import run_cli

    require(Path(CHROMIUM).exists(), "chromium is not installed (apt-get install chromium)")
    store, profile = tmp_path / "s.sqlite", tmp_path / "p.json"
    tuned = run_cli(
        "tune", "--workload", "mlp", "--size", "tiny", "--knobs", "runtime",
        "--runtimes", "tf,litert", "--max-trials", "1", "--confirm-rounds", "6",
        "--store", str(store), "--profile-out", str(profile), "--json",
    )
    assert tuned.returncode == 0, tuned.stderr
    rec = json.loads(tuned.stdout)["recommendation"]
    page = tmp_path / "tune.html"
    shown = run_cli("report", "latest", "--store", str(store), "--html", str(page))
    assert shown.returncode == 0, shown.stderr
    assert page.stat().st_size < REPORT_LIMIT  # a sub-millisecond model: many calls each
    dom = rendered_dom(page, tmp_path / "chromium")
    drawn = re.findall(r'<path class="(?:violin|box)"[^>]* d="M', dom)
    assert drawn and re.search(r"\(n=[\d,]+\)", dom)  # the latency plot, its counts stated
    headings = re.findall(r"<h2>(.*?)</h2>", dom)
    assert headings[0] == "Answer" and "Results" in headings
    answer = dom[dom.index("<h2>Answer</h2>") : dom.index("<h2>Results</h2>")]
    if rec["keep_default"]:
        assert "Keep the default." in answer and "case:" in answer
    else:
        assert rec["label"] in answer and "confirmed speedup (95% CI)" in answer
        assert f"tfperf run --profile {profile}" in answer
        assert "adopting it takes" in answer and "max relative error" in answer


def test_a_config_measured_twice_is_named_and_drift_and_few_samples_are_said_once(
    store_path: Path,
) -> None:
    # a tune measures runtime=xla-aot,runtime_threads=2 against the default, then against
    # a later answer; every config's times drift the same way (the machine slowed down)
    rng = np.random.default_rng(3)
    twice = "runtime=xla-aot,runtime_threads=2"
    with Store.open(store_path) as store:
        run = store.new_run("tune", "tfperf tune --workload lstm --quick",
                            {"kind": "builtin", "name": "lstm", "size": "tiny", "batch": 1},
                            {"cpu": "test cpu"}, {"threshold": 0.03})
        trials = [("default", {}, "baseline"), (twice, {}, "candidate"),
                  ("runtime=xla-aot", {}, "candidate"),
                  (twice, {"runtime": "xla-aot"}, "candidate")]
        for name, incumbent, role in trials:
            trial = store.new_trial(run, name, {}, role)
            for slower in np.linspace(1.0, 1.3, 9):  # the machine slows down by 30%
                store.add_block(trial, (0.002 * slower * rng.lognormal(0, 0.01, 20)).tolist(),
                                "steady")
            outcome = {"label": name, "incumbent": incumbent} if role == "candidate" else None
            store.finish_trial(trial, "ok", {"outcome": outcome} if outcome else {}, None)
        for name in ("onednn=off", "intra_threads=1"):  # stopped at four rounds: cannot win
            trial = store.new_trial(run, name, {}, "candidate")
            store.add_block(trial, [0.002, 0.0021, 0.0019, 0.002], "steady")
            store.finish_trial(trial, "ok", {}, None)
        store.finish_run(run, "ok", {})
    report = build_report(load(store_path, run))
    labels = [r["label"] for r in report["results"]]
    assert labels == ["default", twice, "runtime=xla-aot",
                      f"{twice} (against runtime=xla-aot)", "onednn=off", "intra_threads=1"]
    assert not any("drifted" in w or "samples" in w
                   for r in report["results"] for w in r["warnings"])
    (drift,) = [w for w in report["warnings"] if "drifted" in w]
    assert drift.startswith("the machine's speed drifted during the run: 4 of the 6 "
                            "configurations' times moved by +")
    (few,) = [w for w in report["warnings"] if "fewer than 10 samples" in w]
    assert few.startswith("2 configurations were measured on fewer than 10 samples")
