"""CLI commands ``tune``, ``apply`` and ``run``: thin wrappers over :mod:`tfperf.tuning.tuner` and
:mod:`tfperf.profiles`.

``tfperf tune`` finds the fastest configuration whose outputs stay within tolerance and saves
it as a profile; ``tfperf apply PROFILE --format env|sh|python`` prints how to adopt it;
``tfperf run --profile PROFILE -- CMD ...`` runs any command with the profile's env-level
knobs and exits with the command's exit code.
"""

from __future__ import annotations

# The library behind each command is imported inside it: `tfperf --help` stays instant and
# loads neither numpy, scipy nor plotly.
import dataclasses
import shlex
import sys
from typing import Any

import click
from click.core import ParameterSource

from tfperf.cli.costs import cost_line, max_memory_option, memory_line, price_option
from tfperf.cli.export import export_option, export_run, export_target
from tfperf.cli.train import (
    TRAIN_ONLY,
    refuse_train_only,
    render_train_tune,
    train_options,
    train_workload,
    trains,
)

STOPPED_TEXT = {"reached": "every knob tried once (--quick)"}
"""How a search's stop reason reads where the word alone would not say it."""


def _err_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2g}"


def _rate_text(value: float | None) -> str:
    """Samples per second, rounded to 3 significant digits with thousands separators."""
    if not value:
        return "-"
    return f"{float(f'{value:.3g}'):,.0f}" if value >= 100 else f"{value:.3g}"


_CASE_TEXT = {
    "none_faster": "nothing was faster",
    "rejected": "faster ones were rejected",
    "failed": "the candidates failed",
}
_ADOPT_SHORT = {"env": "env", "code": "1 line", "model": "model file"}


def _memory_gain(doc: dict) -> str:
    """``", 140 MB instead of 610 MB"`` (the peaks of the answer and the default)."""
    ours = (doc["recommendation"].get("memory") or {}).get("peak_rss_mb")
    theirs = (doc["default"].get("memory") or {}).get("peak_rss_mb")
    if ours is None or theirs is None:
        return ""
    if round(ours) == round(theirs):
        return f", {ours:.0f} MB as the default"
    return f", {ours:.0f} MB instead of {theirs:.0f} MB"


def render_costs(doc: dict, out: Any) -> None:
    """The answer's and the default's memory and cost lines, and the memory ceiling."""
    from rich.markup import escape

    rec, default = doc["recommendation"], doc["default"]
    rows = [("default", default)] + ([] if rec["keep_default"] else [(rec["label"], rec)])
    for name, entry in rows:
        basis = (entry.get("cost") or {}).get("basis", "")
        for text in (memory_line(name, entry.get("memory")),
                     cost_line(name, entry.get("cost"), basis)):
            if text:
                out.print(escape(text), soft_wrap=True, style="dim")
    limits = [f"ceiling {doc['max_memory_mb']:g} MB (--max-memory-mb)"
              if doc.get("max_memory_mb") is not None else "",
              f"container limit {doc['container_memory_limit_mb']:.0f} MB (cgroup)"
              if doc.get("container_memory_limit_mb") else ""]
    if any(limits):
        out.print("memory " + ", ".join(x for x in limits if x), style="dim")


def render_pruning(rec: dict, out: Any) -> None:
    """Why each knob of the answer is in it, and why each one the search took is not: the
    measurements of the pruning (``recommendation.kept`` and ``pruned``)."""
    from rich.markup import escape

    for word in ("kept", "pruned"):
        for entry in rec.get(word) or []:
            out.print(escape(f"{word}: {entry['why']}"), soft_wrap=True, style="dim")


def render_tune(doc: dict) -> None:
    """The ranked table and the recommendation, for people."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from tfperf.report.console import console, print_table, speedup_text

    out = console()
    throughput = doc.get("objective") == "throughput"
    training = bool(doc.get("train"))
    if training:
        baseline = doc["train"].get("baseline") or {}
        yours = "your step" if baseline.get("step") == "loop" else "your model"
        out.print(escape(f"{yours}: {_baseline_text(baseline)}"), soft_wrap=True)
    table = Table(
        title=f"tfperf tune (run {doc['run_id']}): {doc['trials']} trials, "
        f"stopped: {STOPPED_TEXT.get(doc['stopped'], doc['stopped'])}",
        box=box.SIMPLE_HEAD,
    )
    if throughput:
        out.print(
            "Objective: throughput - each speedup is in samples per second (time per sample) "
            f"over the default at batch {doc['default'].get('batch')}; ms is per call.",
            soft_wrap=True,
        )
    table.add_column("#", justify="right")
    table.add_column("config", no_wrap=True, overflow="fold")
    columns = ["status", "speedup", "95% CI", "ms/step" if training else "ms"]
    columns += ["batch", "samples/s"] if throughput else []
    for col in (*columns, "abs err", "rel err", "adopt"):
        table.add_column(
            col, justify="left" if col in ("status", "adopt") else "right", no_wrap=True
        )
    reasons = []
    for i, row in enumerate(doc["candidates"], 1):
        status = row["status"]
        shown = {"measured": "ok", "rejected": "[yellow]rejected[/]", "failed": "[red]failed[/]"}[
            status
        ]
        if row["reason"]:
            reasons.append(f"{i}. {row['label']}: {row['reason']}")
        speedup = row["speedup"] or {}
        low, high = speedup.get("ci95") or [None, None]
        ms = row.get("step_ms") if training else row["time_ms"]
        cells = [
            "-" if speedup.get("median") is None else f"{speedup['median']:.2f}x",
            "-" if low is None or high is None else f"{low:.2f}-{high:.2f}",
            "-" if ms is None else f"{ms:.3g}",
        ]
        if throughput:
            cells += [str(row.get("batch") or "-"), _rate_text(row.get("samples_per_s"))]
        table.add_row(
            str(i),
            row["label"],
            shown,
            *cells,
            _err_text(row["max_abs_error"]),
            _err_text(row["max_rel_error"]),
            _ADOPT_SHORT[row["adoption"]],
        )
    print_table(table, out)
    for line in reasons:
        out.print(escape(line), soft_wrap=True)
    for item in doc.get("unavailable", []):
        out.print(
            escape(f"not tried: {item['knob']}={item['value']} ({item['reason']})"),
            style="dim",
            soft_wrap=True,
        )
    rec = doc["recommendation"]
    if rec["keep_default"]:
        case = (rec.get("keep_default_why") or {}).get("case", "none_faster")
        out.print(
            f"[bold]Keep the default[/] ({_CASE_TEXT.get(case, case)}): "
            f"{escape(rec['reason'])}.",
            soft_wrap=True,
        )
    else:
        default = doc["default"]
        if throughput:
            gain = (
                f"{speedup_text(rec['speedup'])} the default's samples per second "
                f"({_rate_text(default.get('samples_per_s'))} at batch {default.get('batch')} "
                f"-> {_rate_text(rec.get('samples_per_s'))} at batch {rec.get('batch')})"
            )
        elif training:
            gain = (
                f"{speedup_text(rec['speedup'])} faster than your setup "
                f"({default['step_ms']:.3g} ms -> {rec['step_ms']:.3g} ms per step)"
            )
        else:
            gain = (
                f"{speedup_text(rec['speedup'])} faster than the default "
                f"({default['time_ms']:.3g} ms -> {rec['time_ms']:.3g} ms)"
            )
        out.print(
            f"[bold green]Use {escape(rec['label'])}[/]: {gain}{_memory_gain(doc)}, max abs "
            f"error {_err_text(rec['max_abs_error'])}; adopting it takes: "
            f"{rec['adoption_text']}.",
            soft_wrap=True,
        )
        if rec.get("artifact"):
            out.print(
                f"converted model: {rec['artifact']} (run_model.py beside it runs it)",
                soft_wrap=True,
            )
        moved = (rec.get("ops") or {}).get("moved")
        if moved:  # tune --ops: where the gain is
            out.print(escape(f"op profile: {moved}"), soft_wrap=True)
        render_pruning(rec, out)
    render_costs(doc, out)
    for warning in doc.get("warnings", []):
        out.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)
    out.print(
        f"profile: {doc['profile']}  (tfperf apply {doc['profile']} --format sh)", soft_wrap=True
    )


def _baseline_text(baseline: dict) -> str:
    """``jit_compile=True, steps_per_execution=8, float32`` and the baseline's notes."""
    from tfperf.core.loopcode import describe_baseline

    text = describe_baseline(baseline)
    if baseline.get("policy_source") == "factory":
        text += " (set by your factory)"
    notes = baseline.get("notes") or []
    return text + "".join(f"; {n}" for n in notes)


def _qps_text(value: float | None) -> str:
    return "-" if not value else f"{value:.4g}"


def render_server(doc: dict) -> None:
    """A server tune for people: each layout's rate within the SLO, the answer, the evidence."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from tfperf.report.console import console, print_table

    out = console()
    slo = doc["slo_ms"]
    table = Table(
        title=f"tfperf tune --objective server (run {doc['run_id']}): {doc['trials']} layouts, "
        f"p99 within {slo:g} ms, stopped: {doc['stopped']}",
        box=box.SIMPLE_HEAD,
    )
    for col in ("#", "config | layout", "status", "req/s in SLO", "x default", "rel err", "adopt"):
        table.add_column(col, justify="left" if col in ("config | layout", "status") else "right")
    for i, row in enumerate(doc["candidates"], 1):
        ratio = (row.get("speedup") or {}).get("median")
        status = "ok" if row["status"] == "measured" else f"{row['status']}: {row['reason']}"
        table.add_row(
            str(i), escape(row["label"]), escape(status), _qps_text(row["max_qps_at_slo"]),
            "-" if ratio is None else f"{ratio:.2f}x", _err_text(row["max_rel_error"]),
            _ADOPT_SHORT[row["adoption"]],
        )
    print_table(table, out)
    rec, default = doc["recommendation"], doc["default"]["serving"]
    confirmed = rec.get("confirmation") or {}
    if confirmed:
        shown = ", ".join(_qps_text(q) for q in confirmed["default_qps"])
        won = ", ".join(_qps_text(q) for q in confirmed["candidate_qps"])
        out.print(f"confirmation, req/s within the SLO: default {shown}; best {won}",
                  soft_wrap=True, markup=False)
    if rec["keep_default"]:
        out.print(
            f"[bold]Keep the default[/] ({_qps_text(default['max_qps_at_slo'])} req/s within "
            f"p99 {slo:g} ms): {escape(rec['reason'])}.", soft_wrap=True,
        )
    else:
        speedup = rec["speedup"] or {}
        low, high = speedup.get("ci95") or [None, None]
        kind = "95% CI" if (speedup.get("n_pairs") or 0) >= 6 else "range"
        interval = "" if low is None else f" ({kind} {low:.2f}-{high:.2f})"
        out.print(
            f"[bold green]Serve it as {escape(rec['label'])}[/]: "
            f"{_qps_text(rec['serving']['max_qps_at_slo'])} req/s within p99 {slo:g} ms, "
            f"{speedup.get('median') or 0:.2f}x the default's "
            f"{_qps_text(default['max_qps_at_slo'])}{interval}; adopting it takes: "
            f"{rec['adoption_text']}.", soft_wrap=True,
        )
        render_pruning(rec, out)
    for note in rec.get("notes") or []:
        out.print(f"[dim]note:[/] {escape(note)}", soft_wrap=True)
    for warning in doc.get("warnings", []):
        out.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)
    out.print(
        f"profile: {doc['profile']}  (tfperf run --profile {doc['profile']} -- CMD; "
        f"tfperf apply {doc['profile']} --format tf-serving)", soft_wrap=True,
    )


@click.command("tune")
@click.argument("model", required=False)
@click.option("--workload", "-w", help="A built-in workload (lstm, encoder, mobilenetv2, ...).")
@click.option(
    "--size",
    type=click.Choice(["standard", "tiny"]),
    default="standard",
    show_default=True,
    help="Size of a built-in workload.",
)
@click.option(
    "--batch",
    type=int,
    default=1,
    show_default=True,
    help="Examples per call (with --throughput: the baseline's).",
)
@click.option(
    "--objective",
    type=click.Choice(["latency", "throughput", "server"]),
    default=None,
    help="latency (default): the time of one call; throughput: samples per second, other "
    "batch sizes tried; server: requests per second within --slo-ms, over serving layouts.",
)
@click.option(
    "--throughput",
    is_flag=True,
    help="The same as --objective throughput.",
)
@click.option(
    "--slo-ms",
    type=float,
    default=None,
    help="With --objective server: the p99 latency bound in milliseconds.",
)
@click.option(
    "--batch-sizes",
    help="With --throughput: the batch sizes to try (default 1,4,16,64, "
    "without those whose call would take over a second).",
)
@click.option("--inputs", help="Sample inputs for MODEL (.npz).")
@click.option("--unsafe", is_flag=True, help="Allow a .keras file to run code on load.")
@click.option(
    "--strategy",
    type=click.Choice(["staged", "optuna"]),
    default="staged",
    show_default=True,
    help="Coordinate search, or Optuna's TPE sampler.",
)
@click.option(
    "--quick",
    is_flag=True,
    help="A short tune: at most 8 candidates (a training tune: one per knob), 120 s and 10 "
    "confirmation rounds, each unless given beside it.",
)
@click.option("--max-trials", type=int, help="Stop after this many candidates.")
@click.option("--budget", type=float, help="Stop starting candidates after this many seconds.")
@click.option(
    "--tolerance",
    help="Accuracy limits: a relative error (0.02) or "
    "rel=..,abs=..,top1=..,metric=.. (see docs/tune.md).",
)
@click.option(
    "--labels",
    type=click.Path(dir_okay=False),
    help="Labels of the sample inputs (.npy/.npz) for a task metric.",
)
@click.option("--runtimes", help="Restrict the runtimes tried, e.g. tf,litert.")
@click.option("--knobs", help="Tune only these knobs, e.g. runtime,allocator (see docs/tune.md).")
@click.option("--resume", help="Continue an interrupted tune (a run id or 'latest').")
@click.option(
    "--profile-out",
    type=click.Path(dir_okay=False),
    help="Where to save the profile (default: the user data dir).",
)
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False),
    help="Copy the winner's converted model and its snippet here.",
)
@click.option(
    "--confirm-rounds",
    type=int,
    help="Rounds of the final winner-vs-default confirmation (default 21; 10 under --quick), "
    "shared among up to 3 fresh pairs of worker processes (one per 7 rounds); a training "
    "tune's, still undecided with its median above the threshold, runs on to 16 in its last "
    "pair.",
)
@click.option(
    "--candidate-timeout",
    type=float,
    default=300.0,
    show_default=True,
    help="Seconds one candidate may take (conversion included).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for --strategy optuna.")
@click.option(
    "--ops",
    is_flag=True,
    help="Profile the default and the answer op by op; the answer names the op types behind "
    "the gain (docs/ops.md).",
)
@click.option("--store", "store", help="The store (default: TFPERF_STORE or the user data dir).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@export_option
@click.option(
    "--mlflow", "to_mlflow", is_flag=True, help="Also log the run to MLflow (docs/mlflow.md)."
)
@max_memory_option
@price_option
@train_options(labels=False)
def tune_command(
    model: str | None,
    workload: str | None,
    size: str,
    batch: int,
    objective: str | None,
    throughput: bool,
    slo_ms: float | None,
    batch_sizes: str | None,
    inputs: str | None,
    unsafe: bool,
    strategy: str,
    quick: bool,
    max_trials: int | None,
    budget: float | None,
    tolerance: str | None,
    labels: str | None,
    runtimes: str | None,
    knobs: str | None,
    resume: str | None,
    profile_out: str | None,
    out_dir: str | None,
    confirm_rounds: int | None,
    candidate_timeout: float,
    seed: int,
    ops: bool,
    store: str | None,
    as_json: bool,
    export: str | None,
    to_mlflow: bool,
    max_memory_mb: float | None,
    price_per_hour: float | None,
    **train_opts: Any,
) -> None:
    """Find the fastest configuration of a model whose outputs stay correct, and save it.
    With --train, of its training step, guarded over many steps (docs/train.md)."""
    from tfperf.accuracy import load_labels
    from tfperf.modelref import workload_from_args
    from tfperf.progress.displays import tune_progress
    from tfperf.report import mlflow_log
    from tfperf.report.console import emit_json, err_console
    from tfperf.tuning import TuneInterrupted, tune
    from tfperf.tuning.options import options_from_args
    from tfperf.tuning.trainguard import parse_train_tolerance

    export_target(export)
    # --train, or a training built-in (--workload cnn-train), which needs no --train
    train = trains({"train": train_opts.pop("train"), "workload": workload})
    if train:
        wl = train_workload(model, dict(train_opts, workload=workload, inputs=inputs,
                                        labels=labels, unsafe=unsafe, batch=batch, size=size))
        train_opts["train_tolerance"] = parse_train_tolerance(tolerance)
        tolerance = labels = None
    else:
        refuse_train_only(train_opts)
        wl = workload_from_args(
            workload, model, inputs=inputs, unsafe=unsafe, batch=batch, size=size
        )
    for name in TRAIN_ONLY:
        train_opts.pop(name, None)
    if quick:  # --quick beats the configuration file's limits, not the ones typed beside it
        ctx = click.get_current_context()
        typed = {n: ctx.get_parameter_source(n) == ParameterSource.COMMANDLINE for n in
                 ("max_trials", "budget")}
        max_trials = max_trials if typed["max_trials"] else None
        budget = budget if typed["budget"] else None
    options = options_from_args(
        strategy=strategy,
        quick=quick,
        max_trials=max_trials,
        budget=budget,
        tolerance=tolerance,
        runtimes=runtimes,
        knobs=knobs,
        store=store,
        resume=resume,
        profile_out=profile_out,
        out_dir=out_dir,
        confirm_rounds=confirm_rounds,
        candidate_timeout=candidate_timeout,
        seed=seed,
        throughput=throughput,
        objective=objective,
        slo_ms=slo_ms,
        batch_sizes=batch_sizes,
        command=shlex.join(["tfperf", *sys.argv[1:]]),
        max_memory_mb=max_memory_mb,
        price_per_hour=price_per_hour,
        **train_opts,
    )
    options = dataclasses.replace(options, ops=ops)
    sample_labels = load_labels(labels) if labels else None
    if to_mlflow:
        mlflow_log.require_mlflow()  # before measuring, not after
    try:
        with tune_progress() as progress:
            doc = tune(wl, options, labels=sample_labels, progress=progress)
    except TuneInterrupted as exc:
        err_console().print(
            f"Interrupted: run {exc.run_id} keeps its {exc.finished} finished "
            f"candidate{'s' if exc.finished != 1 else ''}; continue with "
            f"`tfperf tune ... --resume {exc.run_id}` (the same model and options).",
            soft_wrap=True,
            markup=False,
        )
        raise click.exceptions.Exit(130) from None
    if as_json:
        emit_json(doc)
    elif doc.get("objective") == "server":
        render_server(doc)
    else:
        render_tune(doc)
        if doc.get("train"):
            render_train_tune(doc)
    export_run(export, options.store_path, doc["run_id"])
    if to_mlflow:
        mlflow_log.log_and_tell(doc, options.store_path)


@click.command("apply")
@click.argument("profile")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["env", "sh", "python", "tf-serving"]),
    default="sh",
    show_default=True,
    help="env: KEY=VALUE lines; sh: export lines; python: a snippet; tf-serving: TensorFlow "
    "Serving's batching parameters file, its flags for each instance in the comments.",
)
def apply_command(profile: str, fmt: str) -> None:
    """Print how to adopt a tuned profile."""
    import sys

    from tfperf.profiles import load_profile, mismatch_warnings, render
    from tfperf.report.console import err_console

    data = load_profile(profile)
    for warning in mismatch_warnings(data):
        err_console().print(f"[yellow]warning:[/] {warning}", soft_wrap=True)
    sys.stdout.write(render(data, fmt))


@click.command(
    "run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option("--profile", "profile", required=True, help="A profile saved by tfperf tune.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def run_command(profile: str, command: tuple[str, ...]) -> int:
    """Run COMMAND with a profile's env-level knobs: tfperf run --profile P -- python serve.py.

    A profile tuned for a server runs one copy per instance, each pinned to its cores, with
    TFPERF_INSTANCE (0..K-1) and TFPERF_INSTANCES (K) set; Ctrl-C stops them all."""
    from rich.markup import escape

    from tfperf.cli.verbosity import detail, note
    from tfperf.core.loopcode import is_diff
    from tfperf.profiles import (
        DIFF_HEADING,
        load_profile,
        mismatch_warnings,
        profile_env,
        run_with_profile,
        serving_layout,
        to_do_by_hand,
    )
    from tfperf.report.console import err_console

    data = load_profile(profile)
    for warning in mismatch_warnings(data):
        err_console().print(f"[yellow]warning:[/] {warning}", soft_wrap=True)
    by_hand = to_do_by_hand(data.get("code") or [])
    if is_diff(by_hand):  # a custom loop's answer: its diff, line by line
        note(f"[dim]note: this profile also needs what tfperf run cannot do; "
             f"{escape(DIFF_HEADING[2:])}[/]")
        for line in by_hand:
            note(f"[dim]  {escape(line)}[/]")
    elif by_hand:
        note(
            "[dim]note: this profile also needs what tfperf run cannot do: "
            f"{escape('; '.join(by_hand))}[/]"
        )
    detail(" ".join(["tfperf run sets", *(f"{k}={v}" for k, v in profile_env(data).items())]))
    layout = serving_layout(data)
    if layout is not None:
        count = layout.instances
        note(
            f"[dim]starting {count} instance{'s' if count > 1 else ''} ({layout.label()}): "
            f"TFPERF_INSTANCE=0..{count - 1}[/]"
        )

    def failed(sentence: str) -> None:
        err_console().print(f"[yellow]warning:[/] {escape(sentence)}", soft_wrap=True)

    code = run_with_profile(data, command, on_failure=failed)
    raise click.exceptions.Exit(code)


def register(group: click.Group) -> None:
    """Add ``tune``, ``apply`` and ``run`` to ``group``."""
    group.add_command(tune_command)
    group.add_command(apply_command)
    group.add_command(run_command)
