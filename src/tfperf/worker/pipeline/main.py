"""The pipeline-analysis worker: ``python -m tfperf.worker.pipeline.main --out FILE ...``.

Contract (parent <-> worker): the parent names a result file (``--out``) and a progress file
(``--progress``). The worker imports TensorFlow, loads the target (``--target module:function``
or ``--demo``), measures, and writes one JSON document to ``--out`` atomically (a temporary
file renamed into place) and exits 0. A problem the user can fix is written as
``{"error": {"kind": "user", "message": one sentence}}`` with exit code 3; any other exception
as ``{"error": {"kind": "internal", ...}}``, exit 3. Progress lines (one phase per line) are
appended to the progress file for display only. Stdout/stderr are never parsed.

Result document (raw figures; the parent derives the statistics)::

    {"schema": 1, "target", "tf_version", "batch", "has_model", "ncpu",
     "steps",                                       # per block, after --min-block-seconds
     "rounds",
     "blocks": {"dataset": [s/batch per round], "compute": [s/step], "train": [s/step]},
     "stages": [...],                               # tfperf.worker.pipeline.stages
     "fixes": [{"name", "change", "baseline": [s], "candidate": [s]}, ...],
     "combined": [{"name", "change", "parts", "baseline", "candidate"}, ...],
     "skipped": [{"name", "reason"}],
     "advice": [{"name", "change", "reason", "stage"}],   # unmeasured, ranked (best first)
     "metric": "steps/s" | "batches/s", "gpu": {...}, "notes": [str]}

Every list of block times is paired by index with its ``baseline`` list: each candidate block
runs right next to a baseline block of its own (see :func:`paired`); ``compute`` pairs with
``train`` the same way.
"""

from __future__ import annotations

import argparse
import atexit
import json
import math
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from tfperf.core import gpu
from tfperf.core.protocol import EXIT_ERROR
from tfperf.core.stats import DEFAULT_THRESHOLD, MIN_PAIRS, paired_speedup
from tfperf.worker.pipeline import fixes as fx
from tfperf.worker.pipeline import stages, timing
from tfperf.worker.pipeline import target as tg
from tfperf.worker.pipeline.target import Target, TargetError, first_line
from tfperf.worker.tfimport import import_tensorflow, jax_is_needed

SCHEMA = 1


class Progress:
    """Appends phase lines to the parent's progress file (ignored when none was named)."""

    def __init__(self, path: str | None) -> None:
        self._path = path

    def __call__(self, text: str) -> None:
        if self._path:
            with open(self._path, "a", encoding="utf-8") as fh:
                fh.write(text + "\n")


def write_atomic(path: str, doc: dict) -> None:
    """Write ``doc`` as JSON to ``path`` via a temporary file and a rename."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def paired(
    baseline: Callable[[], float],
    candidates: list[Callable[[], float]],
    rounds: int,
    progress: Progress,
    what: str,
) -> list[tuple[list[float], list[float]]]:
    """Measure each candidate next to a baseline block of its own, round after round.

    In every round each candidate runs right before or right after a fresh baseline block
    (the order alternating), and the candidates take turns in a rotating order; the result is
    ``(baseline block times, candidate block times)`` per candidate, paired by index. Pairs of
    adjacent blocks see the same machine, so a machine whose speed drifts cancels out of the
    pair's ratio.
    """
    times: list[tuple[list[float], list[float]]] = [([], []) for _ in candidates]
    n = len(candidates)
    for r in range(rounds):
        progress(f"{what}: round {r + 1}/{rounds}")
        for k in range(n):
            i = (r + k) % n
            base, cand = times[i]
            if (r + i) % 2 == 0:
                base.append(baseline())
                cand.append(candidates[i]())
            else:
                cand.append(candidates[i]())
                base.append(baseline())
    return times


def _faster(baseline: list[float], candidate: list[float]) -> bool:
    """Whether a fix goes into the combination: significantly faster, or -- with too few
    rounds for significance -- faster by at least the threshold."""

    result = paired_speedup(baseline, candidate, threshold=DEFAULT_THRESHOLD)
    if result["verdict"] == "faster":
        return True
    median = result["median"]
    too_few = result["n_pairs"] < MIN_PAIRS
    return too_few and median is not None and median >= 1 + DEFAULT_THRESHOLD


class _Runs:
    """Block runners for one analysis: each returns the seconds per step of one block."""

    def __init__(self, target: Target, steps: int) -> None:

        self.steps = steps
        self.batch = timing.first_batch(target.dataset)
        self.step = timing.keras_step(target.model) if target.model is not None else None
        self.nvml, self.gpu_reason = gpu.open_nvml()
        self.sampler = gpu.UtilSampler(self.nvml) if self.nvml is not None else None

    def warm_up(self) -> None:

        if self.step is not None:
            for _ in range(3):
                timing.run_step(self.step, self.batch)

    def dataset(self, ds: Any) -> Callable[[], float]:

        return lambda: timing.dataset_block(ds, self.steps)

    def compute(self) -> Callable[[], float]:

        return lambda: timing.compute_block(self.step, self.batch, self.steps)

    def train(self, ds: Any, sample_gpu: bool = False) -> Callable[[], float]:
        """Training steps fed by ``ds``; with ``sample_gpu``, GPU utilisation is sampled."""

        sampler = self.sampler if sample_gpu else None

        def run() -> float:
            if sampler is not None:
                sampler.start()
            try:
                return timing.train_block(ds, self.step, self.steps)
            finally:
                if sampler is not None:
                    sampler.stop()

        return run

    def end_to_end(self, ds: Any) -> Callable[[], float]:
        """The figure fixes are judged by: training steps when there is a model, else batches."""
        return self.train(ds) if self.step is not None else self.dataset(ds)

    def gpu_section(self, model: Any) -> dict:

        checks = gpu.model_checks(model, self.nvml is not None)
        if self.nvml is None:
            return gpu.no_gpu(self.gpu_reason, checks)
        self.nvml.close()
        return {
            "available": True,
            "reason": "",
            "devices": self.nvml.names,
            "utilization": self.sampler.summary() if self.sampler else None,
            "bound": None,
            "model": checks,
        }


MAX_STEPS = 2000
"""Most steps per block when blocks are lengthened to ``min_block_s``."""


def block_steps(step_s: float, steps: int, min_block_s: float) -> int:
    """Steps per block: ``steps``, or more when a block of ``steps`` steps of ``step_s``
    seconds would be shorter than ``min_block_s`` (at most :data:`MAX_STEPS`). Blocks of a few
    milliseconds measure the machine's noise more than the pipeline."""
    if step_s <= 0 or steps * step_s >= min_block_s:
        return steps
    return max(steps, min(MAX_STEPS, math.ceil(min_block_s / step_s)))


def measure(
    target: Target,
    steps: int,
    rounds: int,
    progress: Progress,
    stage_seconds: float = 0.3,
    min_block_s: float = 0.0,
) -> dict:
    """All the measurements of one analysis (see the module docstring for the result)."""
    import psutil
    import tensorflow as tf

    progress("reading the first batch")
    runs = _Runs(target, steps)
    batch_size = stages.final_batch_size(target.dataset)
    progress("compiling the training step")
    runs.warm_up()
    ds = target.dataset
    notes = _set_block_length(runs, ds, steps, min_block_s, progress)
    blocks = _end_to_end_blocks(runs, ds, rounds, progress)
    progress("timing each stage of the pipeline")
    stage_rows = stages.measure_stages(ds, budget_s=stage_seconds, batch_hint=batch_size)
    bounding = next((r["stage"] for r in stage_rows if r["bounding"]), None)
    found = fx.candidates(target, fx.cpu_count(), psutil.virtual_memory().total, bounding)
    fix_rows, built = _measure_fixes(target, found.fixes, runs, rounds, progress)
    winners = [
        fix
        for (fix, _), row in zip(built, fix_rows, strict=True)
        if _faster(row["baseline"], row["candidate"])
    ]
    combined = _measure_combinations(target, built, winners, runs, rounds, progress)
    return {
        "schema": SCHEMA,
        "target": target.spec,
        "tf_version": tf.__version__,
        "batch": batch_size,
        "has_model": runs.step is not None,
        "ncpu": fx.cpu_count(),
        "steps": runs.steps,
        "rounds": rounds,
        "blocks": blocks,
        "stages": stage_rows,
        "fixes": fix_rows,
        "combined": combined,
        "skipped": found.skipped,
        "advice": found.unmeasured,
        "metric": "steps/s" if runs.step is not None else "batches/s",
        "gpu": runs.gpu_section(target.model),
        "notes": notes,
    }


def _set_block_length(
    runs: _Runs, ds: Any, steps: int, min_block_s: float, progress: Progress
) -> list[str]:
    """Lengthen blocks shorter than ``min_block_s``; the note that says so."""
    if min_block_s <= 0:
        return []
    progress("timing one block to set its length")
    runs.steps = block_steps(runs.end_to_end(ds)(), steps, min_block_s)
    if runs.steps == steps:
        return []
    return [
        f"{runs.steps} steps per block instead of {steps}, so that each block lasts "
        f"about {min_block_s:g} s (--min-block-seconds)"
    ]


def _end_to_end_blocks(runs: _Runs, ds: Any, rounds: int, progress: Progress) -> dict:
    """Blocks of the pipeline alone and, with a model, of the step alone and of both."""
    if runs.step is None:
        progress("measuring the pipeline")
        return {"dataset": [runs.dataset(ds)() for _ in range(rounds)]}
    # Compute-only blocks are the cheap baseline that the pipeline alone and the training
    # loop each run next to; the training loop's own pairs give the input share.
    (_, dataset), (compute, train) = paired(
        runs.compute(),
        [runs.dataset(ds), runs.train(ds, sample_gpu=True)],
        rounds,
        progress,
        "measuring pipeline, step and both",
    )
    return {"dataset": dataset, "compute": compute, "train": train}


def _measure_fixes(
    target: Target, candidates: list[fx.Fix], runs: _Runs, rounds: int, progress: Progress
) -> tuple[list[dict], list[tuple[Any, Any]]]:
    """Build every applicable fix and measure it against the user's pipeline, interleaved."""
    built = []
    for fix in candidates:
        progress(f"building fix {fix.name}")
        cand_ds = fix.build(target)
        _prime(cand_ds, whole_epoch="cache" in fix.name)
        built.append((fix, cand_ds))
    if not built:
        return [], []
    times = paired(
        runs.end_to_end(target.dataset),
        [runs.end_to_end(d) for _, d in built],
        rounds,
        progress,
        "measuring fixes",
    )
    rows = [
        {"name": fix.name, "change": fix.change, "baseline": base, "candidate": cand}
        for (fix, _), (base, cand) in zip(built, times, strict=True)
    ]
    return rows, built


def _measure_combinations(
    target: Target,
    built: list[tuple[Any, Any]],
    winners: list[Any],
    runs: _Runs,
    rounds: int,
    progress: Progress,
) -> list[dict]:
    """Measure the union of the winners and, where it differs, all structural fixes with them
    (a structural fix can pay only together with another, like batch-before-map once decoded
    images are cached)."""

    combos = []
    if len(winners) > 1:
        combos.append(winners)
    structural = [f for f, _ in built if f.structural]
    everything = [*structural, *(w for w in winners if not w.structural)]
    if len(everything) > 1 and {f.name for f in everything} != {w.name for w in winners}:
        combos.append(everything)
    if not combos:
        return []
    made = [fx.combine(c) for c in combos]
    runners = []
    for combo in made:
        progress(f"building the combination {combo.name}")
        ds = combo.build(target)
        _prime(ds, whole_epoch="cache" in combo.name)
        runners.append(runs.end_to_end(ds))
    times = paired(
        runs.end_to_end(target.dataset), runners, rounds, progress, "measuring combinations"
    )
    return [
        {
            "name": combo.name,
            "change": combo.change,
            "parts": [f.name for f in parts],
            "baseline": base,
            "candidate": cand,
        }
        for combo, parts, (base, cand) in zip(made, combos, times, strict=True)
    ]


def _prime(ds: Any, whole_epoch: bool = False, max_seconds: float = 60.0) -> None:
    """Run a few batches of ``ds`` (a fix that fails says so before it is timed); with
    ``whole_epoch``, one whole epoch of a finite ``ds``, which fills its cache."""
    import tensorflow as tf

    card = int(ds.cardinality())
    endless = card == int(tf.data.INFINITE_CARDINALITY)
    limit = None if whole_epoch and not endless else 3
    it = iter(ds)
    start = time.perf_counter()
    i = 0
    while limit is None or i < limit:
        try:
            timing.pull(it, i)
        except TargetError:
            if i == 0:
                raise
            break
        i += 1
        if time.perf_counter() - start > max_seconds:
            break


def main(argv: list[str] | None = None) -> int:
    """Entry point; see the module docstring for the contract."""
    parser = argparse.ArgumentParser(prog="python -m tfperf.worker.pipeline.main")
    parser.add_argument("--target")
    parser.add_argument("--demo", action="store_true")
    parser.add_argument("--out", required=True)
    parser.add_argument("--progress")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--stage-seconds", type=float, default=0.3)
    parser.add_argument("--min-block-seconds", type=float, default=0.0)
    args = parser.parse_args(argv)
    progress = Progress(args.progress)
    try:
        progress("importing TensorFlow")
        try:
            # jax, which TensorFlow imports when installed, is no part of an input pipeline
            import_tensorflow(hide_jax=not jax_is_needed("tf"))
        except ImportError as exc:
            raise TargetError(
                f"TensorFlow cannot be imported in {sys.executable} ({exc}); install it there "
                "(pip install tensorflow)"
            ) from exc

        spec = "tfperf.worker.pipeline.demo:make" if args.demo else args.target
        if not spec:
            raise TargetError("name a pipeline function (module:function) or use --demo")
        progress(f"building {spec}")
        doc = measure(
            tg.load(spec),
            args.steps,
            args.rounds,
            progress,
            args.stage_seconds,
            args.min_block_seconds,
        )
    except TargetError as exc:
        write_atomic(args.out, {"error": {"kind": "user", "message": str(exc)}})
        return EXIT_ERROR
    except MemoryError:
        write_atomic(
            args.out,
            {"error": {"kind": "user", "message": "the pipeline ran out of memory"}},
        )
        return EXIT_ERROR
    except Exception as exc:
        traceback.print_exc()
        write_atomic(
            args.out,
            {
                "error": {
                    "kind": "internal",
                    "message": f"{type(exc).__name__}: {first_line(exc)}",
                }
            },
        )
        return EXIT_ERROR
    write_atomic(args.out, doc)
    return 0


def _exit_fast(code: int) -> None:
    """Run the atexit handlers, flush, and exit without the interpreter's slow teardown of
    TensorFlow's modules (seconds, after the result is already written)."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit_fast(main())
