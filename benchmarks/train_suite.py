"""Training user-style models and custom loops faster on this CPU: each knob alone, tuned, guarded.

For each model of ``benchmarks/train/suite_models.py`` (a GRU text classifier, a CNN with batch
norm, a transformer encoder, a tabular MLP with dropout; unseeded, learnable labels) and each
custom training loop (the built-in GAN, ``--workload gan-train``; a plain Python step training
an MLP, ``eager_mlp``; a contrastive loop whose step returns a dict, ``contrastive``):

1. ``tfperf tune --train`` (the library's :func:`tfperf.tuning.tune`) over every training knob,
   as a user runs it: the default tune (its search's default budget, ``--tune-budget`` sets
   another) and a ``--quick`` one, each with its wall time.
2. One interleaved measurement (:func:`tfperf.runner.measure.measure`) of the default, each knob
   alone (steps_per_execution 32, ``mixed_bfloat16``, ``jit_compile``, the tuned input
   pipeline, oneDNN off, one intra-op thread, one inter-op thread, tcmalloc and jemalloc where
   installed, Keras on JAX where jax is installed, and on one CPU) and both tuned
   configurations, every worker
   then running the training guard (the same initial weights and batches, ``--guard-steps``
   steps) judged by
   :func:`tfperf.tuning.trainguard.judge`.

A loop's singles are its step in the other form (eager where it is a ``tf.function``, a graph
where it is plain Python) and the knobs above but Keras on JAX, which runs Keras' own train
step only. Prints one table: steps/s with its 95% interval, the speedup over the default with its
interval, and the guard's figures (the default's first and final loss, the configuration's final
loss, the verdict); then each loop's step eager, as a graph, under XLA and 32 steps a call side by
side; then, per model, the tuned configuration against the best single knob that passed the
guard (medians from the same run; the bar is 0.95) and the quick tune's against the default
tune's (the bar is 0.9), with each tune's wall time.

Usage (under the measuring lock): ``flock /tmp/tfperf-measure.lock python
benchmarks/train_suite.py [--models rnn,cnn] [--budget 15] [--tune-budget 600]``;
``--no-tune --singles runtime,steps_per_execution`` measures the default and those knobs alone;
``--no-tune --configs 'runtime=keras-jax,steps_per_execution=16;...'`` the default and those.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from tfperf.accuracy import load_outputs
from tfperf.benchmark import train_figures
from tfperf.core import stats
from tfperf.core.allocators import find_allocator
from tfperf.core.config import Config
from tfperf.core.knobs import jax_available, label
from tfperf.modelref import TrainGuard, builtin_train_target, resolve_train_target
from tfperf.runner.measure import Settings, measure
from tfperf.tuning import tune
from tfperf.tuning.options import options_from_args
from tfperf.tuning.trainguard import TrainTolerance, judge

HERE = Path(__file__).resolve().parent / "train"
MODELS = {"rnn": None, "cnn": 64, "transformer": None, "mlp": 256}
"""Model -> the batch its (model, x, y) arrays are cut into (None: its dataset's own)."""
LOOPS = {"gan": "gan-train", "eager_mlp": "suite_models:eager_mlp",
         "contrastive": "suite_models:contrastive"}
"""Custom training loops: the built-in GAN (``--workload gan-train``) and two of the suite's."""
FORMS = {"gan": {"graph": False}, "eager_mlp": {"graph": True},
         "contrastive": {"graph": False}}
"""Each loop's step in the other form than it is written in: eager where it is a
``tf.function``, a graph where it is plain Python (side by side with XLA and N steps a call)."""
SINGLES = [
    {"precision": "bf16"},
    {"xla": "jit"},
    {"steps_per_execution": 32},
    {"input_pipeline": "tuned"},
    {"onednn": False},
    {"intra_threads": 1},
    {"inter_threads": 1},
    *({"allocator": name} for name in ("tcmalloc", "jemalloc") if find_allocator(name)),
    *([{"runtime": "keras-jax"}, {"runtime": "keras-jax", "runtime_threads": 1}]
      if jax_available() else []),
]
"""Each knob alone; JAX's threads knob (the CPUs it runs on) exists on JAX only, so one CPU
there is measured with the runtime."""


def suite_workload(model: str, guard_steps: int | None = None) -> dict:
    """The training workload of a suite model or loop, as ``tfperf --train`` makes it."""
    if LOOPS.get(model, "").endswith("-train"):
        return builtin_train_target(LOOPS[model], guard=TrainGuard(guard_steps))
    target = LOOPS.get(model) or f"suite_models:{model}"
    return resolve_train_target(target, batch=MODELS.get(model), guard_steps=guard_steps)


def suite_configs(model: str, singles: list[dict]) -> list[dict]:
    """The default and the single configurations measured for ``model``: a loop's other form
    first, and no Keras on JAX for a loop (it runs Keras' own train step); arrays reach fit
    through Keras' own pipeline, which has no input pipeline to tune."""
    if model in LOOPS:
        return [{}, FORMS[model], *(c for c in singles if "runtime" not in c)]
    return [{}, *(c for c in singles if MODELS[model] is None or "input_pipeline" not in c)]


def forms_line(model: str, rows: list[dict]) -> str | None:
    """A loop's step eager, as a graph, under XLA and 32 steps a call: ms per step each."""
    by = {r["label"]: r.get("train") or {} for r in rows}
    graph_first = FORMS.get(model) == {"graph": True}
    order = (["default", "graph=on"] if graph_first else ["graph=off", "default"]) + [
        "xla=jit", "steps_per_execution=32"]
    if model not in LOOPS or not all(by.get(k) for k in order):
        return None
    eager, graph, xla, steps = (by[k]["ms_per_step"] for k in order)
    return (f"| {model} | {_f(eager)} | {_f(graph)} ({eager / graph:.1f}x) | {_f(xla)} "
            f"({eager / xla:.1f}x) | {_f(steps)} ({eager / steps:.1f}x) |")


def tuned_config(workload: dict, store: str, budget_s: float | None, quick: bool) -> tuple:
    """The tune's answer (``{}``: keep the default) and its wall time in seconds."""
    options = options_from_args(
        quick=quick, budget=budget_s, store=store,
        profile_out=str(Path(tempfile.mkdtemp()) / "p.json"), candidate_timeout=240,
    )
    started = time.monotonic()
    doc = tune(workload, options)
    took = time.monotonic() - started
    rec = doc["recommendation"]
    for row in doc["candidates"]:
        sp = row.get("speedup") or {}
        guard = (row.get("guard") or {}).get("verdict")
        print(f"  tune {workload['path']}: {row['label']} {row['status']} "
              f"{_f(sp.get('median'), '.2f')} {sp.get('ci95')} guard {guard}"
              f"{'' if row['status'] == 'measured' else ': ' + str(row.get('reason'))}",
              file=sys.stderr)
    answer = {} if rec["keep_default"] else dict(Config.from_dict(rec["config"]).changes())
    print(f"  tune{' --quick' if quick else ''} {workload['path']}: {rec['label']}: "
          f"{rec.get('reason')} ({doc['trials']} trials, stopped: {doc['stopped']}, "
          f"{took:.0f} s; pruned {[p['knob'] for p in rec.get('pruned') or []]}; every knob "
          f"kept on a removal measured significantly slower: {earned(rec, answer)})",
          file=sys.stderr)
    for word in ("kept", "pruned"):
        for entry in rec.get(word) or []:
            print(f"    {word}: {entry['why']}", file=sys.stderr)
    return answer, took


def earned(rec: dict, answer: dict) -> str:
    """"yes" where every knob of the answer is in ``recommendation.kept`` on a removal whose
    verdict was "slower" in this tune, else the knobs that are not."""
    slower = {k["knob"] for k in rec.get("kept") or []
              if (k.get("speed_without") or {}).get("verdict") == "slower"}
    unearned = sorted(set(answer) - slower)
    return "yes" if not unearned else f"NO ({', '.join(unearned)})"


def measure_all(workload: dict, configs: list[dict], budget_s: float) -> list[dict]:
    """One interleaved run of ``configs`` (the default first) with each worker's guard."""
    out_dir = tempfile.mkdtemp(prefix="train-suite-")
    settings = Settings(budget_s=budget_s, outputs_dir=out_dir, timeout_s=300, extras=(),
                        parallel_start=True)
    m = measure(workload, [Config.from_dict(c) for c in configs], settings)
    base = m.trials[0]
    busy = m.other_cpu_share
    print(f"  {workload['path']}: other processes kept "
          f"{'?' if busy is None else format(busy, '.0%')} of the CPUs busy", file=sys.stderr)
    reference = load_outputs(base.outputs_path) if base.outputs_path else None
    rows = []
    for trial, config in zip(m.trials, configs, strict=True):
        row = {"label": label(config), "config": config, "status": trial.status}
        if trial.status == "ok" and trial.samples_s:
            summary = stats.summarize(trial.samples_s, batch=int(trial.ready.get("batch") or 1))
            row["train"] = train_figures(trial.ready["train"], summary)
            row["speedup"] = m.speedup(base, trial, 0.03) if trial is not base else None
        if reference is not None and trial.outputs_path and trial is not base:
            reduced = config.get("precision", "fp32") != "fp32"
            row["guard"] = judge(reference, load_outputs(trial.outputs_path), reduced,
                                 TrainTolerance())
        elif trial is base and reference is not None:
            row["guard"] = judge(reference, reference, False, TrainTolerance())
        row["error"] = (trial.error or {}).get("reason")
        rows.append(row)
    return rows


def _f(value: float | None, spec: str = ".3g") -> str:
    return "-" if value is None else format(value, spec)


def print_rows(model: str, rows: list[dict], tuned_label: str) -> None:
    for row in rows:
        name = row["label"] + (" (tuned)" if row["label"] == tuned_label else "")
        train = row.get("train") or {}
        low, high = train.get("steps_per_s_ci95") or (None, None)
        sp = row.get("speedup") or {}
        sp_ci = sp.get("ci95") or (None, None)
        g = (row.get("guard") or {}).get("guard") or {}
        verdict = g.get("verdict", "-") if row["label"] != "default" else "reference"
        speed = "1" if not sp else f"{_f(sp['median'], '.2f')} [{_f(sp_ci[0], '.2f')}-" \
            f"{_f(sp_ci[1], '.2f')}]"
        losses = f"{_f(g.get('default_first_loss'), '.4g')} -> " \
            f"{_f(g.get('default_final_loss'), '.4g')}"
        error = f" ({row['error']})" if row.get("error") else ""
        print(
            f"| {model} | {name} | {_f(train.get('ms_per_step'))} | "
            f"{_f(train.get('steps_per_s'))} [{_f(low)}-{_f(high)}] | {speed} | {losses} | "
            f"{_f(g.get('final_loss'), '.4g')} | {verdict}{error} |",
            flush=True,
        )


def verdict_line(model: str, rows: list[dict], tuned_label: str, quick_label: str,
                 walls: tuple[float, float]) -> str:
    """The tuned configuration against the best single knob that passed the guard (the tuned
    configuration itself when it is a single knob), the quick tune's against it, and each
    tune's wall time."""
    by = {r["label"]: r for r in rows}
    tuned = by.get(tuned_label) or by["default"]
    quick = by.get(quick_label) or by["default"]
    quick_ratio = quick["train"]["steps_per_s"] / tuned["train"]["steps_per_s"]
    return (f"{_best_line(model, rows, tuned_label)}; tune {walls[0]:.0f} s; --quick "
            f"({quick_label}, {walls[1]:.0f} s) reaches {quick_ratio:.2f} of the tune's answer")


def _best_line(model: str, rows: list[dict], tuned_label: str) -> str:
    by = {r["label"]: r for r in rows}
    singles = {label(c) for c in SINGLES}
    passed = [
        r for r in rows[1:]
        if r["label"] in singles and r.get("train")
        and ((r.get("guard") or {}).get("accepted"))
    ]
    tuned = by.get(tuned_label) or by["default"]
    best = max(passed, key=lambda r: r["train"]["steps_per_s"], default=None)
    if best is None:
        return f"{model}: no single knob passed the guard; tuned = {tuned_label}"
    ratio = tuned["train"]["steps_per_s"] / best["train"]["steps_per_s"]
    return (
        f"{model}: tuned ({tuned_label}) reaches {ratio:.2f} of the best single knob that "
        f"passed the guard ({best['label']})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join([*MODELS, *LOOPS]))
    parser.add_argument("--budget", type=float, default=15.0, help="seconds of steady rounds")
    parser.add_argument("--tune-budget", type=float, default=None,
                        help="seconds of each tune's search (default: tune's own, as a user "
                        "runs it)")
    parser.add_argument("--guard-steps", type=int, default=100)
    parser.add_argument("--singles", default=None,
                        help="only the single configurations of these knobs (e.g. "
                        "runtime,steps_per_execution)")
    parser.add_argument("--configs", default=None,
                        help="measure these configurations too, ';' between them, ',' between "
                        "a configuration's knobs (e.g. 'runtime=keras-jax,steps_per_execution=16;"
                        "runtime=keras-jax,steps_per_execution=32'); without --singles, no single")
    parser.add_argument("--no-tune", action="store_true",
                        help="measure the default and the single configurations only")
    args = parser.parse_args()
    chosen = set(args.singles.split(",")) if args.singles else None
    if chosen is None and args.configs:
        chosen = set()
    singles = [c for c in SINGLES if chosen is None or set(c) <= chosen]
    singles += [dict(Config.parse(c.split(","), []).changes())
                for c in (args.configs or "").split(";") if c]
    os.chdir(HERE)
    store = str(Path(tempfile.mkdtemp()) / "suite.db")
    print("| model | config | ms/step | steps/s [95% CI] | speedup [95% CI] | default loss "
          "first -> final | final loss | guard |")
    print("|---|---|---|---|---|---|---|---|")
    verdicts = []
    started = time.monotonic()
    forms = []
    for model in args.models.split(","):
        workload = suite_workload(model, args.guard_steps)
        tuned, wall, quick, quick_wall = {}, 0.0, {}, 0.0
        if not args.no_tune:  # each tune guards over its own default steps, as a user's does
            as_typed = suite_workload(model)
            tuned, wall = tuned_config(as_typed, store, args.tune_budget, quick=False)
            quick, quick_wall = tuned_config(as_typed, store, None, quick=True)
        configs = suite_configs(model, singles)
        for answer in (tuned, quick):
            if answer and answer not in configs:
                configs.append(answer)
        rows = measure_all(workload, configs, args.budget)
        print_rows(model, rows, "" if args.no_tune else label(tuned))
        forms.append(forms_line(model, rows))
        if not args.no_tune:
            verdicts.append(verdict_line(model, rows, label(tuned), label(quick),
                                         (wall, quick_wall)))
    if any(forms):
        print("\n| loop | eager ms/step | graph | XLA | 32 steps a call |\n|---|---|---|---|---|")
        print("\n".join(line for line in forms if line))
    print()
    for line in verdicts:
        print(line)
    print(f"total {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
