"""Parent side of ``bench --ops``: reading a worker's op profile (``docs/ops.md``).

Contract:

- :func:`read_roofline` adds to a profile (``tfperf.worker.opprofile``'s record) what this
  machine's measured matmul peak and memory bandwidth (:mod:`tfperf.peak`) say about each op and
  op type whose FLOPs and bytes are known: ``intensity`` (FLOPs per byte), ``share_of_peak`` and
  ``bound`` (``"compute"`` when the intensity is above the ridge point peak / bandwidth, else
  ``"memory"``), and ``roofline: {"peak_gflops", "bandwidth_gbs", "ridge"}``.
- :func:`ops_lines` is the console's reading of one trial's profile.
- :func:`align_types` lines up two profiles by op family (:func:`family`: the same kind of
  work under each runtime's own type names) for ``tfperf compare`` and bench's own comparisons
  (:func:`ops_side_by_side`); :func:`moved_text` names the families that account for most of
  a change (tune's answer). A stand-in's profile (XLA AOT's: XLA JIT's of the same graph) has
  another runtime's milliseconds: set beside any profile, both are read in shares of their
  call only (:func:`stand_in_of`).

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

OPS_SECONDS = 1.0
"""Seconds of calls a worker profiles for ``--ops`` (and as many again unprofiled, to measure
the profiler's overhead): bench's, tune's and a load run's."""


def _reading(entry: dict[str, Any], peak_gflops: float | None, bandwidth: float | None,
             ridge: float | None) -> None:
    flops, moved, rate = entry.get("flops"), entry.get("bytes"), entry.get("gflops_per_s")
    if flops and moved:
        entry["intensity"] = flops / moved
        if ridge:
            entry["bound"] = "compute" if entry["intensity"] >= ridge else "memory"
    if rate and peak_gflops:
        entry["share_of_peak"] = rate / peak_gflops


def read_roofline(profile: dict[str, Any] | None, peak: Mapping[str, Any] | None,
                  precision: str = "fp32") -> dict[str, Any] | None:
    """``profile`` with each op's roofline reading against ``peak`` (see the module docstring)."""
    if not profile or not profile.get("available"):
        return profile
    key = "bf16_gflops" if precision in ("bf16", "mixed_bfloat16") else "fp32_gflops"
    peak_gflops = (peak or {}).get(key) or (peak or {}).get("fp32_gflops")
    bandwidth = (peak or {}).get("bandwidth_gbs")
    ridge = peak_gflops / bandwidth if peak_gflops and bandwidth else None
    for entry in [*profile.get("ops", []), *profile.get("op_types", [])]:
        _reading(entry, peak_gflops, bandwidth, ridge)
    profile["roofline"] = {"peak_gflops": peak_gflops, "bandwidth_gbs": bandwidth,
                           "ridge": ridge}
    return profile


def _fmt_type(t: Mapping[str, Any]) -> str:
    rate = f", {t['gflops_per_s']:.3g} GFLOP/s" if t.get("gflops_per_s") else ""
    bound = f", {t['bound']}-bound" if t.get("bound") else ""
    return f"{t['type']} {t['self_share']:.0%} ({t['self_ms']:.3g} ms{rate}{bound})"


def ops_lines(result: Mapping[str, Any], types: int = 6) -> list[str]:
    """The console's lines for one result's op profile (none without ``--ops``)."""
    profile = result.get("ops")
    if not profile:
        return []
    label = result.get("label", "")
    if not profile.get("available"):
        return [f"{label}: no op profile: {profile.get('reason')}"]
    lines = []
    if profile.get("stand_in"):
        lines.append(f"{label}: STAND-IN: {profile['stand_in']}")
    overhead = profile.get("profiler_overhead")
    cost = f", profiler +{overhead:.0%}" if overhead is not None else ""
    shown = ", ".join(_fmt_type(t) for t in profile["op_types"][:types])
    lines.append(f"{label}: op types ({profile['source']}{cost}): {shown}")
    top = [o for o in profile["ops"] if o["type"] not in ("overhead", "rest")][:3]
    if top:
        named = ", ".join(f"{o.get('layer') or o['name']} ({o['type']}) {o['self_share']:.0%}"
                          for o in top)
        lines.append(f"{label}: top ops: {named}")
    return lines


FAMILIES = (
    ("overhead", r"^overhead$"),
    ("depthwise conv", r"depthwise|groupconv"),
    ("conv", r"conv"),
    ("matmul", r"matmul|fullyconnected|^dot$|einsum|gemm"),
    ("elementwise", r"^(_?fused)?(mul|multiply|addv?2?|sub|subtract|biasadd|relu6?|clamp|"
                    r"sigmoid|tanh|gelu|swish|maximum|minimum|eltwise|erf|exp|sqrt|rsqrt|"
                    r"div|divide|realdiv|pow|powerstatic|square|fusion|add_fusion)$"),
    ("layout and copies", r"pad|transpose|reshape|reorder|concat|slice|gather|squeeze|"
                          r"identity|copy|convert|cast|broadcast"),
    ("pooling and reductions", r"pool|mean|reduce|^sum$|^max$"),
    ("softmax and norms", r"softmax|norm|mvn|squareddifference"),
    ("variables and inputs", r"readvariableop|const|parameter|result"),
)
"""Op families: the same kind of work under each runtime's own name (TensorFlow's
``_MklNativeFusedConv2D``, OpenVINO's ``Convolution``, XLA's ``convolution``), so that two
runtimes' profiles line up; any other type is ``other``."""


def family(kind: str) -> str:
    """The family of op type ``kind`` (:data:`FAMILIES`)."""
    for name, pattern in FAMILIES:
        if re.search(pattern, kind, re.I):
            return name
    return "other"


def _by_family(profile: Mapping[str, Any] | None) -> dict[str, tuple[float, float, list[str]]]:
    """Each family's (ms, share of the call, the runtime's own type names in it)."""
    if not profile or not profile.get("available"):
        return {}
    out: dict[str, tuple[float, float, list[str]]] = {}
    for t in profile.get("op_types", []):
        ms, share, kinds = out.get(family(t["type"]), (0.0, 0.0, []))
        out[family(t["type"])] = (ms + float(t["self_ms"]), share + float(t["self_share"]),
                                  [*kinds, t["type"]])
    return out


def stand_in_of(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> str | None:
    """The stand-in either profile is (XLA AOT's: XLA JIT's profile of the same graph), whose
    milliseconds are another runtime's: then two profiles are compared in shares only."""
    return (a or {}).get("stand_in") or (b or {}).get("stand_in")


def align_types(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The op families of two profiles side by side, biggest move first: ``{"family", "a_ms",
    "b_ms", "delta_ms", "share_of_change", "a_share", "b_share", "delta_share", "a_types",
    "b_types"}`` (a family one side lacks counts 0 there; ``*_share`` is the family's share of
    that side's call; ``*_types`` are the runtime's own type names in it). When either side is a
    stand-in (:func:`stand_in_of`) its milliseconds are not its runtime's: that side's ms,
    ``delta_ms`` and ``share_of_change`` are ``None`` and the rows are ordered by share."""
    fa, fb = _by_family(a), _by_family(b)
    if not fa or not fb:
        return []
    a_real, b_real = not (a or {}).get("stand_in"), not (b or {}).get("stand_in")
    by_ms = a_real and b_real
    total = sum(v[0] for v in fb.values()) - sum(v[0] for v in fa.values())
    rows = []
    for name in dict.fromkeys([*fa, *fb]):
        a_ms, a_share, a_types = fa.get(name, (None, 0.0, []))
        b_ms, b_share, b_types = fb.get(name, (None, 0.0, []))
        delta = (b_ms or 0.0) - (a_ms or 0.0)
        rows.append({"family": name, "a_ms": a_ms if a_real else None,
                     "b_ms": b_ms if b_real else None, "delta_ms": delta if by_ms else None,
                     "share_of_change": delta / total if total and by_ms else None,
                     "a_share": a_share, "b_share": b_share, "delta_share": b_share - a_share,
                     "a_types": a_types, "b_types": b_types})
    key = "delta_ms" if by_ms else "delta_share"
    return sorted(rows, key=lambda r: -abs(r[key]))


def moved_text(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None, n: int = 3) -> str | None:
    """One sentence naming the op families that account for most of the change from profile
    ``a`` to profile ``b`` (``None`` when either has no profile); in shares of each call when
    either is a stand-in, whose milliseconds are another runtime's."""
    rows = align_types(a, b)
    if not rows:
        return None
    if stand_in_of(a, b):
        moved = [r for r in rows if r["delta_share"]][:n]
        named = ", ".join(f"{r['family']} ({r['a_share']:.0%} -> {r['b_share']:.0%})"
                          for r in moved)
        return (f"in shares of each call, the most moved in {named} (XLA AOT has no profiler: "
                "its shares are XLA JIT's for the same graph, and its milliseconds are not "
                "compared)")
    total = sum(r["delta_ms"] for r in rows)
    word = "gain" if total < 0 else "loss"
    same_sign = [r for r in rows if r["delta_ms"] * total > 0][:n]
    named = ", ".join(f"{r['family']} ({r['delta_ms']:+.3g} ms)" for r in same_sign)
    return f"most of the {word} ({total:+.3g} ms per call) is in {named}"


def ops_side_by_side(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> dict[str, Any]:
    """A comparison's ``ops`` entry when both sides were profiled: ``{"ops": {"families":
    align_types(a, b), "moved": moved_text(a, b)}}``; ``{}`` otherwise."""
    rows = align_types(a, b)
    return {"ops": {"families": rows, "moved": moved_text(a, b)}} if rows else {}


def side_by_side_lines(comparison: Mapping[str, Any], a: str, b: str, n: int = 5) -> list[str]:
    """The console's lines for a comparison's op types (none without both profiles)."""
    ops = comparison.get("ops")
    if not ops:
        return []
    rows = ops["families"][:n]
    if any(r.get("delta_ms") is None for r in rows):  # a stand-in's side: shares only
        cells = [f"{r['family']} {r['a_share']:.0%} -> {r['b_share']:.0%}" for r in rows]
    else:
        cells = [f"{r['family']} {_ms(r['a_ms'])} -> {_ms(r['b_ms'])} ms" for r in rows]
    return [f"{comparison[a]} -> {comparison[b]}: {ops['moved']}; " + ", ".join(cells)]


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


# ----------------------------------------------------------------------------- pictures
def _profiled(report: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(label, profile) of each result of a report whose trial was profiled."""
    out = []
    for result in report.get("results", []):
        profile = (result.get("info") or {}).get("ops")
        if profile and profile.get("available"):
            suffix = " (stand-in: XLA JIT)" if profile.get("stand_in") else ""
            out.append((f"{result['label']}{suffix}", profile))
    return out


def shares_figure(profiled: list[tuple[str, dict[str, Any]]]) -> Any:
    """Each runtime's shares of its call by op family (:func:`family`), as stacked bars side
    by side; the hover names the runtime's own op types in each."""
    import plotly.graph_objects as go

    per_run = []
    for _label, profile in profiled:
        shares: dict[str, list[Any]] = {}
        for t in profile["op_types"]:
            entry = shares.setdefault(family(t["type"]), [0.0, []])
            entry[0] += t["self_share"]
            entry[1].append(t["type"])
        per_run.append(shares)
    order = [name for name, _ in FAMILIES] + ["other"]
    labels = [label for label, _ in profiled]
    fig = go.Figure()
    for name in order:
        if not any(name in shares for shares in per_run):
            continue
        fig.add_bar(name=name, x=labels, y=[s.get(name, [0.0])[0] for s in per_run],
                    customdata=[", ".join(s.get(name, [0.0, []])[1][:6]) for s in per_run],
                    hovertemplate="%{x}: %{y:.1%} (%{customdata})")
    fig.update_layout(barmode="stack", yaxis={"title": "share of one call", "tickformat": ".0%"},
                      height=420, legend={"title": "op family"})
    return fig


def roofline_figure(profiled: list[tuple[str, dict[str, Any]]]) -> Any:
    """Achieved GFLOP/s against FLOPs per byte, one point per op type and runtime, under this
    machine's measured peak and bandwidth lines."""
    import plotly.graph_objects as go

    fig = go.Figure()
    xs = []
    for label, profile in profiled:
        points = [t for t in profile["op_types"] if t.get("intensity") and t.get("gflops_per_s")]
        xs += [t["intensity"] for t in points]
        fig.add_scatter(x=[t["intensity"] for t in points], y=[t["gflops_per_s"] for t in points],
                        mode="markers+text", name=label, text=[t["type"] for t in points],
                        textposition="top center")
    roof = next((p.get("roofline") for _, p in profiled if p.get("roofline")), None) or {}
    peak, bandwidth = roof.get("peak_gflops"), roof.get("bandwidth_gbs")
    if peak and bandwidth and xs:
        low, high = min([*xs, peak / bandwidth]) / 4, max([*xs, peak / bandwidth]) * 4
        fig.add_scatter(x=[low, peak / bandwidth, high], y=[bandwidth * low, peak, peak],
                        mode="lines", name=f"roof: {bandwidth:.3g} GB/s, {peak:.3g} GFLOP/s",
                        line={"dash": "dash", "color": "#555"})
    fig.update_layout(xaxis={"type": "log", "title": "FLOPs per byte (layer's minimum traffic)"},
                      yaxis={"type": "log", "title": "achieved GFLOP/s"}, height=460)
    return fig


def ops_sections(report: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
    """The HTML report's op sections (none for a run measured without ``--ops``)."""
    profiled = _profiled(report)
    if not profiled:
        return []
    has_points = any(t.get("intensity") for _, p in profiled for t in p["op_types"])
    return [
        ("Where the time goes (op families)", shares_figure(profiled), ""),
        ("Roofline (op types)", roofline_figure(profiled) if has_points else None,
         "No op type has both a FLOP count and a byte count."),
    ]
