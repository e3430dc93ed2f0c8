"""Benchmark: the demo pipeline's end-to-end training steps/s before and after its best fix.

Runs ``tfperf pipeline --demo`` through the library (one worker; baseline and every fix measured
in alternation, round by round) and prints the baseline, each measured fix and the winner, with
the paired speedup's median and 95% interval. Goal: the best fix >= 2x end to end.

    .venv/bin/python benchmarks/pipeline_demo.py [--steps 20] [--rounds 8]
"""

from __future__ import annotations

import argparse
import sys

from tfperf.input_pipeline.analyze import PipelineOptions, analyze_pipeline

GOAL = 2.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    doc = analyze_pipeline(
        demo=True,
        options=PipelineOptions(steps=args.steps, rounds=args.rounds),
        on_progress=lambda line: print(f"  .. {line}", file=sys.stderr),
    )
    print(f"verdict: {doc['verdict']} (input share {doc['input_share']:.0%})")
    print(f"bounding stage: {doc['bounding_stage']}")
    print(f"dataset alone:        {doc['dataset']['batches_per_s']:8.1f} batches/s")
    print(f"step on cached batch: {doc['compute']['steps_per_s']:8.1f} steps/s")
    print(f"both (the baseline):  {doc['train']['steps_per_s']:8.1f} steps/s")
    print(f"{'fix':58s} {'steps/s':>8s} {'speedup':>8s}  95% CI        verdict")
    for fix in doc["fixes"]:
        if fix["measured"]:
            low, high = fix["ci95"]
            print(
                f"{fix['name'][:58]:58s} {fix['per_s']:8.1f} {fix['speedup']:7.2f}x  "
                f"{low:.2f}..{high:.2f}  {fix['verdict']}"
            )
    best = doc["best_fix"]
    if best["name"] is None:
        print("best fix: none significantly faster")
        return 1
    row = next(f for f in doc["fixes"] if f["name"] == best["name"])
    print(
        f"best fix: {best['name']}: {row['baseline_per_s']:.1f} -> {row['per_s']:.1f} steps/s "
        f"end to end, speedup {best['speedup']:.2f}x "
        f"(95% CI {best['ci95'][0]:.2f}..{best['ci95'][1]:.2f}; goal >= {GOAL:.0f}x: "
        f"{'met' if best['speedup'] >= GOAL else 'NOT met'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
