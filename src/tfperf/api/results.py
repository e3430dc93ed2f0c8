"""What the library API returns: one typed, frozen result per command.

Contract: every result wraps the very document the command prints with ``--json``
(:meth:`Result.to_dict` returns a deep copy of it, :meth:`Result.to_json` its JSON text), so a
script can move between the command line and the library without translating anything. Each
result adds typed properties for what its users read most (the recommendation of a tune, the
rows of a bench), a one-line ``repr`` that says the answer, and an HTML view for notebooks
(``_repr_html_``). Results never hold live objects (stores, workers): they can be pickled and
kept.
"""

from __future__ import annotations

import copy
import html
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from tfperf.core.strictjson import to_json
from tfperf.report.console import speedup_text


@dataclass(frozen=True, repr=False)
class Result:
    """A command's document (``doc``), the same as its ``--json`` output."""

    doc: Mapping[str, Any]
    command: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        """A deep copy of the document (changing it leaves the result as it was)."""
        return copy.deepcopy(dict(self.doc))

    def to_json(self) -> str:
        """The document as JSON text, as ``--json`` prints it (non-finite numbers: ``null``)."""
        return to_json(dict(self.doc))

    @property
    def run_id(self) -> int | None:
        """The id of the stored run (``tfperf report RUN``), when the command stores one."""
        return self.doc.get("run_id")

    def summary(self) -> str:
        """One line: the answer."""
        return f"{self.command} run {self.run_id}"

    def rows(self) -> list[tuple[str, str]]:
        """``(name, value)`` pairs for the HTML view, answer first."""
        return []

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.summary()}>"

    def _repr_html_(self) -> str:
        cells = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
            for k, v in self.rows()
        )
        return (
            f"<div><strong>tfperf {html.escape(self.command)}</strong>: "
            f"{html.escape(self.summary())}<table>{cells}</table></div>"
        )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g} ms"


@dataclass(frozen=True)
class Recommendation:
    """Tune's answer: what to use, how much faster it is, and what adopting it takes."""

    keep_default: bool
    label: str
    config: Mapping[str, Any]
    speedup: float | None
    """The confirmed median speedup over the default (``None`` when keeping the default)."""
    ci95: tuple[float | None, float | None]
    max_rel_error: float | None
    adoption: str
    reason: str
    kept: tuple[str, ...] = ()
    """Why each knob of the answer is in it: the measurement of the answer without it."""
    pruned: tuple[str, ...] = ()
    """Why each knob the search took is not: the measurement that let it go."""


@dataclass(frozen=True, repr=False)
class TuneResult(Result):
    """The result of :func:`tfperf.tuning`."""

    command: ClassVar[str] = "tune"

    @property
    def recommendation(self) -> Recommendation:
        rec = self.doc["recommendation"]
        speedup = rec.get("speedup") or {}
        low, high = speedup.get("ci95") or [None, None]
        return Recommendation(
            keep_default=bool(rec["keep_default"]),
            label=rec["label"],
            config=dict(rec.get("config") or {}),
            speedup=None if rec["keep_default"] else speedup.get("median"),
            ci95=(low, high),
            max_rel_error=rec.get("max_rel_error"),
            adoption=rec.get("adoption_text") or "",
            reason=rec.get("reason") or "",
            kept=tuple(e["why"] for e in rec.get("kept") or ()),
            pruned=tuple(e["why"] for e in rec.get("pruned") or ()),
        )

    @property
    def profile(self) -> str | None:
        """The saved profile (apply it with ``tfperf run --profile PROFILE -- CMD``)."""
        return self.doc.get("profile")

    def summary(self) -> str:
        rec = self.recommendation
        if rec.keep_default:
            return f"keep the default ({rec.reason})"
        return f"use {rec.label}: {speedup_text(self.doc['recommendation']['speedup'])} faster"

    def rows(self) -> list[tuple[str, str]]:
        rec = self.recommendation
        raw = self.doc["recommendation"]
        if raw.get("serving"):  # a server tune: requests per second within the SLO
            qps = (self.doc["default"]["serving"]["max_qps_at_slo"],
                   raw["serving"]["max_qps_at_slo"])
            shown = " -> ".join("-" if not q else f"{q:.4g}" for q in qps)
            what = (f"req/s within p99 {self.doc.get('slo_ms'):g} ms", shown)
        else:
            times = (_ms(self.doc["default"].get("time_ms")), _ms(raw.get("time_ms")))
            what = ("time", " -> ".join(times))
        return [
            ("answer", "keep the default" if rec.keep_default else f"use {rec.label}"),
            ("speedup (95% CI)", speedup_text(None if rec.keep_default else raw["speedup"])),
            what,
            ("max rel error", "-" if rec.max_rel_error is None else f"{rec.max_rel_error:.2g}"),
            ("adopting it takes", rec.adoption or "-"),
            ("apply", f"tfperf run --profile {self.profile} -- python your_script.py"),
            ("trials", str(self.doc.get("trials"))),
            ("run", str(self.run_id)),
        ]


@dataclass(frozen=True)
class BenchRow:
    """One measured config of a bench."""

    label: str
    status: str
    p50_ms: float | None
    p99_ms: float | None
    samples_per_s: float | None


@dataclass(frozen=True, repr=False)
class BenchResult(Result):
    """The result of :func:`tfperf.benchmark` (and of a measuring :func:`tfperf.compare`)."""

    command: ClassVar[str] = "bench"

    @property
    def results(self) -> list[BenchRow]:
        return [
            BenchRow(
                label=r["label"],
                status=r["status"],
                p50_ms=(r.get("latency_ms") or {}).get("p50"),
                p99_ms=(r.get("latency_ms") or {}).get("p99"),
                samples_per_s=r.get("throughput_per_s"),
            )
            for r in self.doc.get("results", [])
        ]

    @property
    def speedups(self) -> list[Mapping[str, Any]]:
        """Each candidate against the baseline: ``speedup`` (median, ci95, verdict)."""
        return list(self.doc.get("comparisons", []))

    def summary(self) -> str:
        parts = [f"{r.label} p50 {_ms(r.p50_ms)}" for r in self.results]
        parts += [
            f"{c['candidate']}: {speedup_text(c['speedup'])} {c['speedup']['verdict']}"
            for c in self.speedups
        ]
        return f"run {self.run_id}: " + "; ".join(parts)

    def rows(self) -> list[tuple[str, str]]:
        rows = [
            (r.label, f"p50 {_ms(r.p50_ms)}, p99 {_ms(r.p99_ms)} ({r.status})")
            for r in self.results
        ]
        rows += [
            (f"{c['candidate']} vs {c['baseline']}", speedup_text(c["speedup"]))
            for c in self.speedups
        ]
        return rows


@dataclass(frozen=True, repr=False)
class CompareResult(Result):
    """The result of :func:`tfperf.compare` given two runs (or result files)."""

    command: ClassVar[str] = "compare"

    @property
    def regressions(self) -> list[str]:
        """The configs of B significantly slower than A."""
        return list(self.doc.get("regressions", []))

    def summary(self) -> str:
        pairs = [
            f"{c['label_b']}: {speedup_text(c['speedup'])} {c['speedup']['verdict']}"
            for c in self.doc.get("comparisons", [])
        ]
        return f"{self.doc.get('run_a')} vs {self.doc.get('run_b')}: " + "; ".join(pairs)

    def rows(self) -> list[tuple[str, str]]:
        return [
            (c["label_b"], f"{speedup_text(c['speedup'])} {c['speedup']['verdict']}")
            for c in self.doc.get("comparisons", [])
        ] + [("warning", w) for w in self.doc.get("warnings", [])]


@dataclass(frozen=True, repr=False)
class DoctorResult(Result):
    """The result of :func:`tfperf.diagnosis`: the machine, the install and the findings."""

    command: ClassVar[str] = "doctor"

    @property
    def findings(self) -> list[Mapping[str, Any]]:
        """Each finding: ``id``, ``severity``, ``title``, ``evidence``, ``fix``."""
        return list(self.doc.get("findings") or [])

    def summary(self) -> str:
        ids = ", ".join(f"{f['id']} ({f['severity']})" for f in self.findings)
        return f"{len(self.findings)} finding(s)" + (f": {ids}" if ids else "")

    def rows(self) -> list[tuple[str, str]]:
        return [(f"{f['severity']}: {f['id']}", f"{f['title']} - fix: {f['fix']}")
                for f in self.findings]


@dataclass(frozen=True, repr=False)
class PipelineResult(Result):
    """The result of :func:`tfperf.input_pipeline`: the input pipeline's verdict and best fix."""

    command: ClassVar[str] = "pipeline"

    def summary(self) -> str:
        best = self.doc.get("best_fix") or {}
        answer = best.get("headline") or best.get("change") or "no fix measured"
        return f"{self.doc.get('verdict')}; {answer}"

    def rows(self) -> list[tuple[str, str]]:
        best = self.doc.get("best_fix") or {}
        unmeasured = ", ".join(u["name"] for u in best.get("unmeasured") or []) or "-"
        return [("verdict", str(self.doc.get("verdict"))),
                ("bounding stage", str(self.doc.get("bounding_stage"))),
                ("best fix", str(best.get("change") or "-")),
                ("not measured (needs your code)", unmeasured),
                ("run", str(self.run_id))]


@dataclass(frozen=True, repr=False)
class HistoryResult(Result):
    """The result of :func:`tfperf.history`: the runs of a store (``runs``), or with ``run``
    the trials of that run (``trials``)."""

    command: ClassVar[str] = "history"

    @property
    def runs(self) -> list[Mapping[str, Any]]:
        """Each run, newest first: ``id``, ``kind``, ``command``, ``status``, ``trials``..."""
        return list(self.doc.get("runs") or [])

    @property
    def trials(self) -> list[Mapping[str, Any]]:
        """With ``run``, each of its trials: ``label``, ``status``, ``p50_ms``, ``error``..."""
        return list(self.doc.get("trials") or [])

    @property
    def run_id(self) -> int | None:
        return (self.doc.get("run") or {}).get("id")

    def summary(self) -> str:
        if "run" in self.doc:
            return f"run {self.run_id}: {len(self.trials)} trial(s)"
        return f"{len(self.runs)} run(s) in {self.doc.get('store')}"

    def rows(self) -> list[tuple[str, str]]:
        if "run" in self.doc:
            return [(t["label"], f"{t['status']}, p50 {_ms(t.get('p50_ms'))}")
                    for t in self.trials]
        return [(f"run {r['id']}", f"{r['kind']} {r['status']}: {r['command']}")
                for r in self.runs]


@dataclass(frozen=True, repr=False)
class ReportResult(Result):
    """The result of :func:`tfperf.report`: one run's results, speedups and warnings, and the
    HTML report's path (``html``) when one was written."""

    command: ClassVar[str] = "report"

    @property
    def run_id(self) -> int | None:
        return self.doc["run"]["id"]

    @property
    def html(self) -> str | None:
        """The HTML report written (``html=PATH``), else ``None``."""
        return self.doc.get("html")

    @property
    def warnings(self) -> list[str]:
        return list(self.doc.get("warnings") or [])

    def summary(self) -> str:
        run = self.doc["run"]
        return f"run {run['id']} ({run['kind']}, {run['status']}): {len(self.doc['results'])} " \
               f"config(s), {len(self.warnings)} warning(s)"

    def rows(self) -> list[tuple[str, str]]:
        rows = [(f"{c['candidate']['label']} vs {c['baseline']['label']}",
                 f"{speedup_text(c['speedup'])} {c['speedup']['verdict']}")
                for c in self.doc.get("comparisons") or []]
        return rows + [("warning", w) for w in self.warnings] + [("html", self.html or "-")]


@dataclass(frozen=True, repr=False)
class ApplyResult(Result):
    """The result of :func:`tfperf.apply`: how to adopt a profile, in one ``format`` (``text``,
    what ``tfperf apply PROFILE --format FORMAT`` prints), and the profile's mismatch warnings
    (tuned on another machine or TensorFlow)."""

    command: ClassVar[str] = "apply"

    @property
    def text(self) -> str:
        return str(self.doc["text"])

    @property
    def warnings(self) -> list[str]:
        return list(self.doc.get("warnings") or [])

    def summary(self) -> str:
        lines = len(self.text.splitlines())
        return f"{self.doc['format']} of {self.doc['profile']} ({lines} lines)"

    def rows(self) -> list[tuple[str, str]]:
        return [("format", str(self.doc["format"])), ("profile", str(self.doc["profile"])),
                *(("warning", w) for w in self.warnings), ("text", self.text)]


@dataclass(frozen=True, repr=False)
class LoadResult(Result):
    """The result of :func:`tfperf.bench` under load (``concurrency``, ``rate`` or ``slo_ms``):
    each layout's levels and, with an SLO, the highest rate whose p99 stayed within it."""

    command: ClassVar[str] = "bench"

    @property
    def layouts(self) -> list[Mapping[str, Any]]:
        """Each layout measured, with its ``levels`` (rate, p50/p99, errors...)."""
        return list(self.doc.get("layouts") or [])

    @property
    def max_qps_at_slo(self) -> float | None:
        return self.doc.get("max_qps_at_slo")

    def summary(self) -> str:
        if self.doc.get("slo_ms") is None:
            return f"run {self.run_id}: {len(self.layouts)} layout(s) under load"
        best = self.max_qps_at_slo
        answer = "no level met it" if best is None else \
            f"{best:.4g} requests/s ({self.doc.get('best_layout')})"
        return f"run {self.run_id}: p99 within {self.doc['slo_ms']:g} ms: {answer}"

    def rows(self) -> list[tuple[str, str]]:
        return [("answer", self.summary()), *(("note", n) for n in self.doc.get("notes") or [])]
