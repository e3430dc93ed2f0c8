"""CLI: ``tfperf pipeline module:function | --demo`` — is training waiting for its input?

A thin layer over :func:`tfperf.input_pipeline.analyze.analyze_pipeline`: it shows the worker's
progress on stderr and renders the report (or prints it with ``--json``).
"""

from __future__ import annotations

# The library behind each command is imported inside it: `tfperf --help` stays instant and
# loads neither numpy, scipy nor plotly.
import shlex
import sys

import click

from tfperf.input_pipeline import DEFAULT_MIN_BLOCK_S, DEFAULT_TIMEOUT


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def render(doc: dict) -> None:
    """Print the report for people."""
    from rich.table import Table

    from tfperf.core.inputbound import one_line
    from tfperf.report.console import console

    out = console()
    metric = doc["metric"]
    out.print(f"[bold]{doc['target']}[/]  (batch {doc['batch']}, TensorFlow {doc['tf_version']})")
    out.print(f"dataset alone: {_fmt(doc['dataset']['batches_per_s'])} batches/s")
    if doc["compute"]:
        out.print(f"training step on a cached batch: {_fmt(doc['compute']['steps_per_s'])} steps/s")
        out.print(f"both together: {_fmt(doc['train']['steps_per_s'])} steps/s")
    style = {"highly_input_bound": "red", "moderately_input_bound": "yellow"}.get(
        doc["verdict"] or "", "green"
    )
    out.print(f"[bold {style}]{one_line(doc['input_share'], doc['verdict'])}[/]")

    stages = Table(
        title="prefix throughput (each row: the pipeline up to that stage)",
        caption="* the stage that bounds throughput (adds the most time per batch)",
    )
    for col in ("stage", "elements/s", "batches/s", "adds ms/batch"):
        stages.add_column(col, justify="left" if col == "stage" else "right")
    for row in doc["stages"]:
        mark = " [bold red]*[/]" if row["bounding"] else ""
        python = " [yellow](Python)[/]" if row.get("python_code") else ""
        stages.add_row(
            row["stage"] + python + mark,
            _fmt(row["elements_per_s"], ".0f"),
            _fmt(row["batches_per_s"]),
            _fmt(row["added_ms_per_batch"], ".2f"),
        )
    out.print(stages)

    fixes = Table(title=f"fixes, measured side by side ({metric}, end to end)")
    fixes.add_column("fix", overflow="fold")  # combinations have long names: wrap, never cut
    for col in (metric, "speedup", "95% CI", "verdict"):
        fixes.add_column(col, justify="left" if col == "verdict" else "right")
    for fix in (f for f in doc["fixes"] if f["measured"]):
        low, high = fix["ci95"]
        fixes.add_row(
            fix["name"],
            _fmt(fix["per_s"]),
            f"{_fmt(fix['speedup'], '.2f')}x",
            f"{_fmt(low, '.2f')}..{_fmt(high, '.2f')}",
            fix["verdict"],
        )
    out.print(fixes)
    for fix in doc["fixes"]:
        if not fix["measured"] and not fix.get("change"):
            out.print(f"[dim]does not apply[/] {fix['name']}: {fix['reason']}")
    _render_unmeasured(doc["best_fix"].get("unmeasured") or [])
    _render_answer(doc)
    gpu = doc["gpu"]
    if gpu["available"]:
        util = (gpu.get("utilization") or {}).get("mean_util")
        out.print(
            f"GPU {', '.join(gpu['devices'])}: mean utilisation {_fmt(util, '.0f')}% while "
            f"training ({gpu['bound'] or 'unknown'})"
        )
    else:
        out.print(gpu["reason"])
    for advice in gpu["model"]["advice"]:
        out.print(f"model: {advice}")
    for note in doc["notes"]:
        out.print(f"[dim]note:[/] {note}")


def _render_unmeasured(unmeasured: list[dict]) -> None:
    """The fixes that went unmeasured, most promising first, with the change each needs."""
    from rich.table import Table
    from rich.text import Text

    from tfperf.report.console import console

    if not unmeasured:
        return
    table = Table(title="not measured: these need your code (most promising first)")
    for col in ("#", "fix", "stage", "change to make", "why not measured"):
        table.add_column(col, overflow="fold")
    for i, item in enumerate(unmeasured, 1):
        cells = (
            item["name"],
            item.get("stage") or "-",
            item["change"] or "-",
            item["why_not_measured"],
        )
        table.add_row(str(i), *(Text(c) for c in cells))  # code has brackets: no markup
    console().print(table)


def _render_answer(doc: dict) -> None:
    """The headline, then the best measured fix and its code."""
    from rich.markup import escape
    from rich.syntax import Syntax

    from tfperf.report.console import console

    out = console()
    metric = doc["metric"]
    best = doc["best_fix"]
    out.print(f"[bold]answer:[/] {escape(best['headline'])}", highlight=False)
    if best["name"] is None:
        return
    row = next((f for f in doc["fixes"] if f["name"] == best["name"]), {})
    rates = ""
    if row.get("baseline_per_s") and row.get("per_s"):
        rates = f" ({row['baseline_per_s']:.1f} -> {row['per_s']:.1f} {metric})"
    low, high = best["ci95"]
    out.print(
        f"[bold green]best fix: {best['name']} — {best['speedup']:.2f}x end to end{rates}, "
        f"95% CI {_fmt(low, '.2f')}..{_fmt(high, '.2f')}[/]"
    )
    out.print(Syntax(best["change"], "python", theme="ansi_dark", word_wrap=True))


def register(group: click.Group) -> None:
    """Add ``tfperf pipeline`` to ``group``."""

    @group.command("pipeline")
    @click.argument("target", required=False, metavar="MODULE:FUNCTION")
    @click.option("--demo", is_flag=True, help="Analyse the built-in input-bound pipeline.")
    @click.option("--steps", default=20, show_default=True, help="Timed steps per block.")
    @click.option(
        "--rounds", default=6, show_default=True, help="Interleaved rounds (>= 6 for a verdict)."
    )
    @click.option(
        "--stage-seconds", default=0.3, show_default=True, help="Time per pipeline prefix."
    )
    @click.option(
        "--min-block-seconds",
        default=DEFAULT_MIN_BLOCK_S,
        show_default=True,
        help="Blocks shorter than this get more steps than --steps (0: never).",
    )
    @click.option(
        "--timeout", default=DEFAULT_TIMEOUT, show_default=True, help="Seconds before giving up."
    )
    @click.option("--store", help="The store (default: TFPERF_STORE or the user data dir).")
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
    def pipeline(
        target: str | None,
        demo: bool,
        steps: int,
        rounds: int,
        stage_seconds: float,
        min_block_seconds: float,
        timeout: float,
        store: str | None,
        as_json: bool,
    ) -> None:
        """Find out whether training waits for its input pipeline, where, and what fixes it.

        MODULE:FUNCTION returns a tf.data.Dataset, or a dict {"dataset", "model", "loss",
        "optimizer"} (or a tuple in that order) to time a real training step.
        """
        from tfperf.input_pipeline.analyze import PipelineOptions, analyze_pipeline
        from tfperf.progress import status
        from tfperf.report.console import emit_json

        options = PipelineOptions(
            steps=steps,
            rounds=rounds,
            stage_seconds=stage_seconds,
            timeout=timeout,
            min_block_s=min_block_seconds,
            store=store,
        )
        command = shlex.join(["tfperf", *sys.argv[1:]])
        with status("starting the pipeline worker") as shown:
            doc = analyze_pipeline(
                target,
                demo=demo,
                options=options,
                on_progress=shown.update,
                command=command,
            )
        if as_json:
            emit_json(doc)
        else:
            render(doc)
