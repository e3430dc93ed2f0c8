"""What a measurement costs beyond the workload itself.

Printed, for one workload (default: the tiny mlp, whose calls are short so that overheads
show):

1. interpreter start: ``python -c pass`` (median of 5);
2. a worker's start, phase by phase: process start to TensorFlow imported, the import, the
   build/load, the first call (tracing), the warm-up; and the cold-start figure tfperf
   reports;
3. the per-block round trip: wall time of ``run_block(n)`` seen by the parent minus the sum of
   the samples the worker timed (pipe, JSON, scheduling), median over blocks, for several n;
4. a whole ``bench`` with a small budget: total wall time against the budget.

Usage: ``python benchmarks/overhead.py [--workload mlp] [--size tiny] [--budget 5]``.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def interpreter_start(runs: int = 5) -> float:
    """Median seconds of ``python -c pass``."""
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls)


def worker_costs(workload: dict, calls: list[int], blocks: int) -> dict:
    """Start phases of one worker and the per-block round trip for each block size."""
    from tfperf.core.config import Config
    from tfperf.runner.handle import Worker

    with Worker(workload, Config(), timeout_s=300) as worker:
        ready = worker.wait_ready()
        trips: dict[int, float] = {}
        per_call = statistics.median(ready["warmup"]["samples_s"][-5:])
        for n in calls:
            extra = []
            for _ in range(blocks):
                t0 = time.perf_counter()
                samples = worker.run_block(n)
                extra.append(time.perf_counter() - t0 - sum(samples))
            trips[n] = statistics.median(extra)
    warm = sum(ready["warmup"]["samples_s"])
    phases = ("import_s", "load_s", "first_call_s")
    before_import = ready["startup_s"] - warm - sum(ready[k] for k in phases)
    return {
        "ready": ready,
        "before_import": before_import,
        "warmup_s": warm,
        "warmup_n": len(ready["warmup"]["samples_s"]),
        "cold_start_s": ready["startup_s"] - warm,
        "per_call": per_call,
        "trips": trips,
    }


def whole_bench(workload: dict, budget: float) -> tuple[float, dict]:
    """Wall seconds of ``bench(workload, [default], budget)`` and its document."""
    from tfperf.benchmark import BenchOptions, bench
    from tfperf.core.config import Config
    from tfperf.store import Store

    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "s.sqlite") as store:
        t0 = time.perf_counter()
        doc = bench(
            workload, [Config()], store=store, options=BenchOptions(budget_s=budget, peak=False)
        )
        return time.perf_counter() - t0, doc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="mlp")
    parser.add_argument("--size", default="tiny", choices=["standard", "tiny"])
    parser.add_argument("--budget", type=float, default=5.0)
    parser.add_argument("--blocks", type=int, default=30)
    args = parser.parse_args()
    workload = {"kind": "builtin", "name": args.workload, "size": args.size, "batch": 1}
    print(f"workload {args.workload} ({args.size}); load average {os.getloadavg()[0]:.1f}")
    print(f"interpreter start (python -c pass):   {interpreter_start():7.3f} s")
    w = worker_costs(workload, [1, 10, 100], args.blocks)
    r = w["ready"]
    print(f"worker: process start + tfperf import: {w['before_import']:7.3f} s")
    print(f"worker: import tensorflow:             {r['import_s']:7.3f} s")
    print(f"worker: build/load the workload:       {r['load_s']:7.3f} s")
    print(f"worker: first call (trace, compile):   {r['first_call_s']:7.3f} s")
    print(f"worker: warm-up ({w['warmup_n']} calls):            {w['warmup_s']:7.3f} s")
    print(f"cold start as reported:                {w['cold_start_s']:7.3f} s")
    print(f"one steady call (p50 of the last warm-up calls): {w['per_call'] * 1e3:.4f} ms")
    for n, trip in w["trips"].items():
        share = trip / (trip + n * w["per_call"])
        print(
            f"per-block round trip, {n:>3} calls/block: {trip * 1e3:7.3f} ms "
            f"({share:.1%} of the block's wall time; not inside any sample)"
        )
    wall, doc = whole_bench(workload, args.budget)
    print(
        f"bench --budget {args.budget:g}: {wall:.1f} s wall for {doc['steady_s']:.1f} s of "
        f"steady-state measurement ({doc['rounds']} rounds; the rest is start, warm-up, "
        "eager/predict information, store)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
