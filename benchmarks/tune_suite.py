"""Tune the built-in batch-1 inference workloads and print what tune found.

For each workload: the default time, the tuned time, the speedup with its 95% interval (from
tune's own confirmation round, winner and default interleaved), the chosen configuration, its
error, and how long the tune took. At the end, the geometric mean of the speedups.

``--exhaustive`` also measures every point of the same pruned space against the default and
then measures tune's choice side by side against each of the sweep's three best points,
printing how close tune came to the closest of them (``tune/best`` > 0.95 means within 5% of
every one).

    python benchmarks/tune_suite.py                       # standard sizes, every workload
    python benchmarks/tune_suite.py --size tiny --workloads mlp,lstm --exhaustive
    python benchmarks/tune_suite.py --workloads lstm --exhaustive --knobs runtime,runtime_threads
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

INFERENCE = ("lstm", "encoder", "mobilenetv2", "resnet50", "mlp", "wide-deep")


TOP = 3
"""tune's choice meets this many of the sweep's leaders side by side."""
DUEL_ROUNDS = (12, 24)
"""Rounds (min, max) of each side-by-side check: more than a sweep point's 8."""


def _exhaustive(workload: dict, space, chosen: dict, store_path: str) -> dict:
    """Every point vs the default, then tune's choice vs each of the sweep's top points.

    A sweep point's figure comes from 8 rounds against the default, and near-equal points
    scatter by 10-40%: the sweep's single best is partly luck. So tune's choice is measured
    side by side against each of the :data:`TOP` best points (itself excluded);
    ``tune_vs_best`` is the worst of those ratios (tune's time over the point's time, inverted:
    above 1 means tune's choice was faster).
    """
    from tfperf.core.knobs import label, normalize
    from tfperf.runner.recorder import RunRecorder
    from tfperf.store import Store
    from tfperf.tuning import TuneOptions
    from tfperf.tuning.evaluate import Evaluator
    from tfperf.tuning.search import MEASURED

    with Store.open(store_path) as store:
        run = RunRecorder(store, "tune-exhaustive", "benchmarks/tune_suite.py", workload, {}, {})
        evaluator = Evaluator(workload, TuneOptions(min_rounds=8, max_rounds=8), run=run)
        try:
            evaluator.start_default()
            outcomes = []
            started = time.monotonic()
            for point in space.points()[1:]:
                outcome = evaluator(point, {}, None)
                outcomes.append(outcome)
                print(
                    f"    {outcome.label}: {outcome.status} "
                    f"{(outcome.speedup or {}).get('median') or outcome.reason}",
                    flush=True,
                )
            measured = sorted(
                (o for o in outcomes if o.status == MEASURED and o.speedup["median"]),
                key=lambda o: o.speedup["median"],
                reverse=True,
            )
            best = measured[0] if measured else None
            result = {
                "points": len(outcomes) + 1,
                "measured": len(measured),
                "sweep_s": time.monotonic() - started,
                "best": label(best.config) if best else "default",
                "best_speedup": best.speedup["median"] if best else 1.0,
                "duels": [],
            }
            low, high = DUEL_ROUNDS
            evaluator.options = replace(evaluator.options, min_rounds=low, max_rounds=high)
            leaders = [o for o in measured if normalize(o.config) != normalize(chosen)][:TOP]
            for leader in leaders:
                # tune's choice as the incumbent: vs_incumbent = tune time / leader time
                head = evaluator(leader.config, normalize(chosen), None)
                ratio = (head.vs_incumbent or {}).get("median")
                low, high = (head.vs_incumbent or {}).get("ci95") or [None, None]
                duel = {
                    "point": leader.label,
                    "sweep_speedup": leader.speedup["median"],
                    "tune_vs_point": 1.0 / ratio if ratio else None,
                    "ci95": [1.0 / high, 1.0 / low] if low and high else None,
                }
                result["duels"].append(duel)
                print(
                    f"    tune's choice vs {duel['point']} (sweep {duel['sweep_speedup']:.2f}x):"
                    + (
                        f" {duel['tune_vs_point']:.3f}"
                        if duel["tune_vs_point"]
                        else f" {head.status} {head.reason}"
                    )
                    + (f" [{duel['ci95'][0]:.3f}..{duel['ci95'][1]:.3f}]" if duel["ci95"] else ""),
                    flush=True,
                )
            ratios = [d["tune_vs_point"] for d in result["duels"]]
            result["tune_vs_best"] = (
                1.0 if not leaders else (None if None in ratios else min(ratios))
            )
        finally:
            evaluator.close()
        run.finish("ok", result)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("standard", "tiny"), default="standard")
    parser.add_argument("--workloads", default=",".join(INFERENCE))
    parser.add_argument("--strategy", choices=("staged", "optuna"), default="staged")
    parser.add_argument("--max-trials", type=int)
    parser.add_argument("--budget", type=float, help="seconds per tune")
    parser.add_argument("--exhaustive", action="store_true")
    parser.add_argument("--knobs", help="tune (and sweep) only these knobs, e.g. runtime,allocator")
    parser.add_argument("--store", help="store path (default: a temporary file)")
    args = parser.parse_args(argv)

    from tfperf.core.workloads import builtin_workload
    from tfperf.machine.facts import collect_machine
    from tfperf.tuning import TuneOptions, tune
    from tfperf.tuning.space import build_space, machine_facts

    store = args.store or str(Path(tempfile.mkdtemp(prefix="tune-suite-")) / "store.sqlite")
    machine = collect_machine()
    print(
        f"machine: {machine['cpu']['model']}, {machine['cores']['usable']} usable cores; "
        f"store {store}",
        flush=True,
    )
    rows = []
    for name in args.workloads.split(","):
        workload = builtin_workload(name, size=args.size, batch=1)
        started = time.monotonic()
        knobs = tuple(args.knobs.split(",")) if args.knobs else None
        options = TuneOptions(
            strategy=args.strategy,
            max_trials=args.max_trials,
            knobs=knobs,
            budget_s=args.budget,
            store_path=store,
            profile_out=str(Path(store).with_name(f"{name}.json")),
            command="benchmarks/tune_suite.py",
        )
        doc = tune(workload, options)
        elapsed = time.monotonic() - started
        rec = doc["recommendation"]
        speedup = (rec["speedup"] or {}) if not rec["keep_default"] else {}
        median = speedup.get("median") or 1.0
        low, high = speedup.get("ci95") or [None, None]
        row = {
            "name": name,
            "default_ms": doc["default"]["time_ms"],
            "tuned_ms": rec["time_ms"],
            "speedup": median,
            "ci": (low, high),
            "config": rec["label"],
            "error": rec["max_abs_error"],
            "trials": doc["trials"],
            "elapsed": elapsed,
        }
        print(
            f"{name}: default {row['default_ms']:.3f} ms -> {row['tuned_ms']:.3f} ms, "
            f"{median:.2f}x"
            + (f" (95% CI {low:.2f}-{high:.2f})" if low else "")
            + f", {rec['label']}, max abs err {row['error']:.2g}, "
            f"{doc['trials']} trials in {elapsed:.0f} s",
            flush=True,
        )
        if args.exhaustive:
            space = build_space(machine_facts(machine))
            space = space.restrict(knobs) if knobs else space
            row["exhaustive"] = _exhaustive(workload, space, rec["config"], store)
            ex = row["exhaustive"]
            close = ex["tune_vs_best"]
            print(
                f"  exhaustive: {ex['points']} points in {ex['sweep_s']:.0f} s, best "
                f"{ex['best']} {ex['best_speedup']:.2f}x; tune/best (worst of "
                f"{len(ex['duels'])} side by side) = " + ("?" if close is None else f"{close:.3f}"),
                flush=True,
            )
        rows.append(row)

    print("\nworkload     default ms  tuned ms  speedup (95% CI)       config")
    for r in rows:
        low, high = r["ci"]
        ci = f"({low:.2f}-{high:.2f})" if low else "(keep default)"
        print(
            f"{r['name']:<12} {r['default_ms']:>10.3f} {r['tuned_ms']:>9.3f}  "
            f"{r['speedup']:>6.2f}x {ci:<15} {r['config']}  err {r['error']:.2g}"
        )
    geo = math.exp(sum(math.log(r["speedup"]) for r in rows) / len(rows))
    print(f"geometric-mean speedup over default TensorFlow: {geo:.2f}x (bar: >= 3x)")
    if args.exhaustive:
        worst = min((r["exhaustive"]["tune_vs_best"] or 0.0) for r in rows)
        print(f"worst tune/exhaustive-best ratio: {worst:.3f} (bar: >= 0.95)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
