"""``tfperf bench`` under load: the scenario and layout options, and how a load run is shown.

``--concurrency 1,2,4`` (closed loop), ``--rate QPS[,QPS...]`` (open loop, Poisson arrivals) and
``--slo-ms X`` (the highest rate whose p99 is within X ms) turn ``bench`` into a load
measurement of the layout the layout options describe (``--instances 1,2`` measures each
instance count in turn). The library behind it is :func:`tfperf.serving.run.run_load`.
Every option typed on the command line is applied to a load run or refused in one sentence
(:func:`refuse_dropped`, :func:`tfperf.serving.run.refuse_dropped`): ``--timeout``,
``--memory-limit``, ``--price-per-hour``, ``--ops`` and ``--no-peak`` become the run's
:class:`~tfperf.serving.run.LoadRunOptions`; a value from the configuration file is a
default, not a request, and applies only where it can.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import click
from click.core import ParameterSource

from tfperf.core.errors import UserError

LOAD_KEYS = ("concurrency", "rate", "slo_ms", "url")
LAYOUT_KEYS = ("threads_per_instance", "pin", "max_batch", "max_delay_ms", "streams", "hint")
REMOTE_REFUSED = ("workload", "sets", "envs", "unsafe")
"""Options that say what tfperf itself serves: meaningless for a server the user runs."""


def load_options(fn: Any) -> Any:
    """Add the scenario and layout options to a command."""
    options = [
        click.option("--concurrency", metavar="N[,N...]", help="Closed-loop load levels."),
        click.option("--rate", metavar="QPS[,QPS...]", help="Open-loop rates (Poisson arrivals)."),
        click.option(
            "--slo-ms",
            type=float,
            default=None,
            help="Find the highest rate whose p99 latency stays within this many ms.",
        ),
        click.option(
            "--instances",
            default="1",
            show_default=True,
            metavar="K[,K...]",
            help="Model instances (worker processes) serving at once; several: one layout each.",
        ),
        click.option("--threads-per-instance", type=int, default=None, help="Threads each."),
        click.option(
            "--pin/--no-pin", default=False, show_default=True, help="Pin each instance to cores."
        ),
        click.option("--max-batch", type=int, default=1, show_default=True,
                     help="Dynamic batch: join waiting requests into calls of up to this many."),
        click.option("--max-delay-ms", type=float, default=0.0, show_default=True,
                     help="How long the batcher waits for a batch to fill."),
        click.option("--streams", type=int, default=None, help="OpenVINO throughput streams."),
        click.option("--hint", type=click.Choice(["THROUGHPUT", "LATENCY"]), default=None,
                     help="OpenVINO's PERFORMANCE_HINT; served by its asynchronous requests."),
        click.option("--level-requests", type=int, default=300, show_default=True,
                     help="Each load level sends at least this many requests (a level its cap ends "
                     "first says so)..."),
        click.option("--level-seconds", type=float, default=3.0, show_default=True,
                     help="...and lasts at least this long, then on until its p99 is stable "
                     "(at most 4 times longer)."),
        click.option("--request-timeout", type=float, default=10.0, show_default=True,
                     help="Seconds after its arrival a request counts as timed out."),
        click.option("--url", default=None, metavar="URL",
                     help="Load a server you run instead: http://HOST:PORT/v1/models/NAME, "
                     ".../v2/models/NAME/infer or grpc://HOST:PORT (docs/serving.md)."),
        click.option("--protocol", default=None,
                     type=click.Choice(["tfserving-rest", "v2-rest", "v2-grpc", "tfserving-grpc"]),
                     help="--url's protocol [default: guessed from its scheme and path]."),
        click.option("--model-name", default=None, help="--url's model, when its path names none."),
        click.option("--rest-format", default="row", show_default=True,
                     type=click.Choice(["row", "columnar"]),
                     help="tfserving-rest's request body: instances (row) or inputs (columnar)."),
        click.option("--header", "header", multiple=True, metavar="'NAME: VALUE'",
                     help="--url: a header sent with every request (gRPC: as metadata), such as "
                     "'Authorization: Bearer TOKEN'; repeatable; its value is never stored."),
        click.option("--connections", type=int, default=None, metavar="N",
                     help="--url: exactly N connections [default: as many as each level's "
                     "load needs, opened before it starts]."),
        click.option("--cacert", default=None, metavar="FILE",
                     help="--url over TLS (https://, grpcs://): trust the CA certificates of "
                     "this PEM file [default: $SSL_CERT_FILE, else the usual roots]."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _numbers(text: str | None, kind: type, option: str) -> tuple[Any, ...]:
    if not text:
        return ()
    try:
        return tuple(kind(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise UserError(
            f"{option} takes comma-separated numbers like 1,2,4, not {text!r}."
        ) from None


def wants_load(opts: dict[str, Any]) -> bool:
    """Whether the options ask for a load measurement; layout options alone are a mistake."""
    if any(opts.get(k) for k in LOAD_KEYS):
        return True
    layout_given = opts.get("instances") not in (None, "1") or any(
        opts.get(k) not in (None, False, 1, 0.0) for k in LAYOUT_KEYS
    )
    if layout_given:
        raise UserError(
            "the layout options (--instances, --max-batch, ...) describe a server under load: "
            "add --concurrency N, --rate QPS or --slo-ms X."
        )
    from tfperf.serving.run import refuse_without_load

    refuse_without_load(typed_options(), _flag)
    return False


def check_remote(opts: dict[str, Any], model: str | None) -> None:
    """With ``--url``, refuse what describes a server tfperf would start (one sentence)."""
    defaults = {"instances": "1", "threads_per_instance": None, "pin": False, "max_batch": 1,
                "max_delay_ms": 0.0, "streams": None, "hint": None}
    layout = [
        f"--{k.replace('_', '-')}"
        for k, default in defaults.items()
        if opts.get(k) is not default and opts.get(k) != default
    ]
    if layout:
        raise UserError(
            f"{', '.join(layout)} describe a server tfperf starts; --url measures the server "
            "you run as it is: leave them out (or drop --url)."
        )
    given = [f"--{k.replace('_', '-')}".replace("--sets", "--set").replace("--envs", "--env")
             for k in REMOTE_REFUSED if opts.get(k)]
    if model or given:
        what = ", ".join(given + (["MODEL"] if model else []))
        raise UserError(f"--url measures the model its server serves: leave out {what}.")


TYPED = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT, ParameterSource.PROMPT)
"""Where an option comes from when the user asked for it (not a default or the file's)."""


def typed_options() -> set[str]:
    """The options of the running command the user typed (:data:`TYPED`)."""
    ctx = click.get_current_context()
    return {p.name for p in ctx.command.params
            if p.name and ctx.get_parameter_source(p.name) in TYPED}


def refuse_dropped(remote: bool) -> None:
    """Refuse, in one sentence and before anything starts, a typed option a load run cannot
    apply (:func:`tfperf.serving.run.refuse_dropped`)."""
    from tfperf.serving.run import refuse_dropped as refuse

    refuse(typed_options(), remote=remote, spell=_flag)


def _flag(name: str) -> str:
    """Option ``name`` as typed: ``--no-peak``."""
    return "--" + name.replace("_", "-")


def memory_limit_bytes(gib: float | None) -> int | None:
    """``--memory-limit`` in bytes; a limit that is not positive is one sentence."""
    if gib is None:
        return None
    if gib <= 0:
        raise UserError(f"--memory-limit must be a positive number of GiB, not {gib}.")
    return int(gib * 2**30)


def run_options(opts: dict[str, Any]) -> Any:
    """The :class:`~tfperf.serving.run.LoadRunOptions` of a local load run's options."""
    from tfperf.serving.run import LoadRunOptions

    return LoadRunOptions(
        timeout_s=opts["timeout"], memory_limit_bytes=memory_limit_bytes(opts["memory_limit"]),
        price_per_hour=opts["price_per_hour"], ops=bool(opts["ops"]), peak=not opts["no_peak"],
    )


def run_remote_command(opts: dict[str, Any], model: str | None, command: str) -> dict[str, Any]:
    """``tfperf bench --url``: the document of :func:`tfperf.serving.remote.run_remote`."""
    from tfperf.core.paths import resolve_store_path
    from tfperf.progress import note
    from tfperf.store import Store

    check_remote(opts, model)
    refuse_dropped(remote=True)
    scenario = scenario_of(opts)
    price = run_options(opts).price_per_hour  # checked as a local run's
    if opts["batch"] < 1:
        raise UserError(f"--batch must be 1 or more, not {opts['batch']}.")
    try:
        from tfperf.serving.remote import parse_target, prepare, run_remote
    except ImportError as exc:
        raise UserError(
            f"--url needs the HTTP and gRPC clients ({exc.name} is missing): "
            "pip install 'tfperf[remote]'."
        ) from None
    typed = typed_options()  # applied where given: --rest-format and --batch shape the body
    target = parse_target(opts["url"], opts["protocol"], opts["model_name"],
                          opts["rest_format"] if "rest_format" in typed else None,
                          headers=opts["header"], cacert=opts["cacert"])
    if target.guessed:
        note(f"protocol {target.protocol} (guessed from the URL; --protocol sets it)",
             markup=False)
    for warning in target.warnings:
        note(f"warning: {warning}", markup=False)
    prepared = prepare(target, opts["inputs"], opts["batch"] if "batch" in typed else None)
    note(f"{target.label()}: request body {prepared.source}", markup=False)
    with Store.open(resolve_store_path(opts["store"])) as store, _interrupted():
        return run_remote(
            prepared, scenario, store=store, command=command,
            progress=lambda line: note(line, markup=False), price_per_hour=price,
            connections=opts["connections"],
        )


@contextlib.contextmanager
def _interrupted() -> Iterator[None]:
    """Ctrl-C during a load run: one sentence naming the run and what it keeps, exit 130."""
    from tfperf.report.console import err_console
    from tfperf.serving.run import LoadInterrupted

    try:
        yield
    except LoadInterrupted as exc:
        kept = f"{exc.levels} level{'s' if exc.levels != 1 else ''}"
        err_console().print(
            f"Interrupted: run {exc.run_id} keeps the {kept} measured so far; "
            f"see `tfperf report {exc.run_id}`.",
            markup=False,
            soft_wrap=True,
        )
        raise click.exceptions.Exit(130) from None


def scenario_of(opts: dict[str, Any]) -> Any:
    from tfperf.serving import LoadScenario
    from tfperf.serving.load import level_cap

    seconds = opts["level_seconds"]
    return LoadScenario(
        concurrency=_numbers(opts["concurrency"], int, "--concurrency"),
        rates=_numbers(opts["rate"], float, "--rate"),
        slo_ms=opts["slo_ms"],
        requests=opts["level_requests"],
        seconds=seconds,
        max_seconds=level_cap(seconds),
        timeout_s=opts["request_timeout"],
    )


def layouts_of(opts: dict[str, Any]) -> list[Any]:
    from tfperf.core.serving import ServingLayout
    from tfperf.serving import pinned

    layouts = []
    for k in _numbers(opts["instances"], int, "--instances") or (1,):
        layout = ServingLayout(
            instances=k,
            threads=opts["threads_per_instance"],
            max_batch=opts["max_batch"],
            max_delay_ms=opts["max_delay_ms"],
            streams=opts["streams"],
            hint=opts.get("hint"),
        )
        layouts.append(pinned(layout) if opts["pin"] else layout)
    return layouts


def run_load_command(
    opts: dict[str, Any], workload: dict[str, Any], config: Any, command: str
) -> dict[str, Any]:
    """Measure under load as ``tfperf bench`` does; the document of :func:`run_load`."""
    from tfperf.core.paths import resolve_store_path
    from tfperf.progress import note
    from tfperf.serving.load import check_layout
    from tfperf.serving.run import run_load
    from tfperf.store import Store

    refuse_dropped(remote=False)
    scenario = scenario_of(opts)
    options = run_options(opts)
    layouts = layouts_of(opts)
    for layout in layouts:
        check_layout(config, layout)
    config.worker_env({})  # a missing allocator is a user error before anything starts

    def progress(line: str) -> None:
        note(line, markup=False)  # stderr, left out with -q

    with Store.open(resolve_store_path(opts["store"])) as store, _interrupted():
        return run_load(
            workload,
            config,
            layouts,
            scenario,
            store=store,
            command=command,
            progress=progress,
            options=options,
        )


def render_load(doc: dict[str, Any]) -> None:
    """A load run for people: one table of levels per layout, then the SLO answer."""
    from tfperf.report.console import console, print_table
    from tfperf.report.load import load_table

    out = console()
    for layout in doc["layouts"]:
        print_table(load_table(layout), out)
    for line in cost_and_ops_lines(doc):
        out.print(line, markup=False, soft_wrap=True)
    if doc["slo_ms"] is not None:
        best = doc["max_qps_at_slo"]
        answer = (
            f"{best:.4g} requests/s ({doc['best_layout']})"
            if best is not None
            else "no level met it"
        )
        out.print(f"max QPS with p99 within {doc['slo_ms']:g} ms: {answer}", markup=False)
    for note in doc["notes"]:
        out.print(f"[yellow]note:[/] {note}", soft_wrap=True)
    out.print(f"[dim]{doc['generator']}; run {doc['run_id']}[/]", soft_wrap=True)


def cost_and_ops_lines(doc: dict[str, Any]) -> list[str]:
    """Each layout's cost per level (``--price-per-hour``) and op profile (``--ops``), and the
    cost at the SLO answer, of a load run's document (also as stored: its run's summary)."""
    from tfperf.report.ops import ops_lines

    lines = []
    for layout in doc["layouts"]:
        label = layout["layout_label"]
        priced = [lv for lv in layout["levels"] if lv.get("cost")]
        if priced:
            first = priced[0]["cost"]
            each = ", ".join(f"{_load_of(lv)} ${lv['cost']['per_million_requests']:.3g}"
                             for lv in priced)
            lines.append(f"{label}: per million requests at ${first['price_per_hour']:g}/h "
                         f"({first['batch']} sample(s) each): {each}")
        lines += ops_lines({"label": label, "ops": layout.get("ops")})
    best = doc.get("cost")
    if best:
        lines.append(f"at max QPS within the SLO: ${best['per_million_requests']:.3g} per "
                     f"million requests, ${best['per_million_samples']:.3g} per million samples")
    return lines


def _load_of(level: dict[str, Any]) -> str:
    if level.get("concurrency") is not None:
        return f"concurrency {level['concurrency']}"
    return f"{level['offered_qps']:.4g}/s"


def render_load_comparison(doc: dict[str, Any]) -> None:
    """Two load runs compared: per pair of servers, the levels side by side, then each one's
    highest rate within the SLO and the verdict."""
    from rich import box
    from rich.table import Table

    from tfperf.report.console import console, print_table

    out = console()
    out.print(f"A: {doc['source_a']}\nB: {doc['source_b']}", markup=False, soft_wrap=True)
    for c in doc["comparisons"]:
        table = Table(title=f"A {c['label_a']}  vs  B {c['label_b']}", box=box.SIMPLE_HEAD)
        for col in ("load", "A achieved/s", "A p99 ms", "B achieved/s", "B p99 ms"):
            table.add_column(col, justify="left" if col == "load" else "right", no_wrap=True)
        for pair in c["levels"]:
            a, b = pair["a"] or {}, pair["b"] or {}
            table.add_row(pair["load"], *(_cell(x.get(k)) for x in (a, b)
                                          for k in ("achieved_qps", "p99_ms")))
        print_table(table, out)
        slo = "" if c["slo_ms"] is None else f" within p99 {c['slo_ms']:g} ms"
        ratio = "" if c["ratio"] is None else f" ({c['ratio']:.3f}x)"
        out.print(
            f"max QPS{slo}: A {_cell(c['max_qps_at_slo_a'])}, B {_cell(c['max_qps_at_slo_b'])}"
            f"{ratio}: {c['verdict']}",
            markup=False, soft_wrap=True,
        )
    for warning in doc["warnings"]:
        out.print(f"[yellow]warning:[/] {warning}", soft_wrap=True)


def _cell(value: Any) -> str:
    return "-" if value is None else f"{value:.4g}"
