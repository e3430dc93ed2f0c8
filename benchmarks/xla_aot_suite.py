"""The built-in batch-1 inference workloads with xla-aot beside the other runtimes, in one run.

For each workload the default (TensorFlow) is measured against each runtime candidate through
tune's own evaluator (accuracy guard, interleaved rounds): LiteRT and OpenVINO on every usable
core, xla-aot single-threaded (compiled for the CPU's own LLVM name, and for its x86-64 level)
and multithreaded. Printed per candidate: the default's ms, the candidate's ms, the speedup with
its 95% interval, the max abs error, and for xla-aot the time the compilation took (export,
aot_compile_cpu, link; the runtime archive is built beforehand) and what it was compiled for.
Every runtime's timed call takes host arrays in and gives host arrays out (docs/timed-call.md).

    python benchmarks/xla_aot_suite.py                      # standard sizes, every workload
    python benchmarks/xla_aot_suite.py --size tiny --workloads mlp,lstm --rounds 10

``--fresh`` (the default) deletes the cached xla-aot compilations first, so that the compile
time is measured; ``--no-fresh`` reuses them.
"""

from __future__ import annotations

import argparse
import math
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

INFERENCE = ("lstm", "encoder", "mobilenetv2", "resnet50", "mlp", "wide-deep")
LEVEL = {"runtime": "xla-aot", "aot_target": "level"}
"""xla-aot compiled for the CPU's x86-64 level instead of its own name: the worker is started
with ``TFPERF_AOT_TARGET=level`` (``tfperf.core.aot.LEVEL_ONLY_ENV``)."""


def _candidates(cores: int) -> list[dict]:
    from tfperf.core.knobs import openvino_available

    out: list[dict] = [{"runtime": "litert", "runtime_threads": cores}]
    if openvino_available():
        out.append({"runtime": "openvino-f32"})
    out.append({"runtime": "xla-aot"})
    out.append(LEVEL)
    if cores > 1:
        out.append({"runtime": "xla-aot", "runtime_threads": cores})
    return out


def _compile_s(notes: list[str]) -> str:
    from tfperf.core.protocol import COMPILED_NOTE

    for note in notes:
        if note.startswith(COMPILED_NOTE):
            return note[len(COMPILED_NOTE) :]
    return "cached" if any("reused" in n for n in notes) else ""


def _row(name: str, outcome, default_ms: float | None) -> dict:
    from tfperf.core.knobs import label

    speed = outcome.speedup or {}
    accuracy = outcome.accuracy or {}
    return {
        "workload": name,
        "candidate": label(outcome.config),
        "status": outcome.status,
        "default_ms": default_ms,
        "ms": outcome.time_ms,
        "speedup": speed.get("median"),
        "ci": speed.get("ci95") or [None, None],
        "error": accuracy.get("max_abs_error"),
        "compile": _compile_s(outcome.info.get("notes") or [])
        if outcome.config.get("runtime") == "xla-aot"
        else "",
        "target": next((n for n in outcome.info.get("notes") or []
                        if n.startswith("XLA AOT for")), ""),
        "reason": outcome.reason,
    }


def _workload(name: str, size: str, rounds: int, store, cores: int) -> list[dict]:
    from tfperf.core.workloads import builtin_workload
    from tfperf.runner.recorder import RunRecorder
    from tfperf.tuning import TuneOptions
    from tfperf.tuning.evaluate import Evaluator

    workload = builtin_workload(name, size=size, batch=1)
    run = RunRecorder(store, "xla-aot-suite", "benchmarks/xla_aot_suite.py", workload, {}, {})
    options = TuneOptions(min_rounds=rounds, max_rounds=rounds, candidate_timeout_s=1200.0)
    evaluator = Evaluator(workload, options, run=run)
    rows = []
    try:
        evaluator.start_default()
        for config in _candidates(cores):
            outcome = _level(evaluator) if config is LEVEL else evaluator(config, {}, None)
            speed = (outcome.speedup or {}).get("median")
            default_ms = outcome.time_ms * speed if speed and outcome.time_ms else None
            rows.append(_row(name, outcome, default_ms))
            if config is LEVEL:
                rows[-1]["candidate"] += " (for the level)"
            _print(rows[-1])
    finally:
        evaluator.close()
    run.finish("ok", {"rows": rows})
    return rows


def _level(evaluator) -> object:
    """The xla-aot candidate measured with ``TFPERF_AOT_TARGET=level`` in its worker's
    environment (it passes through tfperf's environment policy); its compiled model is cached
    apart, keyed by the level."""
    import os

    from tfperf.core.aot import LEVEL_ONLY_ENV

    os.environ[LEVEL_ONLY_ENV] = "level"
    try:
        evaluator.workers.drop("runtime=xla-aot")  # the worker compiled for the CPU's name
        return evaluator({"runtime": "xla-aot"}, {}, None)
    finally:
        del os.environ[LEVEL_ONLY_ENV]
        evaluator.workers.drop("runtime=xla-aot")


def _print(r: dict) -> None:
    if r["status"] != "measured":
        print(f"{r['workload']:<12} {r['candidate']:<36} {r['status']}: {r['reason']}", flush=True)
        return
    low, high = r["ci"]
    print(
        f"{r['workload']:<12} {r['candidate']:<36} {r['default_ms']:>9.3f} {r['ms']:>9.3f} "
        f"{r['speedup']:>6.2f}x ({low:.2f}-{high:.2f}) err {r['error']:.2g}"
        + (f"  compile {r['compile']}" if r["compile"] else "")
        + (f"  [{r['target']}]" if r["target"] else ""),
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("standard", "tiny"), default="standard")
    parser.add_argument("--workloads", default=",".join(INFERENCE))
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--fresh", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args(argv)

    from tfperf.core.paths import cache_dir
    from tfperf.machine.facts import collect_machine
    from tfperf.store import Store

    if args.fresh:
        for folder in (cache_dir() / "converted").glob("xla-aot*"):
            shutil.rmtree(folder, ignore_errors=True)
    # The runtime archive is built once per install, before anything is timed.
    subprocess.run([sys.executable, "-m", "tfperf.worker.aot"], check=True)
    machine = collect_machine()
    cores = int(machine["cores"]["usable"])
    store_path = Path(tempfile.mkdtemp(prefix="xla-aot-suite-")) / "store.sqlite"
    print(f"machine: {machine['cpu']['model']}, {cores} usable cores; store {store_path}")
    print(f"{'workload':<12} {'candidate':<36} {'default':>9} {'ms':>9} speedup (95% CI) ...")
    rows = []
    with Store.open(str(store_path)) as store:
        for name in args.workloads.split(","):
            rows += _workload(name, args.size, args.rounds, store, cores)
    aot = [r for r in rows if r["candidate"].startswith("runtime=xla-aot") and r["speedup"]]
    best: dict[str, float] = {}
    for r in aot:
        best[r["workload"]] = max(best.get(r["workload"], 0.0), r["speedup"])
    if best:
        geo = math.exp(sum(math.log(v) for v in best.values()) / len(best))
        print(f"xla-aot (best of its two) over default TensorFlow, geometric mean: {geo:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
