"""The answer of ``tfperf pipeline``: the best measured fix, what went unmeasured, and the
headline that says both (parent side, no TensorFlow).

Contract: :func:`best_fix` picks the significantly faster fix with the highest median speedup
(those whose 95% interval lies above 1 first) and carries the unmeasured fixes, ranked as the
worker ranked them (the bounding stage's first)::

    {"name": str|None, "change": str, "speedup", "ci95", "verdict",
     "unmeasured": [{"name", "change", "why_not_measured", "stage"}, ...],
     "headline": str}

The answer reads "keep the pipeline as it is" only when no measured fix was faster *and*
nothing that could address a stage went unmeasured; otherwise, with no measured winner, the
``change`` names the first unmeasured fix and its code. :func:`headline` is one paragraph: the
verdict when training is not input-bound, the bounding stage and what it costs per batch (and
that it runs Python), the measured fixes with their speedups, and the unmeasured ones in order;
with fewer rounds than a significant verdict needs, it says so rather than "keep".
"""

from __future__ import annotations

from tfperf.core.stats import MIN_PAIRS

KEEP = "keep the pipeline as it is: no fix was significantly faster"
SHOWN = 6
"""Measured fixes named in the headline (the fastest first; the table has them all)."""


def best_fix(measured: list[dict], unmeasured: list[dict] | None = None) -> dict:
    """The answer's fix (see the module docstring); ``unmeasured`` are the worker's advice
    items ``{"name", "change", "reason", "stage"}``, ranked.

    Fixes whose 95% interval lies above 1 come first: on a noisy machine a fix can pass the
    signed-rank test with an interval that still reaches below 1, and a higher median from such
    a fix is no reason to prefer it over one whose gain is sure.
    """
    ranked = [
        {
            "name": u["name"],
            "change": u.get("change") or "",
            "why_not_measured": u["reason"],
            "stage": u.get("stage"),
        }
        for u in unmeasured or []
    ]
    faster = [f for f in measured if f["verdict"] == "faster" and f["speedup"] is not None]
    sure = [f for f in faster if (f["ci95"][0] or 0.0) > 1.0]
    faster = sure or faster
    if faster:
        top = max(faster, key=lambda f: f["speedup"])
        found = {k: top[k] for k in ("name", "change", "speedup", "ci95", "verdict")}
    elif ranked:
        first = ranked[0]
        found = {
            "name": None,
            "change": (
                "no measured fix was significantly faster; the fixes that need your code went "
                f"unmeasured, most promising first: {first['name']}:\n{first['change']}"
            ),
            "speedup": None,
            "ci95": [None, None],
            "verdict": None,
        }
    else:
        found = {
            "name": None,
            "change": KEEP,
            "speedup": None,
            "ci95": [None, None],
            "verdict": None,
        }
    return {**found, "unmeasured": ranked}


def headline(doc: dict) -> str:
    """One paragraph for the report's top (see the module docstring); ``doc`` is the report
    with ``best_fix`` already set."""
    parts = []
    if doc.get("verdict") == "not_input_bound":
        parts.append(
            f"Training is not input-bound ({doc['input_share']:.0%} of the step waits for "
            "input): the pipeline does not limit it."
        )
    bounding = _bounding_sentence(doc.get("stages") or [])
    if bounding:
        parts.append(bounding)
    parts.append(_measured_sentence(doc))
    best = doc["best_fix"]
    few_rounds = int(doc.get("rounds") or 0) < MIN_PAIRS
    if best["name"] is None and few_rounds:
        parts.append(
            f"With {doc.get('rounds')} rounds no fix can be significantly faster: measure with "
            f"--rounds {MIN_PAIRS} or more."
        )
    if best["unmeasured"]:
        items = [
            f"{i}. {u['name']}" + (f" ({u['stage']})" if u.get("stage") else "")
            for i, u in enumerate(best["unmeasured"], 1)
        ]
        parts.append(
            "Not measured (they need your code), most promising first: " + ", ".join(items) + "."
        )
    elif best["name"] is None and not few_rounds:
        parts.append("Keep the pipeline as it is: no fix was significantly faster.")
    return " ".join(parts)


def _bounding_sentence(stages: list[dict]) -> str:
    row = next((s for s in stages if s.get("bounding")), None)
    if row is None:
        return ""
    text = f"{row['stage']} bounds throughput"
    total = sum(s.get("added_ms_per_batch") or 0.0 for s in stages)
    added = row.get("added_ms_per_batch")
    if added is not None and total > 0:
        text += f": it adds {added:.1f} ms per batch, {added / total:.0%} of what the stages add"
    if row.get("python_code"):
        text += (
            ", and it runs Python (parallel calls take turns on the GIL: do its work per "
            "batch or in TensorFlow ops)"
        )
    return text + "."


def _measured_sentence(doc: dict) -> str:
    measured = sorted(
        (f for f in doc["fixes"] if f.get("measured") and f.get("speedup") is not None),
        key=lambda f: -f["speedup"],
    )
    if not measured:
        return "No fix could be measured."
    named = ", ".join(f"{f['name']} {f['speedup']:.2f}x" for f in measured[:SHOWN])
    if len(measured) > SHOWN:
        named += f" and {len(measured) - SHOWN} more"
    best = doc["best_fix"]
    if best["name"] is None:
        return f"Measured end to end: {named}; none significantly faster."
    low, high = best["ci95"]
    return (
        f"Measured end to end: {named}; best: {best['name']}, {best['speedup']:.2f}x "
        f"(95% CI {low:.2f}..{high:.2f})."
    )
