"""`tfperf history` and `tfperf report` through the real CLI, on stores filled with seeded data."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import fill_store, kill_writer_after, run_cli
from tfperf.store import SCHEMA_VERSION

WIDE = {"COLUMNS": "200"}  # human tables are checked without line wrapping


def test_history_lists_runs_newest_first(store_path: Path) -> None:
    ids = fill_store(store_path)
    res = run_cli("history", "--store", str(store_path), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["schema_version"] == 1 and doc["store"] == str(store_path)
    assert [r["id"] for r in doc["runs"]] == [ids["bench"], ids["run"]]
    compare = doc["runs"][1]
    assert compare["kind"] == "compare" and compare["status"] == "ok"
    assert compare["trials"] == {"ok": 3, "failed": 1}
    assert compare["workload"]["name"] == "mlp"
    limited = json.loads(
        run_cli("history", "--store", str(store_path), "--limit", "1", "--json").stdout
    )
    assert [r["id"] for r in limited["runs"]] == [ids["bench"]]
    human = run_cli("history", "--store", str(store_path), env=WIDE)
    assert human.returncode == 0
    assert "mlp (tiny, batch 4)" in human.stdout and "m.keras (keras)" in human.stdout
    assert "3 ok" in human.stdout and "1 failed" in human.stdout


def test_history_of_one_run_lists_its_trials(store_path: Path) -> None:
    ids = fill_store(store_path)
    res = run_cli("history", str(ids["run"]), "--json", env={"TFPERF_STORE": str(store_path)})
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    trials = {t["label"]: t for t in doc["trials"]}
    assert trials["default"]["n_samples"] == 150 and trials["default"]["n_warmup"] == 3
    assert trials["allocator=broken"]["status"] == "failed"
    assert "SIGSEGV" in trials["allocator=broken"]["error"]["reason"]
    human = run_cli("history", "latest", "--store", str(store_path), env=WIDE)
    assert human.returncode == 0 and "m.keras" in human.stdout


def test_history_of_a_missing_store_is_empty_and_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "none.sqlite"
    res = run_cli("history", "--store", str(missing))
    assert res.returncode == 0 and "No runs" in res.stdout
    assert not missing.exists()


def test_report_json_and_table(store_path: Path) -> None:
    ids = fill_store(store_path)
    res = run_cli("report", str(ids["run"]), "--store", str(store_path), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["schema_version"] == 1
    for result in doc["results"]:
        assert set(result["latency_ms"]) >= {"p50", "p90", "p99", "p50_ci95"}
    fast = next(c for c in doc["comparisons"] if c["candidate"]["label"] == "xla=jit")
    assert fast["speedup"]["verdict"] == "faster"
    assert len(fast["speedup"]["ci95"]) == 2
    table = run_cli("report", str(ids["run"]), "--store", str(store_path), env=WIDE)
    assert table.returncode == 0 and "p50 ms" in table.stdout
    assert "faster" in table.stdout and "SIGSEGV" in table.stdout and "xla=jit" in table.stdout


def test_report_html_writes_file(store_path: Path, tmp_path: Path) -> None:
    fill_store(store_path)
    out = tmp_path / "r.html"
    res = run_cli("report", "1", "--store", str(store_path), "--html", str(out), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["html"] == str(out)
    assert out.stat().st_size > 1_000_000 and "Plotly.newPlot" in out.read_text()


def assert_user_error(res, *words: str) -> None:
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    assert res.stderr.startswith("error:")
    for word in words:
        assert word in res.stderr


def test_bad_input_exits_2_with_one_sentence(store_path: Path, tmp_path: Path) -> None:
    fill_store(store_path)
    assert_user_error(run_cli("report", "42", "--store", str(store_path)), "no run 42")
    assert_user_error(run_cli("report", "x", "--store", str(store_path)), "not a run id")
    assert_user_error(run_cli("history", "--limit", "0", "--store", str(store_path)), "--limit")
    assert_user_error(
        run_cli("report", "1", "--store", str(tmp_path / "none.sqlite")), "no tfperf store"
    )
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_user_error(
        run_cli("report", "1", "--store", str(store_path), "--html", str(blocker / "r.html")),
        "--html",
    )
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"\x00garbage" * 512)
    assert_user_error(run_cli("history", "--store", str(junk)), "not a tfperf store")


def test_a_store_of_a_newer_tfperf_is_refused(store_path: Path) -> None:
    fill_store(store_path)
    conn = sqlite3.connect(store_path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    res = run_cli("history", "--store", str(store_path))
    assert_user_error(res, "written by a newer tfperf", "`pip install -U tfperf`", "--store")
    assert res.stderr.count("\n") == 1


def test_help_does_not_load_heavy_modules() -> None:
    code = (
        "import sys; from tfperf.cli import app; "
        "print(sorted(m for m in ('numpy', 'scipy', 'plotly', 'tensorflow', 'sqlite3') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = [m for m in ("numpy", "scipy", "plotly", "tensorflow") if m in out.stdout]
    assert loaded == [], out.stdout


@pytest.mark.tf
@pytest.mark.slow
def test_history_and_report_of_a_real_bench_run(tmp_path: Path) -> None:
    """The whole path: real workers measure a tiny workload, then history/report read it."""
    store = tmp_path / "real.sqlite"
    bench = run_cli(
        "bench",
        "--workload",
        "mlp",
        "--size",
        "tiny",
        "--set",
        "onednn=off",
        "--budget",
        "1",
        "--no-peak",
        "--store",
        str(store),
        "--json",
        timeout=240,
    )
    assert bench.returncode == 0, bench.stderr[-3000:]
    run_id = json.loads(bench.stdout)["run_id"]
    runs = json.loads(run_cli("history", "--store", str(store), "--json").stdout)["runs"]
    assert [(r["id"], r["kind"], r["status"]) for r in runs] == [(run_id, "bench", "ok")]
    html = tmp_path / "real.html"
    res = run_cli("report", str(run_id), "--store", str(store), "--json", "--html", str(html))
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [r["label"] for r in doc["results"]] == ["default", "onednn=off"]
    for result in doc["results"]:
        assert result["status"] == "ok" and result["n"] > 0
        lat = result["latency_ms"]
        assert 0 < lat["p50_ci95"][0] <= lat["p50"] <= lat["p50_ci95"][1]
        assert result["gflops"] is not None  # the built-in mlp has an analytic FLOP count
    (comp,) = doc["comparisons"]
    assert comp["source"] == "stored" and comp["speedup"]["n_pairs"] >= 1
    assert comp["speedup"]["verdict"] in ("faster", "slower", "same", "inconclusive")
    assert "Plotly.newPlot" in html.read_text()


KILLED_WRITER = """
import sys
import numpy as np
from tfperf.store import Store

rng = np.random.default_rng(3)
store = Store.open(sys.argv[1])
run = store.new_run("compare", "killed compare", {"kind": "builtin", "name": "lstm"}, {}, {})
base = store.new_trial(run, "default", {}, "baseline")
cand = store.new_trial(run, "xla=jit", {"xla": "jit"}, "candidate")
rounds = 0
while True:
    drift = rng.uniform(0.8, 1.2)
    store.add_block(base, (0.004 * drift * rng.lognormal(0, 0.02, 10)).tolist(), "steady")
    store.add_block(cand, (0.002 * drift * rng.lognormal(0, 0.02, 10)).tolist(), "steady")
    rounds += 1
    print(rounds, flush=True)
"""


def test_report_of_a_run_killed_with_sigkill(store_path: Path) -> None:
    kill_writer_after(KILLED_WRITER, store_path, 12)
    runs = json.loads(run_cli("history", "--store", str(store_path), "--json").stdout)["runs"]
    assert runs[0]["status"] == "interrupted" and runs[0]["trials"] == {"interrupted": 2}
    res = run_cli("report", "latest", "--store", str(store_path), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["run"]["status"] == "interrupted"
    assert any("interrupted" in w for w in doc["warnings"])
    (comp,) = doc["comparisons"]
    assert comp["source"] == "recomputed" and comp["speedup"]["n_pairs"] >= 12
    assert comp["speedup"]["verdict"] == "faster"
    assert comp["speedup"]["ci95"][0] <= 2.0 <= comp["speedup"]["ci95"][1]


def test_piped_history_prints_long_config_labels_whole(store_path: Path) -> None:
    from tfperf.store import Store

    label = "runtime=litert-dynint8,runtime_threads=1,allocator=tcmalloc"
    with Store.open(store_path) as store:
        run = store.new_run("tune", "tfperf tune", {"kind": "builtin", "name": "lstm"}, {}, {})
        trial = store.new_trial(run, label, {"runtime": "litert-dynint8"}, "candidate")
        store.add_block(trial, [0.001] * 8, "steady")
        store.finish_trial(trial, "ok", {}, None)
        store.finish_run(run, "done", {})
    result = run_cli("history", str(run), "--store", str(store_path))
    assert result.returncode == 0
    assert any(label in line for line in result.stdout.splitlines())
