"""The library API over what tfperf keeps: ``tfperf.history()``, ``tfperf.report()`` (the
store's runs) and ``tfperf.apply()`` (a saved profile).

Contract: the same options as ``tfperf history``, ``tfperf report`` and ``tfperf apply``, under
the command line's names (``--html`` is ``html=``, ``--format`` is ``format=``), with the same
defaults; ``store=None`` is the environment's, else the configuration file's, else the default
store, as on the command line. Each returns a typed result (:mod:`tfperf.api.results`) whose
``to_dict()`` is the command's ``--json`` document (``apply`` has no ``--json``: its document is
``{"profile", "format", "text", "warnings"}``, ``text`` being what the command prints). Bad
input raises :class:`~tfperf.core.errors.UserError`. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import os

from tfperf.api.calls import PathLike, _configured, _path
from tfperf.api.results import ApplyResult, HistoryResult, ReportResult


def history(
    run: int | str | None = None, *, store: PathLike | None = None, limit: int = 50
) -> HistoryResult:
    """The runs recorded in the store, newest first, or with ``run`` (an id or ``"latest"``)
    the trials of that run (``tfperf history [RUN]``)."""
    from tfperf.report.runs import history as history_doc

    store = _configured("history", store=store)["store"]
    ref = None if run is None else str(run)
    return HistoryResult(history_doc(store=_path(store), limit=limit, run=ref))


def report(
    run: int | str = "latest", *, store: PathLike | None = None, html: PathLike | None = None
) -> ReportResult:
    """One run's results, speedups, verdicts and warnings (``tfperf report RUN``); with
    ``html``, also the self-contained HTML report written to that path."""
    from tfperf.report.runs import report as report_doc

    store = _configured("report", store=store)["store"]
    return ReportResult(report_doc(run=str(run), store=_path(store), html=_path(html)))


def apply(profile: PathLike, *, format: str = "sh") -> ApplyResult:
    """How to adopt a tuned profile (``tfperf apply PROFILE --format FORMAT``): ``env`` lines,
    ``sh`` exports, a ``python`` snippet, or ``tf-serving`` (TensorFlow Serving's batching
    parameters file). ``profile`` is a profile's path or name, as the command takes it."""
    from tfperf.core.errors import UserError
    from tfperf.profiles import FORMATS, load_profile, mismatch_warnings, render

    if format not in FORMATS:
        raise UserError(f"format {format!r} is not one of {', '.join(FORMATS)}: pick one.")
    data = load_profile(os.fspath(profile))
    return ApplyResult({
        "profile": os.fspath(profile),
        "format": format,
        "text": render(data, format),
        "warnings": list(mismatch_warnings(data)),
    })
