"""The report of one run: its JSON document (:func:`build_report`) and its HTML page.

Contract
--------

:func:`build_report` turns :meth:`tfperf.store.Store.load_run`'s dictionary into the report
document described in ``docs/results-schema.md`` (``schema_version`` :data:`SCHEMA_VERSION`):
one result per trial (``latency_ms`` with ``p50``, ``p90``, ``p99``, ``mean``, ``p50_ci95``;
throughput; share of the machine's peak where the trial info has ``gflops`` and
``peak_gflops``) and one entry per comparison (``speedup`` with ``median``, ``ci95``,
``verdict``, ``p_value``, ``n_pairs``, ``threshold``). Comparisons recorded in the store are
used as they are; a run that recorded none (e.g. one killed before the end) gets them
recomputed with :func:`tfperf.core.stats.paired_speedup` from the steady blocks of its
``baseline`` trial and each ``candidate`` trial (block medians paired by order), marked
``"source": "recomputed"``.

:func:`write_html` writes one self-contained HTML file: plotly's minified JavaScript is embedded
once (no network access is needed to view it), with the latency distribution per configuration
(drawn from its :data:`PERCENTILES` percentiles, its number of calls stated, so a page's size
does not grow with the calls measured: plotly's 4.8 MB and about 1.2 kB per configuration), the
speedups with their 95% intervals, and the share of peak FLOP/s where known (the figures:
:func:`latency_figure`, :func:`speedup_figure`, :func:`peak_figure`). A tune's page opens with
its answer. A load run's trials (``load`` blocks) are not ``results``: they are its ``load``
sections (:mod:`tfperf.report.load`), drawn as latency percentiles against achieved
throughput per layout with the SLO line.

plotly is imported inside the functions that draw.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

from tfperf.core.errors import UserError
from tfperf.core.knobs import label
from tfperf.core.memory import stored_memory
from tfperf.core.stats import detect_warmup, paired_speedup, summarize
from tfperf.report.load import load_figure, load_html, load_sections
from tfperf.report.ops import ops_sections

SCHEMA_VERSION = 1
LOG_AXIS_SPAN = 5.0
"""Latency plots switch to a log axis when the slowest sample is this many times the fastest."""


def error_text(error: dict | None) -> str:
    """The one-line reason of a trial's error dictionary (``reason`` or ``message``), or ""."""
    if not error:
        return ""
    return str(error.get("reason") or error.get("message") or "")


def block_medians(trial: dict) -> list[float]:
    """The medians of a stored trial's steady blocks (seconds), in the order measured."""
    import numpy as np

    return [
        float(np.median(b["samples_s"]))
        for b in trial.get("blocks", [])
        if b["phase"] == "steady" and b["samples_s"]
    ]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def _flop_rates(info: dict, p50_ms: float | None, run_peak: dict) -> tuple[float | None, ...]:
    """(achieved GFLOP/s, peak GFLOP/s) of a trial from whatever its info recorded.

    In order: ``gflops``/``peak_gflops`` at the top of the info; the measured summary's
    ``flops`` (``gflops_per_s``, ``peak_gflops``); else FLOPs per call over the median latency
    against the run's fp32 peak (``summary.peak.fp32_gflops``).
    """
    measured = ((info.get("summary") or {}).get("flops")) or {}
    gflops = _number(info.get("gflops")) or _number(measured.get("gflops_per_s"))
    peak = _number(info.get("peak_gflops")) or _number(measured.get("peak_gflops"))
    per_call = _number((info.get("flops") or {}).get("per_call"))
    if gflops is None and per_call and p50_ms:
        gflops = per_call / (p50_ms / 1e3) / 1e9
    if peak is None:
        peak = _number((run_peak or {}).get("fp32_gflops"))
    return gflops, peak


def trial_batch(info: dict, default: int) -> int:
    """A trial's samples per call: its info's ``batch``, else a tune candidate's (its
    ``outcome``) or confirmation's (``candidate_batch``), else the workload's ``default``."""
    outcome = (info.get("outcome") or {}).get("info") or {}
    confirmation = info.get("confirmation") or {}
    found = info.get("batch") or outcome.get("batch") or confirmation.get("candidate_batch")
    return int(found or default or 1)


def _result(trial: dict, default_batch: int, run_peak: dict) -> dict:

    info = trial.get("info") or {}
    warmup = trial.get("warmup_s") or []
    batch = trial_batch(info, default_batch)
    summary = summarize(trial["samples_s"], batch=batch)
    gflops, peak = _flop_rates(info, summary["latency_ms"]["p50"], run_peak)
    share = gflops / peak if gflops and peak else None
    warnings = list(summary["warnings"]) if summary["n"] or trial["status"] == "ok" else []
    if trial["status"] != "ok":
        reason = error_text(trial.get("error"))
        warnings.insert(0, f"trial {trial['status']}" + (f": {reason}" if reason else ""))
    return {
        "trial_id": trial["id"],
        "label": trial["label"],
        "role": trial["role"],
        "status": trial["status"],
        "config": trial["config"],
        "batch": batch,
        "n": summary["n"],
        "latency_ms": summary["latency_ms"],
        "throughput_per_s": summary["throughput_per_s"],
        "cv": summary["cv"],
        "warmup": {
            "n": len(warmup),
            "seconds": float(sum(warmup)),
            "steady_from": detect_warmup(warmup),
        },
        "cold_start_s": info.get("cold_start_s"),
        "first_call_s": info.get("first_call_s"),
        "peak_rss_bytes": info.get("peak_rss_bytes"),
        "memory": stored_memory(info),
        "gflops": gflops,
        "peak_gflops": peak,
        "peak_share": share,
        "error": trial.get("error"),
        "info": info,
        "warnings": warnings,
    }


def _comparison(baseline: dict, candidate: dict, result: dict, source: str) -> dict:
    inner = result.get("speedup", result) if isinstance(result.get("speedup"), dict) else result
    speedup = {
        key: inner.get(key)
        for key in ("median", "ci95", "verdict", "p_value", "n_pairs", "threshold")
    }
    if inner.get("processes"):
        speedup["processes"] = inner["processes"]
    if speedup["ci95"] is None:
        speedup["ci95"] = [None, None]
    return {
        "baseline": {"trial_id": baseline["id"], "label": baseline["label"]},
        "candidate": {"trial_id": candidate["id"], "label": candidate["label"]},
        "speedup": speedup,
        "warnings": list(inner.get("warnings") or result.get("warnings") or []),
        "source": source,
    }


def _comparisons(doc: dict) -> list[dict]:
    by_id = {t["id"]: t for t in doc["trials"]}
    stored = [
        _comparison(by_id[c["baseline_trial"]], by_id[c["candidate_trial"]], c["result"], "stored")
        for c in doc["comparisons"]
        if c["baseline_trial"] in by_id and c["candidate_trial"] in by_id
    ]
    if stored:
        return stored

    baselines = [t for t in doc["trials"] if t["role"] == "baseline"]
    if not baselines:
        return []
    base = baselines[0]
    threshold = (doc["run"].get("settings") or {}).get("threshold", 0.03)
    out = []
    for cand in doc["trials"]:
        if cand["role"] != "candidate":
            continue
        result = paired_speedup(block_medians(base), block_medians(cand), threshold=threshold)
        out.append(_comparison(base, cand, result, "recomputed"))
    return out


def _name_repeats(results: list[dict]) -> None:
    """Name for what it is each measurement of a config measured more than once in a run (a
    tune measures a candidate against the default, again against a later answer, again
    without a knob of the answer): its label says what it was measured against, so that two
    rows of one config with two sets of figures say why."""
    count: dict[str, int] = {}
    for result in results:
        count[result["label"]] = count.get(result["label"], 0) + 1
    for result in results:
        incumbent = ((result["info"].get("outcome") or {}).get("incumbent")) or {}
        if count[result["label"]] > 1 and incumbent:
            result["label"] = f"{result['label']} (against {label(incumbent)})"


DRIFTED = "latency drifted by "


def _drift_once(results: list[dict]) -> list[str]:
    """The machine's drift said once for the run, in place of one warning per config: every
    config of a run shares the machine, and interleaved rounds keep their ratios fair."""
    drifted = []
    for result in results:
        mine = [w for w in result["warnings"] if w.startswith(DRIFTED)]
        if mine:
            drifted.append(float(mine[0][len(DRIFTED):].split("%")[0]))
            result["warnings"] = [w for w in result["warnings"] if w not in mine]
    if not drifted:
        return []
    return [f"the machine's speed drifted during the run: {len(drifted)} of the "
            f"{len(results)} configurations' times moved by {min(drifted):+.1f}% to "
            f"{max(drifted):+.1f}% from the first to the last third of their samples; the "
            "speedups are measured side by side, interleaved, and hold"]


FEW = ("only ", "too few samples for a 95% interval")


def _few_samples_once(results: list[dict]) -> list[str]:
    """The configurations measured on fewer samples than stable figures need, said once for
    the run: a tune stops a candidate's rounds once its verdict is decided (or it cannot win),
    so several of them have few, and one line per configuration buried the rest."""
    def is_few(warning: str) -> bool:
        return warning.startswith(FEW) and "sample" in warning

    few = [r for r in results if any(is_few(w) for w in r["warnings"])]
    if len(few) < 2:
        return []  # one is said where it belongs
    for result in few:
        result["warnings"] = [w for w in result["warnings"] if not is_few(w)]
    return [f"{len(few)} configurations were measured on fewer than 10 samples (a tune stops "
            "a candidate once its verdict is decided): their own latency figures are wide, "
            f"their speedups stand on the pairs measured "
            f"({', '.join(r['label'] for r in few)})"]


_RUN_STATUS_NOTES = {
    "interrupted": "the run was interrupted; its figures cover only the blocks that finished "
    "before it stopped",
    "failed": "the run failed: no config was measured",
    "partial": "some configs failed; the figures cover the configs that finished",
}


def build_report(doc: dict) -> dict:
    """The report document of one run (``doc`` as returned by ``Store.load_run``)."""
    run = doc["run"]
    default_batch = (run.get("workload") or {}).get("batch") or 1
    run_peak = (run.get("summary") or {}).get("peak") or {}
    results = [
        _result(t, default_batch, run_peak)
        for t in doc["trials"]
        if not any(b["phase"] == "load" for b in t.get("blocks", []))
    ]
    warnings = []
    if run["status"] in _RUN_STATUS_NOTES:
        warnings.append(_RUN_STATUS_NOTES[run["status"]])
    _name_repeats(results)
    warnings += _drift_once(results) + _few_samples_once(results)
    return {
        "schema_version": SCHEMA_VERSION,
        "run": {
            key: run.get(key)
            for key in (
                "id",
                "uuid",
                "tfperf_version",
                "kind",
                "command",
                "status",
                "started_at",
                "finished_at",
                "workload",
                "machine",
                "settings",
                "summary",
            )
        },
        "results": results,
        "comparisons": _comparisons(doc),
        "load": load_sections(doc),
        "warnings": warnings,
    }


# ------------------------------------------------------------------------------- HTML
_VERDICT_COLORS = {
    "faster": "#2e7d32",
    "slower": "#c62828",
    "same": "#546e7a",
    "inconclusive": "#f9a825",
}

_CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 2rem; color: #222; }
h1 { font-size: 1.4rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
table { border-collapse: collapse; font-size: 0.9rem; }
th, td { border-bottom: 1px solid #ddd; padding: 0.3rem 0.7rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.meta { color: #555; font-size: 0.9rem; } .warn { color: #a15c00; font-size: 0.85rem; }
.note { color: #555; font-style: italic; }
"""


def fmt(value: Any, spec: str = ".3g") -> str:
    """``value`` formatted with ``spec``, or ``-`` when it is unknown (``None``)."""
    return "-" if value is None else format(value, spec)


PERCENTILES = 101
"""Points drawn per configuration in the latency plot: its percentiles 0, 1, ..., 100. The
distribution's shape, quartiles and extremes stay as they are, and a page weighs the same
whatever the number of calls measured (a sub-millisecond tune records hundreds of thousands)."""


def drawn_points(samples: list[float]) -> list[float]:
    """What the latency plot draws of ``samples``: their percentiles 0..100 (all of them when
    there are no more), to 4 significant digits."""
    import numpy as np

    points = (
        samples if len(samples) <= PERCENTILES
        else np.percentile(samples, np.linspace(0.0, 100.0, PERCENTILES)).tolist()
    )
    return [float(f"{v:.4g}") for v in points]


def latency_figure(report: dict, samples_ms: dict[int, list[float]]):
    import plotly.graph_objects as go

    fig = go.Figure()
    present = [s for s in samples_ms.values() if s]
    low = min(min(s) for s in present)
    heavy_tail = low > 0 and max(max(s) for s in present) / low > LOG_AXIS_SPAN
    for res in report["results"]:
        samples = samples_ms.get(res["trial_id"])
        if not samples:
            continue
        name, points = f"{res['label']} (n={len(samples):,})", drawn_points(samples)
        if heavy_tail:  # a kernel density smears a long tail; quartiles and outliers do not
            fig.add_trace(go.Box(y=points, name=name, boxpoints="outliers"))
        else:
            fig.add_trace(
                go.Violin(
                    y=points,
                    name=name,
                    box_visible=True,
                    meanline_visible=True,
                    points=False,
                    spanmode="hard",
                )
            )
    fig.update_layout(
        title="Latency per call (steady state)" + (", log scale" if heavy_tail else "")
        + f"<br><sup>n calls each, drawn from their {PERCENTILES} percentiles (0 to 100)</sup>",
        yaxis_title="milliseconds",
        yaxis_type="log" if heavy_tail else "linear",
        showlegend=False,
        height=420,
        margin={"t": 50, "b": 40},
    )
    return fig


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def speedup_figure(report: dict):
    import plotly.graph_objects as go

    comps = [c for c in report["comparisons"] if c["speedup"]["median"] is not None]
    med = [c["speedup"]["median"] for c in comps]
    bases = sorted({c["baseline"]["label"] for c in comps})
    one_base = len(bases) == 1
    bounds = [[_or(v, c["speedup"]["median"]) for v in c["speedup"]["ci95"]] for c in comps]
    fig = go.Figure(
        go.Bar(
            x=[
                c["candidate"]["label"] if one_base else f"{c['candidate']['label']} vs {base}"
                for c in comps
                for base in [c["baseline"]["label"]]
            ],
            y=[m - 1.0 for m in med],
            base=1.0,
            marker_color=[_VERDICT_COLORS.get(c["speedup"]["verdict"], "#888") for c in comps],
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [
                    hi - c["speedup"]["median"] for c, (_, hi) in zip(comps, bounds, strict=True)
                ],
                "arrayminus": [
                    c["speedup"]["median"] - lo for c, (lo, _) in zip(comps, bounds, strict=True)
                ],
            },
            text=[f"{c['speedup']['median']:.3f}x {c['speedup']['verdict']}" for c in comps],
            textposition="inside",
            insidetextanchor="middle",
            hovertemplate="%{x}: %{text}<extra></extra>",
        )
    )
    threshold = comps[0]["speedup"].get("threshold") or 0.03
    fig.add_hrect(
        y0=1 / (1 + threshold), y1=1 + threshold, fillcolor="#90a4ae", opacity=0.2, line_width=0
    )
    fig.add_hline(y=1.0, line_dash="dash", line_color="#333")
    fig.update_layout(
        title=f"Speedup vs {bases[0] if one_base else 'baseline'} "
        "(median of paired ratios, 95% interval)",
        yaxis_title="speedup (x)",
        height=420,
        margin={"t": 50, "b": 40},
    )
    return fig


def peak_figure(report: dict):
    """% of the machine's peak per config; achieved GFLOP/s alone where the peak is unknown."""
    import plotly.graph_objects as go

    with_share = [r for r in report["results"] if r["peak_share"] is not None]
    if with_share:
        rows, title, axis = with_share, "Share of this machine's measured peak FLOP/s", "% of peak"
        values = [100.0 * r["peak_share"] for r in rows]
        text = [f"{r['gflops']:.3g} of {r['peak_gflops']:.3g} GFLOP/s" for r in rows]
    else:
        rows = [r for r in report["results"] if r["gflops"] is not None]
        title = "Achieved GFLOP/s (this machine's peak was not measured)"
        axis, values = "GFLOP/s", [r["gflops"] for r in rows]
        text = [f"{v:.3g} GFLOP/s" for v in values]
    fig = go.Figure(
        go.Bar(
            x=[r["label"] for r in rows],
            y=values,
            text=text,
            textposition="outside",
            marker_color="#1565c0",
        )
    )
    fig.update_layout(title=title, yaxis_title=axis, height=380, margin={"t": 50, "b": 40})
    return fig


def _results_table(report: dict) -> str:
    if report.get("load"):
        return load_html(report["load"])
    speed = {c["candidate"]["trial_id"]: c["speedup"] for c in report["comparisons"]}
    head = (
        "<tr><th>config</th><th>role</th><th>status</th><th>n</th><th>p50 ms</th>"
        "<th>p50 95% CI</th><th>p90 ms</th><th>p99 ms</th><th>per s</th>"
        "<th>speedup</th><th>verdict</th><th>peak MB</th></tr>"
    )
    rows = []
    for r in report["results"]:
        lat = r["latency_ms"]
        sp = speed.get(r["trial_id"])
        ci = lat["p50_ci95"]
        cells = [
            r["label"],
            r["role"],
            r["status"],
            str(r["n"]),
            fmt(lat["p50"]),
            "-" if ci[0] is None else f"{fmt(ci[0])} .. {fmt(ci[1])}",
            fmt(lat["p90"]),
            fmt(lat["p99"]),
            fmt(r["throughput_per_s"], ".4g"),
            "-" if sp is None else _speedup_text(sp),
            "-" if sp is None else str(sp["verdict"]),
            _memory_cell(r.get("memory")),
        ]
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def _memory_cell(memory: dict | None) -> str:
    peak = (memory or {}).get("peak_rss_mb")
    if peak is None:
        return "-"
    return f"{peak:.0f}" + (" (deployed)" if memory.get("measured_in") == "deployed" else "")


def memory_figure(report: dict):
    """Speed against memory: one point per measured config, samples per second over its peak
    memory (a converted runtime's as deployed), so the cheap fast ones sit top left."""
    import plotly.graph_objects as go

    points = [r for r in report["results"]
              if (r.get("memory") or {}).get("peak_rss_mb") is not None and r["throughput_per_s"]]
    fig = go.Figure(
        go.Scatter(
            x=[r["memory"]["peak_rss_mb"] for r in points],
            y=[r["throughput_per_s"] for r in points],
            text=[r["label"] for r in points],
            mode="markers+text",
            textposition="top center",
        )
    )
    fig.update_layout(
        title="Speed and memory", xaxis_title="peak memory (MB)",
        yaxis_title="samples per second", margin={"t": 50, "b": 40},
    )
    return fig


def _speedup_text(sp: dict) -> str:
    low, high = sp["ci95"]
    if sp["median"] is None:
        return "-"
    return f"{sp['median']:.3f}x [{fmt(low, '.3f')}, {fmt(high, '.3f')}]"


def all_warnings(report: dict) -> list[str]:
    """Every warning of a report document, each prefixed with what it is about."""
    items = [f"run: {w}" for w in report["warnings"]]
    items += [f"{r['label']}: {w}" for r in report["results"] for w in r["warnings"]]
    items += [
        f"{c['candidate']['label']} vs {c['baseline']['label']}: {w}"
        for c in report["comparisons"]
        for w in c["warnings"]
    ]
    return items


def _warnings_html(report: dict) -> str:
    items = all_warnings(report)
    if not items:
        return "<p class='meta'>No quality warnings.</p>"
    return "<ul class='warn'>" + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>"


def _answer_html(report: dict) -> str:
    """The answer, before the evidence. A tune: what to use, the confirmed speedup and its
    interval, the error, what adopting it takes and the command (or which case a "keep the
    default" is). A bench or compare: each candidate's speedup over its baseline and verdict,
    or, with one config, its median time and rate. A pipeline: its verdict, bounding stage,
    headline, best fix and the fixes that went unmeasured, most promising first."""
    summary = report["run"].get("summary") or {}
    rec = summary.get("recommendation")
    if report["run"].get("kind") == "tune" and rec:
        return _tune_answer(summary, rec)
    if report["run"].get("kind") == "pipeline" and summary.get("best_fix"):
        return _pipeline_answer(summary)
    if report["comparisons"]:
        return _answer_table([
            (f"{c['candidate']['label']} vs {c['baseline']['label']}",
             f"{_speedup_text(c['speedup'])} ({c['speedup']['verdict']})")
            for c in report["comparisons"]
        ])
    return _answer_table([
        (r["label"], f"median {fmt(r['latency_ms'].get('p50'))} ms per call, "
                     f"{fmt(r['throughput_per_s'])} calls/s")
        for r in report["results"] if r["status"] == "ok" and r.get("latency_ms")
    ])


def _pipeline_answer(summary: dict) -> str:
    """A pipeline's answer: the headline, the best measured fix, the unmeasured ones ranked."""
    esc = html.escape
    best = summary["best_fix"]
    rows = [
        ("verdict", summary.get("verdict") or "unknown (no model)"),
        ("bounding stage", summary.get("bounding_stage")),
        ("answer", best.get("headline")),
    ]
    if best.get("name"):
        rows.append(("best fix", f"{best['name']} ({fmt(best.get('speedup'), '.2f')}x)"))
    out = _answer_table(rows)
    if best.get("name"):
        out += f"<pre>{esc(best.get('change') or '')}</pre>"
    unmeasured = best.get("unmeasured") or []
    if unmeasured:
        items = "".join(
            f"<li><b>{esc(u['name'])}</b> ({esc(u.get('stage') or '-')}): "
            f"{esc(u['why_not_measured'])}<pre>{esc(u['change'] or '')}</pre></li>"
            for u in unmeasured
        )
        out += f"<h3>Not measured: these need your code (most promising first)</h3><ol>{items}</ol>"
    return out


def _answer_table(rows: list[tuple[str, object]]) -> str:
    if not rows:
        return ""
    esc = html.escape
    cells = "".join(f"<tr><th>{esc(k)}</th><td>{esc(str(v))}</td></tr>" for k, v in rows if v)
    return f"<h2>Answer</h2><table class='answer'>{cells}</table>"


def _tune_answer(summary: dict, rec: dict) -> str:
    """A tune's recommendation (or its "keep the default" and why)."""
    esc = html.escape
    if rec.get("serving"):
        return _server_answer(summary, rec)
    if rec.get("keep_default"):
        items = [f"<p><b>Keep the default.</b> {esc(str(rec.get('reason')))}.</p>"]
        why = rec.get("keep_default_why") or {}
        facts = [
            f"case: {why.get('case')}",
            f"rejected: {why.get('rejected')}",
            f"failed: {why.get('failed')}",
        ]
        best = why.get("best_rejected")
        if best:
            facts.append(
                f"fastest rejected: {best['label']} (about {fmt(best.get('speedup'), '.2f')}x, "
                f"max relative error {fmt(best.get('max_rel_error'))})"
            )
        if why.get("commonest_failure"):
            facts.append(f"commonest failure: {why['commonest_failure']}")
        items.append("<ul>" + "".join(f"<li>{esc(f)}</li>" for f in facts) + "</ul>")
        return "<h2>Answer</h2>" + "".join(items)
    speedup = rec.get("speedup") or {}
    profile = summary.get("profile")
    apply = f"tfperf run --profile {profile} -- python your_script.py" if profile else ""
    rows = [
        ("use", rec.get("label")),
        ("confirmed speedup (95% CI)", _speedup_text(speedup) if speedup else "-"),
        ("time per call", f"{fmt(rec.get('time_ms'))} ms"),
        ("max relative error", fmt(rec.get("max_rel_error"))),
        ("adopting it takes", rec.get("adoption_text")),
        ("profile", profile),
        ("apply with", apply),
    ]
    return _answer_table(rows)


def _server_answer(summary: dict, rec: dict) -> str:
    """A server tune's answer: the layout, its rate within the SLO beside the default's, the
    confirmation's ratio, and how to start it (or why the default is kept)."""
    serving = rec["serving"]
    slo = serving.get("slo_ms") or summary.get("slo_ms")
    default = ((summary.get("default") or {}).get("serving") or {}).get("max_qps_at_slo")
    within = f"requests/s within p99 {fmt(slo, 'g')} ms"
    profile = summary.get("profile")
    if rec.get("keep_default"):
        return _answer_table([
            ("answer", "keep the default (one instance, no batching)"),
            ("why", rec.get("reason")),
            (f"default's {within}", fmt(default, ".4g")),
        ])
    speedup = rec.get("speedup") or {}
    low, high = speedup.get("ci95") or [None, None]
    layout = (
        f"{serving['instances']} instance(s), {serving.get('threads') or 'default'} thread(s) "
        f"each, {'pinned' if serving.get('cores') else 'not pinned'}, dynamic batch "
        f"{serving['max_batch']} after at most {fmt(serving['max_delay_ms'], 'g')} ms"
    )
    return _answer_table([
        ("serve it as", rec.get("label")),
        ("layout", layout),
        (f"tuned {within}", fmt(serving.get("max_qps_at_slo"), ".4g")),
        (f"default's {within}", fmt(default, ".4g")),
        ("ratio (confirmation range)",
         f"{fmt(speedup.get('median'), '.2f')}x ({fmt(low, '.2f')}-{fmt(high, '.2f')})"),
        ("max relative error", fmt(rec.get("max_rel_error"))),
        ("profile", profile),
        ("start it with", f"tfperf run --profile {profile} -- python serve.py" if profile else ""),
        ("TensorFlow Serving", f"tfperf apply {profile} --format tf-serving" if profile else ""),
    ])


def _figures(report: dict, samples_ms: dict[int, list[float]]) -> list[tuple[str, Any, str]]:
    """(title, figure or ``None``, what to say without one) per section; a load run has only
    its load picture, other runs never have it."""
    if report.get("load"):
        return [("Latency under load", load_figure(report["load"]), "")]
    has_samples = any(samples_ms.get(r["trial_id"]) for r in report["results"])
    has_speedups = any(c["speedup"]["median"] is not None for c in report["comparisons"])
    has_peak = any(r["gflops"] is not None for r in report["results"])
    has_memory = sum(1 for r in report["results"]
                     if (r.get("memory") or {}).get("peak_rss_mb") and r["throughput_per_s"]) > 1
    train = ((report.get("run") or {}).get("summary") or {}).get("train")
    losses = [("Loss during the training guard", loss_figure(train), "")] if train else []
    return [
        *losses,
        (
            "Latency distribution",
            latency_figure(report, samples_ms) if has_samples else None,
            "No steady-state samples were recorded.",
        ),
        (
            "Speedups",
            speedup_figure(report) if has_speedups else None,
            "This run has no comparison.",
        ),
        (
            "Share of peak",
            peak_figure(report) if has_peak else None,
            "FLOP counts are unknown for this workload.",
        ),
        (
            "Speed and memory",
            memory_figure(report) if has_memory else None,
            "Fewer than two configs have both a speed and a memory figure.",
        ),
        *ops_sections(report),
    ]


def loss_figure(train: dict):
    """Did it still learn? The default's per-step loss during the guard against the chosen
    configuration's (and any other guarded candidate's, dotted), against the samples seen in
    steps of the default's batch (a candidate at another batch is drawn at equal samples)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    default = train.get("default_losses") or []
    fig.add_trace(go.Scatter(y=default, name="default", mode="lines"))
    chosen = train.get("chosen")
    ratios = train.get("batch_ratios") or {}
    for name, losses in (train.get("trajectories") or {}).items():
        line = {} if name == chosen else {"dash": "dot", "width": 1}
        ratio = float(ratios.get(name) or 1.0)
        x = [(i + 1) * ratio - 1 for i in range(len(losses))]
        fig.add_trace(go.Scatter(x=x, y=losses, name=name, mode="lines", line=line))
    fig.update_layout(xaxis_title="samples seen, in steps of the default's batch",
                      yaxis_title="loss of the step's batch", height=380)
    return fig


def render_html(report: dict, samples_ms: dict[int, list[float]] | None = None) -> str:
    """The report as one self-contained HTML page (plotly's JavaScript embedded).

    ``samples_ms`` maps trial ids to steady-state samples in milliseconds for the latency
    plot; without it the plot is left out.
    """
    import plotly.io as pio

    sections = _figures(report, samples_ms or {})
    parts = []
    first = True
    for title, fig, note in sections:
        parts.append(f"<h2>{html.escape(title)}</h2>")
        if fig is None:
            parts.append(f"<p class='note'>{html.escape(note)}</p>")
            continue
        parts.append(
            pio.to_html(
                fig,
                include_plotlyjs=first,
                full_html=False,
                config={"displaylogo": False, "responsive": True},
            )
        )
        first = False
    run = report["run"]
    title = f"tfperf run {run['id']}: {run['kind']}"
    meta = (
        f"{html.escape(str(run['command']))}<br>started {html.escape(str(run['started_at']))}, "
        f"status {html.escape(str(run['status']))}, workload "
        f"{html.escape(describe_workload(run.get('workload')))}"
    )
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p class='meta'>{meta}</p>{_answer_html(report)}"
        f"<h2>Results</h2>{_results_table(report)}<h2>Warnings</h2>{_warnings_html(report)}"
        f"{''.join(parts)}</body></html>\n"
    )


def describe_workload(workload: dict | None) -> str:
    """A short human name for a workload dictionary (``lstm (tiny, batch 1)``, ``model.keras``)."""
    if not workload:
        return "-"
    if workload.get("kind") == "pipeline":
        return f"input pipeline {workload.get('target')}"
    if workload.get("kind") == "builtin" or "name" in workload or "builtin" in workload:
        extra = [str(workload[k]) for k in ("size",) if workload.get(k)]
        if workload.get("batch"):
            extra.append(f"batch {workload['batch']}")
        name = workload.get("builtin") or workload.get("name")
        return str(name) + (f" ({', '.join(extra)})" if extra else "")
    if workload.get("path"):
        name = os.path.basename(str(workload["path"]).rstrip("/")) or str(workload["path"])
        return f"{name} ({workload.get('format', 'model')})"
    return ", ".join(f"{k}={v}" for k, v in workload.items())


def write_html(doc: dict, path: str | os.PathLike[str], report: dict | None = None) -> Path:
    """Write the HTML report of ``doc`` (``Store.load_run``'s dictionary) to ``path``.

    ``report`` is :func:`build_report`'s document when the caller has it already. Raises
    :class:`UserError` when the file cannot be written.
    """
    report = report if report is not None else build_report(doc)
    samples = {t["id"]: [s * 1e3 for s in t["samples_s"]] for t in doc["trials"]}
    text = render_html(report, samples)
    target = Path(path).expanduser()
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(
            f"cannot write the HTML report to {target} ({exc.strerror or exc}); "
            "pass a writable --html path."
        ) from exc
    return target


def table_page(
    title: str, meta: str, sections: list[tuple[str, list[str], list[list[str]]]]
) -> str:
    """A self-contained HTML page of plain tables in the report's style: ``sections`` are
    ``(heading, column names, rows of cells)``; every text is escaped (``tfperf fleet report``)."""
    parts = []
    for heading, columns, rows in sections:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>"
            for row in rows
        )
        table = f"<table><tr>{head}</tr>{body}</table>" if rows else "<p class='note'>none</p>"
        parts.append(f"<h2>{html.escape(heading)}</h2>{table}")
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p class='meta'>{html.escape(meta)}</p>"
        f"{''.join(parts)}</body></html>\n"
    )
