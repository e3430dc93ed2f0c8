"""``--export FILE`` on bench, tune, compare and history, and ``tfperf compare`` of result files
from two stores and two runners as a CI gate: real runs of the tiny built-in mlp, real files."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from helpers import fill_store, load, run_cli

REQUIRED = {"config", "p50_ms", "p99_ms", "samples_per_s", "speedup", "speedup_low", "speedup_high"}
OTHER_RUNNER = {"fingerprint": "0123456789ab", "cpu": {"model": "Other Runner CPU"}}


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _bench(folder: Path, export: str) -> tuple[dict, Path, Path]:
    """``tfperf bench`` of the tiny mlp and intra_threads=1 into a store of its own, exported;
    (its document, its store, the exported file)."""
    store, path = folder / "store.sqlite", folder / export
    res = run_cli(
        "bench", "--workload", "mlp", "--size", "tiny", "--set", "intra_threads=1",
        "--budget", "1", "--processes", "1", "--parallel-start", "--no-peak",
        "--store", str(store), "--export", str(path), "--json",
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"exported to {path}" in res.stderr
    return json.loads(res.stdout), store, path


@pytest.fixture(scope="module")
def two_stores(tmp_path_factory) -> dict:
    """Two real runs of one command, each in a store of its own, exported to .json."""
    first = _bench(tmp_path_factory.mktemp("runner1"), "a.json")
    second = _bench(tmp_path_factory.mktemp("runner2"), "b.json")
    return {"a": first, "b": second}


def _edited(source: Path, target: Path, scale: float = 1.0, machine: dict | None = None) -> Path:
    """A copy of a result file as another runner would have written it: its machine replaced,
    and every sample multiplied by ``scale`` (an injected speed change)."""
    doc = json.loads(source.read_text())
    if machine is not None:
        doc["machine"] = machine
    for trial in doc["trials"]:
        for block in trial["blocks"]:
            block["samples_s"] = [s * scale for s in block["samples_s"]]
    target.write_text(json.dumps(doc))
    return target


@pytest.mark.tf
@pytest.mark.slow
def test_bench_exports_the_run_it_stored(two_stores) -> None:
    doc, store, path = two_stores["a"]
    exported = json.loads(path.read_text())
    assert exported["schema"] == "tfperf-result/1"
    assert exported["run"]["id"] == doc["run_id"] and exported["run"]["kind"] == "bench"
    assert exported["machine"]["fingerprint"] == doc["machine"]["fingerprint"]
    assert exported["install"]["tf_version"] == doc["results"][0]["install"]["tf_version"]
    loaded = load(store, doc["run_id"])
    for trial, result in zip(loaded["trials"], exported["trials"], strict=True):
        assert len(result["blocks"]) == len(trial["blocks"])
        assert result["n"] == len(trial["samples_s"])
    speedup = exported["trials"][1]["speedup"]
    assert speedup["median"] == pytest.approx(doc["comparisons"][0]["speedup"]["median"])


@pytest.mark.tf
@pytest.mark.slow
def test_compare_reads_files_from_two_stores(two_stores) -> None:
    _, _, a = two_stores["a"]
    _, _, b = two_stores["b"]
    res = run_cli("compare", str(a), str(b), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["source_a"] == str(a) and doc["source_b"] == str(b)
    assert doc["same_machine"] is True
    assert not any("different machines" in w for w in doc["warnings"])
    assert [c["label_b"] for c in doc["comparisons"]] == ["default", "intra_threads=1"]
    for comp in doc["comparisons"]:
        low, high = comp["speedup"]["ci95"]
        assert low <= comp["speedup"]["median"] <= high


@pytest.mark.tf
@pytest.mark.slow
def test_a_stored_run_compares_with_a_file_of_another_runner(two_stores, tmp_path) -> None:
    doc, store, _ = two_stores["a"]
    _, _, b = two_stores["b"]
    other = _edited(b, tmp_path / "other-runner.json", machine=OTHER_RUNNER)
    res = run_cli("compare", str(doc["run_id"]), str(other), "--store", str(store))
    assert res.returncode == 0, res.stderr
    assert f"A: run {doc['run_id']} in {store}" in res.stdout
    assert "warning: the two runs ran on different machines" in res.stdout
    assert "Other Runner CPU" in res.stdout and "different hardware" in res.stdout


def _beyond_spread(path: Path) -> float:
    """A slowdown no measured noise can hide: 1.5x the widest spread (slowest over fastest
    sample) of any trial in the file, so every sample of the slowed copy is slower than every
    sample of the original (a shared CI runner's noise can exceed a fixed 1.5x)."""
    doc = json.loads(path.read_text())
    spreads = [
        max(samples) / min(samples)
        for trial in doc["trials"]
        if (samples := [s for b in trial["blocks"] for s in b["samples_s"]])
    ]
    return 1.5 * max(spreads)


@pytest.mark.tf
@pytest.mark.slow
def test_the_gate_passes_a_faster_file_and_trips_on_a_slower_one(two_stores, tmp_path) -> None:
    _, _, a = two_stores["a"]
    scale = _beyond_spread(a)
    faster = _edited(a, tmp_path / "faster.json", scale=0.7, machine=OTHER_RUNNER)
    slower = _edited(a, tmp_path / "slower.json", scale=scale, machine=OTHER_RUNNER)
    passed = run_cli("compare", str(a), str(faster), "--fail-on-regression", "--json")
    assert passed.returncode == 0, passed.stderr
    assert json.loads(passed.stdout)["regressions"] == []
    report = tmp_path / "gate.csv"
    failed = run_cli(
        "compare", str(a), str(slower), "--fail-on-regression", "--export", str(report)
    )
    assert failed.returncode == 1, failed.stderr
    assert "significantly slower: default, intra_threads=1" in failed.stderr
    rows = _csv_rows(report)  # written before the gate tripped
    assert set(rows[0]) >= REQUIRED
    assert [r["verdict"] for r in rows] == ["slower", "slower"]
    for row in rows:
        assert float(row["speedup"]) == pytest.approx(1 / scale)
        assert float(row["p50_ms"]) == pytest.approx(scale * float(row["a_p50_ms"]))


@pytest.mark.tf
@pytest.mark.slow
def test_tune_exports_the_default_its_candidates_and_its_answer(tmp_path) -> None:
    store, path = tmp_path / "store.sqlite", tmp_path / "tune.json"
    res = run_cli(
        "tune", "--workload", "mlp", "--size", "tiny", "--knobs", "inter_threads",
        "--max-trials", "1", "--confirm-rounds", "6", "--store", str(store),
        "--profile-out", str(tmp_path / "profile.json"), "--export", str(path), "--json",
        timeout=500,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    exported = json.loads(path.read_text())
    assert exported["run"]["kind"] == "tune" and exported["run"]["id"] == doc["run_id"]
    assert exported["install"]["tf_version"] and exported["install"]["fingerprint"]
    roles = [t["role"] for t in exported["trials"]]
    assert roles[:2] == ["baseline", "candidate"]
    # a winner of the search is confirmed (recommended or not); a recommendation always was
    assert "confirmation" in roles or doc["recommendation"]["keep_default"]
    confirmed = doc["recommendation"]["speedup"]
    for trial in exported["trials"][2:]:
        assert trial["role"] == "confirmation" and trial["label"].endswith(" (confirmation)")
        if confirmed:  # None only when the winner's worker crashed while it was confirmed
            assert trial["speedup"]["median"] == pytest.approx(confirmed["median"])
    (candidate,) = doc["candidates"]
    row = next(t for t in exported["trials"] if t["label"] == candidate["label"])
    if candidate["status"] == "measured":
        assert row["speedup"]["median"] == pytest.approx(candidate["speedup"]["median"])
        assert row["max_rel_error"] == candidate["max_rel_error"]
    table = tmp_path / "tune.md"
    shown = run_cli("history", str(doc["run_id"]), "--store", str(store), "--export", str(table))
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in table.read_text().splitlines() if line.startswith("| ")]
    assert len(lines) == 1 + len(exported["trials"])


def test_history_exports_one_row_per_run(store_path: Path, tmp_path: Path) -> None:
    ids = fill_store(store_path)
    path = tmp_path / "history.csv"
    res = run_cli("history", "--store", str(store_path), "--export", str(path))
    assert res.returncode == 0, res.stderr
    rows = _csv_rows(path)
    assert set(rows[0]) >= REQUIRED
    assert [int(r["run_id"]) for r in rows] == [ids["bench"], ids["run"]]


@pytest.mark.parametrize(
    "args",
    [
        ("bench", "--workload", "mlp", "--size", "tiny"),
        ("compare", "--workload", "mlp", "--set", "xla=jit"),
        ("compare", "1", "2"),
        ("tune", "--workload", "mlp"),
        ("history",),
    ],
)
def test_an_unknown_extension_is_exit_2_before_anything_runs(args, tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    res = run_cli(*args, "--store", str(store), "--export", str(tmp_path / "out.xlsx"))
    assert res.returncode == 2, res.stderr
    assert "name a .json, .csv or .md file" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not store.exists() and not (tmp_path / "out.xlsx").exists()


def test_an_unwritable_export_path_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file where a folder should be")
    res = run_cli(
        "bench", "--workload", "mlp", "--export", str(tmp_path / "blocker" / "out.json"),
        "--store", str(tmp_path / "store.sqlite"),
    )
    assert res.returncode == 2, res.stderr
    assert "cannot write --export" in res.stderr and "Traceback" not in res.stderr


def test_compare_refuses_a_file_of_a_newer_format(store_path: Path, tmp_path: Path) -> None:
    ids = fill_store(store_path)
    path = tmp_path / "run.json"
    res = run_cli("history", str(ids["run"]), "--store", str(store_path), "--export", str(path))
    assert res.returncode == 0, res.stderr
    newer = tmp_path / "newer.json"
    shutil.copy(path, newer)
    newer.write_text(newer.read_text().replace("tfperf-result/1", "tfperf-result/2"))
    res = run_cli("compare", str(path), str(newer))
    assert res.returncode == 2
    assert "this tfperf reads tfperf-result/1; upgrade tfperf" in res.stderr
