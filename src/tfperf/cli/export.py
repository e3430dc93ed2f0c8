"""The ``--export FILE`` option that ``bench``, ``tune``, ``compare`` and ``history`` share.

Contract: :func:`export_option` adds the option; a command calls :func:`export_target` before it
measures anything (an unknown extension or an unwritable path is exit 2 at once, not after the
run), then :func:`export_run` or :func:`export_table` once it has its result, before any
``--fail-on`` gate trips (a CI job keeps the file of a failing run). The file is written by
:mod:`tfperf.report.export`; one line on stderr says where.
"""

from __future__ import annotations

# The library is imported inside each function: `tfperf --help` stays instant.
import os
from typing import Any

import click


def export_option(fn: Any) -> Any:
    """Add ``--export FILE`` to a click command (its value reaches it as ``export``)."""
    return click.option(
        "--export",
        "export",
        type=click.Path(dir_okay=False),
        default=None,
        metavar="FILE",
        help="Also write the result to FILE, by its extension: .json (every raw sample; "
        "`tfperf compare` reads it on any machine), .csv or .md (one row per config).",
    )(fn)


def export_target(path: str | None) -> None:
    """Check ``--export``'s path before any work (nothing to do without one)."""
    if path is not None:
        from tfperf.report.export import check_target

        check_target(path)


def export_run(path: str | None, store: str | os.PathLike[str] | None, run_id: Any) -> None:
    """Write run ``run_id`` of ``store`` to ``path`` (nothing to do without one)."""
    if path is None:
        return
    from tfperf.report.export import load_result, run_table

    export_table(run_table(load_result(str(run_id), store)), path)


def export_table(table: Any, path: str | None) -> None:
    """Write a :class:`tfperf.report.export.Table` to ``path`` and say where."""
    if path is None:
        return
    from tfperf.progress import note
    from tfperf.report.export import write

    written = write(table, path)
    note(f"exported to {written}", markup=False)  # -q leaves only the file itself
