"""CLI commands ``bench`` and ``compare``: thin wrappers over :mod:`tfperf.benchmark`.

``tfperf bench`` measures one workload (a built-in or the user's model) under the default
config and, with ``--set``/``--env``, one candidate config, interleaved. ``tfperf compare``
either compares two runs (``A B``, each a stored run or a result file from ``--export``) or
measures several candidates against the default in one interleaved run (each
``--set``/``--env`` is one candidate; join knobs of one candidate with commas: ``--set
onednn=off,intra_threads=2``). Both take ``--export FILE`` (:mod:`tfperf.cli.export`).
"""

from __future__ import annotations

# The library behind each command is imported inside it: `tfperf --help` stays instant and
# loads neither numpy, scipy nor plotly.
import shlex
import sys
from typing import Any

import click

from tfperf.cli.costs import cost_line, memory_line, price_option
from tfperf.cli.export import export_option, export_run, export_table, export_target
from tfperf.cli.load import (
    load_options,
    memory_limit_bytes,
    render_load,
    render_load_comparison,
    run_load_command,
    run_remote_command,
    typed_options,
    wants_load,
)
from tfperf.cli.train import (
    refuse_train_only,
    render_train,
    train_options,
    train_workload,
    trains,
)
from tfperf.core.errors import FailOnTriggered, UserError

_DEFAULT_BUDGET = 30.0


def _workload_of(opts: dict[str, Any], model: str | None) -> dict[str, Any]:
    """The workload named by a command's options (see :func:`workload_from_args`)."""
    from tfperf.modelref import workload_from_args

    return workload_from_args(
        opts["workload"],
        model,
        inputs=opts["inputs"],
        unsafe=opts["unsafe"],
        batch=opts["batch"],
        size=opts["size"],
    )


def _trained(opts: dict[str, Any]) -> str:
    """How a sentence names what makes a command measure training steps."""
    return "--train" if opts["train"] else f"--workload {opts['workload']}"


def _open_store(path: str | None) -> Any:
    from tfperf.core.paths import resolve_store_path
    from tfperf.store import Store

    return Store.open(resolve_store_path(path))


def _fmt(value: float | None, spec: str = ".3g") -> str:
    return "-" if value is None else format(value, spec)


def render_bench(doc: dict[str, Any]) -> None:
    """The results table, notes, speedups and warnings of a bench/compare document. Off a
    terminal, tables are as wide as their labels and lines are not wrapped (see
    :func:`tfperf.report.console.print_table`)."""
    from rich.markup import escape
    from rich.table import Table

    from tfperf.report.console import console, print_table
    from tfperf.report.ops import ops_lines

    out = console()
    table = Table(title=f"tfperf run {doc['run_id']}: {escape(_workload_name(doc))}")
    # A terminal keeps its width (a long label is cut at 28 columns); a file or pipe gets it whole.
    table.add_column("config", no_wrap=True, max_width=28 if out.is_terminal else None)
    for col in (
        "p50 ms",
        "95% CI",
        "p90",
        "p99",
        "per s",
        "cold s",
        "1st s",
        "RSS MiB",
        "GFLOP/s",
        "of peak",
    ):
        table.add_column(col, justify="right")
    for r in doc["results"]:
        if r["status"] != "ok" and not r["n"]:
            reason = (r["error"] or {}).get("reason", r["status"])
            table.add_row(escape(r["label"]), f"[red]{escape(reason)}[/]")
            continue
        lat = r["latency_ms"]
        low, high = lat["p50_ci95"]
        flops = r["flops"]
        share = flops["share_of_peak"]
        rss = r["peak_rss_bytes"]
        table.add_row(
            escape(r["label"]) + ("" if r["status"] == "ok" else " [red](failed)[/]"),
            _fmt(lat["p50"]),
            f"{_fmt(low)}-{_fmt(high)}",
            _fmt(lat["p90"]),
            _fmt(lat["p99"]),
            _fmt(r["throughput_per_s"], ".4g"),
            _fmt(r["cold_start_s"], ".1f"),
            _fmt(r["first_call_s"], ".2g"),
            "-" if not rss else f"{rss / 2**20:.0f}",
            _fmt(flops["gflops_per_s"]),
            "-" if share is None else f"{share:.2%}",
        )
    print_table(table, out)
    for r in doc["results"]:
        styles = [
            f"{name} {s['vs_function']:.1f}x slower" if s.get("vs_function") else f"{name} n/a"
            for name, s in (r.get("call_styles") or {}).items()
        ]
        if any(not s.endswith(" n/a") for s in styles):  # a training step has none of them
            _line(f"{escape(r['label'])}: vs the tf.function call, " + ", ".join(styles))
        for text in ops_lines(r):
            _line(escape(text))
        for text in (memory_line(r["label"], r.get("memory")),
                     cost_line(r["label"], r.get("cost"), "one stream of calls")):
            if text:
                _line(escape(text))
        for w in r["warnings"]:
            _warn(w, r["label"])
    _render_speedups(doc.get("comparisons", []), "baseline", "candidate")
    _render_ops_moves(doc.get("comparisons", []), "baseline", "candidate")
    for w in doc.get("warnings", []):
        _warn(w)
    out.print(f"stopped: {doc['stopped']} after {doc['rounds']} rounds ({doc['steady_s']:.1f} s)")


def _render_ops_moves(comparisons: list[dict[str, Any]], a: str, b: str) -> None:
    """Where the time moved between two profiled configs, op type by op type (``--ops``)."""
    from rich.markup import escape

    from tfperf.report.ops import side_by_side_lines

    for comparison in comparisons:
        for text in side_by_side_lines(comparison, a, b):
            _line(escape(text))


def _line(markup: str) -> None:
    """Print one line of ``markup`` on stdout, never broken inside (the terminal may wrap it)."""
    from tfperf.report.console import console

    console().print(markup, soft_wrap=True)


def _warn(text: str, label: str | None = None) -> None:
    """Print warning ``text``, about the config ``label`` when given."""
    from rich.markup import escape

    about = f" {escape(label)}" if label is not None else ""
    _line(f"[yellow]warning[/]{about}: {escape(text)}")


def _render_speedups(comparisons: list[dict[str, Any]], a: str, b: str) -> None:
    from rich.markup import escape
    from rich.table import Table

    from tfperf.report.console import print_table

    if not comparisons:
        return
    colors = {"faster": "green", "slower": "red", "same": "cyan", "inconclusive": "yellow"}
    table = Table(title="speedup = time A / time B (> 1: B is faster)")
    for col in ("A", "B"):  # a terminal folds long labels over lines rather than cutting them
        table.add_column(col, overflow="fold")
    for col in ("speedup [95% CI]", "p", "verdict"):
        table.add_column(col, no_wrap=True)
    for c in comparisons:
        s = c["speedup"]
        low, high = s["ci95"]
        color = colors.get(s["verdict"], "white")
        table.add_row(
            escape(c[a]),
            escape(c[b]),
            f"{_fmt(s['median'], '.3f')} [{_fmt(low, '.3f')}..{_fmt(high, '.3f')}]",
            _fmt(s["p_value"], ".2g"),
            f"[{color}]{s['verdict']}[/]",
        )
    print_table(table)
    for c in comparisons:
        for w in c["speedup"].get("warnings", []):
            _warn(w, c[b])


def _exit_if_unrunnable(doc: dict[str, Any]) -> None:
    """Exit 2 with one sentence where the default, or the one candidate named, could not run
    (:func:`tfperf.benchmark.unrunnable`): a script must not read its exit 0 as measured."""
    from tfperf.benchmark import unrunnable

    sentence = unrunnable(doc)
    if sentence:
        raise UserError(sentence)


def _refuse_training_knobs(candidate: Any) -> None:
    """A training knob set on an inference workload: one sentence, not a knob ignored."""
    from tfperf.core.config import TRAINING_KNOBS

    named = [k for k in TRAINING_KNOBS if getattr(candidate, k) is not None]
    if named:
        raise UserError(f"{named[0]} acts on a training step: add --train (and your "
                        "training factory), or leave it out.")


def _workload_name(doc: dict[str, Any]) -> str:
    """What was measured, with its batch: a training step's as its first result ran it (a
    factory's dataset sets its own), else the workload's."""
    workload = doc["workload"]
    ran = next((((r.get("train") or {}).get("batch")) for r in doc.get("results") or []
                if r.get("train")), None)
    batch = ran or workload.get("batch")
    name = workload.get("name") if workload.get("kind") == "builtin" else workload.get("builtin")
    if name:  # a training built-in too
        return f"{name} ({workload.get('size')}, batch {batch})"
    return f"{workload.get('path')} (batch {batch})"


def model_options(fn: Any) -> Any:
    """The options that name what is measured (a built-in workload, or MODEL's inputs, batch
    and trust): bench's and compare's, and the fleet commands'."""
    options = [
        click.option("--workload", "workload", metavar="NAME", help="A built-in workload."),
        click.option(
            "--inputs", type=click.Path(), help="Sample inputs (.npz) for MODEL or --url."
        ),
        click.option("--unsafe", is_flag=True, help="Let a .keras file run code on load."),
        click.option("--batch", type=int, default=1, show_default=True, help="Samples per call."),
        click.option(
            "--size",
            type=click.Choice(["standard", "tiny"]),
            default="standard",
            show_default=True,
            help="Size of a built-in workload.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _measure_options(fn: Any) -> Any:
    options = [
        model_options,
        click.option(
            "--set",
            "sets",
            multiple=True,
            metavar="KEY=VALUE",
            help="A knob value (onednn, intra_threads, allocator, xla, ...).",
        ),
        click.option(
            "--env",
            "envs",
            multiple=True,
            metavar="KEY=VALUE",
            help="An environment variable for the measured config.",
        ),
        click.option(
            "--budget",
            type=float,
            default=_DEFAULT_BUDGET,
            show_default=True,
            help="Seconds of steady-state measurement.",
        ),
        click.option(
            "--precision",
            type=float,
            default=0.01,
            show_default=True,
            help="Stop early at this relative CI half-width of p50 and speedup.",
        ),
        click.option(
            "--threshold",
            type=float,
            default=0.03,
            show_default=True,
            help="Smallest speedup that counts as faster/slower.",
        ),
        click.option(
            "--timeout",
            type=float,
            default=120.0,
            show_default=True,
            help="Seconds a worker may take to answer one request.",
        ),
        click.option(
            "--memory-limit",
            type=float,
            default=None,
            metavar="GiB",
            help="Fail a worker whose RSS exceeds this.",
        ),
        click.option("--no-peak", is_flag=True, help="Skip the matmul peak probe."),
        price_option,
        click.option(
            "--ops",
            is_flag=True,
            help="Also profile each config's ops after its timed blocks (docs/ops.md).",
        ),
        click.option(
            "--parallel-start",
            is_flag=True,
            help="Start all workers at once (quicker; cold starts then share the CPU).",
        ),
        click.option(
            "--processes",
            type=int,
            default=None,
            help="Fresh worker processes per config, one after the other, so that a speed "
            "that depends on the process shows in the interval [default: 3 for a --budget "
            "of 15 s or more, else 1].",
        ),
        click.option(
            "--store",
            type=click.Path(),
            default=None,
            help="Store file (default: TFPERF_STORE or the user data dir).",
        ),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON document."),
        export_option,
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _run(
    configs: list[Any],
    opts: dict[str, Any],
    workload: dict[str, Any],
    kind: str,
) -> dict[str, Any]:
    from tfperf.benchmark import BenchOptions, RunInterrupted, default_processes, run_bench
    from tfperf.progress.displays import bench_progress

    processes = opts["processes"]
    options = BenchOptions(
        budget_s=opts["budget"],
        precision=opts["precision"],
        threshold=opts["threshold"],
        timeout_s=opts["timeout"],
        memory_limit_bytes=memory_limit_bytes(opts["memory_limit"]),
        peak=not opts["no_peak"],
        ops=bool(opts.get("ops")),
        price_per_hour=opts.get("price_per_hour"),
        parallel_start=opts["parallel_start"],
        processes=default_processes(opts["budget"]) if processes is None else processes,
    )
    try:
        with bench_progress() as progress:
            return run_bench(
                workload,
                configs,
                options,
                store=opts["store"],
                listener=progress,
                command=shlex.join(["tfperf", *sys.argv[1:]]),
                kind=kind,
            )
    except RunInterrupted as exc:
        _say_interrupted(exc.run_id, exc.rounds)
        raise click.exceptions.Exit(130) from None


def _say_interrupted(run_id: int, rounds: int) -> None:
    """One sentence on stderr for a run stopped by Ctrl-C: which stored run keeps what."""
    from tfperf.report.console import err_console

    if rounds:
        kept = f"keeps the {rounds} round{'s' if rounds != 1 else ''} measured so far"
    else:
        kept = "was stopped before its first round was measured"
    err_console().print(
        f"Interrupted: run {run_id} {kept}; see `tfperf report {run_id}`.",
        soft_wrap=True,
        markup=False,
    )


def _emit(doc: dict[str, Any], as_json: bool, render: Any) -> None:
    if as_json:
        from tfperf.report.console import emit_json

        emit_json(doc)
    else:
        render(doc)


def register(group: click.Group) -> None:
    """Add ``bench`` and ``compare`` to ``group``."""

    @group.command("bench")
    @click.argument("model", required=False)
    @_measure_options
    @load_options
    @train_options(labels=True)
    @click.option(
        "--mlflow", "to_mlflow", is_flag=True, help="Also log the run to MLflow (docs/mlflow.md)."
    )
    def bench_cmd(model: str | None, to_mlflow: bool, **opts: Any) -> None:
        """Measure a workload: a built-in (--workload NAME) or MODEL (.keras, SavedModel dir,
        .tflite, module:function). With --set/--env, the default config and that config are
        measured side by side. With --concurrency, --rate or --slo-ms, the config (the default,
        or --set/--env's) is measured under load, served by the layout the layout options
        describe (docs/serving.md)."""
        from tfperf.core.config import Config
        from tfperf.report import mlflow_log

        export_target(opts["export"])
        if opts["url"]:  # a server the user runs: docs/serving.md, "A server you run"
            if to_mlflow:
                raise UserError("--mlflow does not take a load run yet; leave it out.")
            if trains(opts):
                raise UserError(f"{_trained(opts)} measures training steps, not a served "
                                "model: leave out --url.")
            refuse_train_only(opts)
            command = shlex.join(["tfperf", *sys.argv[1:]])
            doc = run_remote_command(opts, model, command)
            _emit(doc, opts["as_json"], render_load)
            export_run(opts["export"], opts["store"], doc["run_id"])
            return
        training = trains(opts)  # --train, or a training built-in (--workload cnn-train)
        if training:
            workload = train_workload(model, opts)
        else:
            refuse_train_only(opts)
            workload = _workload_of(opts, model)
        candidate = Config.parse(opts["sets"], opts["envs"])
        if not training:
            _refuse_training_knobs(candidate)
        if wants_load(opts) and training:
            raise UserError(f"{_trained(opts)} measures training steps, not a served model: "
                            "leave out the load options.")
        if wants_load(opts):
            if to_mlflow:
                raise UserError("--mlflow does not take a load run yet; leave it out.")
            command = shlex.join(["tfperf", *sys.argv[1:]])
            doc = run_load_command(opts, workload, candidate, command)
            _emit(doc, opts["as_json"], render_load)
            export_run(opts["export"], opts["store"], doc["run_id"])
            return
        configs = [Config()] + ([candidate] if candidate != Config() else [])
        if to_mlflow:
            mlflow_log.require_mlflow()  # before measuring, not after
        doc = _run(configs, opts, workload, "bench")
        _emit(doc, opts["as_json"], render_bench)
        if training and not opts["as_json"]:
            render_train(doc)
        export_run(opts["export"], opts["store"], doc["run_id"])
        if to_mlflow:
            mlflow_log.log_and_tell(doc, opts["store"])
        _exit_if_unrunnable(doc)

    @group.command("compare")
    @click.argument("runs", nargs=-1)
    @click.option("--model", default=None, help="Your model, instead of --workload.")
    @click.option(
        "--fail-on-regression",
        is_flag=True,
        help="Exit 1 when B (or a candidate) is significantly slower, or a measured config failed.",
    )
    @click.option(
        "--fail-on-memory-growth",
        type=float,
        default=None,
        metavar="PCT",
        help="Exit 1 when a config's peak memory in B is more than PCT percent above A's.",
    )
    @_measure_options
    def compare_cmd(
        runs: tuple[str, ...], model: str | None, fail_on_regression: bool,
        fail_on_memory_growth: float | None, **opts: Any
    ) -> None:
        """Compare two runs A B, each a run id of the store ('latest' too) or a .json result
        file written by --export on any machine; or measure candidates against the default in
        one interleaved run (--workload NAME or --model MODEL, each --set/--env one candidate;
        join knobs with commas)."""
        export_target(opts["export"])
        if fail_on_memory_growth is not None and not runs:
            raise UserError("--fail-on-memory-growth compares two runs: give run ids A B.")
        if fail_on_memory_growth is not None and fail_on_memory_growth < 0:
            raise UserError(
                f"--fail-on-memory-growth must be 0 or more percent, not {fail_on_memory_growth:g}."
            )
        doc = _compare_two(runs, model, opts) if runs else _compare_measured(model, opts)
        _gate(doc, fail_on_regression, fail_on_memory_growth)


COMPARE_TWO = {"runs", "store", "as_json", "export", "threshold", "fail_on_regression",
               "fail_on_memory_growth", "quiet", "verbose"}
"""The options ``tfperf compare A B`` applies; any other it is given is refused."""


def _compare_two(runs: tuple[str, ...], model: str | None, opts: dict[str, Any]) -> dict[str, Any]:
    """``tfperf compare A B``: two stored runs or result files, compared and shown."""
    from tfperf.benchmark import compare_runs
    from tfperf.report.export import comparison_table, load_result

    if len(runs) != 2 or opts["workload"] or model:
        raise UserError(
            "give either two run ids or result files (tfperf compare A B) or a workload with "
            "candidates (tfperf compare --workload NAME --set KEY=VALUE)."
        )
    if opts["threshold"] < 0:
        raise UserError(f"--threshold must be 0 or more, not {opts['threshold']}.")
    measuring = sorted(typed_options() - COMPARE_TWO)
    if measuring:
        name = "--" + measuring[0].replace("_", "-")
        raise UserError(f"{name} shapes a measurement, and comparing two runs measures nothing: "
                        "leave it out.")
    a, b = (load_result(ref, opts["store"]) for ref in runs)
    doc = compare_runs(a, b, opts["threshold"])
    load = doc["kind"] == "compare-load"
    _emit(doc, opts["as_json"], render_load_comparison if load else _render_runs)
    if opts["export"]:
        export_table(comparison_table(doc), opts["export"])
    return doc


def _compare_measured(model: str | None, opts: dict[str, Any]) -> dict[str, Any]:
    """``tfperf compare --workload NAME --set ...``: candidates measured against the default."""
    from tfperf.core.config import Config

    workload = _workload_of(opts, model)
    candidates = [Config.parse(s.split(","), []) for s in opts["sets"]]
    candidates += [Config.parse([], [e]) for e in opts["envs"]]
    for candidate in candidates:
        _refuse_training_knobs(candidate)
    if not candidates:
        raise UserError(
            "name at least one candidate with --set KEY=VALUE or --env KEY=VALUE "
            "(or give two run ids)."
        )
    doc = _run([Config(), *candidates], opts, workload, "compare")
    _emit(doc, opts["as_json"], render_bench)
    export_run(opts["export"], opts["store"], doc["run_id"])
    return doc


def _gate(doc: dict[str, Any], fail_on_regression: bool, memory_pct: float | None = None) -> None:
    """``--fail-on-regression``: exit 1 when a config is significantly slower or failed;
    ``--fail-on-memory-growth``: when a config's peak memory grew by more than that."""
    from tfperf.benchmark import failures_in, memory_growth_in, regressions_in

    slower = regressions_in(doc) if fail_on_regression else []
    failed = failures_in(doc) if fail_on_regression else []
    grown = memory_growth_in(doc, memory_pct) if memory_pct is not None else []
    found = [f"significantly slower: {', '.join(slower)}"] if slower else []
    found += [f"failed: {', '.join(failed)}"] if failed else []
    found += [f"memory grew over {memory_pct:g}%: {', '.join(grown)}"] if grown else []
    if found:
        raise FailOnTriggered("; ".join(found) + ".")


def _render_runs(doc: dict[str, Any]) -> None:
    """Two runs compared (stored runs or result files), trial by trial."""
    from rich.markup import escape

    _line(f"A: {escape(doc['source_a'])}")
    _line(f"B: {escape(doc['source_b'])}")
    for c in doc["comparisons"]:
        a, b = c["a"]["latency_ms"], c["b"]["latency_ms"]
        moved = c.get("memory")
        memory = (f", peak memory {moved['a_peak_rss_mb']:.0f} -> {moved['b_peak_rss_mb']:.0f} MB "
                  f"({moved['growth']:+.1%})" if moved else "")
        _line(
            f"  {escape(c['label_a'])}: p50 {_fmt(a['p50'])} ms -> "
            f"{escape(c['label_b'])}: p50 {_fmt(b['p50'])} ms{memory}"
        )
    _render_speedups(doc["comparisons"], "label_a", "label_b")
    _render_ops_moves(doc["comparisons"], "label_a", "label_b")
    for w in doc["warnings"]:
        _warn(w)
