"""The local record of every run and trial: one SQLite file, WAL mode, schema-versioned.

Contract
--------

- :meth:`Store.open` creates the parent directory and the schema on first use, switches the
  database to WAL mode and checks ``PRAGMA user_version`` against :data:`SCHEMA_VERSION`. A
  store of an older version is upgraded in place (below); one of a newer version (written by a
  newer tfperf), a file that is not a tfperf store, or a path that cannot be written raises
  :class:`~tfperf.core.errors.UserError` with one sentence saying what to do.
- Every write is its own transaction, committed before the method returns. A run killed at any
  moment (SIGKILL included) keeps everything written before; :meth:`Store.add_block` is meant to
  be called once per measured block for exactly that reason.
- A run or trial still marked ``running`` whose writer process is gone reads back with status
  ``"interrupted"`` (the writer's host, pid and process start time are recorded to tell; a run
  written on another host reads as ``running`` until it finishes).
- One ``Store`` may be shared by threads: writes are serialised by a lock.
- ``kind``, ``role``, ``phase`` and ``status`` are free-form text (``tune`` adds kinds of runs);
  workloads, machines, settings, configs, infos, errors, summaries and comparison results are
  JSON objects stored as text and returned as dicts.
- Times are returned as ISO 8601 UTC strings (``started_at``, ``finished_at``).
- Every run has a ``uuid`` (a random UUID4, unique across stores, so files exported from
  different stores name a run unambiguously; a run an older tfperf wrote into an upgraded store
  gets one when the store is next opened) and the ``tfperf_version`` that wrote it (``None``:
  unknown, for runs written before schema version 2).

Schema versions and upgrades
----------------------------

Version 1 is :data:`SCHEMA_V1`, kept verbatim: every store starts from it. :data:`MIGRATIONS`
is the ordered table of steps, step ``N`` taking a store from version ``N`` to ``N + 1``;
:data:`SCHEMA_VERSION` is where the last step ends. A new store is version 1 with every step
applied, in the transaction that creates it, so new and upgraded stores have one schema. An
older store is upgraded in place when opened, one step per transaction (``BEGIN IMMEDIATE``,
then the version read again inside it, so of two processes opening an old store at once one
upgrades it and the other finds it done); a step that fails rolls back and leaves the store at
the version before it. Nothing is ever dropped: a step adds tables, columns or indexes and fills
them. Before the first step, a store of at most :data:`BACKUP_MAX_BYTES` is copied (SQLite's
online backup, under the upgrade's lock) to ``<name>.v<version>.bak`` next to it, once per
upgrade (``meta`` holds :data:`UPGRADING` from its first step to its last, so a process that
takes the lock between another's steps does not copy the half-upgraded store); a larger one
is upgraded without a copy, since copying it would cost more than the guard is worth when each
step is a transaction already.

Tables (schema version 3): ``meta(key, value)``, ``runs`` (with ``uuid`` and
``tfperf_version``; ``node_id``, ``host`` and ``fleet_run`` for a run measured on a node of a
Ray cluster, see :data:`RUN_TAGS`), ``trials``, ``blocks`` (one row per measured block,
samples as a JSON list of seconds), ``comparisons``. See ``docs/results-schema.md`` for the
documents built from them.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tfperf import __version__
from tfperf.core.errors import UserError
from tfperf.core.paths import resolve_store_path
from tfperf.core.strictjson import to_json

BUSY_TIMEOUT_S = 30.0
"""How long a write waits for another process holding the store before giving up."""
APP_ID = "tfperf"
RUNNING = "running"
INTERRUPTED = "interrupted"
PHASES = ("warmup", "steady", "load")
RUN_TAGS = ("node_id", "host", "fleet_run")
"""Where a run was measured when not here: the Ray node's id, its host name and the id of the
``fleet`` run it belongs to (all ``None`` for a run measured on this machine)."""
TRIAL_STATUSES = ("ok", "failed", "rejected")
BACKUP_MAX_BYTES = 256 * 2**20
"""An older store up to this size is copied to ``<name>.v<version>.bak`` before its upgrade."""

SCHEMA_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    command TEXT NOT NULL,
    workload TEXT NOT NULL,
    machine TEXT NOT NULL,
    settings TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'running',
    summary TEXT,
    started_at REAL NOT NULL,
    finished_at REAL,
    writer_host TEXT,
    writer_pid INTEGER,
    writer_start REAL
);
CREATE TABLE trials (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    label TEXT NOT NULL,
    config TEXT NOT NULL,
    role TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'running',
    info TEXT,
    error TEXT,
    started_at REAL NOT NULL,
    finished_at REAL
);
CREATE INDEX trials_run ON trials(run_id);
CREATE TABLE blocks (
    id INTEGER PRIMARY KEY,
    trial_id INTEGER NOT NULL REFERENCES trials(id),
    phase TEXT NOT NULL,
    samples TEXT NOT NULL,
    info TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX blocks_trial ON blocks(trial_id);
CREATE TABLE comparisons (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    baseline_trial INTEGER NOT NULL REFERENCES trials(id),
    candidate_trial INTEGER NOT NULL REFERENCES trials(id),
    result TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX comparisons_run ON comparisons(run_id);
"""


def _fill_uuids(conn: sqlite3.Connection) -> None:
    """Give every run without a uuid a fresh one: the runs of a store being upgraded, and a
    run an older tfperf, still running, wrote into the store after another upgraded it."""
    for (run_id,) in conn.execute("SELECT id FROM runs WHERE uuid IS NULL").fetchall():
        conn.execute("UPDATE runs SET uuid = ? WHERE id = ?", (str(uuid.uuid4()), run_id))


def _v2_run_ids(conn: sqlite3.Connection) -> None:
    """Runs get a global id and the tfperf version that wrote them (unknown for older runs)."""
    conn.execute("ALTER TABLE runs ADD COLUMN uuid TEXT")
    conn.execute("ALTER TABLE runs ADD COLUMN tfperf_version TEXT")
    _fill_uuids(conn)
    conn.execute("CREATE UNIQUE INDEX runs_uuid ON runs(uuid)")


@dataclass(frozen=True)
class Migration:
    """One schema step: ``apply`` takes a store at version ``to_version - 1`` to
    ``to_version``, inside a transaction the caller opens and commits. It only adds and fills:
    a store keeps every row it had."""

    to_version: int
    apply: Callable[[sqlite3.Connection], None]


def _v3_fleet_tags(conn: sqlite3.Connection) -> None:
    """Runs measured on a node of a Ray cluster (``tfperf fleet``) name that node, its host
    and the fleet run they belong to; a run measured here has none of the three."""
    conn.execute("ALTER TABLE runs ADD COLUMN node_id TEXT")
    conn.execute("ALTER TABLE runs ADD COLUMN host TEXT")
    conn.execute("ALTER TABLE runs ADD COLUMN fleet_run INTEGER REFERENCES runs(id)")
    conn.execute("CREATE INDEX runs_fleet ON runs(fleet_run)")


MIGRATIONS: tuple[Migration, ...] = (Migration(2, _v2_run_ids), Migration(3, _v3_fleet_tags))
"""The ordered upgrade steps from :data:`SCHEMA_V1`; a schema change adds one at the end."""
SCHEMA_VERSION = 1 + len(MIGRATIONS)
assert [m.to_version for m in MIGRATIONS] == list(range(2, SCHEMA_VERSION + 1))


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="seconds")


def _dumps(value: Any) -> str:

    return to_json(value)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _has_tables(conn: sqlite3.Connection, name: str | None = None) -> bool:
    """Whether the database has any table (or the table ``name``)."""
    sql = "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
    row = conn.execute(sql + " AND name = ?", (name,)) if name else conn.execute(sql)
    return bool(row.fetchone()[0])


def _user_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


@contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, begun at once (``BEGIN IMMEDIATE``: no other writer until it
    ends), committed when the block ends, rolled back when it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _create(conn: sqlite3.Connection) -> None:
    """A new store: version 1, then every migration (inside the caller's transaction)."""
    if _user_version(conn) != 0:
        return  # another process created it while this one waited for the lock
    for statement in SCHEMA_V1.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute("INSERT INTO meta VALUES ('app', ?)", (APP_ID,))
    conn.execute("INSERT INTO meta VALUES ('created_at', ?)", (_iso(time.time()),))
    for migration in MIGRATIONS:
        migration.apply(conn)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


UPGRADING = "upgrading_from"
"""The ``meta`` key an upgrade holds from its first step to its last: the version it started
from, whose copy was kept."""


def _upgrade(conn: sqlite3.Connection, target: Path) -> None:
    """Apply the missing migrations to an older store, one transaction per step; the version
    is read again inside each, so a step another process has applied is not applied twice.
    The copy is kept by the first step of an upgrade only (:data:`UPGRADING` says one began):
    a process that takes over between another's steps finds the store mid-upgrade, and its
    copy would be of a half-upgraded store."""
    while True:
        with _immediate(conn):
            version = _user_version(conn)
            if version >= SCHEMA_VERSION:
                return
            began = conn.execute("SELECT 1 FROM meta WHERE key = ?", (UPGRADING,)).fetchone()
            if not began:
                _keep_copy(target, version)
                conn.execute("INSERT INTO meta VALUES (?, ?)", (UPGRADING, str(version)))
            MIGRATIONS[version - 1].apply(conn)
            conn.execute(f"PRAGMA user_version = {version + 1}")
            if version + 1 == SCHEMA_VERSION:
                conn.execute("DELETE FROM meta WHERE key = ?", (UPGRADING,))


def _keep_copy(target: Path, version: int) -> None:
    """Copy a store of at most :data:`BACKUP_MAX_BYTES` to ``<name>.v<version>.bak`` before
    its upgrade. Called under the upgrade's write lock: a second connection reads the committed
    store (WAL lets it while the lock is held), so two processes never both copy."""
    files = [target, target.with_name(target.name + "-wal")]
    if sum(f.stat().st_size for f in files if f.exists()) > BACKUP_MAX_BYTES:
        return
    copy = target.with_name(f"{target.name}.v{version}.bak")
    partial = copy.with_name(copy.name + ".partial")
    try:
        partial.unlink(missing_ok=True)
        source, dest = sqlite3.connect(target), sqlite3.connect(partial)
        try:
            source.backup(dest)
            dest.execute("PRAGMA journal_mode = DELETE")
        finally:
            dest.close()
            source.close()
        os.replace(partial, copy)
    except (OSError, sqlite3.Error) as exc:
        partial.unlink(missing_ok=True)
        raise UserError(
            f"cannot keep a copy of the store {target} before upgrading it to schema version "
            f"{SCHEMA_VERSION} ({exc}); free some disk space next to it, or pass another "
            "--store PATH."
        ) from exc


def _process_start(pid: int) -> float | None:
    """Start time of process ``pid`` (seconds since the epoch), ``None`` if it is gone."""
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def _writer_alive(pid: int | None, start: float | None) -> bool:
    if pid is None:
        return False
    now_start = _process_start(pid)
    return now_start is not None and (start is None or abs(now_start - start) < 1.0)


class Store:
    """An open tfperf store; use :meth:`open`, and close it (or use it as a context manager)."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        self._lock = threading.Lock()
        self._host = socket.gethostname()
        self._pid = os.getpid()
        self._pid_start = _process_start(self._pid)

    # ----------------------------------------------------------------- opening
    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, *, create: bool = True) -> Store:
        """Open (and with ``create``, create) the store at ``path`` (default: paths rules).

        With ``create=False`` a missing file raises :class:`UserError` instead of being made.
        """

        target = resolve_store_path(path)
        if not target.exists() and not create:
            raise UserError(
                f"there is no tfperf store at {target}; run `tfperf bench` first "
                "or pass --store PATH (or TFPERF_STORE) to use another store."
            )
        if target.is_dir():
            raise UserError(f"the store path {target} is a directory; pass a file path to --store.")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(
                f"cannot create the directory for the store {target} "
                f"({exc.strerror or exc}); pass a writable --store PATH."
            ) from exc
        try:
            conn = sqlite3.connect(
                target, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise UserError(
                f"cannot open the store {target} ({exc}); pass a writable --store PATH."
            ) from exc
        try:
            cls._prepare_patiently(conn, target)
        except UserError:
            conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            conn.close()
            if "not a database" in str(exc) or "malformed" in str(exc):
                raise UserError(
                    f"{target} is not a tfperf store (not an SQLite database); "
                    "pass another --store PATH or move that file aside."
                ) from exc
            raise UserError(
                f"cannot use the store {target} ({exc}); pass a writable --store PATH."
            ) from exc
        return cls(conn, target)

    @classmethod
    def _prepare_patiently(cls, conn: sqlite3.Connection, target: Path) -> None:
        """:meth:`_prepare`, again while another process holds the lock: SQLite does not call
        its busy handler for every lock a new store's first opening takes (switching to WAL
        among them), so four processes creating one store at once could fail "locked"."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                cls._prepare(conn, target)
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    @staticmethod
    def _prepare(conn: sqlite3.Connection, target: Path) -> None:
        """Check, create or upgrade the schema; safe when several processes open a store at once."""
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        if _user_version(conn) == 0 and not _has_tables(conn):
            conn.execute("PRAGMA journal_mode = WAL")
            with _immediate(conn):
                _create(conn)
        # Read again: another process may have created or upgraded the schema meanwhile.
        version = _user_version(conn)
        if version == 0:
            raise UserError(
                f"{target} is an SQLite database but not a tfperf store; pass another --store PATH."
            )
        if version > SCHEMA_VERSION:
            raise UserError(
                f"the store {target} was written by a newer tfperf (schema version {version}; "
                f"tfperf {__version__} reads up to {SCHEMA_VERSION}); upgrade tfperf "
                "(`pip install -U tfperf`) or pass another --store PATH."
            )
        if not _has_tables(conn, "meta"):
            raise UserError(f"{target} is not a tfperf store; pass another --store PATH.")
        app = conn.execute("SELECT value FROM meta WHERE key = 'app'").fetchone()
        if app is None or app[0] != APP_ID:
            raise UserError(f"{target} is not a tfperf store; pass another --store PATH.")
        conn.execute("PRAGMA journal_mode = WAL")
        if version < SCHEMA_VERSION:
            _upgrade(conn, target)
        if conn.execute("SELECT 1 FROM runs WHERE uuid IS NULL LIMIT 1").fetchone():
            with _immediate(conn):
                _fill_uuids(conn)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None  # type: ignore[assignment]

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- writing
    def _execute(self, sql: str, params: tuple) -> sqlite3.Cursor:
        """Run one write; a store that cannot be written becomes a :class:`UserError`."""
        with self._lock:
            try:
                return self._conn.execute(sql, params)
            except sqlite3.OperationalError as exc:
                raise UserError(
                    f"cannot write to the store {self.path} ({exc}); pass a writable "
                    "--store PATH, or wait for the process holding it to finish."
                ) from exc

    def _insert(self, sql: str, params: tuple) -> int:
        return int(self._execute(sql, params).lastrowid)

    def new_run(
        self,
        kind: str,
        command: str,
        workload: dict,
        machine: dict,
        settings: dict,
        tags: dict | None = None,
    ) -> int:
        """Record the start of a run; returns its id. Its status is ``running`` until finished;
        it gets a fresh ``uuid`` and this tfperf's version. ``tags`` names where it was
        measured when not here (:data:`RUN_TAGS`; an unknown key raises ``ValueError``)."""
        tags = dict(tags or {})
        if set(tags) - set(RUN_TAGS):
            raise ValueError(f"run tags are {RUN_TAGS}, not {sorted(set(tags) - set(RUN_TAGS))}")
        return self._insert(
            "INSERT INTO runs (uuid, tfperf_version, kind, command, workload, machine, settings,"
            " started_at, writer_host, writer_pid, writer_start, node_id, host, fleet_run)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                str(uuid.uuid4()),
                __version__,
                kind,
                command,
                _dumps(workload),
                _dumps(machine),
                _dumps(settings),
                time.time(),
                self._host,
                self._pid,
                self._pid_start,
                *(tags.get(name) for name in RUN_TAGS),
            ),
        )

    def new_trial(self, run_id: int, label: str, config: dict, role: str) -> int:
        """Record the start of a trial of ``run_id`` (role e.g. ``baseline``/``candidate``)."""
        return self._insert(
            "INSERT INTO trials (run_id, label, config, role, started_at) VALUES (?, ?, ?, ?, ?)",
            (run_id, label, _dumps(config), role, time.time()),
        )

    def add_block(
        self, trial_id: int, samples_s: list[float], phase: str, info: dict | None = None
    ) -> int:
        """Append one block of samples (seconds per call) to a trial, committed at once.

        ``phase`` is ``"warmup"``, ``"steady"`` or ``"load"`` (one level of a load sweep: its
        latencies, the level's figures in ``info``); ``info`` is optional extra detail (e.g.
        ``{"rss_bytes": ...}``). Returns the block id; blocks keep their insertion order.
        """
        if phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES}, not {phase!r}")
        return self._insert(
            "INSERT INTO blocks (trial_id, phase, samples, info, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (
                trial_id,
                phase,
                json.dumps([float(s) for s in samples_s]),
                None if info is None else _dumps(info),
                time.time(),
            ),
        )

    def finish_trial(self, trial_id: int, status: str, info: dict, error: dict | None) -> None:
        """Close a trial: status ``ok``/``failed``/``rejected``, its info and any error."""
        if status not in TRIAL_STATUSES:
            raise ValueError(f"trial status must be one of {TRIAL_STATUSES}, not {status!r}")
        self._execute(
            "UPDATE trials SET status = ?, info = ?, error = ?, finished_at = ? WHERE id = ?",
            (status, _dumps(info), None if error is None else _dumps(error), time.time(), trial_id),
        )

    def set_trial_info(self, trial_id: int, info: dict) -> None:
        """Record a running trial's info (cold start, install, FLOPs) before it finishes, so a
        run killed later keeps it; :meth:`finish_trial` replaces it."""
        self._execute("UPDATE trials SET info = ? WHERE id = ?", (_dumps(info), trial_id))

    def add_comparison(
        self, run_id: int, baseline_trial: int, candidate_trial: int, result: dict
    ) -> int:
        """Record a comparison (e.g. :func:`tfperf.core.stats.paired_speedup`'s result)."""
        return self._insert(
            "INSERT INTO comparisons (run_id, baseline_trial, candidate_trial, result, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (run_id, baseline_trial, candidate_trial, _dumps(result), time.time()),
        )

    def finish_run(self, run_id: int, status: str, summary: dict) -> None:
        """Close a run with a status (free-form, e.g. ``ok``/``failed``) and a summary."""
        self._execute(
            "UPDATE runs SET status = ?, summary = ?, finished_at = ? WHERE id = ?",
            (status, _dumps(summary), time.time(), run_id),
        )

    # ----------------------------------------------------------------- reading
    def _run_dict(self, row: sqlite3.Row, counts: dict[str, int]) -> dict:
        status = row["status"]
        interrupted = (
            status == RUNNING
            and row["writer_host"] == self._host
            and not _writer_alive(row["writer_pid"], row["writer_start"])
        )
        return {
            "id": row["id"],
            "uuid": row["uuid"],
            "tfperf_version": row["tfperf_version"],
            "kind": row["kind"],
            "command": row["command"],
            "status": INTERRUPTED if interrupted else status,
            "started_at": _iso(row["started_at"]),
            "finished_at": _iso(row["finished_at"]),
            "workload": _loads(row["workload"]),
            "machine": _loads(row["machine"]),
            "settings": _loads(row["settings"]),
            "summary": _loads(row["summary"]),
            "trials": counts,
            **{name: row[name] for name in RUN_TAGS},
        }

    def _trial_counts(self, run_ids: list[int]) -> dict[int, dict[str, int]]:
        counts: dict[int, dict[str, int]] = {rid: {} for rid in run_ids}
        if not run_ids:
            return counts
        marks = ",".join("?" * len(run_ids))
        for run_id, status, count in self._conn.execute(
            f"SELECT run_id, status, count(*) FROM trials WHERE run_id IN ({marks})"
            " GROUP BY run_id, status",
            run_ids,
        ):
            counts[run_id][status] = count
        return counts

    def _rows(self, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        cur = self._conn.cursor()
        cur.row_factory = sqlite3.Row
        return cur.execute(sql, params).fetchall()

    def list_runs(self, limit: int = 50, *, fleet_run: int | None = None) -> list[dict]:
        """The newest ``limit`` runs, newest first; ``trials`` counts trials by status. With
        ``fleet_run``, only the runs the nodes of that fleet run measured."""
        if fleet_run is None:
            rows = self._rows("SELECT * FROM runs ORDER BY id DESC LIMIT ?", (int(limit),))
        else:
            rows = self._rows(
                "SELECT * FROM runs WHERE fleet_run = ? ORDER BY id DESC LIMIT ?",
                (int(fleet_run), int(limit)),
            )
        counts = self._trial_counts([r["id"] for r in rows])
        runs = [self._run_dict(r, counts[r["id"]]) for r in rows]
        for run in runs:
            if run["status"] == INTERRUPTED:
                run["trials"] = {
                    (INTERRUPTED if k == RUNNING else k): v for k, v in run["trials"].items()
                }
        return runs

    def _resolve_run_id(self, run_id: int | str) -> int:
        text = str(run_id).strip()
        if text == "latest":
            row = self._conn.execute("SELECT max(id) FROM runs").fetchone()
            if row[0] is None:
                raise UserError(f"the store {self.path} has no runs yet; run `tfperf bench` first.")
            return int(row[0])
        try:
            wanted = int(text)
        except ValueError:
            raise UserError(
                f"{text!r} is not a run id; pass a number from `tfperf history` or 'latest'."
            ) from None
        if self._conn.execute("SELECT 1 FROM runs WHERE id = ?", (wanted,)).fetchone() is None:
            raise UserError(
                f"there is no run {wanted} in {self.path}; `tfperf history` lists the runs."
            )
        return wanted

    def load_run(self, run_id: int | str) -> dict:
        """Everything about one run (``"latest"`` accepted): run, trials with samples, comparisons.

        Each trial carries ``samples_s`` (steady-state samples, blocks concatenated in order),
        ``warmup_s`` (warm-up samples) and ``blocks`` (``[{"phase", "samples_s", "info"}]``).
        Raises :class:`UserError` for an unknown id.
        """
        rid = self._resolve_run_id(run_id)
        row = self._rows("SELECT * FROM runs WHERE id = ?", (rid,))[0]
        run = self._run_dict(row, self._trial_counts([rid])[rid])
        trials = []
        for t in self._rows("SELECT * FROM trials WHERE run_id = ? ORDER BY id", (rid,)):
            blocks = [
                {
                    "phase": b["phase"],
                    "samples_s": json.loads(b["samples"]),
                    "info": _loads(b["info"]),
                }
                for b in self._rows(
                    "SELECT phase, samples, info FROM blocks WHERE trial_id = ? ORDER BY id",
                    (t["id"],),
                )
            ]
            status = t["status"]
            if status == RUNNING and run["status"] != RUNNING:
                status = INTERRUPTED
            trials.append(
                {
                    "id": t["id"],
                    "label": t["label"],
                    "role": t["role"],
                    "config": _loads(t["config"]),
                    "status": status,
                    "info": _loads(t["info"]) or {},
                    "error": _loads(t["error"]),
                    "started_at": _iso(t["started_at"]),
                    "finished_at": _iso(t["finished_at"]),
                    "samples_s": [
                        s for b in blocks if b["phase"] == "steady" for s in b["samples_s"]
                    ],
                    "warmup_s": [
                        s for b in blocks if b["phase"] == "warmup" for s in b["samples_s"]
                    ],
                    "blocks": blocks,
                }
            )
        comparisons = [
            {
                "id": c["id"],
                "baseline_trial": c["baseline_trial"],
                "candidate_trial": c["candidate_trial"],
                "result": _loads(c["result"]),
            }
            for c in self._rows("SELECT * FROM comparisons WHERE run_id = ? ORDER BY id", (rid,))
        ]
        return {"run": run, "trials": trials, "comparisons": comparisons}
