"""The documents of ``tfperf history`` and ``tfperf report``, for the command line and the library.

Contract: :func:`history` returns the history document (the runs of a store, newest first, or
the trials of one run) and :func:`report` the report document of one run, optionally writing
its HTML report; both are described in ``docs/results-schema.md``. Neither imports TensorFlow;
numpy, scipy and plotly load inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

from pathlib import Path

HISTORY_SCHEMA_VERSION = 1


def _trial_row(trial: dict) -> dict:
    from tfperf.core.stats import summarize

    summary = summarize(trial["samples_s"]) if trial["samples_s"] else None
    return {
        "id": trial["id"],
        "label": trial["label"],
        "role": trial["role"],
        "status": trial["status"],
        "config": trial["config"],
        "n_samples": len(trial["samples_s"]),
        "n_warmup": len(trial["warmup_s"]),
        "p50_ms": summary["latency_ms"]["p50"] if summary else None,
        "install_fingerprint": ((trial.get("info") or {}).get("install") or {}).get("fingerprint"),
        "error": trial["error"],
        "started_at": trial["started_at"],
        "finished_at": trial["finished_at"],
    }


def history(store: str | Path | None = None, limit: int = 50, run: str | None = None) -> dict:
    """The runs in a store (newest first), or with ``run`` the trials of that run.

    Returns ``{"schema_version", "store", "runs": [...]}`` or ``{"schema_version", "store",
    "run": {...}, "trials": [...]}``. A store that does not exist yet has no runs.
    """
    from tfperf.core.errors import UserError
    from tfperf.core.paths import resolve_store_path
    from tfperf.store import Store

    if limit < 1:
        raise UserError("--limit must be a positive number of runs.")
    path = resolve_store_path(store)
    doc: dict = {"schema_version": HISTORY_SCHEMA_VERSION, "store": str(path)}
    if run is None and not path.exists():
        doc["runs"] = []
        return doc
    with Store.open(path, create=False) as db:
        if run is None:
            runs = db.list_runs(limit=limit)
            for r in runs:
                r.pop("machine", None)
            doc["runs"] = runs
        else:
            loaded = db.load_run(run)
            doc["run"] = loaded["run"]
            doc["trials"] = [_trial_row(t) for t in loaded["trials"]]
    return doc


def report(
    run: str | int = "latest", store: str | Path | None = None, html: str | Path | None = None
) -> dict:
    """The report document of one run; with ``html``, also write the HTML report there.

    The returned document gets ``"html": path`` when a file was written.
    """
    from tfperf.report.html import build_report, write_html
    from tfperf.store import Store

    with Store.open(store, create=False) as db:
        loaded = db.load_run(run)
    doc = build_report(loaded)
    if html is not None:
        doc["html"] = str(write_html(loaded, html, report=doc))
    return doc
