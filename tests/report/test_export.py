"""tfperf.report.export: a stored run written as .json, .csv and .md and read back, from a store
filled with known samples and from a real run of the tiny built-in mlp."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from helpers import fill_store, load
from tfperf.core.errors import UserError
from tfperf.report.export import (
    RESULT_SCHEMA,
    RUN_COLUMNS,
    history_table,
    load_result,
    read_result,
    run_result,
    run_table,
    write,
)
from tfperf.store import Store

REQUIRED = {"config", "p50_ms", "p99_ms", "samples_per_s", "speedup", "speedup_low", "speedup_high"}


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _markdown_rows(path: Path) -> list[list[str]]:
    """The cells of each row of the Markdown table (header first, the rule left out)."""
    lines = [line for line in path.read_text().splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in lines[:1] + lines[2:]]


@pytest.fixture
def stored(store_path: Path) -> tuple[Path, dict[str, int]]:
    return store_path, fill_store(store_path)


def test_the_json_file_reads_back_as_the_stored_run(stored, tmp_path: Path) -> None:
    store, ids = stored
    loaded = load(store, ids["run"])
    result = run_result(loaded, store)
    path = write(run_table(result), tmp_path / "run.json")
    doc = json.loads(path.read_text())
    assert doc["schema"] == RESULT_SCHEMA and doc["run"]["kind"] == "compare"
    assert doc["machine"] == {"cpu": "test cpu"}
    back = read_result(path)
    assert back == result and back.origin == str(path)
    for trial, kept in zip(loaded["trials"], back.trials, strict=True):
        assert [b["samples_s"] for b in kept.blocks] == [b["samples_s"] for b in trial["blocks"]]
        assert [b["phase"] for b in kept.blocks] == [b["phase"] for b in trial["blocks"]]
        assert kept.steady_samples() == trial["samples_s"]
    by_label = {t.label: t for t in back.trials}
    stored_speedup = next(
        c["result"] for c in loaded["comparisons"] if c["candidate_trial"] == ids["xla=jit"]
    )
    fast = by_label["xla=jit"].speedup
    assert fast["baseline"] == "default" and fast["median"] == stored_speedup["median"]
    assert fast["ci95"] == stored_speedup["ci95"] and fast["verdict"] == "faster"
    assert by_label["default"].speedup is None
    assert by_label["allocator=broken"].status == "failed" and by_label["allocator=broken"].n == 0


def test_csv_and_markdown_rows_carry_the_stored_figures(stored, tmp_path: Path) -> None:
    store, ids = stored
    loaded = load(store, ids["run"])
    table = run_table(run_result(loaded, store))
    rows = _csv_rows(write(table, tmp_path / "run.csv"))
    assert set(rows[0]) >= REQUIRED and list(rows[0]) == list(RUN_COLUMNS)
    assert [r["config"] for r in rows] == [t["label"] for t in loaded["trials"]]
    default = next(t for t in loaded["trials"] if t["label"] == "default")
    assert float(rows[0]["p50_ms"]) == pytest.approx(np.median(default["samples_s"]) * 1e3)
    assert float(rows[0]["p99_ms"]) == pytest.approx(
        np.percentile(default["samples_s"], 99) * 1e3
    )
    assert float(rows[0]["samples_per_s"]) == pytest.approx(4 / np.median(default["samples_s"]))
    assert rows[0]["speedup"] == "" and rows[0]["role"] == "baseline"
    fast = rows[1]
    assert float(fast["speedup_low"]) <= float(fast["speedup"]) <= float(fast["speedup_high"])
    assert fast["verdict"] == "faster" and fast["runtime"] == "tf"
    assert rows[3]["status"] == "failed" and rows[3]["p50_ms"] == ""
    cells = _markdown_rows(write(table, tmp_path / "run.md"))
    assert cells[0] == list(RUN_COLUMNS)
    assert [r[0] for r in cells[1:]] == [r["config"] for r in rows]
    assert cells[2][cells[0].index("speedup")] == format(float(fast["speedup"]), ".4g")


def test_history_has_one_row_per_run_with_its_fastest_config(stored, tmp_path: Path) -> None:
    store, ids = stored
    rows = _csv_rows(write(history_table(store), tmp_path / "history.csv"))
    assert [int(r["run_id"]) for r in rows] == [ids["bench"], ids["run"]]
    assert set(rows[0]) >= REQUIRED
    compare = rows[1]
    assert compare["config"] == "xla=jit" and compare["verdict"] == "faster"
    assert float(compare["baseline_p50_ms"]) > float(compare["p50_ms"])
    assert rows[0]["config"] == "default" and rows[0]["speedup"] == ""
    doc = json.loads(write(history_table(store), tmp_path / "history.json").read_text())
    assert doc["schema"] == "tfperf-history/1"
    assert [r["id"] for r in doc["runs"]] == [ids["bench"], ids["run"]]
    assert doc["runs"][1]["best"]["config"] == "xla=jit"


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        ({"schema": "tfperf-result/2"}, "upgrade tfperf"),
        ({"schema": "tfperf-history/1"}, "not one run's result"),
        ({"schema": None}, "not a tfperf result file"),
        ({"trials": None}, "not a complete tfperf result file"),
    ],
)
def test_a_file_of_another_format_or_version_is_refused(stored, tmp_path, edit, needle) -> None:
    store, ids = stored
    path = write(run_table(run_result(load(store, ids["run"]))), tmp_path / "run.json")
    doc = json.loads(path.read_text())
    doc.update(edit)
    path.write_text(json.dumps(doc))
    with pytest.raises(UserError, match=needle):
        read_result(path)


def test_a_missing_file_or_unknown_ref_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="there is no result file"):
        load_result(str(tmp_path / "gone.json"))
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(UserError, match="not a tfperf result file"):
        load_result(str(tmp_path / "notes.txt"))
    with pytest.raises(UserError, match="not a run id nor a result file"):
        load_result("yesterday")


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("run.txt", "name a .json, .csv or .md file"),
        ("run", "name a .json, .csv or .md file"),
        ("blocker/run.csv", "is not a folder"),
        ("adir.md", "it is a folder"),
    ],
)
def test_an_unknown_extension_or_unwritable_path_is_refused(stored, tmp_path, name, needle):
    store, ids = stored
    (tmp_path / "blocker").write_text("a file, not a folder")
    (tmp_path / "adir.md").mkdir()
    table = run_table(run_result(load(store, ids["run"])))
    with pytest.raises(UserError, match=needle):
        write(table, tmp_path / name)
    assert not (tmp_path / "run.txt").exists()


def test_a_missing_folder_is_created(stored, tmp_path: Path) -> None:
    store, ids = stored
    table = run_table(run_result(load(store, ids["bench"])))
    path = write(table, tmp_path / "out" / "ci" / "bench.csv")
    assert len(_csv_rows(path)) == 1


def test_a_tune_candidate_at_another_batch_counts_its_own_samples(store_path: Path) -> None:
    # A throughput tune records a candidate's batch in its outcome, not at the top of its info.
    with Store.open(store_path) as store:
        run = store.new_run("tune", "tfperf tune", {"name": "mlp", "batch": 1}, {}, {})
        trial = store.new_trial(run, "batch=8", {"batch": 8, "runtime": "tf"}, "candidate")
        store.add_block(trial, [0.004] * 12, "steady")
        accuracy = {"max_abs_error": 1e-7, "max_rel_error": 2e-6}
        outcome = {"info": {"batch": 8}, "accuracy": accuracy}
        store.finish_trial(trial, "ok", {"outcome": outcome}, None)
        store.finish_run(run, "ok", {})
    (row,) = run_table(load_result("latest", store_path)).rows
    assert row["batch"] == 8 and row["samples_per_s"] == pytest.approx(8 / 0.004)
    assert row["max_rel_error"] == 2e-6


# -- a real run --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> tuple[Path, int]:
    """The tiny mlp measured for real: the default and intra_threads=1, interleaved."""
    from tfperf.benchmark import BenchOptions, bench
    from tfperf.core.config import Config

    path = tmp_path_factory.mktemp("real") / "store.sqlite"
    options = BenchOptions(
        budget_s=30, precision=0.5, min_rounds=8, block_s=0.02, parallel_start=True,
        peak=False, extras=(),
    )
    configs = [Config(), Config.parse(["intra_threads=1"], [])]
    with Store.open(path) as store:
        doc = bench(
            {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1},
            configs,
            store=store,
            options=options,
        )
    return path, doc["run_id"]


@pytest.mark.tf
@pytest.mark.slow
def test_a_real_run_exports_every_block_in_each_format(real_run, tmp_path: Path) -> None:
    store, run_id = real_run
    loaded = load(store, run_id)
    result = load_result(str(run_id), store)
    table = run_table(result)
    doc = json.loads(write(table, tmp_path / "run.json").read_text())
    assert doc["schema"] == RESULT_SCHEMA and doc["run"]["id"] == run_id
    assert doc["machine"]["fingerprint"] == loaded["run"]["machine"]["fingerprint"]
    assert doc["install"]["tf_version"] and doc["install"]["fingerprint"]
    for trial, exported in zip(loaded["trials"], doc["trials"], strict=True):
        assert exported["install_fingerprint"] == doc["install"]["fingerprint"]
        assert len(exported["blocks"]) == len(trial["blocks"])
        steady = [s for b in exported["blocks"] if b["phase"] == "steady" for s in b["samples_s"]]
        assert steady == trial["samples_s"] and len(steady) == exported["n"]
    rows = _csv_rows(write(table, tmp_path / "run.csv"))
    assert set(rows[0]) >= REQUIRED
    assert [r["config"] for r in rows] == ["default", "intra_threads=1"]
    for row, trial in zip(rows, loaded["trials"], strict=True):
        assert float(row["p50_ms"]) == pytest.approx(np.median(trial["samples_s"]) * 1e3)
        assert int(row["n"]) == len(trial["samples_s"])
    (comparison,) = loaded["comparisons"]
    assert float(rows[1]["speedup"]) == pytest.approx(comparison["result"]["median"])
    assert [float(rows[1][k]) for k in ("speedup_low", "speedup_high")] == pytest.approx(
        comparison["result"]["ci95"]
    )
    cells = _markdown_rows(write(table, tmp_path / "run.md"))
    assert [r[0] for r in cells] == ["config", "default", "intra_threads=1"]
