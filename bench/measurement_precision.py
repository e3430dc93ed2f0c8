"""Does a side-by-side speedup hold still while absolute times drift?

Repeats the same comparison -- the default config against ``TF_ENABLE_ONEDNN_OPTS=0``
(``--set onednn=off``) on the ``lstm`` built-in -- several times, each a full ``bench`` run
with fresh workers. Printed per repeat: each config's p50 and the speedup with its 95%
interval and verdict (and, for contrast, the pairwise ratio of block minimums); then the
spread of the speedup across repeats (goal: within +-3% of its median) next to the drift of
the absolute p50s (max/min - 1), which on a shared or throttling machine is larger.

Usage: ``python bench/measurement_precision.py [--repeats 5] [--budget 15] [--block-s S]``.
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


def one_repeat(store, workload: dict, budget: float, block_s: float | None) -> dict:
    """One interleaved bench run of default vs onednn=off."""
    from tfperf.bench import bench
    from tfperf.config import Config

    configs = [Config(), Config.parse(["onednn=off"], [])]
    return bench(
        workload, configs, store=store, budget_s=budget, block_s=block_s, extras=(), peak=False
    )


def min_ratio(store, doc: dict) -> float:
    """Median over rounds of baseline block minimum / candidate block minimum (for contrast:
    the fastest call of a block is the least disturbed by other processes)."""
    trials = store.load_run(doc["run_id"])["trials"]
    base, cand = (
        [min(b["samples_s"]) for b in t["blocks"] if b["phase"] == "steady"] for t in trials
    )
    return statistics.median(b / c for b, c in zip(base, cand, strict=True))


def spread(values: list[float]) -> float:
    """Half the range relative to the median: the +- band the values fall in."""
    return (max(values) - min(values)) / 2 / statistics.median(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget", type=float, default=15.0)
    parser.add_argument("--size", default="standard", choices=["standard", "tiny"])
    parser.add_argument("--workload", default="lstm")
    parser.add_argument(
        "--block-s",
        type=float,
        default=None,
        help="seconds per block (default: tfperf's choice for the budget)",
    )
    args = parser.parse_args()
    from tfperf.store import Store

    workload = {"kind": "builtin", "name": args.workload, "size": args.size, "batch": 1}
    print(
        f"{args.workload} ({args.size}), default vs onednn=off, {args.repeats} repeats of "
        f"{args.budget:g} s; load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'repeat':>6} {'default p50':>12} {'onednn=off p50':>15} {'speedup':>8} "
        f"{'95% CI':>15} {'pairs':>5} {'verdict':<12} {'min ratio':>9}"
    )
    speedups, base_p50, cand_p50, min_ratios = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "s.sqlite") as store:
        for i in range(args.repeats):
            doc = one_repeat(store, workload, args.budget, args.block_s)
            base, cand = (r["latency_ms"]["p50"] for r in doc["results"])
            if not doc["comparisons"] or base is None or cand is None:
                print(f"{i + 1:>6} failed: {[r['error'] for r in doc['results']]}")
                continue
            s = doc["comparisons"][0]["speedup"]
            low, high = s["ci95"]
            min_ratios.append(min_ratio(store, doc))
            print(
                f"{i + 1:>6} {base:>10.3f}ms {cand:>13.3f}ms {s['median']:>8.3f} "
                f"{low:>7.3f}..{high:<6.3f} {s['n_pairs']:>5} {s['verdict']:<12} "
                f"{min_ratios[-1]:>9.3f}"
            )
            speedups.append(s["median"])
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
    print(
        f"for contrast, block-minimum ratio: median {statistics.median(min_ratios):.3f}, "
        f"spread +-{spread(min_ratios):.1%}"
    )
    print(
        f"absolute p50 drift across repeats: default {max(base_p50) / min(base_p50) - 1:+.1%}, "
        f"onednn=off {max(cand_p50) / min(cand_p50) - 1:+.1%} (spread +-{spread(base_p50):.1%}"
        f" and +-{spread(cand_p50):.1%})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
