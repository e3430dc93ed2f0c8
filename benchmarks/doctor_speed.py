"""How fast ``tfperf --help`` and ``tfperf doctor`` are, as the two ratios of issue 2, point 6.

1. ``tfperf --help`` against its 0.5 s budget (median of several runs).
2. ``tfperf doctor`` against ``python -c "import tensorflow"`` on the same machine: the two are
   run side by side (import, doctor, import, doctor, ...), the ratio taken pair by pair, and
   its median reported with the range. The budget is 2x.

Usage: ``python benchmarks/doctor_speed.py [--runs N]``. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HELP_BUDGET_S = 0.5
DOCTOR_BUDGET_RATIO = 2.0


def wall(cmd: list[str], env: dict[str, str] | None = None) -> float:
    """Seconds one run of ``cmd`` takes, output discarded; raises if it fails."""
    started = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
    return time.perf_counter() - started


def _summary(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f} (min {min(values):.3f}, max {max(values):.3f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="pairs of doctor/import runs")
    parser.add_argument("--help-runs", type=int, default=9, help="runs of tfperf --help")
    args = parser.parse_args()

    py = sys.executable
    env = dict(os.environ)
    wall([py, "-m", "tfperf", "--help"], env)  # warm the file cache once
    bare = [wall([py, "-c", "pass"], env) for _ in range(args.help_runs)]
    helps = [wall([py, "-m", "tfperf", "--help"], env) for _ in range(args.help_runs)]
    help_ratio = statistics.median(helps) / HELP_BUDGET_S
    print(f"tfperf --help              : {_summary(helps)} s over {len(helps)} runs")
    print(f"python -c pass (reference) : {_summary(bare)} s")
    print(
        f"ratio 1  --help / {HELP_BUDGET_S} s budget = {help_ratio:.2f}"
        f"  ({'within' if help_ratio <= 1 else 'OVER'} budget)"
    )

    wall([py, "-c", "import tensorflow"], env)  # warm the file cache once
    imports: list[float] = []
    doctors: list[float] = []
    for _ in range(args.runs):
        imports.append(wall([py, "-c", "import tensorflow"], env))
        doctors.append(wall([py, "-m", "tfperf", "doctor"], env))
    ratios = [d / i for d, i in zip(doctors, imports, strict=True)]
    ratio = statistics.median(ratios)
    print(f"python -c 'import tensorflow': {_summary(imports)} s over {len(imports)} runs")
    print(f"tfperf doctor                 : {_summary(doctors)} s, interleaved with it")
    print(
        f"ratio 2  doctor / import tensorflow = {ratio:.2f} (pairwise median; range "
        f"{min(ratios):.2f}-{max(ratios):.2f}; budget {DOCTOR_BUDGET_RATIO:g}x, "
        f"{'within' if ratio <= DOCTOR_BUDGET_RATIO else 'OVER'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
