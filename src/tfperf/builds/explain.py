"""What a TensorFlow build for this CPU could buy, next to XLA and LiteRT, from measured figures.

Contract: :func:`explain` reads the store (never imports TensorFlow) and returns::

    {"cpu": {"target", "features_beyond_wheel": [...], "copts": [...]},
     "figures": {"build": [...], "xla": [...], "litert": [...]},
     "missing": {"build"|"xla"|"litert": "the command that produces such figures"},
     "lines": ["one sentence each", ...]}

Each figure is ``{"run_id", "kind", "workload", "candidate", "speedup", "ci95", "verdict"}``,
taken from the store's comparisons and, for trials without one (``tfperf tune``), from the
``speedup`` of the trial's ``outcome``: ``build`` from ``tfperf builds compare`` runs, ``xla``
from candidates whose config has ``xla`` ``jit``/``auto``, ``litert`` from candidates with
``runtime=litert`` or one of its variants (``litert-fp16``, ``litert-dynint8``, ...).
Speedups are over that run's baseline (>1: faster). Where a category has no figure yet the
text says so and names the command that measures it; nothing is estimated.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tfperf.builds.cpuflags import cpu_flags, host_target
from tfperf.core.paths import resolve_store_path
from tfperf.report.console import console
from tfperf.store import Store

WHEEL_LACKS = (
    "avx2",
    "fma",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
)
"""Instruction sets TensorFlow's x86 pip wheel (built for AVX) says it was compiled without
"in other operations" (its cpu_feature_guard line): code outside oneDNN cannot use them."""

COMMANDS = {
    "build": "tfperf builds compare --candidate <wheel or tensorflow-cpu==X> --workload NAME",
    "xla": "tfperf compare --workload NAME --set xla=jit",
    "litert": "tfperf compare --workload NAME --set runtime=litert",
}
"""The command that produces each category of figures."""


def _workload_label(workload: dict[str, Any]) -> str:
    if workload.get("kind") == "builtin":
        return f"{workload.get('name')} ({workload.get('size', 'standard')})"
    return Path(str(workload.get("path", "model"))).name


def _category(run_kind: str, config: dict[str, Any]) -> str | None:
    if run_kind == "builds":
        return "build"
    if str(config.get("runtime") or "").startswith("litert"):
        return "litert"
    if config.get("xla") in ("jit", "auto"):
        return "xla"
    return None


def collect_figures(store: str | None = None, limit: int = 200) -> dict[str, list[dict]]:
    """Comparisons from the newest ``limit`` runs of the store, by category (see above)."""

    figures: dict[str, list[dict]] = {"build": [], "xla": [], "litert": []}
    path = resolve_store_path(store)
    if not Path(path).is_file():
        return figures
    with Store.open(path, create=False) as db:
        for run in db.list_runs(limit):
            loaded = db.load_run(run["id"])
            trials = {t["id"]: t for t in loaded["trials"]}
            pairs = [
                (trials.get(c["candidate_trial"], {}), c["result"]) for c in loaded["comparisons"]
            ]
            compared = {c["candidate_trial"] for c in loaded["comparisons"]}
            # tune keeps each candidate's speedup over the default in the trial's outcome
            pairs += [
                (t, (t["info"].get("outcome") or {}).get("speedup"))
                for t in loaded["trials"]
                if t["id"] not in compared
            ]
            for cand, res in pairs:
                cat = _category(run["kind"], cand.get("config") or {})
                if cat is None or not res or res.get("median") is None:
                    continue
                figures[cat].append(
                    {
                        "run_id": run["id"],
                        "kind": run["kind"],
                        "workload": _workload_label(run["workload"] or {}),
                        "candidate": cand.get("label"),
                        "speedup": res["median"],
                        "ci95": res.get("ci95"),
                        "verdict": res.get("verdict"),
                    }
                )
    return figures


def explain(store: str | None = None) -> dict[str, Any]:
    """The explanation document (see the module docstring)."""

    name, features = host_target()
    flags = cpu_flags("auto")
    beyond = [f for f in WHEEL_LACKS if f in features]
    figures = collect_figures(store)
    missing = {cat: COMMANDS[cat] for cat, rows in figures.items() if not rows}
    lines = [_cpu_line(name, beyond)]
    for cat, title in (("build", "Other TensorFlow builds"), ("xla", "XLA"), ("litert", "LiteRT")):
        rows = figures[cat]
        if rows:
            lines.append(f"{title}: {_summary(rows)}.")
        else:
            lines.append(
                f"{title}: no figures measured on this machine yet; run `{COMMANDS[cat]}`."
            )
    verdict = _verdict(figures)
    if verdict:
        lines.append(verdict)
    return {
        "cpu": {"target": name, "features_beyond_wheel": beyond, "copts": flags.copts},
        "figures": figures,
        "missing": missing,
        "lines": lines,
    }


def _cpu_line(name: str, beyond: list[str]) -> str:
    if not beyond:
        return (
            f"This CPU ({name}) has none of the instruction sets the pip wheel leaves out, "
            "so a source build has little to enable."
        )
    return (
        f"This CPU ({name}) has {', '.join(f.upper() for f in beyond)}, which the pip "
        "wheel uses only inside oneDNN (chosen at run time); a build for this CPU enables "
        "them in the remaining (Eigen) kernels, while XLA already compiles for the host CPU "
        "at run time and LiteRT's XNNPACK picks its kernels at run time too."
    )


def _fmt(row: dict[str, Any]) -> str:
    low, high = (row.get("ci95") or [None, None])[:2]
    ci = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
    return (
        f"{row['speedup']:.2f}x{ci} on {row['workload']} ({row['candidate']}, "
        f"run {row['run_id']}, {row['verdict']})"
    )


def _summary(rows: list[dict[str, Any]]) -> str:
    best = max(rows, key=lambda r: r["speedup"])
    worst = min(rows, key=lambda r: r["speedup"])
    if best is worst:
        return f"measured {_fmt(best)}"
    return f"best {_fmt(best)}; worst {_fmt(worst)}; {len(rows)} comparisons"


def _verdict(figures: dict[str, list[dict]]) -> str | None:
    """One sentence ranking the build against XLA and LiteRT, only from measured figures."""
    if not figures["build"]:
        return None
    build = max(r["speedup"] for r in figures["build"])
    others = {k: max(r["speedup"] for r in v) for k, v in figures.items() if k != "build" and v}
    if not others:
        return None
    better = [k for k, v in others.items() if v > build]
    if better:
        names = " and ".join("XLA" if k == "xla" else "LiteRT" for k in better)
        return (
            f"Measured here, {names} already gave more (best "
            f"{max(others[k] for k in better):.2f}x) than any build ({build:.2f}x)."
        )
    return f"Measured here, the best build ({build:.2f}x) beat XLA and LiteRT's best figures."


def render_explain(doc: dict[str, Any]) -> None:
    """Print the explanation for people."""

    for line in doc["lines"]:
        console().print(line, soft_wrap=True, markup=False, highlight=False)
