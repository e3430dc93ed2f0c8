"""Console output shared by every command: rich for people, JSON for programs.

Contract: human output goes to stdout through :func:`console`; diagnostics go to stderr through
:func:`err_console`. With ``--json`` a command prints exactly one JSON document on stdout via
:func:`emit_json` and nothing else there.
"""

from __future__ import annotations

import sys
from functools import cache
from typing import Any

from rich.console import Console

from tfperf.core.strictjson import to_json


@cache
def console() -> Console:
    """The stdout console (created on first use)."""
    return Console(highlight=False)


@cache
def err_console() -> Console:
    """The stderr console (created on first use)."""
    return Console(stderr=True, highlight=False)


def emit_json(doc: Any) -> None:
    """Print ``doc`` as one JSON document on stdout."""
    sys.stdout.write(to_json(doc) + "\n")
    sys.stdout.flush()


def print_table(table: Any, out: Console | None = None) -> None:
    """Print a rich ``table`` on ``out`` (stdout by default); off a terminal (a file, a pipe), as
    wide as its rows need, so that a label is never cut or split across lines (a terminal keeps
    its own width)."""
    from rich.measure import Measurement

    out = out or console()
    if out.is_terminal:
        out.print(table)
        return
    needed = Measurement.get(out, out.options.update(max_width=10_000), table).maximum
    wide = Console(
        file=out.file, width=max(out.width, needed), highlight=False, color_system=out.color_system
    )
    wide.print(table)


def speedup_text(speedup: dict | None) -> str:
    """A speedup for people: ``2.31x (2.20-2.45)``, or ``-`` when there is none."""
    if not speedup or speedup.get("median") is None:
        return "-"
    low, high = speedup.get("ci95") or [None, None]
    interval = f" ({low:.2f}-{high:.2f})" if low is not None and high is not None else ""
    return f"{speedup['median']:.2f}x{interval}"
