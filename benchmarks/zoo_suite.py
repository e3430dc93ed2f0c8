"""Tune every zoo model (``benchmarks/zoo``) at its realistic size, and check tune's answer
against every runtime measured alone in the same run.

For each model, given as the user's unseeded factory ``NAME:make``:

1. ``tfperf tune`` with its defaults, ``--repeats`` times: default ms, tuned ms, the confirmed
   speedup with its 95% interval, the chosen configuration and its relative error. Across the
   repeats: whether each repeat's interval covers the other repeats' medians.
2. Every runtime tune can pick, alone (no other knob turned) at each thread count the space
   tries, measured against the default with the accuracy guard (the same tolerance); a
   runtime's figure is its best thread count. The runtimes this machine cannot run are listed
   with the reason.
3. tune's choice side by side against the best accepted runtime (``tune/best``: above 1 means
   tune's choice was faster).

The bars: on every model ``tune/best >= 0.95``, and no model ends in "keep the default" while
a runtime inside the tolerance was significantly faster.

    python benchmarks/zoo_suite.py                        # every zoo model
    python benchmarks/zoo_suite.py --models attention,unet --repeats 3
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ZOO = Path(__file__).resolve().parent / "zoo"
MODELS = (
    "text_classifier",
    "recommender",
    "audio_conv1d",
    "attention",
    "keras_application",
    "unet",
    "tf_module",
)
DUEL_ROUNDS = (12, 24)


def workload(name: str, tiny: bool) -> dict:
    """The workload dict of the user's factory ``NAME:make`` run from the zoo's folder."""
    return {
        "kind": "model",
        "path": f"{name}:{'make_tiny' if tiny else 'make'}",
        "format": "factory",
        "inputs": None,
        "unsafe": False,
        "batch": 1,
        "search_path": str(ZOO),
    }


def tune_once(work: dict, store: str, name: str, k: int) -> dict:
    from tfperf.tuning import TuneOptions, tune

    started = time.monotonic()
    options = TuneOptions(
        store_path=store,
        profile_out=str(Path(store).with_name(f"{name}-{k}.json")),
        command="benchmarks/zoo_suite.py",
    )
    doc = tune(work, options)
    rec = doc["recommendation"]
    speedup = rec["speedup"] if not rec["keep_default"] else None
    row = {
        "default_ms": doc["default"]["time_ms"],
        "tuned_ms": rec["time_ms"],
        "median": (speedup or {}).get("median") or 1.0,
        "ci95": (speedup or {}).get("ci95") or [None, None],
        "label": rec["label"],
        "config": rec["config"],
        "rel_error": rec["max_rel_error"],
        "keep_default_why": rec.get("keep_default_why"),
        "elapsed_s": time.monotonic() - started,
        "trials": doc["trials"],
    }
    low, high = row["ci95"]
    print(
        f"  tune {k + 1}: {row['default_ms']:.3f} ms -> {row['tuned_ms']:.3f} ms, "
        f"{row['median']:.2f}x" + (f" ({low:.2f}-{high:.2f})" if low else "")
        + f", {row['label']}, rel err {row['rel_error']:.2g}, {row['trials']} trials in "
        f"{row['elapsed_s']:.0f} s"
        + (f"; keep the default: {rec['reason']}" if rec["keep_default"] else ""),
        flush=True,
    )
    return row


def runtimes_alone(work: dict, store: str, chosen: dict) -> dict:
    """Step 2 and 3 of the module docstring, with tfperf's own evaluator."""
    from tfperf.core.knobs import label, normalize
    from tfperf.machine.facts import collect_machine
    from tfperf.runner.recorder import RunRecorder
    from tfperf.store import Store
    from tfperf.tuning import TuneOptions
    from tfperf.tuning.evaluate import Evaluator
    from tfperf.tuning.search import MEASURED
    from tfperf.tuning.space import build_space, machine_facts

    space = build_space(machine_facts(collect_machine(), "factory"))
    unavailable = [u for u in space.unavailable if u["knob"] == "runtime"]
    configs = []
    for runtime in space.values["runtime"][1:]:
        threads = space.neighbours({"runtime": runtime}, "runtime_threads")
        configs += [{"runtime": runtime}, *threads]
    with Store.open(store) as st:
        run = RunRecorder(st, "zoo-runtimes", "benchmarks/zoo_suite.py", work, {}, {})
        evaluator = Evaluator(work, TuneOptions(min_rounds=8, max_rounds=12), run=run)
        try:
            evaluator.start_default()
            best: dict[str, object] = {}
            for config in configs:
                o = evaluator(config, {}, None)
                median = (o.speedup or {}).get("median")
                err = (o.accuracy or {}).get("max_rel_error")
                print(
                    f"    {o.label}: {o.status} "
                    + (f"{median:.2f}x" if median else "")
                    + (f" rel err {err:.2g}" if err is not None else "")
                    + ("" if o.status == MEASURED else f" ({o.reason})"),
                    flush=True,
                )
                runtime = config["runtime"]
                if o.status == MEASURED and (
                    runtime not in best or median > best[runtime].speedup["median"]
                ):
                    best[runtime] = o
            ranked = sorted(best.values(), key=lambda o: -o.speedup["median"])
            result = {
                "runtimes": {
                    r: {"label": o.label, "speedup": o.speedup, "rel_error":
                        (o.accuracy or {}).get("max_rel_error")}
                    for r, o in best.items()
                },
                "unavailable": unavailable,
                "best": ranked[0].label if ranked else "default",
                "best_significant": bool(ranked) and ranked[0].speedup["verdict"] == "faster",
                "tune_vs_best": None,
            }
            if ranked and normalize(ranked[0].config) != normalize(chosen):
                low, high = DUEL_ROUNDS
                evaluator.options = replace(evaluator.options, min_rounds=low, max_rounds=high)
                head = evaluator(ranked[0].config, normalize(chosen), None)
                ratio = (head.vs_incumbent or {}).get("median")
                result["tune_vs_best"] = 1.0 / ratio if ratio else None
                result["duel_ci"] = (head.vs_incumbent or {}).get("ci95")
            elif ranked:
                result["tune_vs_best"] = 1.0
            result["best_label"] = label(ranked[0].config) if ranked else "default"
        finally:
            evaluator.close()
        run.finish("ok", {"best": result["best"]})
    return result


def covers(rows: list[dict]) -> list[bool]:
    """For each repeat: whether its interval covers every other repeat's median."""
    out = []
    for i, row in enumerate(rows):
        low, high = row["ci95"]
        others = [r["median"] for j, r in enumerate(rows) if j != i]
        out.append(low is not None and all(low <= m <= high for m in others))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--tiny", action="store_true", help="the tiny sizes (a quick trial)")
    parser.add_argument("--store", help="store path (default: a temporary file)")
    args = parser.parse_args(argv)

    from tfperf.machine.facts import collect_machine

    store = args.store or str(Path(tempfile.mkdtemp(prefix="zoo-suite-")) / "store.sqlite")
    machine = collect_machine()
    print(f"machine: {machine['cpu']['model']}, {machine['cores']['usable']} usable cores; "
          f"store {store}", flush=True)
    table = []
    for name in args.models.split(","):
        print(f"{name}:", flush=True)
        work = workload(name, args.tiny)
        tunes = [tune_once(work, store, name, k) for k in range(args.repeats)]
        alone = runtimes_alone(work, store, tunes[0]["config"])
        table.append((name, tunes, alone))
    print("\nmodel              default ms  tuned ms  speedup (95% CI)      rel err   CI covers")
    failures = []
    for name, tunes, alone in table:
        first = tunes[0]
        low, high = first["ci95"]
        ci = f"({low:.2f}-{high:.2f})" if low else "(keep default)"
        print(
            f"{name:<18} {first['default_ms']:>10.3f} {first['tuned_ms']:>9.3f}  "
            f"{first['median']:>7.2f}x {ci:<14} {first['rel_error']:<9.2g} "
            f"{'/'.join('yes' if c else 'no' for c in covers(tunes))}"
        )
        ratio = alone["tune_vs_best"]
        best = alone["best_label"]
        best_row = next((r for r in alone["runtimes"].values() if r["label"] == best), {})
        best_speedup = (best_row.get("speedup") or {}).get("median") or 1.0
        print(f"  chosen: {first['label']}; best runtime alone: {best} {best_speedup:.2f}x "
              f"(rel err {best_row.get('rel_error') or 0:.2g}); tune/best "
              f"{'-' if ratio is None else format(ratio, '.3f')}")
        if ratio is not None and ratio < 0.95:
            failures.append(f"{name}: tune/best {ratio:.3f} < 0.95")
        if any(t["keep_default_why"] for t in tunes) and alone["best_significant"]:
            failures.append(f"{name}: kept the default while {best} was significantly faster")
        for u in alone["unavailable"]:
            print(f"  not measured on this machine: {u['value']} ({u['reason']})")
    print("bars: " + ("all met" if not failures else "; ".join(failures)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
