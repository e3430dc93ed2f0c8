"""What the fleet path costs against a local run of the same workload on the same machine.

Starts a one-node Ray cluster on this machine (every CPU, in a network namespace of its own with
only loopback up: ``tests/raycluster.py``; needs root), then alternates, ``--repeats`` times:

- local: ``tfperf bench --workload mlp --size tiny --budget B --no-peak --processes 1 --json``;
- fleet: ``tfperf fleet bench`` of the same, on the node (which runs ``tfperf doctor`` first).

Printed: the cluster's start, each command's wall time, the fleet's extra time over the local
run (joining the cluster, the node's doctor, the task, filing the result), and the two median
latencies with their 95% intervals, their ratio and whether the intervals overlap (the measured
speed must agree within noise). Both drivers run in the namespace. The cluster is stopped by
killing its own processes. Asserts nothing.

Usage: ``python benchmarks/fleet_overhead.py [--budget 10] [--repeats 2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from raycluster import LoopbackCluster, can_run  # noqa: E402


def timed(cluster: LoopbackCluster, args: list[str]) -> tuple[float, dict]:
    started = time.perf_counter()
    done = cluster.inside(
        [sys.executable, "-m", "tfperf", *args, "--json"], capture_output=True, text=True
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"tfperf {' '.join(args)} failed: {done.stderr[-2000:]}")
    return wall, json.loads(done.stdout)


def latency(result: dict) -> tuple[float, float, float]:
    lat = result["latency_ms"]
    low, high = lat["p50_ci95"]
    return lat["p50"], low, high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=2)
    opts = parser.parse_args()
    why = can_run()
    if why:
        raise SystemExit(f"cannot start a loopback Ray cluster here: {why}")
    store = Path(tempfile.mkdtemp(prefix="tfperf-fleet-bench-")) / "store.sqlite"
    bench = ["--workload", "mlp", "--size", "tiny", "--budget", f"{opts.budget:g}", "--no-peak"]
    bench += ["--processes", "1", "--store", str(store)]
    cluster = LoopbackCluster()
    try:
        started = time.perf_counter()
        cluster.add_node(cpus=os.cpu_count() or 1)
        print(
            f"one-node Ray cluster ({os.cpu_count()} CPUs) started in "
            f"{time.perf_counter() - started:.1f} s"
        )
        rows = []
        for repeat in range(opts.repeats):
            local_s, local = timed(cluster, ["bench", *bench])
            fleet_s, fleet = timed(cluster, ["fleet", "bench", *bench])
            (node,) = fleet["nodes"]
            rows.append(
                (
                    repeat,
                    local_s,
                    fleet_s,
                    latency(local["results"][0]),
                    latency(node["result"]["results"][0]),
                )
            )
    finally:
        cluster.stop()
    print(f"\nbudget {opts.budget:g} s of steady state; wall times in s; p50 in ms [95% CI]")
    print(
        f"{'#':>2} {'local s':>8} {'fleet s':>8} {'extra s':>8}   "
        f"{'local p50':>24} {'node p50':>24} {'ratio':>6} overlap"
    )
    for repeat, local_s, fleet_s, (lp, ll, lh), (fp, fl, fh) in rows:
        overlap = "yes" if ll <= fh and fl <= lh else "no"
        print(
            f"{repeat:>2} {local_s:8.1f} {fleet_s:8.1f} {fleet_s - local_s:8.1f}   "
            f"{lp:8.4f} [{ll:.4f}-{lh:.4f}] {fp:8.4f} [{fl:.4f}-{fh:.4f}] "
            f"{fp / lp:6.3f} {overlap}"
        )
    extra = statistics.median(r[2] - r[1] for r in rows)
    ratio = statistics.median(r[4][0] / r[3][0] for r in rows)
    print(
        f"\nmedian extra time of the fleet path: {extra:.1f} s; "
        f"median node/local p50 ratio: {ratio:.3f}"
    )


if __name__ == "__main__":
    main()
