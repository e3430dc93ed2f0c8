"""A built-in workload under load, served by 1 instance and by 2 pinned instances, in one run.

For each layout, on one harness (its instances started once): a closed-loop concurrency sweep,
an open-loop rate sweep that goes past capacity (the same rates for both layouts: fractions of
the 1-instance capacity the closed sweep measured), and the SLO search with an SLO of 4x the
1-instance single-stream p50. Printed side by side: each level's offered and achieved rate,
p50/p99 (ms, from the scheduled arrival) with p99's 95% interval, completed/sent, failed (f)
and timed out (t), the generator's CPU (share of one core) and, open loop, its own lag
(p99, ms); then both layouts' SLO answers.

Usage: ``python benchmarks/serving_load.py [--workload mlp] [--size standard]
[--requests 300] [--seconds 2] [--slo-ms X]``. Prints figures; asserts nothing. Measure under the
/tmp/measuring lock.
"""

from __future__ import annotations

import argparse
import time

from tfperf.core.config import Config
from tfperf.core.serving import ServingLayout
from tfperf.serving import Harness, LoadLevel, LoadScenario, measure_on, pinned

RATE_FRACTIONS = (0.5, 0.8, 1.2, 1.6)


def _level(level: LoadLevel) -> str:
    offered = "" if level.offered_qps is None else f"off {level.offered_qps:7.1f} "
    return offered + (
        f"ach {level.achieved_qps:7.1f}/s p50 {level.p50_ms:7.3f} p99 {level.p99_ms:8.3f} "
        f"[{level.p99_ci_ms[0]:.3g},{level.p99_ci_ms[1]:.3g}] "
        f"{level.completed}/{level.sent} f{level.failed} t{level.timed_out} "
        f"cpu {level.generator_cpu:.2f}"
        + ("" if level.generator_lag_p99_ms is None else f" lag {level.generator_lag_p99_ms:.2f}")
    )


def _measure(workload: dict, layout: ServingLayout, base: LoadScenario, first: dict) -> dict:
    """Closed sweep, rate sweep and SLO search of one layout on one harness."""
    with Harness(workload, Config(), layout) as harness:
        closed = measure_on(harness, LoadScenario(concurrency=(1, 2, 4), **base))
        capacity = max(lv.achieved_qps for lv in closed.levels)
        first.setdefault("capacity", capacity)
        first.setdefault("slo_ms", 4 * closed.levels[0].p50_ms)
        rates = tuple(round(f * first["capacity"], 1) for f in RATE_FRACTIONS)
        opened = measure_on(harness, LoadScenario(rates=rates, **base))
        slo = measure_on(harness, LoadScenario(slo_ms=first["slo_ms"], **base))
    return {"closed": closed, "open": opened, "slo": slo, "capacity": capacity}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="mlp")
    parser.add_argument("--size", default="standard", choices=["standard", "tiny"])
    parser.add_argument("--requests", type=int, default=300, help="at least, per level")
    parser.add_argument("--seconds", type=float, default=2.0, help="at least, per level")
    parser.add_argument("--slo-ms", type=float, default=None,
                        help="the SLO (default: 4x the 1-instance single-stream p50)")
    args = parser.parse_args()
    workload = {"kind": "builtin", "name": args.workload, "size": args.size, "batch": 1}
    base = {"requests": args.requests, "seconds": args.seconds, "max_seconds": 20.0}
    layouts = [ServingLayout(), pinned(ServingLayout(instances=2))]
    first: dict = {} if args.slo_ms is None else {"slo_ms": args.slo_ms}
    started = time.perf_counter()
    results = {lay.label(): _measure(workload, lay, base, first) for lay in layouts}
    names = list(results)
    print(f"workload {args.workload} ({args.size}, batch 1); levels of >= {args.requests} "
          f"requests and >= {args.seconds:g} s; latency from the scheduled arrival (ms)")
    print(f"{'level':<14}" + "".join(f"| {n:<94}" for n in names))
    for part in ("closed", "open", "slo"):
        rows = zip(*(results[n][part].levels for n in names), strict=False)
        for levels in rows:
            lv = levels[0]
            what = (f"c={lv.concurrency}" if lv.scenario == "closed"
                    else f"{lv.offered_qps:.1f}/s")
            if part == "slo":
                what = "slo search"
            print(f"{what:<14}" + "".join(f"| {_level(x):<94}" for x in levels))
    why = "given" if args.slo_ms is not None else "4x the 1-instance single-stream p50"
    print(f"SLO: p99 within {first['slo_ms']:.3f} ms ({why})")
    for n in names:
        r = results[n]
        answer = r["slo"].max_qps_at_slo
        shown = "none within the SLO" if answer is None else f"{answer:.1f}/s"
        print(f"  {n:<12} capacity (closed, best) {r['capacity']:8.1f}/s   "
              f"max_qps_at_slo {shown}")
    print(f"total wall time {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
