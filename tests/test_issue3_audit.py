"""`tfperf report` on runs that did not finish ok, as a user meets them through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli
from test_store import WRITER, kill_writer_after

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
    from tfperf.stats import paired_speedup

    result = paired_speedup([0.001 * (i + 1) for i in range(8)], [])
    assert result["verdict"] == "inconclusive" and result["n_pairs"] == 0
    assert result["warnings"] == ["no pairs to compare"]
    uneven = paired_speedup([0.001] * 8, [0.001] * 6)
    assert any("only the first 6 pairs" in w for w in uneven["warnings"])
