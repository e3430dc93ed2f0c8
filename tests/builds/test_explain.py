"""`tfperf builds explain` quotes figures from a real store: bench comparisons and tune outcomes."""

from __future__ import annotations

import json

from tfperf.builds.explain import collect_figures, explain
from tfperf.store import Store

WORKLOAD = {"kind": "builtin", "name": "lstm", "size": "tiny", "batch": 1}


def _speedup(median: float) -> dict:
    return {
        "median": median,
        "ci95": [median * 0.95, median * 1.05],
        "verdict": "faster",
        "n_pairs": 10,
        "p_value": 0.001,
    }


def _fill(path) -> tuple[int, int]:
    with Store.open(path) as db:
        bench = db.new_run("compare", "tfperf bench", WORKLOAD, {}, {})
        base = db.new_trial(bench, "default", {"xla": "off"}, "baseline")
        jit = db.new_trial(bench, "xla=jit", {"xla": "jit"}, "candidate")
        threads = db.new_trial(bench, "intra_threads=1", {"intra_threads": 1}, "candidate")
        db.add_comparison(bench, base, jit, _speedup(3.9))
        db.add_comparison(bench, base, threads, _speedup(1.1))
        fp16 = db.new_trial(bench, "runtime=litert-fp16", {"runtime": "litert-fp16"}, "candidate")
        db.add_comparison(bench, base, fp16, _speedup(5.5))
        tune = db.new_run("tune", "tfperf tune", WORKLOAD, {}, {})
        lite = db.new_trial(tune, "runtime=litert", {"runtime": "litert"}, "candidate")
        db.finish_trial(lite, "ok", {"outcome": {"speedup": _speedup(7.2)}}, None)
        failed = db.new_trial(tune, "xla=auto", {"xla": "auto"}, "candidate")
        db.finish_trial(failed, "failed", {"outcome": {"speedup": None}}, {"reason": "crash"})
        return bench, tune


def test_figures_come_from_comparisons_and_tune_outcomes(tmp_path):
    store = tmp_path / "store.sqlite"
    bench, tune = _fill(store)
    figures = collect_figures(str(store))
    assert [(f["run_id"], f["speedup"]) for f in figures["xla"]] == [(bench, 3.9)]
    # every LiteRT variant counts as LiteRT, not only the plain fp32 runtime
    assert sorted((f["run_id"], f["speedup"]) for f in figures["litert"]) == [
        (bench, 5.5),
        (tune, 7.2),
    ]
    assert figures["build"] == []  # thread counts are no build, nothing is invented
    doc = explain(str(store))
    assert set(doc["missing"]) == {"build"}
    assert any("3.90x" in line and "lstm (tiny)" in line for line in doc["lines"])
    assert any("tfperf builds compare" in line for line in doc["lines"])


def test_cli_explain_on_a_missing_store_says_what_to_run(cli, tmp_path):
    res = cli("builds", "explain", "--store", str(tmp_path / "none.sqlite"), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["figures"] == {"build": [], "xla": [], "litert": []}
    assert len(doc["missing"]) == 3
    # each missing category names a command that exists: tfperf compare --set KNOB=VALUE
    assert doc["missing"]["xla"].startswith("tfperf compare --workload NAME --set xla=")
    assert doc["missing"]["litert"].startswith("tfperf compare --workload NAME --set runtime=")
