"""The options and lines of what an answer costs: ``--price-per-hour`` (bench, tune),
``--max-memory-mb`` (tune), and the memory and cost lines printed under a result table
(``docs/memory.md``).

Contract: :func:`price_option` and :func:`max_memory_option` add the options (their values
reach a command as ``price_per_hour`` and ``max_memory_mb``; the configuration file's keys of
the same names set their defaults); :func:`memory_line` and :func:`cost_line` are one line each
for a result that has a ``memory`` or ``cost`` record, ``None`` otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click


def price_option(fn: Any) -> Any:
    """Add ``--price-per-hour USD``."""
    return click.option(
        "--price-per-hour",
        "price_per_hour",
        type=float,
        default=None,
        metavar="USD",
        help="What this machine costs an hour: each result then gives the cost of a million "
        "samples.",
    )(fn)


def max_memory_option(fn: Any) -> Any:
    """Add ``--max-memory-mb MB``."""
    return click.option(
        "--max-memory-mb",
        "max_memory_mb",
        type=float,
        default=None,
        metavar="MB",
        help="Reject a candidate (or a served layout) whose peak memory exceeds this.",
    )(fn)


def _mb(value: float) -> str:
    """Whole MB, but a tenth below 10 (a small model's file is not "0 MB")."""
    return f"{value:.1f}" if abs(value) < 10 else f"{value:.0f}"


def memory_line(label: str, memory: Mapping[str, Any] | None) -> str | None:
    """``"litert: peak 42 MB, steady 41 MB, model 4 MB, file 3 MB (a process that loads the
    artifact alone; its worker peaked at 610 MB)"``."""
    if not memory or memory.get("peak_rss_mb") is None:
        return None
    parts = [f"peak {_mb(memory['peak_rss_mb'])} MB"]
    for key, name in (("steady_rss_mb", "steady"), ("model_mb", "model"),
                      ("artifact_mb", "file")):
        if memory.get(key) is not None:
            parts.append(f"{name} {_mb(memory[key])} MB")
    where = ""
    if memory.get("measured_in") == "deployed":
        where = " (a process that loads the artifact alone"
        if memory.get("worker_peak_rss_mb") is not None:
            where += f"; its worker peaked at {memory['worker_peak_rss_mb']:.0f} MB"
        where += ")"
    elif memory.get("not_deployed"):
        where = f" (in its worker, TensorFlow included: {memory['not_deployed']})"
    if memory.get("instances", 1) > 1:
        what = "projected" if memory.get("projected") else "measured"
        where += f" ({memory['instances']} instances, {what} sum)"
    return f"{label}: " + ", ".join(parts) + where


def cost_line(label: str, cost: Mapping[str, Any] | None, basis: str = "") -> str | None:
    """``"tf: $0.0123 per million samples at $0.10/h"`` (``basis`` says whose throughput)."""
    if not cost:
        return None
    text = (f"{label}: ${cost['per_million_samples']:.4g} per million samples at "
            f"${cost['price_per_hour']:g}/h")
    return text + (f" ({basis})" if basis else "")
