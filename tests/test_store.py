"""tfperf.store: round trips, versioning and upgrades, bad paths, and survival of a SIGKILL
mid-run."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pytest

from helpers import WRITER, kill_writer_after
from tfperf import __version__
from tfperf.core.errors import UserError
from tfperf.store import SCHEMA_V1, SCHEMA_VERSION, Migration, Store


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
    with pytest.raises(UserError, match=r"newer tfperf \(schema version 7.*upgrade tfperf"):
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


# ----------------------------------------------------------------- upgrading older stores
V1_SCHEMA_SHA256 = "b85e4f022d1722fe6fe5e5d8cf050d013bf987a15937a1deeca1407793ac55fc"
"""The digest of schema version 1's text as tfperf created every version-1 store: old stores
are described exactly only while ``SCHEMA_V1`` stays verbatim."""
V1_TABLES = ("meta", "runs", "trials", "blocks", "comparisons")


def write_v1_store(path: Path, runs: int = 3) -> dict[int, list[float]]:
    """A store as tfperf wrote schema version 1: WAL, finished compare runs (two trials with
    warm-up and steady blocks and a comparison each) and an unfinished one; returns each
    trial's steady samples."""
    rng = np.random.default_rng(5)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript(SCHEMA_V1)
    conn.execute("INSERT INTO meta VALUES ('app', 'tfperf')")
    conn.execute("INSERT INTO meta VALUES ('created_at', '2026-11-20T10:00:00+00:00')")
    steady: dict[int, list[float]] = {}
    for r in range(runs):
        t0 = 1_790_000_000.0 + 3600 * r
        run = conn.execute(
            "INSERT INTO runs (kind, command, workload, machine, settings, status, summary,"
            " started_at, finished_at, writer_host, writer_pid, writer_start)"
            " VALUES ('compare', 'tfperf compare --workload mlp --set xla=jit',"
            ' \'{"kind": "builtin", "name": "mlp"}\', \'{"cpu": "old cpu"}\','
            " '{\"threshold\": 0.03}', ?, ?, ?, ?, 'oldhost', 4242, ?)",
            ("ok", '{"best": "xla=jit"}', t0, t0 + 60, t0 - 1),
        ).lastrowid
        trials = []
        for label, config, role in (
            ("default", "{}", "baseline"),
            ("xla=jit", '{"xla": "jit"}', "candidate"),
        ):
            trial = conn.execute(
                "INSERT INTO trials (run_id, label, config, role, status, info, started_at,"
                " finished_at) VALUES (?, ?, ?, ?, 'ok', '{\"batch\": 1}', ?, ?)",
                (run, label, config, role, t0 + 1, t0 + 59),
            ).lastrowid
            trials.append(trial)
            conn.execute(
                "INSERT INTO blocks (trial_id, phase, samples, info, created_at)"
                " VALUES (?, 'warmup', '[0.05, 0.01]', NULL, ?)",
                (trial, t0 + 2),
            )
            steady[trial] = []
            for k in range(4):
                samples = [float(x) for x in rng.lognormal(-6, 0.05, 5)]
                steady[trial] += samples
                conn.execute(
                    "INSERT INTO blocks (trial_id, phase, samples, info, created_at)"
                    " VALUES (?, 'steady', ?, ?, ?)",
                    (trial, json.dumps(samples), json.dumps({"round": k}), t0 + 3 + k),
                )
        conn.execute(
            "INSERT INTO comparisons (run_id, baseline_trial, candidate_trial, result, created_at)"
            ' VALUES (?, ?, ?, \'{"median": 1.6, "verdict": "faster"}\', ?)',
            (run, trials[0], trials[1], t0 + 58),
        )
    conn.execute(
        "INSERT INTO runs (kind, command, workload, machine, settings, started_at, writer_host,"
        " writer_pid, writer_start) VALUES ('tune', 'tfperf tune', '{}', '{}', '{}', ?,"
        " 'oldhost', 4243, NULL)",
        (1_790_100_000.0,),
    )
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    return steady


def table_rows(path: Path) -> dict[str, list[tuple]]:
    """Every row of the version-1 tables, in the version-1 columns, by id."""
    conn = sqlite3.connect(path)
    rows = {}
    for table in V1_TABLES:
        columns = [c[1] for c in conn.execute(f"PRAGMA table_info({table})")]
        later = ("uuid", "tfperf_version", "node_id", "host", "fleet_run")
        v1_columns = [c for c in columns if c not in later]
        order = "key" if table == "meta" else "id"
        rows[table] = conn.execute(
            f"SELECT {', '.join(v1_columns)} FROM {table} ORDER BY {order}"
        ).fetchall()
    conn.close()
    return rows


def test_the_store_keeps_schema_version_1_verbatim() -> None:
    assert hashlib.sha256(SCHEMA_V1.encode()).hexdigest() == V1_SCHEMA_SHA256


def test_a_version_1_store_is_upgraded_in_place_with_nothing_lost(store_path: Path) -> None:
    steady = write_v1_store(store_path)
    before = table_rows(store_path)
    with Store.open(store_path) as store:
        runs = store.list_runs()
        loaded = [store.load_run(r["id"]) for r in runs]
        new_run = store.new_run("bench", "after the upgrade", {}, {}, {})
        new = store.load_run(new_run)["run"]
    conn = sqlite3.connect(store_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
    uuids = [row[0] for row in conn.execute("SELECT uuid FROM runs ORDER BY id")]
    conn.close()
    after = table_rows(store_path)
    assert after["meta"] == before["meta"]
    assert after["runs"][: len(before["runs"])] == before["runs"]
    for table in ("trials", "blocks", "comparisons"):
        assert after[table] == before[table]
    samples = {t["id"]: t["samples_s"] for doc in loaded for t in doc["trials"]}
    assert samples == steady
    assert [r["status"] for r in runs] == ["running", "ok", "ok", "ok"]  # another host wrote it
    assert all(doc["comparisons"][0]["result"]["verdict"] == "faster" for doc in loaded[1:])
    assert all(r["tfperf_version"] is None for r in runs)
    assert len(set(uuids)) == len(uuids) == 5
    assert all(uuid.UUID(u).version == 4 for u in uuids)
    assert [r["uuid"] for r in runs] == uuids[-2::-1]
    assert new["uuid"] == uuids[-1] and new["tfperf_version"] == __version__
    # Every run stored before version 3 was measured here: no node, host nor fleet run.
    assert all(r[k] is None for r in runs for k in ("node_id", "host", "fleet_run"))


def test_a_run_an_older_tfperf_writes_after_the_upgrade_gets_its_uuid(store_path: Path) -> None:
    write_v1_store(store_path, runs=1)
    Store.open(store_path).close()
    # an older tfperf still running inserts a run the way it always did, without a uuid
    conn = sqlite3.connect(store_path, isolation_level=None)
    conn.execute(
        "INSERT INTO runs (kind, command, workload, machine, settings, started_at)"
        " VALUES ('bench', 'tfperf bench', '{}', '{}', '{}', 1790000000.0)"
    )
    conn.close()
    with Store.open(store_path) as store:
        runs = store.list_runs()
    assert len({r["uuid"] for r in runs}) == 3 and all(r["uuid"] for r in runs)


def test_the_upgrade_keeps_a_copy_of_the_version_1_store(store_path: Path) -> None:
    write_v1_store(store_path)
    before = table_rows(store_path)
    Store.open(store_path).close()
    copy = store_path.with_name(store_path.name + ".v1.bak")
    conn = sqlite3.connect(copy)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    conn.close()
    assert table_rows(copy) == before
    assert not list(store_path.parent.glob("*.partial"))


def test_a_failing_upgrade_step_leaves_the_store_as_it_was(monkeypatch, store_path: Path) -> None:
    import tfperf.store

    def half_done(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE runs ADD COLUMN uuid TEXT")
        raise sqlite3.OperationalError("disk I/O error")

    write_v1_store(store_path)
    before = table_rows(store_path)
    monkeypatch.setattr(tfperf.store, "MIGRATIONS", (Migration(2, half_done),))
    with pytest.raises(UserError, match="cannot use the store"):
        Store.open(store_path)
    monkeypatch.undo()
    conn = sqlite3.connect(store_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert "uuid" not in [c[1] for c in conn.execute("PRAGMA table_info(runs)")]
    conn.close()
    assert table_rows(store_path) == before
    with Store.open(store_path) as store:  # the real step still upgrades it afterwards
        assert len(store.list_runs()) == 4


def test_a_new_store_has_the_schema_of_an_upgraded_one(tmp_path: Path) -> None:
    old, new = tmp_path / "old.sqlite", tmp_path / "new.sqlite"
    write_v1_store(old, runs=0)
    Store.open(old).close()
    Store.open(new).close()

    def schema(path: Path) -> list[tuple]:
        conn = sqlite3.connect(path)
        rows = conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
        ).fetchall()
        conn.close()
        return rows

    assert schema(old) == schema(new)


def test_an_upgrade_taken_over_between_its_steps_keeps_only_the_first_copy(
    monkeypatch, store_path: Path
) -> None:
    # One opener applies the first step (keeping store.sqlite.v1.bak), then stops before the
    # second, as a process does when another takes the lock between its steps: the next
    # opener finishes the upgrade without copying the half-upgraded store.
    import tfperf.store

    def fails(conn: sqlite3.Connection) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    write_v1_store(store_path)
    first = tfperf.store.MIGRATIONS[0]
    monkeypatch.setattr(tfperf.store, "MIGRATIONS", (first, Migration(3, fails)))
    with pytest.raises(UserError):
        Store.open(store_path)
    monkeypatch.undo()
    conn = sqlite3.connect(store_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    conn.close()
    with Store.open(store_path) as store:
        assert len(store.list_runs()) == 4
    assert [p.name for p in store_path.parent.glob("*.bak")] == ["store.sqlite.v1.bak"]
    conn = sqlite3.connect(store_path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'upgrading_from'").fetchone() is None
    conn.close()


def test_processes_opening_a_version_1_store_at_once_upgrade_it_once(store_path: Path) -> None:
    import time

    write_v1_store(store_path)
    start = str(time.time() + 1.5)  # both open the old store at the same moment
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPENER, str(store_path), start], stderr=subprocess.PIPE
        )
        for _ in range(2)
    ]
    errors = [p.communicate(timeout=60)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    with Store.open(store_path) as store:
        runs = store.list_runs()
    assert len(runs) == 6
    assert len({r["uuid"] for r in runs}) == 6
    assert [p.name for p in store_path.parent.glob("*.bak")] == ["store.sqlite.v1.bak"]
