"""Does tfperf's p50 match an independent plain-Python timing of the same call? (goal: 5%)

For each workload, two processes run side by side with the same environment:

- a tfperf worker (``tfperf.runner.handle.Worker``, the path ``tfperf bench`` uses), and
- a plain process (this script with ``--plain``) that gets the same call from
  ``tfperf.worker.prepare`` and times it with ``timeit`` -- no tfperf worker, protocol, warm-up or
  measuring loop involved.

They take turns (tfperf block, plain block, plain block, tfperf block, ...), so machine drift
hits both alike. Printed per workload: tfperf's p50, the plain median of per-call times, the
plain ``timeit`` median of block means, and the ratios tfperf / plain.

Usage: ``python benchmarks/timer_check.py [--workloads mlp,lstm] [--size standard] [--rounds 80]``.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import timeit
from pathlib import Path

GOAL = 0.05


def plain_main(name: str, size: str) -> int:
    """Child: the same call (``tfperf.worker.prepare``), timed by ``timeit``; answers "N" lines with
    the timings of N calls (JSON)."""
    import gc

    from tfperf.worker.prepare import prepare

    call = prepare({"kind": "builtin", "name": name, "size": size, "batch": 1}, {}).call
    for _ in range(20):
        call()
    for line in sys.stdin:
        n = int(line)
        gc.enable()  # as in the worker (timeit switches it off, the per-call loop keeps it)
        per_call = [timeit.Timer(call, "gc.enable()").timeit(1) for _ in range(n)]
        block_mean = timeit.timeit(call, number=n) / n
        print(json.dumps({"per_call": per_call, "block_mean": block_mean}), flush=True)
    return 0


def check(name: str, size: str, rounds: int, block_s: float) -> dict[str, float]:
    """Alternate tfperf blocks and plain blocks; return the three medians and ratios."""
    from tfperf.core.config import Config
    from tfperf.runner.handle import Worker

    workload = {"kind": "builtin", "name": name, "size": size, "batch": 1}
    worker = Worker(workload, Config(), timeout_s=300)
    env = worker.environment()
    plain = subprocess.Popen(
        [sys.executable, __file__, "--plain", name, "--size", size],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parent,
    )
    try:
        worker.start()
        ready = worker.wait_ready()
        per_call = statistics.median(ready["warmup"]["samples_s"][-5:])
        calls = max(3, round(block_s / per_call))
        tfperf_samples: list[float] = []
        plain_samples: list[float] = []
        plain_means: list[float] = []

        def plain_block() -> None:
            assert plain.stdin is not None and plain.stdout is not None
            plain.stdin.write(f"{calls}\n")
            plain.stdin.flush()
            msg = json.loads(plain.stdout.readline())
            plain_samples.extend(msg["per_call"])
            plain_means.append(msg["block_mean"])

        for i in range(rounds):
            if i % 2 == 0:
                tfperf_samples.extend(worker.run_block(calls))
                plain_block()
            else:
                plain_block()
                tfperf_samples.extend(worker.run_block(calls))
    finally:
        worker.close()
        if plain.stdin is not None:
            plain.stdin.close()
        plain.wait(timeout=30)
    tf_p50 = statistics.median(tfperf_samples)
    plain_p50 = statistics.median(plain_samples)
    plain_mean = statistics.median(plain_means)
    return {
        "calls_per_block": calls,
        "tfperf_p50_ms": tf_p50 * 1e3,
        "plain_p50_ms": plain_p50 * 1e3,
        "plain_timeit_ms": plain_mean * 1e3,
        "ratio_p50": tf_p50 / plain_p50,
        "ratio_timeit": tf_p50 / plain_mean,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plain", metavar="WORKLOAD", help=argparse.SUPPRESS)
    parser.add_argument("--workloads", default="mlp,lstm")
    parser.add_argument("--size", default="standard", choices=["standard", "tiny"])
    parser.add_argument("--rounds", type=int, default=80)
    parser.add_argument("--block-s", type=float, default=0.05)
    args = parser.parse_args()
    if args.plain:
        return plain_main(args.plain, args.size)
    print(f"machine load average: {os.getloadavg()[0]:.1f}; goal: within {GOAL:.0%}")
    print(
        f"{'workload':<10} {'calls':>5} {'tfperf p50':>11} {'plain p50':>10} "
        f"{'timeit':>8} {'ratio p50':>9} {'ratio timeit':>12}"
    )
    for name in args.workloads.split(","):
        r = check(name, args.size, args.rounds, args.block_s)
        verdict = "ok" if abs(r["ratio_p50"] - 1) <= GOAL else "OUTSIDE GOAL"
        print(
            f"{name:<10} {r['calls_per_block']:>5} {r['tfperf_p50_ms']:>9.4f}ms "
            f"{r['plain_p50_ms']:>8.4f}ms {r['plain_timeit_ms']:>6.4f}ms "
            f"{r['ratio_p50']:>9.3f} {r['ratio_timeit']:>12.3f}  {verdict}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
