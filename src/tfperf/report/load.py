"""A load run in reports: its levels read back from the store, a table, and the picture.

Contract:

- :func:`load_sections` reads, from :meth:`tfperf.store.Store.load_run`'s dictionary, one
  section per trial that has ``load`` blocks: ``{"trial_id", "layout_label", "layout",
  "levels": [level dicts in measured order], "slo_ms", "max_qps_at_slo"}`` (the level dicts
  are those :class:`tfperf.serving.LoadLevel` wrote into each block's info, so a run stopped
  mid-sweep shows every level it finished; the SLO answer is the finished trial's, ``None``
  before). :func:`tfperf.report.html.build_report` puts them under ``load``.
- :data:`LOAD_COLUMNS` and :func:`load_rows`: an exported load run's rows, one per level.
- Each level shows its harness floor's p50 and p99 (``harness_floor_ms``; ``-`` where none
  was measured: a server tfperf did not start, or a run stored before floors were).
- :func:`load_table` is a rich table of one section's (or one ``LoadResult.to_dict()``'s)
  levels; :func:`load_lines` the plain lines of a whole report's load sections;
  :func:`load_html` the HTML tables of the report page.
- :func:`load_figure` draws, for each measured layout, p50/p90/p99 latency against achieved
  throughput (one line per percentile, levels joined in order of achieved rate), with the
  SLO as a horizontal line when the run had one. plotly is imported inside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_PERCENTILES = (("p50_ms", "p50", "dot"), ("p90_ms", "p90", "dash"), ("p99_ms", "p99", "solid"))


def load_sections(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The load sections of a run (module docstring)."""
    sections = []
    for trial in doc.get("trials", []):
        levels = [b.get("info") or {} for b in trial.get("blocks", []) if b["phase"] == "load"]
        if not levels:
            continue
        info = trial.get("info") or {}
        result = info.get("result") or {}
        sections.append(
            {
                "trial_id": trial["id"],
                "layout_label": info.get("layout_label") or trial["label"],
                "layout": info.get("layout"),
                "levels": levels,
                "slo_ms": result.get("slo_ms", (info.get("scenario") or {}).get("slo_ms")),
                "max_qps_at_slo": result.get("max_qps_at_slo"),
                "target": info.get("target"),
            }
        )
    return sections


def _fmt(value: Any, spec: str = ".3g") -> str:
    return "-" if value is None else format(value, spec)


def _level_row(level: Mapping[str, Any]) -> list[str]:
    load = (
        f"c={level.get('concurrency')}"
        if level.get("scenario") == "closed"
        else f"{_fmt(level.get('offered_qps'), '.4g')}/s"
    )
    lo, hi = [*(level.get("p99_ci_ms") or []), None, None][:2]
    return [
        load,
        _fmt(level.get("achieved_qps"), ".4g"),
        _fmt(level.get("p50_ms")),
        _fmt(level.get("p90_ms")),
        f"{_fmt(level.get('p99_ms'))} [{_fmt(lo)}, {_fmt(hi)}]",
        _fmt(level.get("p999_ms")),
        f"{level.get('completed')}/{level.get('sent')}"
        + (f" ({level['retried']} retried)" if level.get("retried") else ""),
        str(level.get("failed")),
        str(level.get("timed_out")),
        _fmt(level.get("generator_cpu"), ".2f"),
        _floor(level.get("harness_floor_ms")),
    ]


def _floor(floor: Mapping[str, Any] | None) -> str:
    return "-" if not floor else f"{_fmt(floor.get('p50'))} / {_fmt(floor.get('p99'))}"


COLUMNS = ("load", "achieved/s", "p50 ms", "p90 ms", "p99 ms [95% CI]", "p99.9 ms",
           "completed", "failed", "timed out", "gen CPU", "floor p50/p99 ms")


def load_table(section: Mapping[str, Any]) -> Any:
    """A rich table of one layout's levels (a section, or a ``LoadResult.to_dict()``)."""
    from rich import box
    from rich.table import Table

    label = section.get("layout_label") or "layout"
    slo = section.get("slo_ms")
    title = ("Server " if section.get("target") else "Layout ") + label + (
        f": max {_fmt(section.get('max_qps_at_slo'), '.4g')}/s within p99 {slo:g} ms"
        if slo is not None
        else ""
    )
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for col in COLUMNS:
        table.add_column(col, justify="left" if col == "load" else "right", no_wrap=True)
    for level in section.get("levels", []):
        table.add_row(*_level_row(level))
    return table


LOAD_COLUMNS = (
    "server", "scenario", "concurrency", "offered_qps", "achieved_qps", "p50_ms", "p90_ms",
    "p99_ms", "p99_low_ms", "p99_high_ms", "p999_ms", "sent", "completed", "failed",
    "timed_out", "retried", "generator_cpu", "harness_floor_p50_ms", "harness_floor_p99_ms",
    "slo_ms", "max_qps_at_slo",
)
"""The CSV / Markdown columns of an exported load run: one row per level."""


def load_rows(sections: Any) -> tuple[dict[str, Any], ...]:
    """One :data:`LOAD_COLUMNS` row per level of ``sections`` (:func:`load_sections`)."""
    rows = []
    for section in sections:
        for level in section.get("levels", []):
            lo, hi = [*(level.get("p99_ci_ms") or []), None, None][:2]
            row = {k: level.get(k) for k in LOAD_COLUMNS}
            floor = level.get("harness_floor_ms") or {}
            row.update(
                server=section.get("layout_label"), p99_low_ms=lo, p99_high_ms=hi,
                harness_floor_p50_ms=floor.get("p50"), harness_floor_p99_ms=floor.get("p99"),
                slo_ms=section.get("slo_ms"), max_qps_at_slo=section.get("max_qps_at_slo"),
            )
            rows.append(row)
    return tuple(rows)


def load_html(sections: list[Mapping[str, Any]]) -> str:
    """One HTML table of levels per layout, titled with its SLO answer."""
    import html

    parts = []
    for section in sections:
        title = f"Layout {section['layout_label']}"
        if section.get("slo_ms") is not None:
            title += (
                f": max {_fmt(section.get('max_qps_at_slo'), '.4g')} requests/s with p99 "
                f"within {section['slo_ms']:g} ms"
            )
        head = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
        rows = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in _level_row(lv)) + "</tr>"
            for lv in section["levels"]
        )
        parts.append(f"<h3>{html.escape(title)}</h3><table><tr>{head}</tr>{rows}</table>")
    return "".join(parts)


def load_lines(report: Mapping[str, Any]) -> list[str]:
    """Plain lines for a report's load sections (one header, one line per level)."""
    lines = []
    for section in report.get("load", []):
        lines.append(f"layout {section['layout_label']}:")
        lines.append("  " + " | ".join(COLUMNS))
        lines += ["  " + " | ".join(_level_row(level)) for level in section["levels"]]
        if section.get("slo_ms") is not None:
            lines.append(
                f"  max QPS within p99 {section['slo_ms']:g} ms: "
                f"{_fmt(section.get('max_qps_at_slo'), '.4g')}"
            )
    return lines


def load_figure(sections: list[Mapping[str, Any]]) -> Any:
    """Latency percentiles against achieved throughput per layout (module docstring)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    colors = ("#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f")
    slo = None
    for i, section in enumerate(sections):
        levels = sorted(section["levels"], key=lambda lv: lv.get("achieved_qps") or 0.0)
        slo = section.get("slo_ms") if section.get("slo_ms") is not None else slo
        for key, name, dash in _PERCENTILES:
            fig.add_trace(
                go.Scatter(
                    x=[lv.get("achieved_qps") for lv in levels],
                    y=[lv.get(key) for lv in levels],
                    mode="lines+markers",
                    name=f"{section['layout_label']} {name}",
                    line={"color": colors[i % len(colors)], "dash": dash},
                )
            )
    if slo is not None:  # a trace, not a shape: an annotation on a log axis takes log units
        rates = [lv.get("achieved_qps") or 0.0 for sec in sections for lv in sec["levels"]]
        fig.add_trace(
            go.Scatter(
                x=[0.0, max(rates, default=1.0) * 1.05],
                y=[slo, slo],
                mode="lines",
                name=f"SLO p99 {slo:g} ms",
                line={"color": "#333", "dash": "longdash", "width": 1},
            )
        )
    fig.update_layout(
        title="Latency under load (from each request's scheduled arrival)",
        xaxis_title="achieved requests per second",
        yaxis_title="milliseconds",
        yaxis_type="log",
        height=460,
        margin={"t": 50, "b": 40},
    )
    return fig
