"""Speed and memory of every runtime, side by side, on the built-in batch-1 inference workloads.

For each workload the default (TensorFlow) is measured against each runtime candidate through
tune's own evaluator (accuracy guard, then interleaved rounds), and each candidate's memory is
read the way tune reads it (``tfperf.runner.memory.memory_of``): TensorFlow's in its worker, a
converted runtime's (LiteRT, OpenVINO, XLA AOT) in a process that loads its artifact alone.
Printed per candidate: ms per call, the speedup with its 95% interval, peak and steady RSS,
the model's share (RSS once ready minus RSS before it was loaded), the artifact's size on disk,
and for a converted runtime the peak of the worker that converted it.

    python benchmarks/memory_suite.py                       # standard sizes, every workload
    python benchmarks/memory_suite.py --size tiny --workloads mlp --rounds 6
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

INFERENCE = ("lstm", "encoder", "mobilenetv2", "resnet50", "mlp", "wide-deep")
RUNTIMES = ("litert", "litert-dynint8", "litert-fp16", "litert-int8", "openvino-f32",
            "openvino-bf16", "xla-aot")
HEADER = (f"{'workload':<12} {'runtime':<16} {'ms':>8} {'speedup (95% CI)':>20} {'peak':>6} "
          f"{'steady':>6} {'model':>6} {'file':>6} {'worker':>6}  (MB; 'worker': the converting "
          "worker's peak)")


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _line(name: str, runtime: str, ms: float | None, speed: dict | None, memory: dict) -> str:
    speed = speed or {}
    low, high = speed.get("ci95") or [None, None]
    shown = (f"{speed['median']:.2f}x ({low:.2f}-{high:.2f})" if speed.get("median") and low
             else "1.00x (default)" if runtime == "tf" else "-")
    return (f"{name:<12} {runtime:<16} {'-' if ms is None else format(ms, '.3f'):>8} "
            f"{shown:>20} {_mb(memory.get('peak_rss_mb')):>6} "
            f"{_mb(memory.get('steady_rss_mb')):>6} {_mb(memory.get('model_mb')):>6} "
            f"{_mb(memory.get('artifact_mb')):>6} {_mb(memory.get('worker_peak_rss_mb')):>6}")


def _workload(name: str, size: str, rounds: int, store) -> None:
    from tfperf.core.knobs import openvino_available
    from tfperf.core.workloads import builtin_workload
    from tfperf.runner.recorder import RunRecorder
    from tfperf.tuning import TuneOptions
    from tfperf.tuning.evaluate import Evaluator

    workload = builtin_workload(name, size=size, batch=1)
    run = RunRecorder(store, "memory-suite", "benchmarks/memory_suite.py", workload, {}, {})
    options = TuneOptions(min_rounds=rounds, max_rounds=rounds, candidate_timeout_s=1200.0)
    evaluator = Evaluator(workload, options, run=run)
    try:
        ready = evaluator.start_default()
        tail = ready["warmup"]["samples_s"][-5:]
        default_ms = sorted(tail)[len(tail) // 2] * 1e3
        print(_line(name, "tf", default_ms, None, evaluator.default_memory.to_dict()), flush=True)
        for runtime in RUNTIMES:
            if runtime.startswith("openvino") and not openvino_available():
                continue
            outcome = evaluator({"runtime": runtime}, {}, None)
            memory = outcome.info.get("memory") or {}
            if outcome.status == "measured":
                print(_line(name, runtime, outcome.time_ms, outcome.speedup, memory), flush=True)
            else:
                print(f"{name:<12} {runtime:<16} {outcome.status}: {outcome.reason}", flush=True)
            evaluator.workers.drop(f"runtime={runtime}")  # one candidate's worker at a time
    finally:
        evaluator.close()
    run.finish("ok", {})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("standard", "tiny"), default="standard")
    parser.add_argument("--workloads", default=",".join(INFERENCE))
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args(argv)

    from tfperf.machine.facts import collect_machine
    from tfperf.store import Store

    # The XLA AOT runtime archive is built once per install, before anything is timed.
    subprocess.run([sys.executable, "-m", "tfperf.worker.aot"], check=True, capture_output=True)
    machine = collect_machine()
    store_path = Path(tempfile.mkdtemp(prefix="memory-suite-")) / "store.sqlite"
    print(f"machine: {machine['cpu']['model']}, {machine['cores']['usable']} usable cores; "
          f"store {store_path}")
    print(HEADER)
    with Store.open(str(store_path)) as store:
        for name in args.workloads.split(","):
            _workload(name, args.size, args.rounds, store)
    return 0


if __name__ == "__main__":
    sys.exit(main())
