"""Portable results: a run, a comparison or a store's history written to a file by its
extension, and a result file read back on any machine, beside any store.

Contract
--------

- :func:`run_result` turns :meth:`tfperf.store.Store.load_run`'s dictionary into a
  :class:`RunResult`: the run (kind, command, workload, status, times, settings, summary), the
  machine facts and the TensorFlow install stored with it, and per trial its label, config,
  status, summary statistics (those of :func:`tfperf.report.html.build_report`), speedup over
  the baseline with its 95% interval (the run's stored comparison, or one recomputed from its
  blocks), the accuracy a tune measured, and every raw block (seconds per call, per block, per
  phase). :func:`read_result` reads a ``.json`` result file back into the same record, so
  :func:`tfperf.benchmark.compare_runs` runs one statistic on a file and on a stored run alike;
  :func:`load_result` takes either a result file or a run id / ``latest`` in a store.
- Every document names its format and version in ``"schema"`` (:data:`RESULT_SCHEMA`,
  :data:`COMPARISON_SCHEMA`, :data:`HISTORY_SCHEMA`). A reader refuses another format, or a
  version it does not know, with one sentence saying what to do; a new key does not change the
  version.
- A load run (``kind: "load"``, local layouts or a server the user runs) keeps its levels under
  ``load`` (one section per server: levels, SLO, highest rate within it); its CSV and Markdown
  rows are its levels (:data:`tfperf.report.load.LOAD_COLUMNS`).
- :class:`Table` is what one ``--export FILE`` writes: a JSON document, and the rows of its CSV
  and Markdown forms (one row per config, or per run for a history). :func:`run_table`,
  :func:`comparison_table` and :func:`history_table` build one; :func:`write` writes it by the
  extension of ``FILE`` (:data:`FORMATS`), whole or not at all. :func:`check_target` refuses
  an unknown extension, or a path that cannot be written, before any measuring starts.
  Both raise :class:`~tfperf.core.errors.UserError` (exit 2).

The formats are described in ``docs/results-schema.md``. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, NoReturn

from tfperf import __version__
from tfperf.core.errors import UserError
from tfperf.core.memory import stored_memory
from tfperf.core.paths import resolve_store_path
from tfperf.core.strictjson import to_json
from tfperf.machine.facts import machine_summary
from tfperf.report.html import build_report, describe_workload
from tfperf.report.load import LOAD_COLUMNS, load_rows
from tfperf.store import Store

RESULT_SCHEMA = "tfperf-result/1"
"""One run: ``bench``, ``tune``, ``compare --workload`` and ``history RUN`` write it; ``compare``
reads it."""
COMPARISON_SCHEMA = "tfperf-comparison/1"
"""Two runs compared (``compare A B --export``)."""
HISTORY_SCHEMA = "tfperf-history/1"
"""A store's runs, one summary each (``history --export``)."""
FORMATS = (".json", ".csv", ".md")

RUN_COLUMNS = (
    "config", "role", "status", "p50_ms", "p99_ms", "samples_per_s", "speedup", "speedup_low",
    "speedup_high", "verdict", "max_rel_error", "runtime", "batch", "n", "trial_id",
    "peak_rss_mb", "model_mb",
)
COMPARISON_COLUMNS = (
    "config", "config_a", "p50_ms", "p99_ms", "samples_per_s", "speedup", "speedup_low",
    "speedup_high", "verdict", "p_value", "a_p50_ms", "a_p99_ms", "a_samples_per_s",
)
HISTORY_COLUMNS = (
    "run_id", "started_at", "kind", "status", "workload", "machine", "config", "p50_ms",
    "p99_ms", "samples_per_s", "speedup", "speedup_low", "speedup_high", "verdict",
    "baseline_p50_ms", "peak_rss_mb",
)

_BEST_KEYS = HISTORY_COLUMNS[HISTORY_COLUMNS.index("config") : HISTORY_COLUMNS.index("verdict") + 1]
"""The history row's columns that describe the run's best config (:func:`best_trial`)."""


@dataclass(frozen=True)
class TrialResult:
    """One trial of a portable result (a config measured in a run)."""

    id: int
    label: str
    role: str
    config: dict
    status: str
    error: dict | None
    batch: int
    n: int
    latency_ms: dict
    """``p50``, ``p90``, ``p99``, ``mean``, ``p50_ci95`` of the steady samples (ms per call)."""
    throughput_per_s: float | None
    """Samples per second at the median latency (``batch / p50``)."""
    speedup: dict | None
    """Over the run's ``baseline`` (named in it): ``median``, ``ci95``, ``p_value``,
    ``n_pairs``, ``threshold``, ``verdict``; ``None`` for the baseline itself and a trial the
    run did not compare."""
    max_abs_error: float | None
    max_rel_error: float | None
    install_fingerprint: str | None
    warnings: tuple[str, ...]
    blocks: tuple[dict, ...]
    """``{"phase": "warmup" | "steady", "samples_s": [seconds per call], "info"}``, in the
    order measured."""
    install: dict | None = None
    """The trial's TensorFlow install where it is not the run's (another interpreter)."""
    ops: dict | None = None
    """Its op profile, for a run measured with ``--ops`` (``docs/ops.md``)."""
    memory: dict | None = None
    """Its memory record (:class:`tfperf.core.memory.Memory`, ``docs/memory.md``)."""

    def steady_samples(self) -> list[float]:
        """The steady-state samples, blocks concatenated in order (seconds per call)."""
        return [s for b in self.blocks if b.get("phase") == "steady" for s in b["samples_s"]]

    def row(self) -> dict[str, Any]:
        """The trial's row of the CSV and Markdown forms (:data:`RUN_COLUMNS`)."""
        return {
            "config": self.label,
            "role": self.role,
            "status": self.status,
            **_figures(self.latency_ms, self.throughput_per_s),
            **_speedup_cells(self.speedup),
            "max_rel_error": self.max_rel_error,
            "runtime": (self.config or {}).get("runtime") or "tf",
            "batch": self.batch,
            "n": self.n,
            "trial_id": self.id,
            "peak_rss_mb": (self.memory or {}).get("peak_rss_mb"),
            "model_mb": (self.memory or {}).get("model_mb"),
        }


@dataclass(frozen=True)
class RunResult:
    """One run as a portable result: what a ``tfperf-result`` file holds."""

    run: dict
    """``id``, ``kind``, ``command``, ``status``, ``started_at``, ``finished_at``, ``workload``,
    ``settings``, ``summary`` and ``store`` (where it was recorded)."""
    machine: dict
    install: dict | None
    """The baseline's TensorFlow install (the first trial's that recorded one)."""
    trials: tuple[TrialResult, ...]
    warnings: tuple[str, ...] = ()
    tfperf_version: str = __version__
    load: tuple[dict, ...] = ()
    """A load run's servers (:func:`tfperf.report.load.load_sections`): each one's levels, SLO
    and highest rate within it; its trials are these, not ``trials``."""
    origin: str = field(default="", compare=False)
    """Where this record came from (``run 7 in STORE`` or a file's path); not written."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of a result file."""
        return {
            "schema": RESULT_SCHEMA,
            "tfperf_version": self.tfperf_version,
            "run": self.run,
            "machine": self.machine,
            "install": self.install,
            "trials": [asdict(t) for t in self.trials],
            "warnings": list(self.warnings),
            "load": list(self.load),
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any], origin: str = "") -> RunResult:
        """Rebuild from :meth:`to_dict` (keys it does not know are ignored); a missing key
        raises ``KeyError``."""
        names = {f.name for f in fields(TrialResult)}
        trials = []
        for trial in doc["trials"]:
            kept = {k: v for k, v in trial.items() if k in names}
            kept.update(warnings=tuple(trial["warnings"]), blocks=tuple(trial["blocks"]))
            trials.append(TrialResult(**kept))
        return cls(
            run=doc["run"],
            machine=doc["machine"] or {},
            install=doc["install"],
            trials=tuple(trials),
            warnings=tuple(doc.get("warnings") or ()),
            tfperf_version=str(doc.get("tfperf_version")),
            load=tuple(doc.get("load") or ()),
            origin=origin,
        )


# -------------------------------------------------------------------- building and reading
def run_result(loaded: dict[str, Any], store: str | os.PathLike[str] | None = None) -> RunResult:
    """The portable result of a stored run (``loaded`` as ``Store.load_run`` returns it)."""
    report = build_report(loaded)
    run = loaded["run"]
    speedups = {
        c["candidate"]["trial_id"]: {"baseline": c["baseline"]["label"], **c["speedup"]}
        for c in report["comparisons"]
    }
    stored = [t for t in loaded["trials"] if not any(b["phase"] == "load" for b in t["blocks"])]
    install = next((i for i in (_info(t).get("install") for t in stored) if i), None)
    trials = tuple(
        _trial(t, r, speedups.get(t["id"]), _accuracy(t, stored), install)
        for t, r in zip(stored, report["results"], strict=True)
    )
    keys = ("id", "kind", "command", "status", "started_at", "finished_at", "workload")
    record = {k: run.get(k) for k in (*keys, "settings", "summary")}
    record["store"] = None if store is None else str(Path(store).resolve())
    origin = f"run {run['id']}" + ("" if store is None else f" in {store}")
    return RunResult(
        record,
        run.get("machine") or {},
        install,
        trials,
        tuple(report["warnings"]),
        load=tuple(report["load"]),
        origin=origin,
    )


def _info(trial: dict[str, Any]) -> dict[str, Any]:
    return trial.get("info") or {}




def _trial(
    trial: dict[str, Any],
    result: dict[str, Any],
    speedup: dict[str, Any] | None,
    accuracy: dict[str, Any],
    run_install: dict[str, Any] | None,
) -> TrialResult:
    install = _info(trial).get("install") or None
    return TrialResult(
        id=trial["id"],
        label=trial["label"],
        role=trial["role"],
        config=trial["config"] or {},
        status=trial["status"],
        error=trial.get("error"),
        batch=result["batch"],
        n=result["n"],
        latency_ms=result["latency_ms"],
        throughput_per_s=result["throughput_per_s"],
        speedup=speedup,
        max_abs_error=accuracy.get("max_abs_error"),
        max_rel_error=accuracy.get("max_rel_error"),
        install_fingerprint=(install or {}).get("fingerprint"),
        warnings=tuple(result["warnings"]),
        blocks=tuple(trial["blocks"]),
        install=install if install != run_install else None,
        ops=_info(trial).get("ops"),
        memory=stored_memory(_info(trial)),
    )


def _accuracy(trial: dict[str, Any], trials: list[dict[str, Any]]) -> dict[str, Any]:
    """The accuracy a tune measured for the trial's config (a confirmation trial has none of
    its own: its candidate's)."""

    def measured(t: dict[str, Any]) -> dict[str, Any]:
        return (_info(t).get("outcome") or {}).get("accuracy") or {}

    if measured(trial):
        return measured(trial)
    same = (measured(t) for t in trials if t["config"] == trial["config"])
    return next((m for m in same if m), {})


def read_result(path: str | os.PathLike[str]) -> RunResult:
    """A ``tfperf-result`` file read back; a missing, unreadable or foreign file, or one of
    another version, raises :class:`UserError`."""
    doc = _read_json(path)
    check_schema(doc, path, RESULT_SCHEMA)
    try:
        return RunResult.from_dict(doc, origin=str(path))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UserError(
            f"{path} is not a complete tfperf result file (missing or malformed {exc}); "
            "export the run again with --export FILE.json."
        ) from None


def _read_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise UserError(
            f"there is no result file {path}; pass a .json file written by --export, "
            "or a run id from `tfperf history`."
        ) from None
    except OSError as exc:
        raise UserError(
            f"cannot read {path} ({exc.strerror or exc}); pass a readable result file."
        ) from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        doc = None
    if not isinstance(doc, dict):
        raise UserError(
            f"{path} is not a tfperf result file (not a JSON document); pass a .json file "
            "written by --export."
        )
    return doc


def check_schema(doc: dict[str, Any], path: Any, expected: str) -> None:
    """Refuse a document whose ``schema`` is not ``expected`` (another format, or another
    version of it) with one sentence saying what to do."""
    found = str(doc.get("schema") or "")
    if found == expected:
        return
    name, _, version = found.partition("/")
    want, _, want_version = expected.partition("/")
    if name != want:
        what = f"a {found} file" if name.startswith("tfperf-") else "not a tfperf result file"
        raise UserError(
            f"{path} is {what}, not one run's result ({expected}); export a run with "
            "`tfperf history RUN --export FILE.json`."
        )
    newer = version.isdigit() and int(version) > int(want_version)
    hint = "upgrade tfperf to read it" if newer else "export the run again with this tfperf"
    raise UserError(f"{path} is a {found} file and this tfperf reads {expected}; {hint}.")


def is_result_file(ref: str) -> bool:
    """Whether ``ref`` names a result file rather than a run: it ends in ``.json``, or it is an
    existing path that is not a run id (a number or ``latest``)."""
    text = ref.strip()
    if text.lower().endswith(".json"):
        return True
    return not (text.isdigit() or text == "latest") and Path(text).exists()


def load_result(ref: str, store: str | os.PathLike[str] | None = None) -> RunResult:
    """A result file (:func:`is_result_file`), or run ``ref`` (an id or ``latest``) of the
    store (``--store`` > ``TFPERF_STORE`` > the default)."""
    if is_result_file(ref):
        return read_result(ref)
    text = ref.strip()
    if not (text.isdigit() or text == "latest"):
        raise UserError(
            f"{ref!r} is not a run id nor a result file; pass a number from `tfperf history`, "
            "'latest', or a .json file written by --export."
        )
    path = resolve_store_path(store)
    with Store.open(path, create=False) as db:
        return run_result(db.load_run(text), path)


# -------------------------------------------------------------------------------- tables
@dataclass(frozen=True)
class Table:
    """What one ``--export FILE`` writes: ``document`` as JSON, or ``rows`` (keyed by
    ``columns``) as CSV or as a Markdown table under ``title``."""

    document: dict
    columns: tuple[str, ...]
    rows: tuple[dict, ...]
    title: str


def _figures(latency_ms: dict | None, per_s: float | None, prefix: str = "") -> dict[str, Any]:
    latency_ms = latency_ms or {}
    return {
        f"{prefix}p50_ms": latency_ms.get("p50"),
        f"{prefix}p99_ms": latency_ms.get("p99"),
        f"{prefix}samples_per_s": per_s,
    }


def _speedup_cells(speedup: dict | None) -> dict[str, Any]:
    speedup = speedup or {}
    low, high = speedup.get("ci95") or [None, None]
    return {
        "speedup": speedup.get("median"),
        "speedup_low": low,
        "speedup_high": high,
        "verdict": speedup.get("verdict"),
    }


def _machine_name(machine: dict) -> str:
    brief = machine_summary(machine or {})
    return str(brief["cpu"] or brief["fingerprint"] or "an unknown machine")


def run_table(result: RunResult) -> Table:
    """One run: the result document, one row per trial (:data:`RUN_COLUMNS`)."""
    run = result.run
    title = (
        f"tfperf {run.get('kind')} run {run.get('id')}: {describe_workload(run.get('workload'))}"
        f" on {_machine_name(result.machine)}"
    )
    if result.load:
        return Table(result.to_dict(), LOAD_COLUMNS, load_rows(result.load), title)
    rows = tuple(t.row() for t in result.trials)
    return Table(result.to_dict(), RUN_COLUMNS, rows, title)


def comparison_table(doc: dict[str, Any]) -> Table:
    """Two runs compared (``compare_runs``' document): one row per pair of trials, B's figures
    and B's speedup over A (:data:`COMPARISON_COLUMNS`); two load runs: one row per pair of
    levels (:data:`LOAD_COMPARISON_COLUMNS`)."""
    document = {"schema": COMPARISON_SCHEMA, "tfperf_version": __version__, **doc}
    title = f"tfperf compare: {doc['source_a']} (A) vs {doc['source_b']} (B)"
    if doc.get("kind") == "compare-load":
        return Table(document, LOAD_COMPARISON_COLUMNS, _load_comparison_rows(doc), title)
    rows = []
    for c in doc["comparisons"]:
        a, b = c["a"], c["b"]
        rows.append(
            {
                "config": c["label_b"],
                "config_a": c["label_a"],
                **_figures(b["latency_ms"], b["throughput_per_s"]),
                **_speedup_cells(c["speedup"]),
                "p_value": c["speedup"].get("p_value"),
                **_figures(a["latency_ms"], a["throughput_per_s"], prefix="a_"),
            }
        )
    return Table(document, COMPARISON_COLUMNS, tuple(rows), title)


LOAD_COMPARISON_COLUMNS = (
    "server", "server_a", "load", "achieved_qps", "p99_ms", "a_achieved_qps", "a_p99_ms",
    "slo_ms", "max_qps_at_slo", "a_max_qps_at_slo", "ratio", "verdict",
)


def _load_comparison_rows(doc: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    rows = []
    for c in doc["comparisons"]:
        for pair in c["levels"]:
            a, b = pair["a"] or {}, pair["b"] or {}
            rows.append({
                "server": c["label_b"], "server_a": c["label_a"], "load": pair["load"],
                "achieved_qps": b.get("achieved_qps"), "p99_ms": b.get("p99_ms"),
                "a_achieved_qps": a.get("achieved_qps"), "a_p99_ms": a.get("p99_ms"),
                "slo_ms": c["slo_ms"], "max_qps_at_slo": c["max_qps_at_slo_b"],
                "a_max_qps_at_slo": c["max_qps_at_slo_a"], "ratio": c["ratio"],
                "verdict": c["verdict"],
            })
    return tuple(rows)


def best_trial(result: RunResult) -> TrialResult | None:
    """The config a run's history row shows: its fastest significantly faster config (a tune's:
    its confirmed recommendation), else its baseline, else its first measured trial."""
    measured = [t for t in result.trials if t.status == "ok" and t.n]
    confirmed = [t for t in measured if t.role == "confirmation"]
    faster = [t for t in confirmed or measured if (t.speedup or {}).get("verdict") == "faster"]
    if faster:
        return max(faster, key=lambda t: t.speedup["median"])
    base = [t for t in measured if t.role == "baseline"]
    return (base or measured or [None])[0]


def _history_entry(listed: dict[str, Any], result: RunResult) -> dict[str, Any]:
    best = best_trial(result)
    base = next((t for t in result.trials if t.role == "baseline"), None)
    keys = ("id", "kind", "command", "status", "started_at", "finished_at", "workload")
    return {
        **{k: listed.get(k) for k in keys},
        "machine": machine_summary(result.machine),
        "trials": listed.get("trials"),
        "baseline_p50_ms": None if base is None else base.latency_ms.get("p50"),
        "best": None if best is None else best.row(),
    }


def _history_row(entry: dict[str, Any]) -> dict[str, Any]:
    best = entry["best"] or {}
    return {
        "run_id": entry["id"],
        "started_at": entry["started_at"],
        "kind": entry["kind"],
        "status": entry["status"],
        "workload": describe_workload(entry["workload"]),
        "machine": entry["machine"]["cpu"] or entry["machine"]["fingerprint"],
        **{k: best.get(k) for k in _BEST_KEYS},
        "baseline_p50_ms": entry["baseline_p50_ms"],
        "peak_rss_mb": best.get("peak_rss_mb"),
    }


def history_table(store: str | os.PathLike[str] | None = None, limit: int = 50) -> Table:
    """A store's newest ``limit`` runs, one summary each (a store not made yet has none)."""
    path = resolve_store_path(store).resolve()
    entries = []
    if path.exists():
        with Store.open(path, create=False) as db:
            for listed in db.list_runs(limit=limit):
                result = run_result(db.load_run(listed["id"]), path)
                entries.append(_history_entry(listed, result))
    document = {
        "schema": HISTORY_SCHEMA,
        "tfperf_version": __version__,
        "store": str(path),
        "runs": entries,
    }
    rows = tuple(_history_row(e) for e in entries)
    return Table(document, HISTORY_COLUMNS, rows, f"tfperf history: {path}")


# ------------------------------------------------------------------------------- writing
def check_target(path: str | os.PathLike[str]) -> Path:
    """The file ``--export`` writes, checked before any work: a known extension and a folder
    that can be written (a missing one is created, as the store's is)."""
    target = Path(path).expanduser()
    if target.suffix.lower() not in FORMATS:
        raise UserError(
            f"--export {path}: the format follows the extension, so name a .json, .csv or .md file."
        )
    folder = target.parent
    if folder.exists() and not folder.is_dir():
        _unwritable(path, f"{folder} is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _unwritable(path, exc.strerror or str(exc))
    if target.is_dir():
        _unwritable(path, "it is a folder")
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        _unwritable(path, "permission denied")
    return target


def _unwritable(path: Any, why: str) -> NoReturn:
    raise UserError(f"cannot write --export {path} ({why}); pass a file in a writable folder.")


def write(table: Table, path: str | os.PathLike[str]) -> Path:
    """Write ``table`` to ``path`` in the format its extension names; the path written."""
    target = check_target(path)
    render = {".json": _json_text, ".csv": _csv_text, ".md": _markdown_text}
    text = render[target.suffix.lower()](table)
    partial = target.with_name(f".{target.name}.partial")
    try:
        with open(partial, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.replace(partial, target)  # a reader never sees half a file
    except OSError as exc:
        partial.unlink(missing_ok=True)
        _unwritable(path, exc.strerror or str(exc))
    return target


def _json_text(table: Table) -> str:
    return to_json(table.document) + "\n"


def _csv_text(table: Table) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=table.columns, extrasaction="ignore")
    writer.writeheader()
    for row in table.rows:
        writer.writerow({k: "" if row.get(k) is None else row.get(k) for k in table.columns})
    return out.getvalue()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return format(value, ".4g")
    return str(value).replace("|", "\\|")


def _markdown_text(table: Table) -> str:
    numeric = {
        c for c in table.columns
        if any(isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool)
               for r in table.rows)
    }
    lines = [f"**{_cell(table.title)}**", ""]
    lines.append("| " + " | ".join(table.columns) + " |")
    lines.append("|" + "|".join("---:" if c in numeric else "---" for c in table.columns) + "|")
    for row in table.rows:
        lines.append("| " + " | ".join(_cell(row.get(c)) for c in table.columns) + " |")
    return "\n".join(lines) + "\n"
