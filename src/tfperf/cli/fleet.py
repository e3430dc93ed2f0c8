"""CLI group ``tfperf fleet``: ``doctor``, ``bench``, ``tune`` and ``report`` on a Ray cluster.

A thin wrapper over :mod:`tfperf.fleet.commands`: each command names the cluster
(``--ray-address`` or ``RAY_ADDRESS``), runs the ordinary tfperf command on every node of it
(or the ``--node`` ones), prints one line per node as it finishes (stderr) and then a table,
or one JSON document with ``--json``; ``--html FILE`` writes the host x workload matrix as a
page. Ray is imported by the library, inside the command: ``tfperf --help`` does not load it.
"""

from __future__ import annotations

# The library behind each command is imported inside it: `tfperf --help` stays instant and
# loads neither numpy, scipy, plotly nor Ray.
import contextlib
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from tfperf.cli.bench import model_options

_STATUS_STYLE = {"ok": "green", "skipped": "yellow"}


def _options(fn: Any) -> Any:
    options = [
        click.option(
            "--ray-address",
            "address",
            default=None,
            metavar="ADDR",
            help="The Ray cluster: HOST:PORT, ray://HOST:10001 or auto [default: RAY_ADDRESS].",
        ),
        click.option(
            "--node",
            "nodes",
            multiple=True,
            metavar="HOST|ID",
            help="Only this node (a host name or a node id prefix); repeat for more.",
        ),
        click.option(
            "--node-timeout",
            type=click.FloatRange(min=1),
            default=3600,
            show_default=True,
            help="Seconds each node's command may take.",
        ),
        click.option(
            "--store", default=None, help="The store (default: TFPERF_STORE or the user data dir)."
        ),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON document."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _model_options(fn: Any) -> Any:
    return click.argument("model", required=False)(model_options(fn))


def _fleet_options(opts: dict[str, Any]) -> Any:
    from tfperf.fleet.commands import FleetOptions

    return FleetOptions(
        address=opts["address"],
        nodes=tuple(opts["nodes"]),
        store=opts["store"],
        timeout_s=opts["node_timeout"],
        command=shlex.join(["tfperf", *sys.argv[1:]]),
        on_node=_say_node,
    )


def _workload(opts: dict[str, Any]) -> dict[str, Any]:
    from tfperf.modelref import workload_from_args

    return workload_from_args(
        opts["workload"],
        opts["model"],
        inputs=opts["inputs"],
        unsafe=opts["unsafe"],
        batch=opts["batch"],
        size=opts["size"],
    )


def _say_node(entry: dict[str, Any]) -> None:
    """One line on stderr as each node finishes (not with -q)."""
    from rich.markup import escape

    from tfperf.progress import note

    style = _STATUS_STYLE.get(entry["status"], "red")
    reason = f": {escape(str(entry['reason']))}" if entry.get("reason") else ""
    role = f" ({entry['role']})" if entry.get("role") else ""
    name = escape(f"{entry['host']} ({entry['node_id'][:8]})")
    note(f"node {name}{role}: [{style}]{entry['status']}[/]{reason}")


def _line(text: str) -> None:
    from tfperf.report.console import console

    console().print(text, soft_wrap=True, markup=False)


def _table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    from rich.table import Table

    from tfperf.report.console import print_table

    table = Table(title=title)
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*(str(c) for c in row))
    print_table(table)


def _nodes_rows(doc: dict[str, Any]) -> list[list[str]]:
    """host, node, status (and a fleet tune's role for the node), kind, reason."""
    return [
        [
            e["host"],
            e["node_id"][:8],
            e["status"] + (f" ({e['role']})" if e.get("role") else ""),
            e.get("kind") or "-",
            e.get("reason") or "",
        ]
        for e in doc["nodes"]
    ]


def _render_kinds(doc: dict[str, Any]) -> None:
    names = {e["node_id"]: f"{e['host']} ({e['node_id'][:8]})" for e in doc["nodes"]}
    rows = [
        [k["id"], k["description"], ", ".join(names[n] for n in k["nodes"])] for k in doc["kinds"]
    ]
    _table("kinds of machine", ["kind", "what", "nodes"], rows)
    for kind in doc["kinds"]:
        for node_id, diff in kind.get("differences", {}).items():
            only = ", ".join(diff["only_here"]) or "-"
            missing = ", ".join(diff["missing_here"]) or "-"
            _line(
                f"{names[node_id]} differs from its kind: findings only here: {only}; "
                f"missing here: {missing}"
            )


def render_doctor(doc: dict[str, Any]) -> None:
    """``fleet doctor`` for people: the nodes, their worst findings, the kinds."""
    rows = []
    for e, row in zip(doc["nodes"], _nodes_rows(doc), strict=True):
        findings = (e.get("result") or {}).get("findings") or []
        row.insert(4, " ".join(f"{f['id']}({f['severity']})" for f in findings) or "-")
        rows.append(row)
    columns = ["host", "node", "status", "kind", "findings", "reason"]
    _table(f"tfperf fleet doctor (run {doc['run_id']}): {doc['status']}", columns, rows)
    _render_kinds(doc)


def render_matrix(matrix: dict[str, Any], title: str) -> None:
    """The host x workload matrix (median ms per call) and its outliers."""
    rows = [
        [r["node"], r["kind"] or "-"] + [_ms(r["cells"].get(c)) for c in matrix["columns"]]
        for r in matrix["rows"]
    ]
    _table(title, ["node", "kind", *(f"{c} ms" for c in matrix["columns"])], rows)
    for o in matrix["outliers"]:
        _line(_outlier_text(o))
    if not matrix["outliers"]:
        _line("no node is significantly slower than the rest of its kind")
    for note in matrix["notes"]:
        _line(f"note: {note}")


def _ms(cell: dict[str, Any] | None) -> str:
    return "-" if not cell else f"{cell['p50_ms']:.3g}"


def _outlier_text(o: dict[str, Any]) -> str:
    from tfperf.report.console import speedup_text

    diff = o["findings"]
    said = [f"findings only here: {', '.join(diff['only_here'])}"] if diff["only_here"] else []
    said += [f"missing here: {', '.join(diff['missing_here'])}"] if diff["missing_here"] else []
    return (
        f"outlier: {o['node']} on {o['column']}: {speedup_text(o['speedup'])} of its kind's "
        f"speed ({o['kind']}); " + ("; ".join(said) or "its doctor findings match its kind's")
    )


def render_bench(doc: dict[str, Any]) -> None:
    columns = ["host", "node", "status", "kind", "reason"]
    _table(f"tfperf fleet bench (run {doc['run_id']}): {doc['status']}", columns, _nodes_rows(doc))
    render_matrix(doc["matrix"], "median ms per call")


def render_tune(doc: dict[str, Any]) -> None:
    from tfperf.report.console import speedup_text

    columns = ["host", "node", "status", "kind", "reason"]
    _table(f"tfperf fleet tune (run {doc['run_id']}): {doc['status']}", columns, _nodes_rows(doc))
    for t in doc["tunes"]:
        if t["status"] != "ok":
            _line(f"kind {t['kind']}: the tune on {t['tuned_on']} failed: {t['reason']}")
            continue
        _line(
            f"kind {t['kind']}: tuned on {t['tuned_on']}: {t['label']} "
            f"{speedup_text(t['speedup'])}; profile {t.get('profile')}"
        )
        if t["holds_on"]:
            _line(f"  holds on: {', '.join(t['holds_on'])}")
        for miss in t["does_not_hold_on"]:
            _line(f"  does not hold on {miss['node']}: {miss['reason']}")
        for miss in t["not_verified"]:
            _line(f"  {miss['node']}: {miss['reason']}")


@contextlib.contextmanager
def _ray_on_stderr() -> Iterator[None]:
    """While a fleet command runs, what Ray prints from its own threads (a node marked dead)
    goes to stderr, and Ray is left before the result is printed: ``--json`` stays one
    document. Ray is left inside the redirection: its error listener prints a node's death
    until ``ray.shutdown`` joins it."""
    from tfperf.fleet.cluster import disconnect

    with contextlib.redirect_stdout(sys.stderr):
        try:
            yield
        finally:
            disconnect()


def _emit(doc: dict[str, Any], as_json: bool, render: Any) -> None:
    if as_json:
        from tfperf.report.console import emit_json

        emit_json(doc)
    else:
        render(doc)


def write_html(matrix: dict[str, Any], path: str, title: str) -> None:
    """The matrix, its kinds and outliers as one HTML page."""
    from tfperf.core.errors import UserError
    from tfperf.report.html import table_page

    rows = [
        [r["node"], r["kind"] or "-", r["status"] or "-"]
        + [_ms(r["cells"].get(c)) for c in matrix["columns"]]
        for r in matrix["rows"]
    ]
    sections = [
        ("Median ms per call", ["node", "kind", "status", *matrix["columns"]], rows),
        ("Outliers", ["outlier"], [[_outlier_text(o)] for o in matrix["outliers"]]),
        (
            "Kinds of machine",
            ["kind", "what", "nodes"],
            [[k["id"], k["description"], ", ".join(k["nodes"])] for k in matrix["kinds"]],
        ),
    ]
    runs = ", ".join(str(r) for r in matrix["fleet_runs"])
    page = table_page(title, f"fleet runs {runs}", sections)
    try:
        Path(path).expanduser().write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UserError(
            f"cannot write {path} ({exc.strerror or exc}); pass a writable --html path."
        ) from exc


def register(group: click.Group) -> None:
    """Add the ``fleet`` group to ``group``."""

    @group.group("fleet")
    def fleet() -> None:
        """Audit, measure and tune every node of a Ray cluster (docs/fleet.md)."""

    _add_doctor_and_bench(fleet)
    _add_tune_and_report(fleet)


def _add_doctor_and_bench(fleet: click.Group) -> None:
    @fleet.command("doctor")
    @_options
    def doctor_cmd(as_json: bool, **opts: Any) -> None:
        """Run `tfperf doctor` on every node; group the nodes by kind of machine."""
        from tfperf.fleet.commands import fleet_doctor

        with _ray_on_stderr():
            doc = fleet_doctor(_fleet_options(opts))
        _emit(doc, as_json, render_doctor)

    @fleet.command("bench")
    @_model_options
    @_options
    @click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="A knob value.")
    @click.option("--env", "envs", multiple=True, metavar="KEY=VALUE", help="An env variable.")
    @click.option(
        "--budget",
        type=float,
        default=30.0,
        show_default=True,
        help="Seconds of steady-state measurement on each node.",
    )
    @click.option("--processes", type=int, default=None, help="As for `tfperf bench`.")
    @click.option("--no-peak", is_flag=True, help="Skip the matmul peak probe.")
    @click.option("--html", "html_path", default=None, help="Write the matrix as HTML here.")
    def bench_cmd(as_json: bool, html_path: str | None, **opts: Any) -> None:
        """Run `tfperf bench` (after `tfperf doctor`) on every node; the host x workload
        matrix with the nodes slower than their kind."""
        from tfperf.core.config import Config
        from tfperf.fleet.commands import BenchSpec, fleet_bench

        extra = ("--no-peak",) if opts["no_peak"] else ()
        if opts["processes"] is not None:
            extra += ("--processes", str(opts["processes"]))
        spec = BenchSpec(
            _workload(opts), Config.parse(opts["sets"], opts["envs"]), opts["budget"], extra
        )
        with _ray_on_stderr():
            doc = fleet_bench(spec, _fleet_options(opts))
        _emit(doc, as_json, render_bench)
        if html_path:
            write_html(doc["matrix"], html_path, f"tfperf fleet bench (run {doc['run_id']})")


def _add_tune_and_report(fleet: click.Group) -> None:
    @fleet.command("tune")
    @_model_options
    @_options
    @click.option(
        "--verify-budget",
        type=float,
        default=20.0,
        show_default=True,
        help="Seconds of each profile-vs-default check on the other nodes of a kind.",
    )
    @click.option(
        "--out-dir",
        default="fleet-tune",
        show_default=True,
        help="Where each kind's profile and converted model are saved.",
    )
    @click.option(
        "--tune-arg",
        "tune_args",
        multiple=True,
        metavar="ARG",
        help="An option for `tfperf tune` on each kind, e.g. --tune-arg=--quick.",
    )
    def tune_cmd(
        as_json: bool, verify_budget: float, out_dir: str, tune_args: tuple[str, ...], **opts: Any
    ) -> None:
        """Tune once per kind of machine, then check the profile against the default on
        every other node of that kind."""
        from tfperf.fleet.commands import TuneSpec, fleet_tune

        spec = TuneSpec(_workload(opts), tuple(tune_args), verify_budget, out_dir)
        with _ray_on_stderr():
            doc = fleet_tune(spec, _fleet_options(opts))
        _emit(doc, as_json, render_tune)

    @fleet.command("report")
    @click.argument("runs", nargs=-1)
    @click.option(
        "--store", default=None, help="The store (default: TFPERF_STORE or the user data dir)."
    )
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
    @click.option("--html", "html_path", default=None, help="Write the matrix as HTML here.")
    def report_cmd(
        runs: tuple[str, ...], store: str | None, as_json: bool, html_path: str | None
    ) -> None:
        """The host x workload matrix of fleet runs (default: the latest fleet bench)."""
        from tfperf.fleet.commands import fleet_report

        doc = fleet_report(store, runs)
        _emit(doc, as_json, lambda d: render_matrix(d, "median ms per call"))
        if html_path:
            write_html(doc, html_path, "tfperf fleet report")
