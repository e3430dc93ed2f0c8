"""``tfperf tune`` as a library function: find the fastest correct configuration for a workload.

Contract
--------

:func:`tune` ``(workload, options, ...) -> dict`` searches the pruned space of
:mod:`tfperf.tuning.space` with :class:`tfperf.tuning.search.Search` and returns the JSON document
``tfperf tune --json`` prints::

    {"run_id", "workload", "machine": {"fingerprint", "cpu", "cores"}, "install",
     "objective": "latency"|"throughput",
     "strategy", "stopped", "trials", "elapsed_s", "tolerance", "space_size",
     "max_memory_mb", "price_per_hour", "container_memory_limit_mb",
     "default": {"time_ms", "batch", "samples_per_s", "memory", "cost"},
     "recommendation": {"label", "config", "keep_default": bool, "reason", "keep_default_why",
                        "speedup": {"median", "ci95": [lo, hi], "p_value", "verdict", ...},
                        "time_ms", "batch", "samples_per_s", "max_abs_error",
                        "max_rel_error", "top1_agreement",
                        "adoption", "adoption_text", "artifact", "notes", "memory", "cost"},
     "candidates": [{"label", "config", "status": "measured"|"rejected"|"failed", "reason",
                     "speedup", "time_ms", "batch", "samples_per_s", "max_abs_error",
                     "max_rel_error", "top1_agreement", "metric", "adoption", "artifact",
                     "notes", "memory", "over_ceiling"?}],  # ranked

``memory`` is :class:`tfperf.core.memory.Memory`'s record; ``cost`` is ``{"price_per_hour",
"per_million_samples", "basis"}`` with ``--price-per-hour`` (``docs/memory.md``).
     "unavailable": [{"knob", "value", "reason"}], "environment": {"not_inherited"},
     "profile": path | None, "artifacts_dir": path | None, "warnings": [...]}

``time_ms`` is always the median time of one call (``batch`` samples). The objective decides
what a speedup compares: ``"latency"`` (the default) the time of one call; ``"throughput"``
(``TuneOptions(throughput=True)``, which adds the ``batch`` knob) the time per sample, a call's
time over its batch, so a speedup is the candidate's samples per second over the default's at
the workload's batch. Every comparison uses it: the interleaved rounds, the search's steps, the
confirmation and the ranking.

A tune runs in phases, each a function here: :func:`plan` (the machine, the space, the
objective), :func:`search` (the default started, every candidate tried by
:class:`tfperf.tuning.evaluate.Evaluator`), :func:`tfperf.tuning.conclude.conclude` (the winner
confirmed against the default, the recommendation) and :func:`save` (the profile, the converted
model). Everything is recorded in the store as it happens (a run of kind ``"tune"``, one trial
per evaluated candidate whose ``info["outcome"]`` is the :class:`tfperf.tuning.search.Outcome`),
so ``resume=RUN`` replays an interrupted tune's finished candidates without measuring them
again; Ctrl-C raises :class:`TuneInterrupted`, which names the run to resume.

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tfperf.benchmark import machine_summary
from tfperf.core.errors import UserError
from tfperf.core.knobs import label
from tfperf.core.memory import mib
from tfperf.machine.facts import collect_machine
from tfperf.profiles import default_profile_path, profile_from_tune, save_profile
from tfperf.runner.recorder import RunRecorder
from tfperf.store import Store
from tfperf.tuning.conclude import conclude, export_artifact, kept_lines
from tfperf.tuning.evaluate import Evaluator, Progress
from tfperf.tuning.options import TuneOptions
from tfperf.tuning.prune import prune, removals_ahead
from tfperf.tuning.search import Outcome, Search, SearchResult, cache_key
from tfperf.tuning.servertune import tune_server
from tfperf.tuning.space import (
    DEFAULT_BATCHES,
    TRAIN_SEARCH_ORDER,
    Space,
    SpaceFacts,
    build_space,
    machine_facts,
    to_config_dict,
    train_batches,
)
from tfperf.tuning.traintune import (
    TrainEvaluator,
    TrainLimits,
    is_training,
    train_document,
    train_limits,
)

KIND = "tune"
MAX_CALL_S = 1.0
"""A throughput tune's default batch sizes stop where one call of the default would take
longer than this (estimated from its time per sample): a block is at least one call, and a
candidate takes dozens of blocks."""


class TuneInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`tune`: run ``run_id`` is stored as ``interrupted`` with its
    ``finished`` candidates, which ``resume=run_id`` replays without measuring them again."""

    def __init__(self, run_id: int, finished: int) -> None:
        super().__init__(run_id, finished)
        self.run_id = run_id
        self.finished = finished


@dataclass
class Plan:
    """What :func:`plan` decided before anything runs."""

    machine: dict
    facts: SpaceFacts
    space: Space
    objective: str
    """``"latency"`` or ``"throughput"``."""
    batches: tuple[int, ...]
    given_space: bool


def tune(
    workload: Mapping[str, Any],
    options: TuneOptions | None = None,
    *,
    labels: Any = None,
    space: Space | None = None,
    progress: Progress | None = None,
) -> dict:
    """Tune ``workload`` (a workload dict); see the module docstring for the result.

    ``labels`` (one per sample row) add a task metric to the accuracy guard; ``space``
    replaces the space built for this machine (tests, sweeps).
    """
    options = options or TuneOptions()
    options.check()
    progress = progress or Progress()
    started = time.monotonic()
    found = plan(workload, options, space)
    record = options.record(found.objective, found.space.values, found.batches)
    with Store.open(options.store_path) as store:
        cache = resume_cache(store, options, workload, found.objective)
        with RunRecorder(store, KIND, options.command, workload, found.machine, record) as run:
            if is_training(workload):
                evaluator: Evaluator = TrainEvaluator(
                    workload, options, run=run, progress=progress, batches=found.batches
                )
            else:
                evaluator = Evaluator(
                    workload, options, labels=labels, run=run, progress=progress,
                    per_sample=found.objective == "throughput",
                )
            try:
                doc = _run(evaluator, found, options, cache, progress)
            except KeyboardInterrupt:
                run.finish("interrupted", {})
                raise TuneInterrupted(run.run_id, _finished(store, run.run_id)) from None
            finally:
                evaluator.close()
            doc.update(
                run_id=run.run_id,
                workload=dict(workload),
                machine=machine_summary(found.machine),
                install=(evaluator.default_ready or {}).get("install", {}),
                strategy=options.strategy,
                elapsed_s=time.monotonic() - started,
                tolerance=options.tolerance.to_dict(),
                container_memory_limit_mb=mib(
                    (found.machine.get("memory") or {}).get("cgroup_limit_bytes")
                ),
            )
            if isinstance(evaluator, TrainEvaluator):
                train_document(doc, evaluator)
            save(doc, found.machine, workload, options)
            summary = {"recommendation": doc["recommendation"], "profile": doc["profile"]}
            if doc.get("train"):  # the trajectories the report draws
                summary["train"] = doc["train"]
            if found.objective == "server":  # the rate the recommendation is measured against
                summary.update(default=doc["default"], slo_ms=doc["slo_ms"])
            run.finish("ok", summary)
    return doc


def _run(
    evaluator: Evaluator, found: Plan, options: TuneOptions, cache: dict, progress: Progress
) -> dict:
    """The search and its conclusion for the plan's objective: the document's core, with
    ``stopped``, ``trials``, ``space_size`` and ``unavailable``."""
    if found.objective == "server":
        doc = tune_server(evaluator, found.space, options, progress)
    else:
        result, space_used, ready = search(evaluator, found, options, cache, progress)
        doc = _document(evaluator, result, options, ready, found.objective)
        doc.update(
            stopped=result.stopped,
            trials=len(result.outcomes),
            space_size=space_used.size(),
            unavailable=space_used.unavailable + _unreached(evaluator, result, options),
        )
        doc["recommendation"]["pruned"] = list(result.pruned)
        doc["recommendation"]["kept"] = kept_lines(result, doc["recommendation"])
    return _warn_environment(doc, evaluator)


def plan(workload: Mapping[str, Any], options: TuneOptions, space: Space | None) -> Plan:
    """The machine's facts, the pruned space (restricted to ``options.knobs``) and the
    objective, before any worker starts."""
    machine = collect_machine()
    train = is_training(workload)
    if train and options.goal == "server":
        raise UserError(
            f"{workload.get('builtin') or workload.get('path')} is a training workload and a "
            "server answers requests: "
            "tune an inference workload with --objective server."
        )
    own = workload.get("kind") in ("model", "train")
    fmt = workload.get("format", "builtin") if own else "builtin"
    batch = int(workload.get("batch") or 1)
    batches = _batch_ladder(options, batch, train) if options.throughput else ()
    facts = machine_facts(machine, fmt, train, options.runtimes, batch, batches)
    chosen = _restricted(space or build_space(facts), options.knobs)
    throughput = options.goal == "throughput" or "batch" in chosen.knobs()
    objective = "server" if options.goal == "server" else (
        "throughput" if throughput else "latency"
    )
    return Plan(machine, facts, chosen, objective, batches, space is not None)


def search(
    evaluator: Evaluator,
    found: Plan,
    options: TuneOptions,
    cache: dict,
    progress: Progress,
) -> tuple[SearchResult, Space, dict]:
    """Start the default, replay a resumed tune's candidates, and search; the search's
    result, the space it searched and the default's ``ready`` message."""
    progress.phase("starting the default configuration")
    ready = evaluator.start_default()
    space = found.space
    moved = evaluator.default_batch != found.facts.batch
    if options.throughput and not found.given_space and moved:
        # the inputs file (or factory) set the batch: the ladder is around that one
        batches = _batch_ladder(options, evaluator.default_batch, found.facts.train)
        refit = replace(found.facts, batch=evaluator.default_batch, batches=batches)
        space = _restricted(build_space(refit), options.knobs)
    training = isinstance(evaluator, TrainEvaluator)
    if training:
        space = evaluator.fit_space(space)
    if options.throughput and options.batch_sizes is None:
        space = _cap_batches(space, ready)
    for outcome in cache.values():
        trial = evaluator.run.trial(outcome.label, to_config_dict(outcome.config), "candidate")
        evaluator.finish_trial(trial, outcome)
    limits = train_limits(evaluator, space, options, progress) if training else TrainLimits(
        options.max_trials, options.budget_s)
    shown = limits.max_trials if limits.planned is None else limits.planned
    progress.start(shown, limits.budget_s, resumed=len(cache))
    searching = Search(
        space,
        evaluator,
        max_trials=limits.max_trials,
        budget_s=limits.budget_s,
        reserve=limits.reserve,
        cache=cache,
        seed=options.seed,
        # a training search has its own order (TRAIN_SEARCH_ORDER), budget or not
        runtime_first=not training and (
            options.max_trials is not None or options.budget_s is not None),
        knob_order=TRAIN_SEARCH_ORDER if training else None,
        reach_first=training,
        # --quick's training search: one candidate of every knob, then the answer is pruned
        sweeps=0 if training and options.quick else 3,
        after=functools.partial(removals_ahead, space=space) if training else None,
        look_again=limits.look_again,
        reach_again=limits.reach_again,
        resize=evaluator.resize_ladder if training else None,
    )
    result = searching.run(options.strategy)
    space = searching.space  # sized again along the way (a training tune's ladder)
    if training:
        evaluator.take_reference()  # where no candidate needed it
    if len(space.canonical(result.incumbent)) > 1:
        progress.phase(f"pruning {label(result.incumbent)}: each knob removed in turn, kept "
                       "only where the answer is significantly slower without it")
        result = prune(result, space, evaluator, say=progress.phase)
    return result, space, ready


def _unreached(evaluator: Evaluator, result: SearchResult, options: TuneOptions) -> list[dict]:
    """The knobs the search never tried, each with why: the answer's runtime, where they do not
    act (:func:`_off_runtime`), or, in a training search, the budget (or trial limit), with the
    budget that would reach them (what its candidates cost here, added to the one given)."""
    off = _off_runtime(result)
    if not isinstance(evaluator, TrainEvaluator) or not result.unreached:
        return off
    each = evaluator.candidate_cost_s()
    if result.stopped == "max-trials":
        why = f"not tried: the trial limit ({options.max_trials}); --max-trials " \
              f"{len(result.outcomes) + len(result.unreached)} would reach it"
    else:
        need = (evaluator.search_budget_s or 0) + each * len(result.unreached)
        why = f"not tried: budget; --budget {need:.0f} would reach it (about {each:.0f} s a " \
              "candidate here)"
    return off + [{"knob": k, "value": "any", "reason": why} for k in result.unreached]


def _off_runtime(result: SearchResult) -> list[dict]:
    """The knobs left untried because the answer moved to a runtime they do not act on before
    the search reached them: a reader must know that they were not measured on the runtime
    the search left either."""
    runtime = result.incumbent.get("runtime")
    if not result.off_runtime or not runtime:
        return []
    where = RUNTIME_WORDS.get(runtime, runtime)
    why = (f"not tried: the answer runs on {where}, where these knobs do not act; the search "
           f"moved there before it reached them, so they were not measured on the default's "
           f"runtime either")
    return [{"knob": "/".join(result.off_runtime), "value": "any", "reason": why}]


RUNTIME_WORDS = {"keras-jax": "JAX (keras-jax)", "keras-tf": "TensorFlow (keras-tf)"}
"""How a reason names a runtime where its label alone says little."""


def _document(
    evaluator: Evaluator, result: SearchResult, options: TuneOptions, ready: dict, objective: str
) -> dict:
    """The recommendation and the warnings a person must read with it."""
    doc = conclude(evaluator, result, options.confirm_rounds, ready)
    doc["objective"] = objective
    doc["max_memory_mb"] = options.max_memory_mb
    doc["price_per_hour"] = options.price_per_hour
    return doc


def _warn_environment(doc: dict, evaluator: Evaluator) -> dict:
    """Add the warnings a person must read with any recommendation."""
    if evaluator.reference_is_flat():
        doc["warnings"].append(
            "the model's outputs on the sample inputs are (nearly) constant, so the "
            "accuracy check cannot tell a variant from the original; tune with real "
            "weights and --inputs (and --labels) for a check that means something"
        )
    if evaluator.not_inherited:
        names = ", ".join(sorted(evaluator.not_inherited))
        doc["warnings"].append(
            f"you had set {names}; tune measured without them (every configuration "
            "sets its own environment)"
        )
    doc["environment"] = {"not_inherited": evaluator.not_inherited}
    return doc


def save(doc: dict, machine: dict, workload: Mapping[str, Any], options: TuneOptions) -> None:
    """Write the profile and the winner's converted model; their paths go into ``doc``."""
    keys = {"workload": dict(workload), "machine": doc["machine"], "objective": doc["objective"]}
    target = Path(options.profile_out) if options.profile_out else default_profile_path(keys)
    artifacts = options.artifacts_dir
    if artifacts is None:
        artifacts = str(target.with_name(target.stem + "-model"))
    doc["artifacts_dir"] = export_artifact(doc["recommendation"], artifacts)
    doc["profile"] = str(save_profile(profile_from_tune(doc, machine), target))


def _finished(store: Any, run_id: int) -> int:
    trials = store.load_run(run_id)["trials"]
    return sum(t["role"] == "candidate" and bool(t["info"]) for t in trials)


def _cap_batches(space: Space, ready: Mapping[str, Any]) -> Space:
    """``space`` without the batch sizes whose calls would take over :data:`MAX_CALL_S`."""
    tail = (ready.get("warmup") or {}).get("samples_s", [])[-5:]
    if not tail:
        return space
    per_sample = statistics.median(tail) / int(ready.get("batch") or 1)
    too_big = tuple(b for b in space.values.get("batch", ())[1:] if b * per_sample > MAX_CALL_S)
    if not too_big:
        return space
    return space.drop(
        "batch",
        too_big,
        f"a call would take over {MAX_CALL_S:g} s at the default's {per_sample * 1e3:.3g} ms "
        "per sample; name it in --batch-sizes to try it anyway",
    )


def _batch_ladder(options: TuneOptions, batch: int, own_training: bool) -> tuple[int, ...]:
    """The batch sizes a throughput tune tries: ``--batch-sizes``, else a training step's
    multiples of its batch, else :data:`DEFAULT_BATCHES`."""
    if options.batch_sizes:
        return tuple(options.batch_sizes)
    return train_batches(batch) if own_training else DEFAULT_BATCHES


def _restricted(space: Space, knobs: tuple[str, ...] | None) -> Space:
    """``space`` with only ``knobs`` tuned (all of them when ``None``)."""
    return space.restrict(knobs) if knobs else space


def resume_cache(
    store: Any, options: TuneOptions, workload: Mapping[str, Any], objective: str
) -> dict[str, Outcome]:
    """The finished candidates of the tune ``options.resume`` names, by search cache key
    (empty when not resuming)."""
    if options.resume is None:
        return {}
    loaded = store.load_run(options.resume)
    run = loaded["run"]
    if run["kind"] != KIND:
        raise UserError(f"run {run['id']} is a {run['kind']} run, not a tune; pass a tune run.")
    if run["workload"] != dict(workload):
        raise UserError(
            f"run {run['id']} tuned another workload; resume it with the same model and options."
        )
    tuned_for = (run.get("settings") or {}).get("objective", "latency")
    if tuned_for != objective:
        flag = "with --throughput" if tuned_for == "throughput" else "without --throughput"
        raise UserError(f"run {run['id']} tuned for {tuned_for}; resume it {flag}.")
    cache = {}
    for trial in loaded["trials"]:
        data = (trial.get("info") or {}).get("outcome")
        if trial["status"] in ("ok", "rejected", "failed") and data:
            outcome = Outcome.from_dict(data)
            cache[cache_key(outcome.config, outcome.incumbent)] = outcome
    return cache
