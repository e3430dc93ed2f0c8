"""`tfperf report` on runs that did not finish ok, as a user meets them through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import WRITER, kill_writer_after, run_cli

WIDE = {"COLUMNS": "200"}  # human tables are checked without line wrapping


def test_report_of_killed_run_keeps_sample_counts_and_says_it_was_interrupted(
    store_path: Path,
) -> None:
    reported = kill_writer_after(WRITER, store_path, 20)
    doc = json.loads(run_cli("report", "latest", "--store", str(store_path), "--json").stdout)
    assert doc["run"]["status"] == "interrupted"
    assert any("was interrupted" in w for w in doc["warnings"])
    n = doc["results"][0]["n"]
    assert n >= 3 * reported
    human = run_cli("report", "latest", "--store", str(store_path), env=WIDE)
    assert human.returncode == 0, human.stderr
    row = next(line for line in human.stdout.splitlines() if line.startswith("default"))
    assert "interrupted" in row and str(n) in row
    assert "the run is interrupted" not in human.stdout


def test_a_candidate_without_rounds_is_not_said_to_use_zero_pairs() -> None:
    from tfperf.core.stats import paired_speedup

    result = paired_speedup([0.001 * (i + 1) for i in range(8)], [])
    assert result["verdict"] == "inconclusive" and result["n_pairs"] == 0
    assert result["warnings"] == ["no pairs to compare"]
    uneven = paired_speedup([0.001] * 8, [0.001] * 6)
    assert any("only the first 6 pairs" in w for w in uneven["warnings"])


def test_a_killed_bench_keeps_each_ready_trials_cold_start_and_install_fingerprint(
    store_path: Path,
) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from tfperf.store import Store

    cmd = [sys.executable, "-m", "tfperf", "bench", "--workload", "mlp", "--size", "tiny"]
    cmd += ["--budget", "300", "--precision", "0.00001", "--no-peak", "--store", str(store_path)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        steady = 0
        while steady < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
            if store_path.exists():
                with Store.open(store_path) as st:
                    if st.list_runs(1):
                        trials = st.load_run("latest")["trials"]
                        steady = sum(b["phase"] == "steady" for t in trials for b in t["blocks"])
        assert steady >= 2, "the run never reached its steady phase"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    with Store.open(store_path) as st:
        trial = st.load_run("latest")["trials"][0]
    assert trial["status"] == "interrupted"
    assert trial["info"]["cold_start_s"] > 0
    fingerprint = trial["info"]["install"]["fingerprint"]
    assert len(fingerprint) == 12 and int(fingerprint, 16) >= 0
    doc = json.loads(run_cli("history", "latest", "--store", str(store_path), "--json").stdout)
    assert doc["trials"][0]["install_fingerprint"] == fingerprint
