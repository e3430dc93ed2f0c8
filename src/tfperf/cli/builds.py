"""CLI commands: ``tfperf builds plan|register|compare|explain`` over :mod:`tfperf.builds`."""

from __future__ import annotations

# The library behind each command is imported inside it: `tfperf --help` stays instant and
# loads neither numpy, scipy nor plotly.
from typing import Any

import click

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
STORE_OPTION = click.option(
    "--store",
    "store",
    default=None,
    type=click.Path(dir_okay=False),
    help="Store path (default: TFPERF_STORE or the platform data dir).",
)


@click.group(name="builds")
def builds() -> None:
    """Compare TensorFlow builds side by side, and plan a build for this CPU."""


@builds.command(name="plan")
@click.option(
    "--tensorflow",
    "tensorflow",
    default="2.21.0",
    show_default=True,
    help="TensorFlow release to build.",
)
@click.option("--cuda/--no-cuda", default=False, show_default=True, help="Build with CUDA.")
@click.option(
    "--target",
    default="auto",
    show_default=True,
    help="archspec microarchitecture to build for; auto = this CPU.",
)
@click.option("--python", "python", default=None, help="Python version (default: this one).")
@click.option(
    "--out",
    "out",
    default=None,
    type=click.Path(file_okay=False),
    help="Folder for build.sh, Dockerfile and plan.json.",
)
@click.option("--run", "run_it", is_flag=True, help="Run build.sh after writing it.")
@click.option("--dry-run", is_flag=True, help="With --run: print each command instead of running.")
@JSON_OPTION
def plan_cmd(
    tensorflow: str,
    cuda: bool,
    target: str,
    python: str | None,
    out: str | None,
    run_it: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Write a pinned recipe (script + Dockerfile) to build TensorFlow for this CPU."""
    from tfperf.builds.plan import make_plan, run_plan, write_plan
    from tfperf.cli.verbosity import note
    from tfperf.core.errors import UserError
    from tfperf.report.console import console, emit_json

    if dry_run and not run_it:
        raise UserError("--dry-run only applies with --run; add --run.")
    plan = make_plan(tensorflow=tensorflow, cuda=cuda, target=target, python=python)
    doc: dict[str, Any] = plan.to_dict()
    if out or run_it:
        folder = out or f"tfperf-build-{plan.candidate_name}"
        doc["files"] = write_plan(plan, folder)
    if run_it:
        doc["run"] = _run_with_progress(run_plan, doc["files"], folder, dry_run, as_json)
    if as_json:
        emit_json(doc)
        return
    con = console()
    con.print(
        f"[bold]TensorFlow {plan.tensorflow}[/] for [bold]{plan.cpu.target}[/]"
        f" ({'CUDA' if cuda else 'CPU only'})"
    )
    con.print(f"  Bazel {plan.release.bazel}, {plan.cpu.compiler}, Python {plan.python}")
    con.print(f"  copts: {' '.join(plan.copts)}", soft_wrap=True)
    for text in plan.notes:
        note(f"[yellow]note:[/] {text}")
    if "files" in doc:
        for kind, path in doc["files"].items():
            con.print(f"  {kind}: {path}")
        if not run_it:
            con.print(
                f"Run it: bash {doc['files']['script']}   "
                f"(or docker build --output type=local,dest=wheels {folder})"
            )
    else:
        # soft_wrap: the script must survive copy and paste, never broken into new lines
        con.print(plan.script, markup=False, highlight=False, soft_wrap=True)
    if run_it:
        run = doc["run"]
        con.print(
            f"{'dry run' if dry_run else 'build'} finished: {len(run['steps_done'])}/"
            f"{run['total_steps']} steps, log {run['log']}, wheel {run['wheel']}"
        )


def _run_with_progress(
    run_plan: Any, files: dict[str, str], folder: str, dry_run: bool, quiet: bool
) -> dict[str, Any]:
    """Run build.sh with a rich progress bar on stderr (one tick per step; none with -q)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from tfperf.cli.verbosity import QUIET, level
    from tfperf.report.console import err_console

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=err_console(),
        transient=quiet,
        disable=level() == QUIET,
    ) as progress:
        task = progress.add_task("build.sh", total=None)

        def on_line(line: str, step: int, total: int) -> None:
            if line.startswith("==> ["):
                progress.update(
                    task, completed=step - 1, total=total, description=line.split("] ", 1)[-1][:60]
                )
            elif not quiet and level() > QUIET:
                progress.console.print(line, markup=False, highlight=False, soft_wrap=True)

        result = run_plan(folder, dry_run=dry_run, on_line=on_line)
        progress.update(task, completed=result.total_steps)
    return result.to_dict()


@builds.command(name="register")
@click.argument("wheel", type=click.Path())
@click.option("--name", default=None, help="Name to pass to --candidate (default: wheel name).")
@JSON_OPTION
def register_cmd(wheel: str, name: str | None, as_json: bool) -> None:
    """Register a built wheel as a `builds compare` candidate."""
    from tfperf.builds.envs import register_wheel
    from tfperf.report.console import console, emit_json

    key, path = register_wheel(wheel, name)
    if as_json:
        emit_json({"name": key, "wheel": path})
    else:
        console().print(f"registered {key} -> {path}; compare with --candidate {key}")


@builds.command(name="compare")
@click.option(
    "--candidate",
    "candidates",
    multiple=True,
    required=True,
    help="pip requirement(s), several joined with ' & ' (quoted), a wheel path or a registered "
    "name; repeat for several candidates.",
)
@click.option("--workload", default=None, help="Built-in workload name.")
@click.argument("model", required=False)
@click.option(
    "--size",
    default="standard",
    show_default=True,
    type=click.Choice(["standard", "tiny"]),
    help="Built-in workload size.",
)
@click.option("--batch", default=1, show_default=True, type=int)
@click.option(
    "--min-rounds", default=8, show_default=True, type=int, help="Interleaved rounds at least."
)
@click.option(
    "--budget", default=30.0, show_default=True, type=float, help="Seconds of steady measuring."
)
@click.option("--calls", default=None, type=int, help="Calls per block (default: from warm-up).")
@STORE_OPTION
@JSON_OPTION
def compare_cmd(
    candidates: tuple[str, ...],
    workload: str | None,
    model: str | None,
    size: str,
    batch: int,
    min_rounds: int,
    budget: float,
    calls: int | None,
    store: str | None,
    as_json: bool,
) -> None:
    """Measure the same workload in this environment (baseline) and in each candidate build."""
    from tfperf.builds.compare import compare_builds, render_compare
    from tfperf.cli.verbosity import QUIET, level
    from tfperf.core.errors import UserError
    from tfperf.report.console import emit_json

    if (workload is None) == (model is None):
        raise UserError("give exactly one of --workload NAME or a MODEL path.")
    result = compare_builds(
        list(candidates),
        workload=workload,
        model=model,
        size=size,
        batch=batch,
        min_rounds=min_rounds,
        budget_s=budget,
        calls=calls,
        store=store,
        progress=not as_json and level() > QUIET,
    )
    if as_json:
        emit_json(result)
    else:
        render_compare(result)


@builds.command(name="explain")
@STORE_OPTION
@JSON_OPTION
def explain_cmd(store: str | None, as_json: bool) -> None:
    """What a build for this CPU could buy beyond XLA or LiteRT, from measured figures."""
    from tfperf.builds.explain import explain, render_explain
    from tfperf.report.console import emit_json

    doc = explain(store=store)
    if as_json:
        emit_json(doc)
    else:
        render_explain(doc)


def register(group: click.Group) -> None:
    """Add this module's commands to ``group``."""
    group.add_command(builds)
