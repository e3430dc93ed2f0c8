"""CLI commands over the store: ``tfperf history`` and ``tfperf report``.

Library functions first: :func:`tfperf.report.runs.history` returns the history document and
:func:`tfperf.report.runs.report` the report document (both described in
``docs/results-schema.md``; the library API returns them too); the click commands only render
them. Neither imports TensorFlow; numpy, scipy and plotly load inside the functions.
"""

from __future__ import annotations

# The library behind each command is imported inside it: `tfperf --help` stays instant and
# loads neither numpy, scipy nor plotly.
from collections.abc import Callable

import click

from tfperf.cli.export import export_option, export_run, export_table, export_target
from tfperf.report.runs import HISTORY_SCHEMA_VERSION, history, report

__all__ = ["HISTORY_SCHEMA_VERSION", "history", "register", "report"]

# ------------------------------------------------------------------------ rendering
def _trial_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "0"


def _table(title: str):
    """A compact rich table (no vertical rules) so that reports fit 80 columns."""
    from rich import box
    from rich.table import Table

    return Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)


def _print_history(doc: dict) -> None:
    from tfperf.report.console import console, print_table
    from tfperf.report.html import describe_workload, error_text, fmt

    out = console()
    if "runs" in doc:
        if not doc["runs"]:
            out.print(f"No runs in {doc['store']} yet; `tfperf bench` records one.")
            return
        table = _table(f"Runs in {doc['store']}")
        for col in ("id", "when (UTC)", "kind", "workload", "status", "trials"):
            table.add_column(col, justify="right" if col == "id" else "left")
        for r in doc["runs"]:
            table.add_row(
                str(r["id"]),
                (r["started_at"] or "-").replace("T", " ")[:16],
                r["kind"],
                describe_workload(r["workload"]),
                r["status"],
                _trial_counts(r["trials"]),
            )
        print_table(table, out)
        return
    run = doc["run"]
    table = _table(
        f"Run {run['id']} ({run['kind']}, {run['status']}): {describe_workload(run['workload'])}"
    )
    for col in ("id", "config", "role", "status", "samples", "warm-up", "p50 ms", "error"):
        table.add_column(col)
    for t in doc["trials"]:
        table.add_row(
            str(t["id"]),
            t["label"],
            t["role"],
            t["status"],
            str(t["n_samples"]),
            str(t["n_warmup"]),
            fmt(t["p50_ms"]),
            error_text(t["error"]),
        )
    print_table(table, out)
    out.print(f"[dim]{run['command']}[/]")


def _print_pipeline_run(title: str, run_id: int, summary: dict) -> None:
    from tfperf.report.console import console

    out = console()
    out.print(title, soft_wrap=True, markup=False)
    share = summary.get("input_share")
    shown = "-" if share is None else f"{share:.0%}"
    out.print(f"verdict: {summary.get('verdict')} (input share {shown})", markup=False)
    out.print(f"bounding stage: {summary.get('bounding_stage')}", markup=False)
    best = summary.get("best_fix") or {}
    if best.get("name"):
        out.print(f"best fix: {best['name']} ({best.get('speedup', 0):.2f}x)", markup=False)
    if best.get("headline"):
        out.print(f"answer: {best['headline']}", markup=False)
    out.print(f"`tfperf report {run_id} --json` holds every stage and fix", markup=False)


def _print_load_run(title: str, sections: list, summary: dict) -> None:
    """A stored load run: its levels per layout, then what the command printed below them
    (each level's cost, the op profiles) from the run's summary."""
    from tfperf.cli.load import cost_and_ops_lines
    from tfperf.report.console import console, print_table
    from tfperf.report.load import load_table

    out = console()
    out.print(title)
    for section in sections:
        print_table(load_table(section), out)
    for line in cost_and_ops_lines(summary) if summary.get("layouts") else []:
        out.print(line, markup=False, soft_wrap=True)


def _print_report(doc: dict) -> None:
    from tfperf.report.console import console, print_table
    from tfperf.report.html import all_warnings, describe_workload, fmt

    out = console()
    run = doc["run"]
    what = describe_workload(run["workload"])
    title = f"Run {run['id']} ({run['kind']}, {run['status']}): {what}"
    if run["kind"] == "pipeline":  # no trials: the analysis is the run's summary
        _print_pipeline_run(title, run["id"], run.get("summary") or {})
        return
    if doc.get("load"):  # levels of load per layout, not one latency per config
        _print_load_run(title, doc["load"], run.get("summary") or {})
        return
    table = _table(title)
    columns = ["config", "n", "p50 ms [95% CI]", "p90 ms", "p99 ms", "per s", "peak MB"]
    has_peak = any(r["peak_share"] is not None for r in doc["results"])
    for col in [*columns, "% peak"] if has_peak else columns:
        table.add_column(col, justify="left" if col == "config" else "right", no_wrap=True)
    for r in doc["results"]:
        lat = r["latency_ms"]
        low, high = lat["p50_ci95"]
        row = [
            r["label"] + (" *" if r["role"] == "baseline" else ""),
            str(r["n"]) if r["status"] == "ok" else f"[red]{r['status']}[/] {r['n'] or ''}",
            "-" if lat["p50"] is None else f"{fmt(lat['p50'])} [{fmt(low)}, {fmt(high)}]",
            fmt(lat["p90"]),
            fmt(lat["p99"]),
            fmt(r["throughput_per_s"], ".4g"),
            fmt((r.get("memory") or {}).get("peak_rss_mb"), ".0f"),
        ]
        if has_peak:
            row.append("-" if r["peak_share"] is None else f"{100 * r['peak_share']:.1f}")
        table.add_row(*row)
    print_table(table, out)
    if any(r["role"] == "baseline" for r in doc["results"]):
        out.print("[dim]* baseline[/]")
    if doc["comparisons"]:
        colors = {"faster": "green", "slower": "red", "same": "cyan", "inconclusive": "yellow"}
        baselines = sorted({c["baseline"]["label"] for c in doc["comparisons"]})
        one_base = len(baselines) == 1
        comp_table = _table(
            f"Speedup vs {baselines[0] if one_base else 'baseline'} "
            "(baseline time / candidate time)"
        )
        columns = ["candidate", "speedup", "95% CI", "p", "pairs", "verdict"]
        if not one_base:
            columns.insert(1, "baseline")
        for col in columns:
            comp_table.add_column(
                col, justify="left" if col in ("candidate", "baseline") else "right"
            )
        for c in doc["comparisons"]:
            sp = c["speedup"]
            low, high = sp["ci95"]
            verdict = str(sp["verdict"])
            row = [
                c["candidate"]["label"],
                "-" if sp["median"] is None else f"{sp['median']:.3f}x",
                f"{fmt(low, '.3f')}..{fmt(high, '.3f')}",
                fmt(sp["p_value"], ".2g"),
                fmt(sp["n_pairs"], "d"),
                f"[{colors.get(verdict, 'white')}]{verdict}[/]",
            ]
            if not one_base:
                row.insert(1, c["baseline"]["label"])
            comp_table.add_row(*row)
        out.print()
        out.print(comp_table)
    for note in all_warnings(doc):
        out.print(f"[yellow]warning:[/] {note}", soft_wrap=True)
    if doc.get("html"):
        out.print(f"HTML report written to {doc['html']}")


def _show(doc: dict, as_json: bool, printer: Callable[[dict], None]) -> None:
    """Print ``doc`` as one JSON document, or for people with ``printer``."""
    if as_json:
        from tfperf.report.console import emit_json

        emit_json(doc)
    else:
        printer(doc)


_STORE_OPTION = click.option(
    "--store",
    "store",
    type=click.Path(dir_okay=False),
    default=None,
    help="Store file (default: TFPERF_STORE, else the user data dir).",
)


def register(group: click.Group) -> None:
    """Add ``history`` and ``report`` to ``group``."""

    @group.command("history")
    @_STORE_OPTION
    @click.option("--limit", type=int, default=50, show_default=True, help="Runs to list.")
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
    @export_option
    @click.argument("run", required=False)
    def history_cmd(
        store: str | None, limit: int, as_json: bool, export: str | None, run: str | None
    ) -> None:
        """List the recorded runs, or the trials of RUN (an id or 'latest'). With --export,
        also write the listed runs (one summary each), or RUN's whole result, to a file."""
        export_target(export)
        _show(history(store=store, limit=limit, run=run), as_json, _print_history)
        if run is not None:
            export_run(export, store, run)
        elif export:
            from tfperf.report.export import history_table

            export_table(history_table(store, limit), export)

    @group.command("report")
    @click.argument("run")
    @_STORE_OPTION
    @click.option(
        "--html",
        "html_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="Also write a self-contained HTML report with plots to this file.",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
    def report_cmd(run: str, store: str | None, html_path: str | None, as_json: bool) -> None:
        """Show the results of RUN (an id or 'latest'): latency, speedups, verdicts, warnings."""
        _show(report(run=run, store=store, html=html_path), as_json, _print_report)
