"""Two load runs compared: their levels lined up and the highest rate within the SLO of each.

Contract:

- :func:`compare_load` takes two :class:`~tfperf.report.export.RunResult` s of kind ``load``
  (a layout tfperf served, or a server the user runs: any mix) and returns the document
  ``tfperf compare A B`` prints (``kind: "compare-load"``). Servers are paired by label when
  both runs measured the same ones; otherwise A's best (highest rate within its SLO, else its
  first) is paired with B's best. For each pair: ``levels`` lined up (closed levels by
  concurrency, open ones by offered rate within :data:`RATE_MATCH` of each other; a level
  with no partner is listed alone), each side's ``max_qps_at_slo``, ``ratio`` (B's over A's)
  and ``verdict``.
- **The regression rule** for the highest rate within the SLO (``verdict: "slower"``, listed in
  ``regressions`` so that ``--fail-on-regression`` exits 1): both runs were searched at the
  same SLO, A met it at some rate, and either B met it at none, or B's rate is lower than A's
  by more than ``threshold`` (a share, ``--threshold``), B met the SLO at no offered rate as
  high as the one A's answer was offered (the achieved rates of two levels offered the same
  rate differ by noise alone), **and** B showed it: one of B's open
  levels offered at most A's rate (times 1 + threshold) missed the SLO (p99 over it, or more
  than 1% failed or timed out; a level whose p99 does not stand on enough requests is evidence
  of nothing), or had its p99 interval wholly above the p99 interval of A's answering
  level. A lower rate without such a level is ``inconclusive``. Above A's by more than the
  threshold is ``faster``; within it ``same``. Without an SLO in both, or with different SLOs,
  the verdict is ``inconclusive`` and a warning says why.
- A run without load levels beside one with them raises :class:`~tfperf.core.errors.UserError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tfperf.core.errors import UserError

RATE_MATCH = 0.05
"""Open levels of A and B whose offered rates differ by at most this share are lined up."""
MAX_FAILED_SHARE = 0.01
"""As :data:`tfperf.serving.levels.MAX_FAILED_SHARE`: a level failing (or timing out) more is
not within."""


def _within(level: Mapping[str, Any], slo_ms: float) -> bool:
    p99 = level.get("p99_ms")
    sent = level.get("sent") or 0
    failed = (level.get("failed") or 0) + (level.get("timed_out") or 0)
    return p99 is not None and sent > 0 and p99 <= slo_ms and failed <= MAX_FAILED_SHARE * sent


def _best(sections: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    answered = [s for s in sections if s.get("max_qps_at_slo") is not None]
    return max(answered, key=lambda s: s["max_qps_at_slo"]) if answered else sections[0]


def _pairs(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> list[tuple[Any, Any]]:
    labels_a = [s["layout_label"] for s in a]
    if sorted(labels_a) == sorted(s["layout_label"] for s in b):
        by_label = {s["layout_label"]: s for s in b}
        return [(s, by_label[s["layout_label"]]) for s in a]
    return [(_best(a), _best(b))]


def _key(level: Mapping[str, Any]) -> tuple[str, float]:
    if level.get("scenario") == "closed":
        return ("closed", float(level.get("concurrency") or 0))
    return ("open", float(level.get("offered_qps") or 0.0))


def line_up(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A's and B's levels side by side (module docstring), in A's order then B's leftovers."""
    left = list(b)
    rows = []
    for level in a:
        kind, x = _key(level)
        match = None
        for other in left:
            okind, ox = _key(other)
            if okind == kind and (ox == x if kind == "closed" else abs(ox - x) <= RATE_MATCH * x):
                match = other
                break
        if match is not None:
            left.remove(match)
        rows.append({"load": _load(level), "a": level, "b": match})
    rows += [{"load": _load(level), "a": None, "b": level} for level in left]
    return rows


def _load(level: Mapping[str, Any]) -> str:
    if level.get("scenario") == "closed":
        return f"c={level.get('concurrency')}"
    return f"{float(level.get('offered_qps') or 0.0):.4g}/s"


def _answer_level(section: Mapping[str, Any]) -> Mapping[str, Any] | None:
    slo = section.get("slo_ms")
    opened = [lv for lv in section["levels"] if lv.get("scenario") == "open"]
    within = [lv for lv in opened or section["levels"] if slo is not None and _within(lv, slo)]
    if not within:
        return None
    return max(within, key=lambda lv: (lv.get("offered_qps") or 0.0, lv.get("concurrency") or 0))


def _b_showed_it(a: Mapping[str, Any], b: Mapping[str, Any], threshold: float) -> bool:
    """Whether one of B's open levels at or below A's rate missed the SLO or had its p99
    interval wholly above A's (the regression rule's evidence)."""
    slo = float(a["slo_ms"])
    answer = _answer_level(a)
    if answer is None:
        return False
    rate = float(answer.get("offered_qps") or answer.get("achieved_qps") or 0.0)
    a_high = (answer.get("p99_ci_ms") or [None, None])[1]
    for level in b["levels"]:
        if level.get("scenario") != "open" or float(level["offered_qps"]) > rate * (1 + threshold):
            continue
        if level.get("p99_ms") is None:  # too few requests for its p99: evidence of nothing
            continue
        b_low = (level.get("p99_ci_ms") or [None, None])[0]
        if not _within(level, slo) or (a_high is not None and b_low is not None and b_low > a_high):
            return True
    return False


def _offered(section: Mapping[str, Any]) -> float:
    """The offered rate of the level that answered (0 for a closed one): what the server was
    asked to take and took within the SLO."""
    answer = _answer_level(section)
    return float((answer or {}).get("offered_qps") or 0.0)


def verdict(a: Mapping[str, Any], b: Mapping[str, Any], threshold: float) -> tuple[str, str | None]:
    """The verdict of B's highest rate within the SLO against A's, and a warning if any."""
    slo_a, slo_b = a.get("slo_ms"), b.get("slo_ms")
    if slo_a is None or slo_b is None:
        return "inconclusive", "give both runs --slo-ms to compare their rates within it"
    if abs(slo_a - slo_b) > 1e-9:
        return "inconclusive", f"the runs' SLOs differ (A {slo_a:g} ms, B {slo_b:g} ms)"
    rate_a, rate_b = a.get("max_qps_at_slo"), b.get("max_qps_at_slo")
    if rate_a is None:
        return ("faster" if rate_b is not None else "same"), None
    if rate_b is None:
        return "slower", None
    if rate_b > rate_a * (1 + threshold):
        return "faster", None
    if rate_b >= rate_a * (1 - threshold) or _offered(b) >= _offered(a):
        return "same", None
    if _b_showed_it(a, b, threshold):
        return "slower", None
    return "inconclusive", (
        f"B's rate within the SLO is lower, but none of its levels at or below A's rate missed "
        f"the SLO ({b['layout_label']})"
    )


def compare_load(a: Any, b: Any, threshold: float) -> dict[str, Any]:
    """Compare load run B against load run A (module docstring)."""
    if not a.load or not b.load:
        plain = a.origin if not a.load else b.origin
        raise UserError(
            f"{plain} has no load levels: compare a load run (tfperf bench --url, --rate, "
            "--slo-ms) with another load run."
        )
    comparisons, warnings = [], []
    for sa, sb in _pairs(a.load, b.load):
        said, warning = verdict(sa, sb, threshold)
        rate_a, rate_b = sa.get("max_qps_at_slo"), sb.get("max_qps_at_slo")
        comparisons.append({
            "label_a": sa["layout_label"],
            "label_b": sb["layout_label"],
            "slo_ms": sa.get("slo_ms") if sa.get("slo_ms") == sb.get("slo_ms") else None,
            "max_qps_at_slo_a": rate_a,
            "max_qps_at_slo_b": rate_b,
            "ratio": rate_b / rate_a if rate_a and rate_b is not None else None,
            "verdict": said,
            "levels": line_up(sa["levels"], sb["levels"]),
        })
        if warning:
            warnings.append(warning)
    return {
        "kind": "compare-load",
        "run_a": a.run.get("id"),
        "run_b": b.run.get("id"),
        "source_a": a.origin,
        "source_b": b.origin,
        "threshold": threshold,
        "comparisons": comparisons,
        "regressions": [c["label_b"] for c in comparisons if c["verdict"] == "slower"],
        "warnings": warnings,
    }
