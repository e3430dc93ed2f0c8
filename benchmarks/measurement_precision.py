"""Does a side-by-side speedup hold still while absolute times drift?

Repeats the same comparison -- the default config against ``TF_ENABLE_ONEDNN_OPTS=0`` (``--set
onednn=off``) on the ``lstm`` built-in -- several times, each a full ``bench`` run with fresh
workers and ``tfperf bench``'s default budget, block length and number of worker processes per
config (several, one after the other: a config's speed can depend on its process). Each run
also interleaves a control: a second worker with the default config (an A/A comparison,
labelled by a variable nothing reads), whose "speedup" must be 1. Printed per repeat: each
config's p50, the speedup with its 95% interval and verdict, the control's ratio and, for
contrast, the pairwise ratio of block minimums, and each worker process's own speedup. Then how
many repeats' intervals cover the median of all repeats (an honest interval covers it), then
the spread of the speedup across repeats (goal: within +-3% of its median) next to the
control's spread (the instrument's own error) and the drift of the absolute p50s (max/min - 1),
which on a shared or throttling machine is larger; and how the speedup moves with the machine's
state (its correlation with the default p50): an effect that itself depends on the machine's
state cannot hold still, however it is measured.

Usage: ``python benchmarks/measurement_precision.py [--repeats 5] [--budget 30] [--block-s S]
[--processes P]``.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

GOAL = 0.03
CONTROL_ENV = "TFPERF_CONTROL_COPY=1"
"""Makes the control's label differ from the default's; no code reads the variable."""


def one_repeat(store, workload: dict, budget: float, block_s: float | None, processes: int) -> dict:
    """One interleaved bench run of default, its control copy and onednn=off."""
    from tfperf.benchmark import BenchOptions, bench
    from tfperf.core.config import Config

    configs = [Config(), Config.parse([], [CONTROL_ENV]), Config.parse(["onednn=off"], [])]
    return bench(
        workload,
        configs,
        store=store,
        options=BenchOptions(
            budget_s=budget, block_s=block_s, processes=processes, extras=(), peak=False
        ),
    )


def min_ratio(store, doc: dict, candidate: int) -> float:
    """Median over rounds of baseline block minimum / candidate block minimum (for contrast:
    the fastest call of a block is the least disturbed by other processes)."""
    trials = store.load_run(doc["run_id"])["trials"]
    base, cand = (
        {
            b["info"]["round"]: min(b["samples_s"])
            for b in trials[i]["blocks"]
            if b["phase"] == "steady"
        }
        for i in (0, candidate)
    )
    return statistics.median(base[r] / cand[r] for r in base.keys() & cand.keys())


def spread(values: list[float]) -> float:
    """Half the range relative to the median: the +- band the values fall in."""
    return (max(values) - min(values)) / 2 / statistics.median(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget", type=float, default=30.0, help="as tfperf bench's default")
    parser.add_argument("--size", default="standard", choices=["standard", "tiny"])
    parser.add_argument("--workload", default="lstm")
    parser.add_argument(
        "--block-s",
        type=float,
        default=None,
        help="seconds per block (default: tfperf's choice for the budget)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=None,
        help="worker processes per config (default: tfperf bench's choice for the budget)",
    )
    args = parser.parse_args()
    from tfperf.benchmark import default_processes
    from tfperf.store import Store

    processes = args.processes or default_processes(args.budget)

    workload = {"kind": "builtin", "name": args.workload, "size": args.size, "batch": 1}
    print(
        f"{args.workload} ({args.size}), default vs onednn=off with an A/A control, "
        f"{args.repeats} repeats of {args.budget:g} s, {processes} worker process(es) per "
        f"config; load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'repeat':>6} {'default p50':>12} {'onednn=off p50':>15} {'speedup':>8} "
        f"{'95% CI':>15} {'pairs':>5} {'verdict':<8} {'A/A':>6} {'A/A CI':>13} {'min ratio':>9}"
    )
    speedups, controls, base_p50, cand_p50, min_ratios, cis = [], [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "s.sqlite") as store:
        for i in range(args.repeats):
            doc = one_repeat(store, workload, args.budget, args.block_s, processes)
            base, _, cand = (r["latency_ms"]["p50"] for r in doc["results"])
            if len(doc["comparisons"]) < 2 or base is None or cand is None:
                print(f"{i + 1:>6} failed: {[r['error'] for r in doc['results']]}")
                continue
            aa, s = (c["speedup"] for c in doc["comparisons"])
            min_ratios.append(min_ratio(store, doc, 2))
            per = s.get("processes") or {}
            per_text = " ".join(f"{v:.3f}" for v in per.get("speedups", []))
            if per.get("effect"):
                per_text += " (differ)"
            print(
                f"{i + 1:>6} {base:>10.3f}ms {cand:>13.3f}ms {s['median']:>8.3f} "
                f"{s['ci95'][0]:>7.3f}..{s['ci95'][1]:<6.3f} {s['n_pairs']:>5} "
                f"{s['verdict']:<8} {aa['median']:>6.3f} "
                f"{aa['ci95'][0]:>6.3f}..{aa['ci95'][1]:<5.3f} {min_ratios[-1]:>9.3f}  {per_text}"
            )
            cis.append(s["ci95"])
            speedups.append(s["median"])
            controls.append(aa["median"])
            base_p50.append(base)
            cand_p50.append(cand)
    if len(speedups) < 2:
        print("too few successful repeats to compare")
        return 0
    sp = spread(speedups)
    print(
        f"speedup: median {statistics.median(speedups):.3f}, spread +-{sp:.1%} "
        f"({'within' if sp <= GOAL else 'OUTSIDE'} the +-{GOAL:.0%} goal)"
    )
    centre = statistics.median(speedups)
    covering = sum(low <= centre <= high for low, high in cis)
    print(
        f"intervals covering the median of all repeats: {covering} of {len(cis)} "
        "(an interval that misses it understated the run-to-run spread)"
    )
    print(
        f"A/A control: median {statistics.median(controls):.3f}, spread +-{spread(controls):.1%}, "
        f"farthest from 1: {max(abs(c - 1) for c in controls):.1%} (the instrument's own error)"
    )
    print(
        f"for contrast, block-minimum ratio: median {statistics.median(min_ratios):.3f}, "
        f"spread +-{spread(min_ratios):.1%}"
    )
    print(
        f"absolute p50 drift across repeats: default {max(base_p50) / min(base_p50) - 1:+.1%}, "
        f"onednn=off {max(cand_p50) / min(cand_p50) - 1:+.1%} (spread +-{spread(base_p50):.1%}"
        f" and +-{spread(cand_p50):.1%})"
    )
    if len(speedups) >= 3 and len(set(base_p50)) > 1 and len(set(speedups)) > 1:
        corr = statistics.correlation(base_p50, speedups)
        print(
            f"correlation of the speedup with the default p50 (the machine's state): {corr:+.2f}"
            " (near -1: onednn=off loses more when the machine is slow)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
