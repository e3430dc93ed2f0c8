"""``tfperf bench --ops`` end to end: each trial carries its own op profile in the JSON
document and the stored run, the console reads it, and a runtime without a profiler says so."""

from __future__ import annotations

import json
import math

import pytest

from helpers import require_package, run_cli

require_package("xprof", "pip install 'tfperf[ops]'")


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bench-ops")
    # the standard mlp: TensorFlow's tracer misses the tiny one's matmuls in some runs (it
    # runs them inline), which the profile then says in a note
    res = run_cli("bench", "--workload", "mlp", "--size", "standard", "--set", "runtime=litert",
                  "--ops", "--budget", "1", "--processes", "1", "--json",
                  "--store", str(folder / "s.sqlite"), "--export", str(folder / "run.json"),
                  env={"TFPERF_CACHE_DIR": str(folder / "cache")})
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout), folder


def test_each_trial_carries_its_own_profile(doc):
    document, _ = doc
    tf_result, litert_result = document["results"]
    profile = tf_result["ops"]
    assert profile["available"] and profile["source"].startswith("tensorflow-profiler")
    assert math.isclose(sum(t["self_share"] for t in profile["op_types"]), 1.0, rel_tol=1e-9)
    assert profile["op_types"][-1]["type"] == "overhead"
    assert profile["roofline"]["bandwidth_gbs"] > 0 and profile["roofline"]["peak_gflops"] > 0
    # the mlp's three Dense layers: each matmul carries its layer's FLOPs
    carried = [o for o in profile["ops"] if o.get("flops")]
    assert carried and all(o["layer"] and o["bound"] in ("compute", "memory") for o in carried)
    assert litert_result["ops"]["available"] is False
    assert "no per-op profiler" in litert_result["ops"]["reason"]


def test_the_memory_record_is_read_before_the_profiler_grows_the_worker(doc):
    """The profiler (its trace buffers, xprof's reader) grows TensorFlow's worker after the
    rounds: the worker's own peak in bytes has that growth, the configuration's memory must not,
    so that ``compare --fail-on-memory-growth`` of an ``--ops`` run against a plain run gates on
    the configuration alone."""
    document, _ = doc
    tf_result = document["results"][0]
    worker_peak_mb = tf_result["peak_rss_bytes"] / 2**20
    assert tf_result["memory"]["peak_rss_mb"] < worker_peak_mb - 1, tf_result["memory"]


def test_the_console_names_the_op_types_and_the_missing_profiler(doc):
    from tfperf.cli.bench import render_bench
    from tfperf.report.console import console

    document, _ = doc
    with console().capture() as captured:
        render_bench(document)
    text = captured.get()
    assert "default: op types (tensorflow-profiler" in text
    assert "runtime=litert: no op profile: LiteRT's Python interpreter" in text


def test_the_exported_run_keeps_the_profiles(doc):
    _document, folder = doc
    exported = json.loads((folder / "run.json").read_text())
    trials = exported.get("trials") or []
    assert [bool((t.get("ops") or {}).get("available")) for t in trials] == [True, False]


def test_compare_of_two_profiled_runs_lines_up_the_op_types(doc, tmp_path):
    _document, folder = doc
    res = run_cli("compare", str(folder / "run.json"), str(folder / "run.json"), "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    compared = json.loads(res.stdout)
    ops = compared["comparisons"][0]["ops"]
    families = [r["family"] for r in ops["families"]]
    assert "overhead" in families and "matmul" in families and len(families) == len(set(families))
    assert all(r["a_ms"] == r["b_ms"] for r in ops["families"])  # the same run twice


def test_the_html_report_draws_the_shares_and_the_roofline(doc):
    document, folder = doc
    page = folder / "r.html"
    res = run_cli("report", str(document["run_id"]), "--store", str(folder / "s.sqlite"),
                  "--html", str(page))
    assert res.returncode == 0, res.stderr[-2000:]
    text = page.read_text()
    assert "Where the time goes (op families)" in text and "Roofline (op types)" in text
    assert '"barmode":"stack"' in text
    assert "roof: " in text  # the peak and bandwidth lines
