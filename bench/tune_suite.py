"""Tune the built-in batch-1 inference workloads and print what tune found.

For each workload: the default time, the tuned time, the speedup with its 95% interval (from
tune's own confirmation round, winner and default interleaved), the chosen configuration, its
error, and how long the tune took. At the end, the geometric mean of the speedups.

``--exhaustive`` also measures every point of the same pruned space against the default and
then measures tune's choice against the exhaustive best side by side, printing how close tune
came (``tune/best`` > 0.95 means within 5%).

    python bench/tune_suite.py                       # standard sizes, every workload
    python bench/tune_suite.py --size tiny --workloads mlp,lstm --exhaustive
    python bench/tune_suite.py --workloads lstm --exhaustive --knobs runtime,litert_threads
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

INFERENCE = ("lstm", "encoder", "mobilenetv2", "resnet50", "mlp", "wide-deep")


def _exhaustive(workload: dict, space, chosen: dict, store_path: str) -> dict:
    """Every point vs the default, then tune's choice vs the best point, interleaved."""
    from tfperf.search import MEASURED
    from tfperf.space import label, normalize
    from tfperf.store import Store
    from tfperf.tune import Evaluator

    with Store.open(store_path) as store:
        run_id = store.new_run("tune-exhaustive", "bench/tune_suite.py", workload, {}, {})
        evaluator = Evaluator(workload, store=store, run_id=run_id, min_rounds=8, max_rounds=8)
        try:
            evaluator.start_default()
            outcomes = []
            for point in space.points()[1:]:
                outcome = evaluator(point, {}, None)
                outcomes.append(outcome)
                print(
                    f"    {outcome.label}: {outcome.status} "
                    f"{(outcome.speedup or {}).get('median') or outcome.reason}",
                    flush=True,
                )
            measured = [o for o in outcomes if o.status == MEASURED and o.speedup["median"]]
            best = max(measured, key=lambda o: o.speedup["median"], default=None)
            result = {
                "points": len(outcomes) + 1,
                "measured": len(measured),
                "best": label(best.config) if best else "default",
                "best_speedup": best.speedup["median"] if best else 1.0,
            }
            if best is None or normalize(best.config) == normalize(chosen):
                result["tune_vs_best"] = 1.0
            else:
                # tune's choice as the incumbent: vs_incumbent = tune time / best time
                head = evaluator(best.config, normalize(chosen), None)
                ratio = (head.vs_incumbent or {}).get("median")
                result["tune_vs_best"] = 1.0 / ratio if ratio else None
        finally:
            evaluator.close()
        store.finish_run(run_id, "ok", result)
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

    from tfperf.machine import collect_machine
    from tfperf.space import build_space, machine_facts
    from tfperf.tune import tune
    from tfperf.workloads import builtin_workload

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
        doc = tune(
            workload,
            strategy=args.strategy,
            max_trials=args.max_trials,
            knobs=knobs,
            budget_s=args.budget,
            store_path=store,
            profile_out=Path(store).with_name(f"{name}.json"),
            command="bench/tune_suite.py",
        )
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
                f"  exhaustive: {ex['points']} points, best {ex['best']} "
                f"{ex['best_speedup']:.2f}x; tune/best = "
                + ("?" if close is None else f"{close:.3f}"),
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
