"""``tfperf tune --objective server --slo-ms X``: the server search run for real, its winner
confirmed against the default, and the document's core.

Contract
--------

:func:`tune_server` ``(evaluator, plan, options, progress) -> dict`` runs after nothing has
started. It starts the default worker (its outputs are the accuracy reference), then
:class:`tfperf.tuning.server.ServerSearch` over :func:`tfperf.tuning.server.server_space`
(this process's CPUs, the SLO, the runtimes of the tune's space, so ``--runtimes`` holds) with
:class:`ServerEvaluator`, which

- checks each runtime config once, with the tune's accuracy guard on a worker of its own
  (:func:`tfperf.accuracy.guard`; a layout does not change what the model computes, its runtime
  and precision do), and rejects every candidate of a runtime beyond the tolerance;
- measures an accepted candidate with :func:`tfperf.serving.search_slo` (its instances started
  for it, the levels recorded in the tune's run as trials of role ``"serving"``).

The search's budget is ``options.budget_s`` or :data:`DEFAULT_BUDGET_S`, for the whole tune:
it stops starting candidates when what is left would not hold the confirmation. The
confirmation runs :func:`confirm_pairs` pairs of SLO searches of the default and the winner,
alternating which goes first (trials of role ``"confirmation"``), and
:func:`tfperf.tuning.server.confirmation` decides. A winner that missed the SLO in one of its
confirmation searches, or whose ratio to the default is not "faster" by the verdict rule every
tfperf comparison uses, is not recommended: the default is kept, ``reason`` says why, and
``keep_default_why`` has the cases and keys of :mod:`tfperf.tuning.keepdefault`.

The document's core (the rest as any tune's, ``docs/tune.md``)::

    {"objective": "server", "slo_ms",
     "default": {"time_ms", "batch", "samples_per_s",
                 "serving": {"max_qps_at_slo", ...the default layout}},
     "recommendation": {... as any tune's ..., "serving": {"instances", "threads", "cores",
                        "max_batch", "max_delay_ms", "streams", "max_qps_at_slo", "slo_ms"},
                        "confirmation": {"default_qps", "candidate_qps", "ratio",
                                         "missed_slo", "recommend", "reason"} | None},
     "candidates": [{"label", "config", "serving", "status", "reason", "max_qps_at_slo",
                     "speedup": {"median"}, "max_abs_error", ..., "adoption"}],
     "stopped", "trials", "space_size", "unavailable", "warnings"}

Memory: each runtime's serving instance is read once, when its accuracy is checked, as bench
and tune read a configuration (:func:`tfperf.runner.memory.memory_of`: TensorFlow's worker, a
converted runtime's deployed process, which loads the artifact alone). A layout whose projected
total (instances x that figure) is over ``max_memory_mb`` is rejected without being started
(``over_ceiling``), except the default: it is the baseline, measured whatever its memory, and a
warning says it is over. A measured layout's row carries the sum over its instances after its
sweep, read the same way and as the layout runs (:class:`tfperf.runner.memory.LayoutMemory`:
at its dynamic batch, with OpenVINO's hint and streams); the projection is at batch 1, so a
batched or ``THROUGHPUT`` layout it let under the ceiling is rejected once measured over it
(``over_ceiling``, "as the layout ran") and never recommended. The ceiling is about the
layout as deployed, not about the instances this machine ran to measure it (each of which
imported TensorFlow and converted the model). ``cost`` (with ``price_per_hour``) is at the rate each
layout kept within the SLO.

The floor: each SLO search measures the harness floor of its answering level (the same load
with every model call skipped, ``floor_at_answer``), so the recommendation states the floor of
the layout it recommends (``serving.harness_floor_ms`` and a note in ``notes``; with a dynamic
batcher the note names the batch's delay) from that layout's last search.

Levels: ``level_requests`` and ``level_s`` at least, then on until their p99 stands on
``level_tail`` requests beyond it (the rule of every load run), never past :data:`LEVEL_CAP_S`
times ``level_s``; the request timeout is the SLO's at least.

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from typing import Any

from tfperf.accuracy import guard
from tfperf.core.config import Config
from tfperf.core.errors import UserError
from tfperf.core.knobs import ADOPTION_TEXT, adoption, label, normalize
from tfperf.core.memory import Memory, cost, over_ceiling
from tfperf.core.serving import DEFAULT_LAYOUT
from tfperf.core.stats import MIN_PAIRS
from tfperf.runner.handle import WorkerFailed
from tfperf.runner.memory import memory_of
from tfperf.serving import LoadLevel, LoadScenario, search_slo
from tfperf.serving.harness import available_cpus
from tfperf.serving.levels import floor_statement
from tfperf.tuning.evaluate import Evaluator, Progress, failure_reason, samples_per_s
from tfperf.tuning.keepdefault import keep_default_why
from tfperf.tuning.options import TuneOptions
from tfperf.tuning.server import (
    DEFAULT_CANDIDATE,
    FAILED,
    MEASURED,
    REJECTED,
    ServerCandidate,
    ServerOutcome,
    ServerResult,
    ServerSearch,
    alternating_rates,
    confirmation,
    server_space,
)
from tfperf.tuning.serverprune import (
    LayoutPruning,
    confirmed_entries,
    dimensions,
    prune_layout,
)
from tfperf.tuning.space import Space, to_config_dict

DEFAULT_BUDGET_S = 600.0
"""A server tune's whole time, unless ``--budget`` says otherwise (ten minutes)."""
LEVEL_CAP_S = 10.0
"""A tune's level runs at most this many times ``level_s`` waiting for its p99 to stand."""


def confirm_pairs(confirm_rounds: int) -> int:
    """Pairs of SLO searches of the confirmation: one per 3 of ``--confirm-rounds`` (a pair
    costs two whole SLO searches), at least :data:`~tfperf.core.stats.MIN_PAIRS`: with fewer
    pairs the verdict rule every comparison uses cannot say "faster"."""
    return max(MIN_PAIRS, confirm_rounds // 3)


class _Role:
    """The tune's run recorder, with every trial the load measurement opens given ``role``."""

    def __init__(self, run: Any, role: str) -> None:
        self._run = run
        self._role = role

    def trial(self, trial_label: str, config: Mapping[str, Any], role: str) -> int:
        return self._run.trial(trial_label, config, self._role)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._run, name)


class ServerEvaluator:
    """Evaluates server candidates for real (see the module docstring)."""

    def __init__(self, evaluator: Evaluator, options: TuneOptions, scenario: LoadScenario) -> None:
        self.evaluator = evaluator
        self.options = options
        self.scenario = scenario
        self.progress = evaluator.progress
        self._accuracy: dict[str, tuple[str, str, dict | None]] = {}
        self._per_instance: dict[str, Memory] = {}
        """One serving instance's memory by runtime config, read when its accuracy is."""
        self.default_qps: float | None = None
        """The default's rate within the SLO, once measured (the first candidate)."""
        self.loads: dict[str, dict] = {}
        """Each layout's last SLO search (a ``LoadResult`` dict), by candidate key."""

    def accuracy(self, config: Mapping[str, Any]) -> tuple[str, str, dict | None]:
        """``(status, reason, check)`` of a runtime config, checked once on a worker of its own
        (the default's outputs are the reference)."""
        name = label(dict(config))
        if name not in self._accuracy:
            self._accuracy[name] = self._check(dict(config))
        return self._accuracy[name]

    def _check(self, config: dict) -> tuple[str, str, dict | None]:
        if not config:
            if self.evaluator.default_memory is not None:
                self._per_instance[label({})] = self.evaluator.default_memory
            return MEASURED, "", {"accepted": True, "max_abs_error": 0.0, "max_rel_error": 0.0}
        workers = self.evaluator.workers
        try:
            handle = workers.get(config, self.options.candidate_timeout_s)
            self._per_instance[label(config)] = memory_of(handle.worker)
            reference, labels = self.evaluator.reference_at(handle.batch)
            check = guard(reference, workers.outputs(handle), self.options.tolerance, labels)
        except WorkerFailed as exc:
            workers.drop_dead()
            return FAILED, failure_reason(exc, config), None
        finally:
            workers.drop(label(config))
        return (MEASURED, "", check) if check["accepted"] else (REJECTED, check["reason"], check)

    def __call__(self, candidate: ServerCandidate, timeout_s: float | None) -> ServerOutcome:
        self.progress.candidate(candidate.key())
        started = time.monotonic()
        status, reason, check = self.accuracy(candidate.config)
        projected = self.projected(candidate)
        over = None if candidate == DEFAULT_CANDIDATE else (
            over_ceiling(projected, self.options.max_memory_mb))
        if status == MEASURED and over:  # not started: its instances would not fit
            status, reason = REJECTED, over
        if status == MEASURED:
            outcome = self.measure(candidate, self.evaluator.run, role="serving")
            outcome.accuracy = check
            self._over_as_measured(outcome)
        else:
            outcome = ServerOutcome(candidate, status, reason=reason, accuracy=check)
            outcome.info["runtime_failed"] = status == FAILED
            if over:
                outcome.info.update(over_ceiling=True, memory=projected.to_dict())
            self._record(outcome)
        outcome.elapsed_s = time.monotonic() - started
        if candidate == DEFAULT_CANDIDATE:
            self.default_qps = outcome.max_qps_at_slo
        if self.default_qps and outcome.rate:
            outcome.speedup = {"median": outcome.rate / self.default_qps}
        self.progress.done(outcome)
        return outcome

    def _over_as_measured(self, outcome: ServerOutcome) -> None:
        """Reject a layout whose memory as it ran (its batch, OpenVINO's hint and streams)
        passed the ceiling its batch-1 projection let it under (module docstring)."""
        if outcome.candidate == DEFAULT_CANDIDATE or outcome.status != MEASURED:
            return
        measured = Memory.from_dict((outcome.load or {}).get("memory"))
        over = over_ceiling(measured, self.options.max_memory_mb)
        if over:
            outcome.status, outcome.reason = REJECTED, f"{over}, as the layout ran"
            outcome.info.update(over_ceiling=True, memory=measured.to_dict())

    def projected(self, candidate: ServerCandidate) -> Memory | None:
        """The layout's memory before it starts: its instances x one instance's measured
        figure (:meth:`tfperf.core.memory.Memory.times`), ``None`` before one was read."""
        one = self._per_instance.get(label(dict(candidate.config)))
        return None if one is None else one.times(candidate.layout.instances)

    def measure(self, candidate: ServerCandidate, run: Any, role: str) -> ServerOutcome:
        """One SLO search of ``candidate``, recorded under ``role``."""
        config = Config.from_dict(to_config_dict(dict(candidate.config)))
        recorder = None if run is None else _Role(run, role)
        try:
            result = search_slo(
                self.evaluator.workload, config, candidate.layout, self.options.slo_ms,
                self.scenario, recorder=recorder, timeout_s=self.options.candidate_timeout_s,
            )
        except WorkerFailed as exc:
            return ServerOutcome(candidate, FAILED, reason=failure_reason(exc, candidate.config))
        except UserError as exc:
            return ServerOutcome(candidate, FAILED, reason=str(exc))
        load = result.to_dict()
        self.loads[candidate.key()] = load
        return ServerOutcome(candidate, MEASURED, max_qps_at_slo=result.max_qps_at_slo, load=load)

    def _record(self, outcome: ServerOutcome) -> None:
        run = self.evaluator.run
        if run is None:
            return
        config = to_config_dict(dict(outcome.candidate.config))
        trial = run.trial(outcome.candidate.key(), config, "candidate")
        status = "rejected" if outcome.status == REJECTED else "failed"
        run.finish_trial(trial, status, {"server": outcome.to_dict()}, {"reason": outcome.reason})


def runtime_configs(space: Space) -> list[dict]:
    """The runtime configs of the tune's space: the default first, then one per runtime."""
    configs = [{}]
    for runtime in space.values.get("runtime", ()):
        config = space.canonical({"runtime": runtime})
        if config and config not in configs:
            configs.append(config)
    return configs


def tune_server(
    evaluator: Evaluator, space: Space, options: TuneOptions, progress: Progress
) -> dict:
    """Search, confirm and build the document's core (see the module docstring)."""
    started = time.monotonic()
    progress.phase("starting the default configuration")
    ready = evaluator.start_default()
    evaluator.workers.drop(label({}))  # the reference is kept; its worker would only wait
    slo_ms = float(options.slo_ms or 0.0)
    allowed = space.bare_runtime in space.values.get("runtime", (space.bare_runtime,))
    found = server_space(available_cpus(), slo_ms, runtime_configs(space), allowed)
    # no harness floor per level: a tune compares layouts by their rate, and a floor per level
    # would cost every SLO search seconds; only the answering level's, so that the layout
    # recommended states its floor. Levels run until their p99 stands, not until it is as
    # precise as a bench's: the confirmation's paired searches judge the layouts.
    levels = LoadScenario(
        requests=options.level_requests, seconds=options.level_s,
        max_seconds=LEVEL_CAP_S * options.level_s, floor=False, floor_at_answer=True,
        precision=None, tail=options.level_tail, timeout_s=max(10.0, (options.slo_ms or 0) / 1e3),
    )
    judge = ServerEvaluator(evaluator, options, levels)
    pairs = confirm_pairs(options.confirm_rounds)
    budget = (options.budget_s or DEFAULT_BUDGET_S) - (time.monotonic() - started)
    progress.start(options.max_trials, budget)
    result = ServerSearch(
        found, judge, max_trials=options.max_trials, budget_s=budget, reserve=2 * pairs
    ).run()
    pruning = LayoutPruning(result.incumbent)
    if len(dimensions(result.incumbent)) > 1:
        progress.phase(f"pruning {result.incumbent.key()}: each change set back in turn, kept "
                       "only where the layout is significantly slower without it")
        pruning = prune_layout(judge, result.incumbent, pairs, say=progress.phase)
        result.incumbent = pruning.answer
    doc = conclude_server(judge, result, pairs, ready)
    rec = doc["recommendation"]
    rec.update(pruned=list(pruning.pruned), kept=confirmed_entries(pruning, rec))
    doc.update(
        objective="server", slo_ms=slo_ms, stopped=result.stopped, trials=len(result.outcomes),
        space_size=found.size(), unavailable=space.unavailable,
    )
    return doc


def conclude_server(
    judge: ServerEvaluator, result: ServerResult, pairs: int, ready: dict
) -> dict:
    """Confirm the winner against the default and build the document's core."""
    default = result.default
    default_qps = default.max_qps_at_slo if default is not None else None
    winner = result.incumbent
    decided = None
    if winner != DEFAULT_CANDIDATE:
        decided = confirm(judge, winner, pairs)
        if decided["default_qps"]:
            default_qps = _median(decided["default_qps"])
    candidates = [_row(o, default_qps) for o in _ranked(result.outcomes)]
    warnings = _warnings(result, judge.evaluator.default_memory, judge.options.max_memory_mb)
    if decided is not None and decided["recommend"]:
        recommendation = _recommend(winner, decided, candidates, judge.options.slo_ms)
        if recommendation["memory"] is None:  # a pruned answer, never a candidate itself
            recommendation["memory"] = (judge.loads.get(winner.key()) or {}).get("memory")
    else:
        recommendation = _keep_default(
            decided, default_qps, candidates, judge.options.slo_ms, judge.options.threshold
        )
    recommended = winner if decided is not None and decided["recommend"] else DEFAULT_CANDIDATE
    _state_floor(recommendation, judge.loads.get(recommended.key()))
    starved = _budget_starved(result, pairs)
    if starved and recommendation["keep_default"]:
        recommendation["reason"] = starved
        warnings.append(starved)
    tail = (ready.get("warmup") or {}).get("samples_s", [])[-5:]
    default_ms = statistics.median(tail) * 1e3 if tail else None
    batch = judge.evaluator.default_batch
    default_row = {
        "time_ms": default_ms, "batch": batch,
        "samples_per_s": samples_per_s(default_ms, batch),
        "serving": DEFAULT_LAYOUT.to_dict() | {"max_qps_at_slo": default_qps},
        "memory": (default.load or {}).get("memory") if default is not None else None,
    }
    _server_costs(judge.options.price_per_hour, batch, default_row, recommendation)
    return {
        "default": default_row,
        "recommendation": recommendation,
        "candidates": candidates,
        "warnings": warnings,
    }


def _state_floor(recommendation: dict, load: Mapping[str, Any] | None) -> None:
    """The recommended layout's harness floor, from its last search's answering level
    (module docstring), in ``serving.harness_floor_ms`` and a sentence in ``notes``."""
    for level in (load or {}).get("levels", []):
        if level.get("harness_floor_ms"):
            answering = LoadLevel.from_dict(level)
            recommendation["serving"]["harness_floor_ms"] = level["harness_floor_ms"]
            recommendation["notes"].append(
                f"{recommendation['label']}: {floor_statement(answering)}")
            return
    recommendation["serving"]["harness_floor_ms"] = None


LAYOUTS_WORTH_A_BUDGET = 4
"""The layouts a suggested ``--budget`` leaves room for, besides the default and the
confirmation."""


def _budget_starved(result: ServerResult, pairs: int) -> str | None:
    """The sentence for a search whose budget held the default and nothing else."""
    if result.stopped != "budget" or len(result.outcomes) > 1 or not result.outcomes:
        return None
    took = result.outcomes[0].elapsed_s or 0.0
    searches = 1 + LAYOUTS_WORTH_A_BUDGET + 2 * pairs
    return (
        f"the budget ran out before any layout but the default was tried: one SLO search took "
        f"{took:.0f} s here and the confirmation needs {2 * pairs} more, so give --budget "
        f"{took * searches:.0f} or more for {LAYOUTS_WORTH_A_BUDGET} layouts"
    )


def _server_costs(price: float | None, batch: int, default: dict, recommendation: dict) -> None:
    """``cost`` at the rate each layout kept within the SLO (requests x batch samples)."""
    for entry in (default, recommendation):
        qps = (entry.get("serving") or {}).get("max_qps_at_slo")
        priced = cost(price, qps * batch if qps else None)
        entry["cost"] = dict(priced, basis="the rate kept within the SLO") if priced else None


def confirm(judge: ServerEvaluator, winner: ServerCandidate, pairs: int) -> dict:
    """Alternating SLO searches of the default and the winner; :func:`confirmation`'s verdict."""
    judge.progress.phase(f"confirming {winner.key()} against the default")
    measured = alternating_rates(
        judge, [("default", DEFAULT_CANDIDATE), ("winner", winner)], pairs, "confirmation")
    return confirmation(measured["default"], measured["winner"], judge.options.threshold)


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v]
    return statistics.median(present) if present else None


def _ranked(outcomes: list[ServerOutcome]) -> list[ServerOutcome]:
    order = {MEASURED: 0, REJECTED: 1, FAILED: 2}
    return sorted(outcomes, key=lambda o: (order[o.status], -o.rate))


def _row(outcome: ServerOutcome, default_qps: float | None) -> dict:
    accuracy = outcome.accuracy or {}
    ratio = outcome.rate / default_qps if default_qps and outcome.rate else None
    config = dict(outcome.candidate.config)
    return {
        "label": outcome.candidate.key(),
        "config": to_config_dict(config),
        "serving": outcome.candidate.layout.to_dict(),
        "status": outcome.status,
        "reason": outcome.reason or (
            "no rate it was offered kept p99 within the SLO"
            if outcome.status == MEASURED and not outcome.max_qps_at_slo else ""
        ),
        "max_qps_at_slo": outcome.max_qps_at_slo,
        "speedup": None if ratio is None else {"median": ratio},
        "time_ms": None,
        "batch": None,
        "samples_per_s": None,
        "max_abs_error": accuracy.get("max_abs_error"),
        "max_rel_error": accuracy.get("max_rel_error"),
        "top1_agreement": accuracy.get("top1_agreement"),
        "metric": accuracy.get("metric"),
        "adoption": adoption(config),
        "artifact": None,
        "notes": [],
        "memory": (outcome.load or {}).get("memory") or outcome.info.get("memory"),
        **({"over_ceiling": True} if outcome.info.get("over_ceiling") else {}),
    }


def _serving(candidate: ServerCandidate, qps: float | None, slo_ms: float | None) -> dict:
    return candidate.layout.to_dict() | {"max_qps_at_slo": qps, "slo_ms": slo_ms}


def _recommend(
    winner: ServerCandidate, decided: dict, candidates: list[dict], slo_ms: float | None
) -> dict:
    config = normalize(dict(winner.config))
    # a pruned answer was not a candidate itself: its runtime's accuracy is its own
    row = next((c for c in candidates if c["label"] == winner.key()), None) or next(
        (c for c in candidates if normalize(dict(c["config"])) == config), {})
    kind = adoption(config)
    ratio = decided["ratio"] or {"median": None, "ci95": [None, None]}
    return {
        "label": winner.key(),
        "config": to_config_dict(config),
        "keep_default": False,
        "reason": decided["reason"],
        "keep_default_why": None,
        "speedup": {**ratio, "default_qps": decided["default_qps"],
                    "candidate_qps": decided["candidate_qps"]},
        "time_ms": None, "batch": None, "samples_per_s": None,
        "max_abs_error": row.get("max_abs_error"),
        "max_rel_error": row.get("max_rel_error"),
        "top1_agreement": row.get("top1_agreement"),
        "adoption": kind,
        "adoption_text": ADOPTION_TEXT[kind] + "; start it with `tfperf run --profile P -- CMD`",
        "artifact": None,
        "notes": [],
        "serving": _serving(winner, _median(decided["candidate_qps"]), slo_ms),
        "confirmation": decided,
        "memory": row.get("memory"),
    }


def _keep_default(
    decided: dict | None, default_qps: float | None, candidates: list[dict],
    slo_ms: float | None, threshold: float,
) -> dict:
    why = keep_default_why(candidates, None, threshold=threshold)
    reason = why["summary"]
    if decided is not None and why["case"] == "none_faster":
        # the winner's confirmation is what the user must hear, unless faster ones were rejected
        reason = decided["reason"]
        why["summary"] = f"{reason}; {why['summary']}"
    return {
        "label": "default",
        "config": to_config_dict({}),
        "keep_default": True,
        "reason": reason,
        "keep_default_why": why,
        "speedup": None if decided is None else decided["ratio"],
        "time_ms": None, "batch": None, "samples_per_s": None,
        "max_abs_error": 0.0, "max_rel_error": 0.0, "top1_agreement": None,
        "adoption": "env",
        "adoption_text": "nothing to change",
        "artifact": None,
        "notes": [],
        "serving": _serving(DEFAULT_CANDIDATE, default_qps, slo_ms),
        "confirmation": decided,
        "memory": next((c.get("memory") for c in candidates
                        if c["label"] == DEFAULT_CANDIDATE.key()),
                       None),
    }


def _warnings(
    result: ServerResult, default_memory: Memory | None, ceiling_mb: float | None
) -> list[str]:
    out = []
    default_over = over_ceiling(default_memory, ceiling_mb)
    if default_over:  # measured all the same: it is what every layout is compared with
        out.append(f"the default itself is over the memory ceiling: its {default_over}")
    if result.default is not None and result.default.status == MEASURED and not (
        result.default.max_qps_at_slo
    ):
        out.append(
            "the default met the SLO at no rate it was offered: the bound may be below the "
            "model's time for one request on this machine"
        )
    if result.default is not None and result.default.status != MEASURED:
        out.append(f"the default could not be measured under load: {result.default.reason}")
    return out

