"""``tfperf doctor``: :func:`tfperf.diagnosis.audit.run_doctor` for people (rich) or programs
(JSON).

Exit codes: 0 ok; 1 when ``--fail-on warn|error`` is met; 2 when TensorFlow is not installed
(after printing the machine section) or on bad options. A TensorFlow that fails or crashes on
import is an error finding (exit 0 unless ``--fail-on``), never a traceback.
"""

from __future__ import annotations

# The library behind each command is imported inside it: `tfperf --help` stays instant and
# loads neither numpy, scipy nor plotly.
import sys
from typing import Any

import click

from tfperf.core.errors import FailOnTriggered, UserError

_STYLE = {"error": "bold red", "warn": "yellow", "info": "cyan"}


def _gib(n: int | None) -> str:
    return f"{n / 2**30:.1f} GiB" if n else "?"


def _machine_rows(m: dict[str, Any]) -> list[tuple[str, str]]:
    cpu, cores = m.get("cpu", {}), m.get("cores", {})
    quota = cores.get("cgroup_quota")
    usable = f"{cores.get('usable')} (affinity {cores.get('affinity')}, cgroup quota "
    usable += f"{quota:g} CPUs)" if quota is not None else "none)"
    gpus = m.get("gpus") or []
    allocs = m.get("allocators_available") or {}
    return [
        ("CPU", f"{cpu.get('model')} ({cpu.get('vendor')}, {cpu.get('machine')})"),
        ("Microarchitecture", str(cpu.get("microarchitecture"))),
        ("Compiler flags", str((cpu.get("compiler_flags") or {}).get("gcc", "?"))),
        ("Instruction sets", " ".join(m.get("isa") or []) or "?"),
        (
            "Cores",
            f"{cores.get('physical')} physical, {cores.get('logical')} logical, "
            f"{cores.get('sockets')} socket(s), {cores.get('numa_nodes')} NUMA node(s)",
        ),
        ("Usable CPUs", usable),
        (
            "Memory",
            f"{_gib(m['memory'].get('total_bytes'))} total, "
            f"{_gib(m['memory'].get('available_bytes'))} available"
            + (f", container limit {_gib(m['memory']['cgroup_limit_bytes'])}"
               if m["memory"].get("cgroup_limit_bytes") else ""),
        ),
        (
            "GPUs",
            ", ".join(f"{g['name']} ({_gib(g.get('memory_bytes'))})" for g in gpus) or "none",
        ),
        ("Allocators", ", ".join(f"{k}: {v or 'not installed'}" for k, v in allocs.items())),
        ("Wake-up latency", _wakeup_text(m.get("wakeup"))),
        ("Fingerprint", str(m.get("fingerprint"))),
    ]


def _wakeup_text(wakeup: dict[str, Any] | None) -> str:
    if not wakeup:
        return "not measured"
    where = "on another CPU" if wakeup.get("cross_cpu") else "on the same CPU"
    return (
        f"p50 {wakeup['p50_ms'] * 1000:.0f} us, p99 {wakeup['p99_ms'] * 1000:.0f} us "
        f"(a thread asleep on a pipe {where}, {wakeup['samples']} wake-ups; "
        "every served request pays a few)"
    )


def _install_rows(i: dict[str, Any]) -> list[tuple[str, str]]:
    if i.get("status") != "ok":
        return [("Status", f"{i.get('status')}: {(i.get('error') or {}).get('message')}")]
    dist = i.get("distribution") or {}
    build = i.get("build") or {}
    onednn = i.get("onednn") or {}
    threads = i.get("threads") or {}
    cuda = "CPU only"
    if build.get("is_cuda_build"):
        cuda = f"CUDA {build.get('cuda_version')}, cuDNN {build.get('cudnn_version')}"
    elif build.get("is_rocm_build"):
        cuda = f"ROCm {build.get('rocm_version', '?')}"
    rows = [
        ("TensorFlow", f"{i.get('tf_version')} ({i.get('git_version')}) at {i.get('path')}"),
        (
            "Distribution",
            f"{dist.get('name')} {dist.get('version')} from {dist.get('channel')}"
            f" (installer: {dist.get('installer')})",
        ),
        ("Python", f"{i['python']['version']} ({i['python']['executable']})"),
        ("Import time", f"{i.get('import_s', 0):.2f} s (whole probe {i.get('probe_s', 0):.2f} s)"),
        ("Build", f"{cuda}; compiler {i.get('compiler')}"),
        ("Built without", " ".join(i.get("isa_missing") or []) or "nothing this CPU has"),
        ("oneDNN", f"{'on' if onednn.get('enabled') else 'off'} -- {onednn.get('why')}"),
        ("XLA", "available" if i.get("xla_available") else "not available"),
        ("Allocator", str(i.get("allocator"))),
    ]
    for pool in ("intra_op", "inter_op"):
        t = threads.get(pool) or {}
        rows.append((f"{pool} threads", f"{t.get('effective')} ({t.get('source')})"))
    omp = i.get("openmp") or {}
    rows.append(
        (
            "OpenMP",
            ("linked by " + ", ".join(omp["linked_by"]))
            if omp.get("linked")
            else "not used by TensorFlow's libraries",
        )
    )
    if i.get("gpus_visible") is not None:
        rows.append(("GPUs visible", ", ".join(i["gpus_visible"]) or "none"))
    return rows


def _aot_rows(doc: dict[str, Any]) -> list[tuple[str, str]]:
    aot = doc.get("xla_aot") or {}
    if not aot:
        return []
    text = "available" if aot.get("available") else "missing " + "; ".join(aot.get("missing", []))
    return [("XLA AOT", text)]


def _keras_rows(doc: dict[str, Any]) -> list[tuple[str, str]]:
    backend = doc.get("keras_backend")
    if not backend:
        return []
    jax = doc.get("jax") or {}
    jax_text = (
        f"jax {jax.get('version')} importable (runtime keras-jax)"
        if jax.get("importable")
        else f"jax not importable: {jax.get('install')}"
    )
    return [("Keras backend", f"{backend} ({doc.get('keras_backend_source')}); {jax_text}")]


def _table(rows: list[tuple[str, str]]) -> Any:
    from rich.table import Table

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(key, value)
    return table


def render(doc: dict[str, Any]) -> None:
    """Print the doctor's document for a person: machine, install, environment, findings."""
    from rich.markup import escape

    from tfperf.report.console import console

    out = console()
    install = doc["install"]
    env = install.get("env") or {}
    sections = (
        ("Machine", _machine_rows(doc["machine"])),
        ("TensorFlow install", [*_install_rows(install), *_aot_rows(doc), *_keras_rows(doc)]),
        ("Performance environment variables", list(env.items()) or [("(none set)", "")]),
    )
    for title, rows in sections:
        out.print(f"[bold underline]{title}[/]")
        out.print(_table(rows))
        out.print()
    findings = doc.get("findings") or []
    out.print(f"[bold]Findings[/] ({len(findings)})")
    for f in findings:
        style = _STYLE[f["severity"]]
        out.print(f"[{style}]{f['severity'].upper():5}[/] [bold]{f['id']}[/]: {escape(f['title'])}")
        evidence = f["evidence"].replace("\n", "\n      ")
        out.print(f"      {escape(evidence)}", soft_wrap=True)
        out.print(f"      [green]fix:[/] {escape(f['fix'])}", soft_wrap=True)
    if not findings:
        out.print("  nothing to fix")


def render_settings() -> None:
    """The settings table of ``tfperf doctor -v``: each setting, its value and its source
    (a flag given to a command beats them all)."""
    from rich.markup import escape
    from rich.table import Table

    from tfperf.cli.settings import describe, load
    from tfperf.report.console import console, print_table

    config = load()
    out = console()
    out.print()
    out.print("[bold underline]Settings[/] (a flag given to a command beats every source)")
    table = Table(box=None, pad_edge=False)
    for col in ("setting", "value", "source"):
        table.add_column(col, overflow="fold")
    for row in describe(config):
        table.add_row(*(escape(cell) for cell in (row.setting, row.value, row.source)))
    print_table(table, out)
    found = str(config.path) if config.path else "none found (tfperf.toml, [tool.tfperf])"
    out.print(f"configuration file: {found}", markup=False, soft_wrap=True)


def register(group: click.Group) -> None:
    """Add ``doctor`` to ``group``."""

    @group.command("doctor")
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON document (schema v1).")
    @click.option(
        "--fail-on",
        type=click.Choice(["warn", "error"]),
        default=None,
        help="Exit 1 when a finding of this severity or worse is reported.",
    )
    @click.option(
        "--timeout",
        type=click.FloatRange(min=1),
        default=120,
        show_default=True,
        help="Seconds the install probe may take.",
    )
    @click.option(
        "--python",
        "python",
        default=None,
        help="Audit the TensorFlow of this interpreter (it needs tfperf installed).",
    )
    def doctor(as_json: bool, fail_on: str | None, timeout: float, python: str | None) -> int:
        """Audit this machine and its TensorFlow install, and say what to fix."""
        from tfperf.cli.verbosity import VERBOSE, level
        from tfperf.diagnosis.audit import fails_on, run_doctor
        from tfperf.progress import status
        from tfperf.report.console import emit_json

        with status("Importing TensorFlow in a probe, reading machine facts..."):
            doc = run_doctor(timeout=timeout, python=python)
        if as_json:
            emit_json(doc)
        else:
            render(doc)
            if level() >= VERBOSE:
                render_settings()
        install = doc["install"]
        if install.get("status") == "not_installed":
            py = python or sys.executable
            raise UserError(
                f"TensorFlow is not installed for this Python: install it with `{py} -m pip "
                "install tensorflow-cpu` (on an NVIDIA GPU machine: the `tensorflow` package with "
                "its `and-cuda` extra) and rerun `tfperf doctor`."
            )
        if fail_on and fails_on(doc, fail_on):
            worst = [f["id"] for f in doc["findings"] if f["severity"] in ("error", fail_on)]
            raise FailOnTriggered(f"findings at or above {fail_on}: {', '.join(worst)}")
        return 0
