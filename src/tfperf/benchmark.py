"""``bench`` and ``compare`` as library functions: measure, record in the store, summarise.

Contract:

- :func:`bench` measures one workload under ``configs`` (the first is the baseline) with
  :func:`tfperf.runner.measure.measure`, records the run as it goes (every block is committed as it
  arrives; a failed worker is a failed trial with its reason) and returns the JSON document
  ``tfperf bench --json`` prints::

    {"schema_version", "run_id", "kind", "workload", "workload_fingerprint",
     "machine": {"fingerprint", "cpu", "cores"}, "peak",
     "settings", "stopped", "rounds", "steady_s", "other_cpu_share",
     "environment": {"not_inherited": {NAME: VALUE}},
     "results": [{"trial_id", "label", "role", "config", "status", "error",
                  "n", "latency_ms": {"p50", "p90", "p99", "mean", "p50_ci95": [lo, hi]},
                  "throughput_per_s", "cv", "warnings",
                  "cold_start_s", "import_s", "load_s", "first_call_s", "warmup",
                  "peak_rss_bytes", "memory": {"peak_rss_mb", "steady_rss_mb", "model_mb",
                  "artifact_mb", "measured_in", "worker_peak_rss_mb", "not_deployed",
                  "instances", "projected"},
                  "cost": {"price_per_hour", "per_million_samples"} | null,
                  "batch", "install", "notes",
                  "flops": {"per_call", "source", "gflops_per_s", "peak_gflops",
                            "share_of_peak"},
                  "call_styles": {"eager": {"p50_ms", "vs_function"}, "predict": ...},
                  "ops": {...} (with ``--ops`` only: docs/ops.md)}],
     "comparisons": [{"baseline", "candidate", "baseline_trial", "candidate_trial",
                      "speedup": {"median", "ci95": [lo, hi], "p_value", "n_pairs",
                                  "threshold", "verdict", "warnings"}}],
     "warnings": [...]}

  ``speedup`` = baseline time / candidate time (> 1: the candidate is faster), the median of
  pair-by-pair ratios of block medians; the verdict needs both a significance test and the size
  threshold (:func:`tfperf.core.stats.paired_speedup`). Every key is described in
  ``docs/results-schema.md``.
- Failures. A baseline whose worker reports a mistake in the user's input (a corrupt model
  file that passed the parent-side check, a .keras that needs ``--unsafe``, a factory that
  raises or returns the wrong thing, an ``--inputs`` file that does not fit the model) raises
  :class:`tfperf.core.errors.UserError` with the worker's one sentence (exit 2), after its failed
  trial is recorded and the run is stored as ``failed``. A candidate that fails, for any
  reason, is a failed trial with its reason and the run goes on. A baseline that *crashes*
  (signal, timeout, memory limit, an exception in TensorFlow) is also a failed trial and a
  returned document (exit 0): the input was acceptable, the crash is a finding about this
  workload on this install -- reported in its result, in ``warnings`` and in the stored run's
  status -- and the exit codes are kept for what they promise: 2 for input the user must
  change, 1 for a ``--fail-on`` gate. A gate (``compare --fail-on-regression``) does count a
  failed trial: see :func:`failures_in`.
- Ctrl-C (``KeyboardInterrupt``) once the run is in the store raises :class:`RunInterrupted`
  (a ``KeyboardInterrupt`` that names the run and its finished rounds) after the workers are
  closed and the run is stored as ``interrupted`` with every block measured so far.
- :func:`compare_runs` compares two runs trial by trial (same label, or the same config under
  an older label order; else the first trials), each a :class:`tfperf.report.export.RunResult`
  from the store or from a result file written on any machine: the statistic runs on the raw
  blocks either way. The runs were not interleaved, so the comparison is unpaired: the ratio of
  the medians of the per-block medians, a bootstrap 95% interval, a Mann-Whitney test, and the
  same verdict rule. ``regressions`` lists the labels where run B is significantly slower; a
  warning says when the runs measured different workloads or ran on different machines.

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tfperf.core import stats
from tfperf.core.config import Config
from tfperf.core.errors import UserError
from tfperf.core.memory import change, check_limits, cost
from tfperf.core.stats import DEFAULT_THRESHOLD
from tfperf.diagnosis.install import install_fingerprint
from tfperf.machine import contention
from tfperf.machine.facts import collect_machine, machine_summary
from tfperf.peak import above_peak_warning, get_peak, recheck_peak, share_of_peak
from tfperf.report.export import RunResult, TrialResult
from tfperf.report.load_compare import compare_load
from tfperf.report.ops import OPS_SECONDS, ops_side_by_side, read_roofline
from tfperf.runner.identity import model_digests
from tfperf.runner.measure import Listener, Measurement, Settings, Trial, measure
from tfperf.runner.recorder import MeasureRecorder, RunRecorder

SCHEMA_VERSION = 1
"""``schema_version`` of the bench/compare documents (``docs/results-schema.md``)."""
PROCESS_MIN_BUDGET_S = 15.0
"""Budgets from this long get :data:`DEFAULT_PROCESSES` worker processes per config."""
DEFAULT_PROCESSES = 3
EXTRAS = ("eager", "predict")
EXTRA_SHARE = 0.1
"""Each informational call style is timed for this share of the budget, at most a second: a
quick bench stays about as quick as its budget."""


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`bench`: run ``run_id`` is stored as ``interrupted`` and keeps the
    blocks of its ``rounds`` finished rounds (and of any round under way)."""

    def __init__(self, run_id: int, rounds: int) -> None:
        super().__init__(run_id, rounds)
        self.run_id = run_id
        self.rounds = rounds


def default_processes(budget_s: float) -> int:
    """Worker processes per config for a steady-state budget of ``budget_s`` seconds: 3 from
    15 s (a speedup can depend on the process, and only several processes show it), 1 below
    (each restart costs a cold start, a large share of a short run)."""
    return DEFAULT_PROCESSES if budget_s >= PROCESS_MIN_BUDGET_S else 1


def workload_fingerprint(workload: Mapping[str, Any]) -> str:
    """A 12-hex-digit hash of the workload dict and, for a model, of its files' content."""

    digest = hashlib.sha256(json.dumps(dict(workload), sort_keys=True).encode())
    for key in ("path", "inputs"):
        root = Path(str(workload.get(key) or ""))
        if not workload.get(key) or not root.exists():
            continue
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for path in files:
            digest.update(str(path.relative_to(root) if root.is_dir() else path.name).encode())
            with open(path, "rb") as fh:
                for chunk in iter(lambda fh=fh: fh.read(1 << 20), b""):
                    digest.update(chunk)
    return digest.hexdigest()[:12]


@dataclass(frozen=True)
class BenchOptions:
    """How long, how precisely and how safely :func:`bench` measures (the CLI's options)."""

    budget_s: float = 30.0
    precision: float = 0.01
    threshold: float = DEFAULT_THRESHOLD
    timeout_s: float = 120.0
    memory_limit_bytes: int | None = None
    min_rounds: int | None = None
    """At least this many rounds (default: enough pairs for a verdict, plus two)."""
    block_s: float | None = None
    parallel_start: bool = False
    processes: int = 1
    extras: tuple[str, ...] = EXTRAS
    peak: bool = True
    """Compare achieved FLOP/s with this machine's measured peak."""
    python: str = sys.executable
    ops: bool = False
    """Profile each config's ops after its rounds (``--ops``, ``docs/ops.md``)."""
    price_per_hour: float | None = None
    """What the machine costs (``--price-per-hour``): each result's ``cost`` follows from it."""

    def settings(self) -> Settings:
        """The measurement settings these options imply."""
        return Settings(
            budget_s=self.budget_s,
            precision=self.precision,
            min_rounds=self.min_rounds if self.min_rounds is not None else stats.MIN_PAIRS + 2,
            block_s=self.block_s,
            parallel_start=self.parallel_start,
            processes=self.processes,
            timeout_s=self.timeout_s,
            memory_limit_bytes=self.memory_limit_bytes,
            extras=tuple(self.extras),
            extra_s=min(1.0, EXTRA_SHARE * self.budget_s),
            python=self.python,
            ops_s=OPS_SECONDS if self.ops else None,
        )

    def record(self) -> dict[str, Any]:
        """The settings a run stores (``docs/results-schema.md``)."""
        return {
            "budget_s": self.budget_s,
            "processes": self.processes,
            "precision": self.precision,
            "threshold": self.threshold,
            "timeout_s": self.timeout_s,
            "memory_limit_bytes": self.memory_limit_bytes,
            "min_rounds": self.settings().min_rounds,
            "python": self.python,
            "price_per_hour": self.price_per_hour,
        }


def bench(
    workload: Mapping[str, Any],
    configs: Sequence[Config],
    *,
    store: Any,
    options: BenchOptions | None = None,
    listener: Listener | None = None,
    command: str = "bench",
    kind: str = "bench",
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Measure, record and summarise; see the module docstring for the returned document."""
    options = options or BenchOptions()
    configs = list(configs) or [Config()]
    machine = collect_machine()
    recorded = dict(workload, fingerprint=workload_fingerprint(workload))
    with RunRecorder(store, kind, command, recorded, machine, options.record()) as run:
        recorder = MeasureRecorder(run, listener, _trial_info)
        try:
            result = measure(workload, configs, options.settings(), recorder, environ)
            peak = _peak(machine, options.python, result, options.ops) if options.peak else None
            doc = _document(result, recorder.trial_ids, options.threshold, peak)
            for entry in doc["results"]:
                entry["cost"] = cost(options.price_per_hour, entry.get("throughput_per_s"))
            doc.update(
                schema_version=SCHEMA_VERSION,
                run_id=run.run_id,
                kind=kind,
                workload_fingerprint=recorded["fingerprint"],
                machine=machine_summary(machine),
                settings=options.record(),
            )
            _record_results(run, doc, result)
        except KeyboardInterrupt as exc:
            run.finish("interrupted", {})
            raise RunInterrupted(run.run_id, recorder.rounds) from exc
    return doc


def check_options(options: BenchOptions, configs: Sequence[Config]) -> None:
    """Raise :class:`UserError` with one sentence for options or configs that cannot run."""
    for name, value in (("budget", options.budget_s), ("precision", options.precision),
                        ("timeout", options.timeout_s)):
        if not value > 0:
            raise UserError(f"--{name} must be a positive number, not {value}.")
    if options.threshold < 0:
        raise UserError(f"--threshold must be 0 or more, not {options.threshold}.")
    check_limits(options.memory_limit_bytes, options.price_per_hour)
    if options.processes < 1:
        raise UserError(f"--processes must be 1 or more, not {options.processes}.")
    for config in configs:
        config.worker_env({})  # a missing allocator is a user error before anything starts


def run_bench(
    workload: Mapping[str, Any],
    configs: Sequence[Config],
    options: BenchOptions,
    *,
    store: str | None,
    listener: Listener | None,
    command: str,
    kind: str,
) -> dict[str, Any]:
    """:func:`bench` as the command line and the library run it: the options checked, the
    store at path ``store`` (default: the paths rules) opened and closed. Ctrl-C raises
    :class:`RunInterrupted`."""
    from tfperf.core.paths import resolve_store_path
    from tfperf.store import Store

    check_options(options, configs)
    with Store.open(resolve_store_path(store)) as opened:
        return bench(workload, configs, store=opened, options=options, listener=listener,
                     command=command, kind=kind)


def _record_results(run: RunRecorder, doc: dict[str, Any], result: Measurement) -> None:
    """Close each measured trial with its summary, store the comparisons, close the run."""
    for res, trial in zip(doc["results"], result.trials, strict=True):
        if trial.status == "ok":
            run.finish_trial(res["trial_id"], "ok", _trial_info(trial, res))
    for comp in doc["comparisons"]:
        run.comparison(comp["baseline_trial"], comp["candidate_trial"], comp["speedup"])
    ok = sum(r["status"] == "ok" for r in doc["results"])
    status = "ok" if ok == len(doc["results"]) else ("failed" if ok == 0 else "partial")
    keys = ("stopped", "rounds", "steady_s", "other_cpu_share", "warnings", "peak")
    summary = {k: doc[k] for k in keys}
    summary["results"] = [_brief(r) for r in doc["results"]]
    summary["comparisons"] = [
        {k: c[k] for k in ("baseline", "candidate", "speedup")} for c in doc["comparisons"]
    ]
    run.finish(status, summary)


def _peak(machine: dict[str, Any], python: str, result: Measurement,
          ops: bool = False) -> dict[str, Any] | None:
    """The machine's peak, probed again once if a trial achieved more (``recheck_peak``);
    ``None`` when no trial has a FLOP count (an op profile's roofline always wants it)."""
    if not _any_flops(result) and not ops:
        return None
    achieved = [(_achieved(t), t.config.precision) for t in result.trials]
    return recheck_peak(get_peak(machine, python=python), achieved, machine, python=python)


def _achieved(trial: Trial) -> float | None:
    """FLOP/s at the trial's median latency (``None`` without FLOPs or samples)."""
    per_call = (trial.ready.get("flops") or {}).get("per_call")
    samples = trial.samples_s
    median = statistics.median(samples) if samples else None
    return per_call / median if per_call and median else None


def _any_flops(result: Measurement) -> bool:
    return any((t.ready.get("flops") or {}).get("per_call") for t in result.trials)


def _trial_info(trial: Trial, result: Mapping[str, Any] | None = None) -> dict[str, Any]:
    info: dict[str, Any] = {
        "calls_per_block": trial.calls_per_block,
        "cold_start_s": trial.cold_start_s,
        "restart_cold_start_s": trial.restart_cold_start_s,
        "peak_rss_bytes": trial.peak_rss_bytes,
        "memory": trial.memory.to_dict() if trial.memory else None,
        "not_inherited": trial.not_inherited,
    }
    for key in (
        "import_s",
        "load_s",
        "first_call_s",
        "startup_s",
        "flops",
        "batch",
        "notes",
        "fingerprint",
    ):
        if key in trial.ready:
            info[key] = trial.ready[key]
    if trial.ready.get("install"):
        info["install"] = _install(trial)
    if result is not None:
        info["summary"] = _brief(result)
        info["call_styles"] = result.get("call_styles")
        if result.get("ops") is not None:
            info["ops"] = result["ops"]
    return info


def _install(trial: Trial) -> dict[str, Any] | None:
    """The worker's install facts with their ``fingerprint`` (``tfperf.diagnosis.install``)."""

    install = trial.ready.get("install")
    if not install:
        return None
    return dict(install, fingerprint=install_fingerprint(install))


def _brief(result: Mapping[str, Any]) -> dict[str, Any]:
    keys = (
        "label",
        "status",
        "n",
        "latency_ms",
        "throughput_per_s",
        "cold_start_s",
        "first_call_s",
        "peak_rss_bytes",
        "memory",
        "cost",
        "flops",
        "warnings",
        "error",
    )
    out = {k: result.get(k) for k in keys}
    if out["error"]:
        out["error"] = {"reason": out["error"].get("reason")}
    return out


def _document(
    m: Measurement,
    trial_ids: Mapping[int, int],
    threshold: float,
    peak: dict[str, Any] | None,
) -> dict[str, Any]:

    results = [_result(t, trial_ids.get(t.index), peak) for t in m.trials]
    busy = contention.busy_warning(m.other_cpu_share)
    comparisons = []
    base = m.trials[0]
    for cand in m.trials[1:]:
        if not m.paired_rounds(base, cand):
            continue
        speed = m.speedup(base, cand, threshold)
        if busy:
            speed["warnings"].append(busy)
        comparisons.append(
            {
                "baseline": base.label,
                "candidate": cand.label,
                "baseline_trial": trial_ids.get(base.index),
                "candidate_trial": trial_ids.get(cand.index),
                "speedup": speed,
                **ops_side_by_side(base.ops, cand.ops),
            }
        )
    not_inherited: dict[str, str] = {}
    for t in m.trials:
        not_inherited.update(t.not_inherited)
    warnings = []
    if not_inherited:
        names = ", ".join(sorted(not_inherited))
        warnings.append(f"not applied to the workers (set it with --env to measure it): {names}")
    if base.status == "failed":
        warnings.append(
            f"the baseline ({base.label}) failed: {(base.error or {}).get('reason')}; "
            "speedups are measured only against rounds it finished"
        )
    if m.stopped == "budget" and any("wide" in w for r in results for w in r["warnings"]):
        warnings.append("the time budget ran out before the precision target was met")
    if busy:
        warnings.append(busy)
    return {
        "workload": m.workload,
        "peak": peak,
        "stopped": m.stopped,
        "rounds": m.rounds,
        "steady_s": m.steady_s,
        "other_cpu_share": m.other_cpu_share,
        "environment": {"not_inherited": not_inherited},
        "results": results,
        "comparisons": comparisons,
        "warnings": warnings,
    }


def _result(trial: Trial, trial_id: int | None, peak: dict[str, Any] | None) -> dict[str, Any]:

    ready = trial.ready
    batch = int(ready.get("batch") or 1)
    summary = stats.summarize(trial.samples_s, batch=batch)
    flops_in = ready.get("flops") or {}
    per_call = flops_in.get("per_call")
    p50_ms = summary["latency_ms"]["p50"]
    achieved = _achieved(trial)
    peak_gflops, share = share_of_peak(achieved, peak, trial.config.precision)
    above = above_peak_warning(share, peak)
    if above:
        summary["warnings"].append(above)
    warmup = {
        "n": len(trial.warmup_s),
        "seconds": sum(trial.warmup_s),
        "steady_from": stats.detect_warmup(trial.warmup_s) if trial.warmup_s else 0,
    }
    return {
        "trial_id": trial_id,
        "label": trial.label,
        "role": trial.role,
        "config": trial.config.to_dict(),
        "status": trial.status,
        "error": trial.error,
        **summary,
        "cold_start_s": trial.cold_start_s,
        "import_s": ready.get("import_s"),
        "load_s": ready.get("load_s"),
        "first_call_s": ready.get("first_call_s"),
        "warmup": warmup,
        "peak_rss_bytes": trial.peak_rss_bytes or None,
        "memory": trial.memory.to_dict() if trial.memory else None,
        "batch": batch,
        "calls_per_block": trial.calls_per_block,
        "blocks": len(trial.blocks),
        "install": _install(trial),
        "model": model_digests(ready.get("fingerprint")),
        "notes": ready.get("notes", []),
        "flops": {
            "per_call": per_call,
            "source": flops_in.get("source", "unknown"),
            "gflops_per_s": achieved / 1e9 if achieved else None,
            "peak_gflops": peak_gflops,
            "share_of_peak": share,
        },
        "call_styles": _call_styles(trial, p50_ms),
        **({"ops": read_roofline(trial.ops, peak, trial.config.precision)}
           if trial.ops is not None else {}),
        **({"train": train_figures(ready["train"], summary)} if ready.get("train") else {}),
    }


def train_figures(train: Mapping[str, Any], summary: Mapping[str, Any]) -> dict[str, Any]:
    """A training workload's result: steps and samples per second (steps, not calls: one call
    runs ``steps_per_call`` steps) with their 95% intervals, the first steps' cost and the
    share of a step spent waiting for input, from the worker's ``ready["train"]``."""
    steps = int(train.get("steps_per_call") or 1)
    batch = int(train.get("batch") or 1)
    lat = summary["latency_ms"]
    low, high = lat.get("p50_ci95") or (None, None)

    def rate(ms: float | None, per: int) -> float | None:
        return per / (ms / 1e3) if ms else None

    return {
        **dict(train),
        "steps_per_s": rate(lat["p50"], steps),
        "steps_per_s_ci95": [rate(high, steps), rate(low, steps)],
        "samples_per_s": rate(lat["p50"], steps * batch),
        "ms_per_step": lat["p50"] / steps if lat["p50"] else None,
    }


def _call_styles(trial: Trial, p50_ms: float | None) -> dict[str, Any]:
    styles: dict[str, Any] = {}
    for name, samples in trial.extras.items():
        if not samples:
            styles[name] = {
                "p50_ms": None,
                "vs_function": None,
                "error": trial.extra_errors.get(name),
            }
            continue
        ms = statistics.median(samples) * 1e3
        styles[name] = {
            "p50_ms": ms,
            "vs_function": ms / p50_ms if p50_ms else None,
            "n": len(samples),
        }
    return styles


# -- comparing two stored runs -----------------------------------------------------------------


def unpaired_speedup(
    a_s: Sequence[float], b_s: Sequence[float], threshold: float = DEFAULT_THRESHOLD
) -> dict[str, Any]:
    """Speedup of B over A (A time / B time) from independent samples (seconds).

    Median ratio, a percentile-bootstrap 95% interval (fixed seed), a two-sided Mann-Whitney
    p-value, and the verdict rule of :func:`tfperf.core.stats.paired_speedup`.
    """


    a = np.asarray([x for x in a_s if x > 0 and math.isfinite(x)], dtype=float)
    b = np.asarray([x for x in b_s if x > 0 and math.isfinite(x)], dtype=float)
    out: dict[str, Any] = {
        "median": None,
        "ci95": [None, None],
        "p_value": None,
        "n_a": int(a.size),
        "n_b": int(b.size),
        "threshold": threshold,
        "verdict": "inconclusive",
        "warnings": [],
        "paired": False,
    }
    if a.size < stats.MIN_CI_SAMPLES or b.size < stats.MIN_CI_SAMPLES:
        out["warnings"].append(
            f"too few blocks ({a.size} and {b.size}) for a verdict; "
            f"at least {stats.MIN_CI_SAMPLES} each are needed"
        )
        if a.size and b.size:
            out["median"] = float(np.median(a) / np.median(b))
        return out
    rng = np.random.default_rng(0)
    boots = np.median(rng.choice(a, (2000, a.size)), axis=1) / np.median(
        rng.choice(b, (2000, b.size)), axis=1
    )
    median = float(np.median(a) / np.median(b))
    low, high = (float(v) for v in np.percentile(boots, [2.5, 97.5]))
    p = float(stats.scipy_stats().mannwhitneyu(a, b, alternative="two-sided").pvalue)
    out.update(median=median, ci95=[low, high], p_value=p)
    out["verdict"] = stats.verdict(median, low, high, p, min(a.size, b.size), threshold)
    out["warnings"].append(
        "the runs were not interleaved: machine drift between them counts as a difference"
    )
    return out


def _block_medians(trial: TrialResult) -> list[float]:
    """What an unpaired speedup compares: the medians of the steady blocks, or the raw samples
    of a trial with fewer than 6 blocks."""
    medians = [
        statistics.median(b["samples_s"])
        for b in trial.blocks
        if b.get("phase") == "steady" and b.get("samples_s")
    ]
    if len(medians) >= 6:
        return medians
    return trial.steady_samples()


def _config_label(trial: TrialResult) -> str:
    """The trial's label as this tfperf writes it (older runs listed knobs in another order)."""
    try:
        return Config.from_dict(trial.config).label()
    except (UserError, TypeError, ValueError):
        return trial.label


def _pairs(run_a: RunResult, run_b: RunResult) -> list[tuple[TrialResult, TrialResult]]:
    """Trials of A and B paired by label, or by config (as today's label writes it); the two
    first trials when nothing pairs."""
    ok_a = [t for t in run_a.trials if t.status == "ok"]
    ok_b = [t for t in run_b.trials if t.status == "ok"]
    by_label = {t.label: t for t in ok_b}
    by_config = {_config_label(t): t for t in ok_b}
    pairs = []
    for trial in ok_a:
        match = by_label.get(trial.label) or by_config.get(_config_label(trial))
        if match is not None:
            pairs.append((trial, match))
    if not pairs and ok_a and ok_b:
        pairs = [(ok_a[0], ok_b[0])]
    return pairs


def _compare_warnings(a: RunResult, b: RunResult, same_machine: bool) -> list[str]:
    warnings = []
    if (a.run.get("workload") or {}) != (b.run.get("workload") or {}):
        warnings.append("the two runs measured different workloads (or different model files)")
    if not same_machine:
        cpu_a, cpu_b = (machine_summary(r.machine)["cpu"] or "unknown" for r in (a, b))
        warnings.append(
            f"the two runs ran on different machines (A: {cpu_a}, B: {cpu_b}): the figures "
            "compare different hardware as well as the configs"
        )
    return warnings


def compare_runs(
    a: RunResult, b: RunResult, threshold: float = DEFAULT_THRESHOLD
) -> dict[str, Any]:
    """Compare run B against run A, each a stored run or a result file
    (:func:`tfperf.report.export.load_result`); see the module docstring. Load runs are
    compared by their highest rate within the SLO (:mod:`tfperf.report.load_compare`)."""
    if a.load or b.load:
        return {"schema_version": SCHEMA_VERSION, **compare_load(a, b, threshold)}
    pairs = _pairs(a, b)
    if not pairs:
        raise UserError(
            f"{a.origin} and {b.origin} have no successful trials to compare; "
            "pick runs (or result files) whose trials finished ok."
        )
    comparisons = [
        {
            "label_a": ta.label,
            "label_b": tb.label,
            "trial_a": ta.id,
            "trial_b": tb.id,
            "a": stats.summarize(ta.steady_samples(), batch=ta.batch),
            "b": stats.summarize(tb.steady_samples(), batch=tb.batch),
            "speedup": unpaired_speedup(_block_medians(ta), _block_medians(tb), threshold),
            "memory": change(ta.memory, tb.memory),
            **ops_side_by_side(ta.ops, tb.ops),
        }
        for ta, tb in pairs
    ]
    fingerprints = {machine_summary(r.machine)["fingerprint"] for r in (a, b)}
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "compare-runs",
        "run_a": a.run.get("id"),
        "run_b": b.run.get("id"),
        "source_a": a.origin,
        "source_b": b.origin,
        "same_machine": len(fingerprints) == 1,
        "threshold": threshold,
        "comparisons": comparisons,
        "regressions": [c["label_b"] for c in comparisons if c["speedup"]["verdict"] == "slower"],
        "warnings": _compare_warnings(a, b, len(fingerprints) == 1),
    }


def memory_growth_in(doc: Mapping[str, Any], limit_pct: float) -> list[str]:
    """``"label +12.0% (610 -> 683 MB)"`` for each config of a two-run comparison whose peak
    memory grew by more than ``limit_pct`` percent (``compare --fail-on-memory-growth``)."""
    grown = []
    for c in doc.get("comparisons", []):
        moved = c.get("memory")
        if moved and moved["growth"] * 100 > limit_pct:
            grown.append(f"{c.get('label_b', c.get('candidate'))} {moved['growth']:+.1%} "
                         f"({moved['a_peak_rss_mb']:.0f} -> {moved['b_peak_rss_mb']:.0f} MB)")
    return grown


def regressions_in(doc: Mapping[str, Any]) -> list[str]:
    """Candidates significantly slower than their baseline in a bench/compare document."""
    if "regressions" in doc:
        return list(doc["regressions"])
    return [
        c["candidate"] for c in doc.get("comparisons", []) if c["speedup"]["verdict"] == "slower"
    ]


def failures_in(doc: Mapping[str, Any]) -> list[str]:
    """``"label (reason)"`` for each failed trial of a bench/compare document.

    A gate such as ``--fail-on-regression`` trips on these too: a config that crashed was not
    shown to be as fast as the baseline, and a baseline that crashed leaves nothing compared.
    Stored-run comparisons (``compare_runs``) have no failures of their own: ``[]``.
    """
    return [
        f"{r['label']} ({(r.get('error') or {}).get('reason') or 'failed'})"
        for r in doc.get("results", [])
        if r.get("status") == "failed"
    ]


def unrunnable(doc: Mapping[str, Any]) -> str | None:
    """The sentence a ``tfperf bench`` exits 2 with: its default could not run, or the one
    candidate the user named could not (its worker said why before measuring anything: an
    exception or the user's input, not a crash, which is a finding about that configuration);
    ``None`` where both ran."""
    results = list(doc.get("results", []))
    if not results:
        return None
    if _said_why(results[0]):
        return f"The default configuration cannot run: {_why(results[0])}."
    if len(results) == 2 and _said_why(results[1]):
        return (f"{results[1]['label']} cannot run: {_why(results[1])} (the default's figures "
                "are above).")
    return None


def _said_why(result: Mapping[str, Any]) -> bool:
    error = result.get("error") or {}
    return result.get("status") == "failed" and not result.get("n") and bool(error.get("kind"))


def _why(result: Mapping[str, Any]) -> str:
    error = result.get("error") or {}
    return str(error.get("message") or error.get("reason") or "failed").rstrip(". ")
