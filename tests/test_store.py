"""tfperf.store: round trips, versioning, bad paths, and survival of a SIGKILL mid-run."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from helpers import WRITER, kill_writer_after
from tfperf.core.errors import UserError
from tfperf.store import SCHEMA_VERSION, Store


def fill(store: Store) -> tuple[int, int, int]:
    rng = np.random.default_rng(11)
    run = store.new_run(
        "bench",
        "tfperf bench --workload mlp",
        {"kind": "builtin", "name": "mlp"},
        {"cpu": "test"},
        {"threshold": 0.03},
    )
    base = store.new_trial(run, "default", {}, "baseline")
    cand = store.new_trial(run, "onednn=off", {"onednn": False}, "candidate")
    for trial in (base, cand):
        store.add_block(trial, [0.5, 0.1], "warmup")
        for _ in range(3):
            store.add_block(trial, list(rng.lognormal(-6, 0.05, 4)), "steady", {"rss_bytes": 10})
        store.finish_trial(trial, "ok", {"batch": 1, "gflops": 2.0}, None)
    store.add_comparison(run, base, cand, {"median": 1.1, "verdict": "faster"})
    store.finish_run(run, "ok", {"best": "onednn=off"})
    return run, base, cand


def test_round_trip(store_path: Path) -> None:
    with Store.open(store_path) as store:
        run, base, cand = fill(store)
        doc = store.load_run(run)
        assert store.load_run("latest") == doc
    assert doc["run"]["status"] == "ok"
    assert doc["run"]["workload"] == {"kind": "builtin", "name": "mlp"}
    assert doc["run"]["summary"] == {"best": "onednn=off"}
    assert doc["run"]["trials"] == {"ok": 2}
    assert doc["run"]["started_at"].endswith("+00:00")
    trials = {t["id"]: t for t in doc["trials"]}
    assert trials[cand]["config"] == {"onednn": False}
    assert trials[cand]["role"] == "candidate"
    assert trials[base]["warmup_s"] == [0.5, 0.1]
    assert len(trials[base]["samples_s"]) == 12
    assert trials[base]["blocks"][1]["info"] == {"rss_bytes": 10}
    assert trials[base]["info"]["gflops"] == 2.0
    assert doc["comparisons"][0]["baseline_trial"] == base
    assert doc["comparisons"][0]["result"]["verdict"] == "faster"


def test_wal_and_schema_version(store_path: Path) -> None:
    Store.open(store_path).close()
    conn = sqlite3.connect(store_path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_list_runs_newest_first_with_limit(store_path: Path) -> None:
    with Store.open(store_path) as store:
        ids = [fill(store)[0] for _ in range(3)]
        runs = store.list_runs(limit=2)
    assert [r["id"] for r in runs] == [ids[2], ids[1]]
    assert runs[0]["kind"] == "bench" and runs[0]["trials"] == {"ok": 2}


def test_a_run_of_a_live_writer_is_running(store_path: Path) -> None:
    with Store.open(store_path) as store:
        run = store.new_run("tune", "tfperf tune", {}, {}, {})
        store.new_trial(run, "a", {}, "candidate")
        assert store.load_run(run)["run"]["status"] == "running"
        assert store.load_run(run)["trials"][0]["status"] == "running"


def test_unknown_run_ids(store_path: Path) -> None:
    with Store.open(store_path) as store:
        with pytest.raises(UserError, match="no runs yet"):
            store.load_run("latest")
        fill(store)
        with pytest.raises(UserError, match="no run 99"):
            store.load_run(99)
        with pytest.raises(UserError, match="not a run id"):
            store.load_run("abc")


def test_invalid_phase_and_status(store_path: Path) -> None:
    with Store.open(store_path) as store:
        run = store.new_run("bench", "x", {}, {}, {})
        trial = store.new_trial(run, "a", {}, "baseline")
        with pytest.raises(ValueError):
            store.add_block(trial, [0.1], "cooldown")
        with pytest.raises(ValueError):
            store.finish_trial(trial, "great", {}, None)


def test_newer_schema_is_refused_with_its_version(store_path: Path) -> None:
    Store.open(store_path).close()
    conn = sqlite3.connect(store_path)
    conn.execute("PRAGMA user_version = 7")
    conn.close()
    with pytest.raises(UserError, match=r"schema version 7.*newer.*upgrade tfperf"):
        Store.open(store_path)


def test_not_sqlite_file_is_refused(store_path: Path) -> None:
    store_path.write_bytes(b"this is a text file, not a database\n" * 100)
    with pytest.raises(UserError, match="not a tfperf store"):
        Store.open(store_path)


def test_foreign_sqlite_database_is_refused(store_path: Path) -> None:
    conn = sqlite3.connect(store_path)
    conn.execute("CREATE TABLE songs (title TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(UserError, match="not a tfperf store"):
        Store.open(store_path)


def test_unwritable_paths_are_user_errors(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UserError, match="cannot create the directory"):
        Store.open(blocker / "sub" / "store.sqlite")
    with pytest.raises(UserError, match="is a directory"):
        Store.open(tmp_path)
    with pytest.raises(UserError, match="no tfperf store"):
        Store.open(tmp_path / "missing.sqlite", create=False)
    assert not (tmp_path / "missing.sqlite").exists()


def test_env_variable_selects_the_store(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TFPERF_STORE", str(tmp_path / "deep" / "env.sqlite"))
    with Store.open() as store:
        assert store.path == tmp_path / "deep" / "env.sqlite"
    assert (tmp_path / "deep" / "env.sqlite").exists()


def test_sigkill_mid_run_keeps_every_committed_block(store_path: Path) -> None:
    reported = kill_writer_after(WRITER, store_path, 50)
    with Store.open(store_path) as store:
        doc = store.load_run("latest")
        runs = store.list_runs()
    blocks = doc["trials"][0]["blocks"]
    assert len(blocks) >= reported
    assert [b["samples_s"][0] for b in blocks] == pytest.approx(
        [0.001 * (i + 1) for i in range(len(blocks))]
    )
    assert doc["run"]["status"] == "interrupted"
    assert doc["trials"][0]["status"] == "interrupted"
    assert runs[0]["status"] == "interrupted" and runs[0]["trials"] == {"interrupted": 1}
    conn = sqlite3.connect(store_path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_writes_from_several_threads(store_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with Store.open(store_path) as store:
        run = store.new_run("bench", "threads", {}, {}, {})
        trials = [store.new_trial(run, f"t{i}", {}, "candidate") for i in range(4)]

        def write(trial: int) -> None:
            for k in range(25):
                store.add_block(trial, [float(k)], "steady")

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(write, trials))
        doc = store.load_run(run)
    assert [t["samples_s"] for t in doc["trials"]] == [[float(k) for k in range(25)]] * 4


OPENER = textwrap.dedent(
    """
    import sys, time
    from tfperf.store import Store
    time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
    with Store.open(sys.argv[1]) as store:
        store.new_run("bench", "concurrent", {}, {}, {})
    """
)


def test_processes_creating_one_store_at_once(store_path: Path) -> None:
    import time

    start = str(time.time() + 1.5)  # all four open the fresh store at the same moment
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPENER, str(store_path), start], stderr=subprocess.PIPE
        )
        for _ in range(4)
    ]
    errors = [p.communicate(timeout=60)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], errors
    with Store.open(store_path) as store:
        assert len(store.list_runs()) == 4


def test_a_store_locked_by_another_process_is_a_user_error(monkeypatch, store_path: Path) -> None:
    import tfperf.store

    monkeypatch.setattr(tfperf.store, "BUSY_TIMEOUT_S", 0.2)
    with Store.open(store_path) as store:
        holder = sqlite3.connect(store_path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(UserError, match=r"cannot write to the store.*locked"):
                store.new_run("bench", "blocked", {}, {}, {})
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert store.new_run("bench", "after", {}, {}, {}) == 1
