"""What keras's optional imports add to every TensorFlow process's start, in this environment.

Importing TensorFlow imports keras, and keras imports scikit-learn (its ``keras.wrappers``) and
matplotlib's pyplot (its ``keras.visualization``) whenever they are installed. Every tfperf
worker, serving instance and probe is a fresh process that pays for them. This script imports
TensorFlow in fresh processes, alternately as installed and with those two packages hidden
(``sys.modules[name] = None``, which keras handles as "not installed"), and prints the CPU time
(user + system) and wall time of each, median over the pairs with their range.

Usage: ``python benchmarks/import_cost.py [--pairs N]``. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time

from tfperf.worker.probe import OPTIONAL_IMPORTS

OPTIONAL = tuple(OPTIONAL_IMPORTS)  # the packages doctor's probe times, by module name
HIDE = "import sys\nfor name in {names!r}: sys.modules[name] = None\n"


def timed_import(hidden: tuple[str, ...]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one fresh ``import tensorflow``."""
    code = (HIDE.format(names=hidden) if hidden else "") + "import tensorflow\n"
    before = os.times()
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system)
    return cpu, wall


def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s (range {min(values):.2f}-{max(values):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=7, help="alternating pairs of imports")
    args = parser.parse_args()
    installed = tuple(n for n in OPTIONAL if importlib.util.find_spec(n) is not None)
    print(f"python {sys.version.split()[0]}; installed of {', '.join(OPTIONAL)}: "
          f"{', '.join(installed) or 'none'}")
    if not installed:
        print("neither is installed: TensorFlow's import here has nothing of theirs to pay for")
        return 0
    rows = {"as installed": [], f"without {', '.join(installed)}": []}
    for _ in range(args.pairs):
        for label, hidden in zip(rows, ((), installed), strict=True):
            rows[label].append(timed_import(hidden))
    for label, runs in rows.items():
        print(f"import tensorflow, {label:<28} CPU {_summary([c for c, _ in runs])}, "
              f"wall {_summary([w for _, w in runs])}")
    full, bare = ([c for c, _ in runs] for runs in rows.values())
    extra = [a - b for a, b in zip(full, bare, strict=True)]
    print(f"what they add to each process start: CPU {_summary(extra)} "
          f"({statistics.median(extra) / statistics.median(bare):.0%} of the import without them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
