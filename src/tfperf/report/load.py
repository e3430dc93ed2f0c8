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
  was measured: a server tfperf did not start, or a run stored before floors were) and the
  server's own time per request beside the client's latency: for tfperf's instances the
  model call (``service_ms`` p50/p99), for a server the user runs its own queue and compute
  means where it keeps statistics (``server_ms``), with how long requests waited for a client
  connection (``client_queue_ms``) and the reconnects the level made. A percentile that does
  not stand on enough requests is ``-`` with the requests it needs (``needs``), and a level
  whose window was followed by a long drain shows it (``drain_s``).
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


def _pct(level: Mapping[str, Any], key: str, name: str) -> str:
    """A percentile, or ``-`` with the requests it would need."""
    need = (level.get("needs") or {}).get(name)
    return f"- (n<{need})" if level.get(key) is None and need else _fmt(level.get(key))


def _pair(values: Mapping[str, Any] | None) -> str:
    return "-" if not values else f"{_fmt(values.get('p50'))} / {_fmt(values.get('p99'))}"


def _server(server: Mapping[str, Any] | None) -> str:
    if not server:
        return "-"
    return f"{_fmt(server.get('queue_ms'))} / {_fmt(server.get('compute_ms'))}"


def _level_row(level: Mapping[str, Any], remote: bool = False) -> list[str]:
    load = (
        f"c={level.get('concurrency')}"
        if level.get("scenario") == "closed"
        else f"{_fmt(level.get('offered_qps'), '.4g')}/s"
    )
    lo, hi = [*(level.get("p99_ci_ms") or []), None, None][:2]
    drain = level.get("drain_s")
    row = [
        load,
        _fmt(level.get("achieved_qps"), ".4g"),
        _pct(level, "p50_ms", "p50"),
        _pct(level, "p90_ms", "p90"),
        f"{_pct(level, 'p99_ms', 'p99')} [{_fmt(lo)}, {_fmt(hi)}]",
        _pct(level, "p999_ms", "p99.9"),
        f"{level.get('completed')}/{level.get('sent')}"
        + (f" ({level['retried']} retried)" if level.get("retried") else ""),
        str(level.get("failed")),
        str(level.get("timed_out")),
        "-" if drain is None else f"{drain:.2g}",
        _fmt(level.get("generator_cpu"), ".2f"),
    ]
    if remote:
        return [*row, _pair(level.get("client_queue_ms")), _fmt(level.get("reconnects"), "d"),
                _server(level.get("server_ms"))]
    return [*row, _pair(level.get("service_ms")), _floor(level.get("harness_floor_ms"))]


def _floor(floor: Mapping[str, Any] | None) -> str:
    return "-" if not floor else f"{_fmt(floor.get('p50'))} / {_fmt(floor.get('p99'))}"


COLUMNS = ("load", "achieved/s", "p50 ms", "p90 ms", "p99 ms [95% CI]", "p99.9 ms",
           "completed", "failed", "timed out", "drain s", "gen CPU")
LOCAL_COLUMNS = (*COLUMNS, "service p50/p99 ms", "floor p50/p99 ms")
"""A layout tfperf serves: the model call's time (service) and the harness's floor."""
REMOTE_COLUMNS = (*COLUMNS, "client queue p50/p99 ms", "reconnects",
                  "server queue/compute ms")
"""A server the user runs: the wait for a client connection, the reconnects, and the server's
own queue and compute time per request (its statistics, where it keeps them)."""


def _columns(section: Mapping[str, Any]) -> tuple[str, ...]:
    return REMOTE_COLUMNS if section.get("target") else LOCAL_COLUMNS


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
    for col in _columns(section):
        table.add_column(col, justify="left" if col == "load" else "right", no_wrap=True)
    remote = bool(section.get("target"))
    for level in section.get("levels", []):
        table.add_row(*_level_row(level, remote))
    return table


LOAD_COLUMNS = (
    "server", "scenario", "concurrency", "offered_qps", "achieved_qps", "p50_ms", "p90_ms",
    "p99_ms", "p99_low_ms", "p99_high_ms", "p999_ms", "sent", "completed", "failed",
    "timed_out", "retried", "window_s", "drain_s", "generator_cpu", "harness_floor_p50_ms",
    "harness_floor_p99_ms", "service_p50_ms", "service_p99_ms", "client_queue_p50_ms",
    "client_queue_p99_ms", "reconnects", "server_queue_ms", "server_compute_ms", "slo_ms",
    "max_qps_at_slo",
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
            service = level.get("service_ms") or {}
            queue = level.get("client_queue_ms") or {}
            server = level.get("server_ms") or {}
            row.update(
                server=section.get("layout_label"), p99_low_ms=lo, p99_high_ms=hi,
                harness_floor_p50_ms=floor.get("p50"), harness_floor_p99_ms=floor.get("p99"),
                service_p50_ms=service.get("p50"), service_p99_ms=service.get("p99"),
                client_queue_p50_ms=queue.get("p50"), client_queue_p99_ms=queue.get("p99"),
                server_queue_ms=server.get("queue_ms"),
                server_compute_ms=server.get("compute_ms"),
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
        head = "".join(f"<th>{html.escape(c)}</th>" for c in _columns(section))
        remote = bool(section.get("target"))
        rows = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in _level_row(lv, remote))
            + "</tr>"
            for lv in section["levels"]
        )
        parts.append(f"<h3>{html.escape(title)}</h3><table><tr>{head}</tr>{rows}</table>")
    return "".join(parts)


def load_lines(report: Mapping[str, Any]) -> list[str]:
    """Plain lines for a report's load sections (one header, one line per level)."""
    lines = []
    for section in report.get("load", []):
        lines.append(f"layout {section['layout_label']}:")
        remote = bool(section.get("target"))
        lines.append("  " + " | ".join(_columns(section)))
        lines += ["  " + " | ".join(_level_row(level, remote)) for level in section["levels"]]
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
