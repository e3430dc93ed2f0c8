"""Every zoo model, in every form a user has it, on the runtimes tune can pick: the outputs of
each conversion against TensorFlow's on the same inputs.

Each model is checked in a child process of its own that runs tfperf's worker-side code: each form
is loaded with ``tfperf.worker.prepare.load_workload`` -- the factory (seeded as in a worker), and
the ``.keras`` file and SavedModel written by ``save.py`` with their inputs -- and prepared for each
runtime with ``tfperf.worker.prepare.prepare_loaded``. A form's reference is its own TensorFlow
output. The ``"tf"`` row of a saved form compares that output with the one ``save.py`` took from the
model before saving it, which catches inputs fed in the wrong order. A converter that crashes the
process (full-int8 conversion of a recurrent model can) is a ``"crashed"`` row, and the child is
started again after it.

Every converting runtime runs on the factory; the saved forms run the fp32 runtimes
(``SAVED_RUNTIMES``), where an input-order mistake shows as a large error rather than as
quantisation noise. The ``.keras`` file of a model of one input runs its ``"tf"`` row only: it
loads to a Keras model in memory, as the factory gives, and converts along the factory's path
with nothing to feed in the wrong order (its conversions repeated the factory's: 17 s of
DenseNet121's at 32x32). With ``--every-runtime`` the factory also runs the rest of what tune can
pick (``OTHER_RUNTIMES``: bf16 TensorFlow and OpenVINO in bf16 where the CPU has bf16 instructions,
XLA AOT), which costs more (XLA AOT compiles the model with a C++ toolchain).

Usage: ``python benchmarks/zoo/conversions.py NAME [NAME ...] --saved DIR [--tiny]
[--every-runtime]`` (DIR as written by ``save.py``). Prints one JSON line per (model, form,
runtime): ``{"model", "form", "runtime", "status": "ok" | "failed" | "crashed",
"max_rel_error", "max_abs_error", "top1_agreement", "accepted", "guard_reason", "reason"}``:
``accepted`` and ``guard_reason`` are the verdict of tune's accuracy guard
(``tfperf.accuracy.guard``, default tolerance) on a conversion that ran.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNTIMES = ("litert", "litert-fp16", "litert-dynint8", "litert-int8", "openvino-f32")
"""The runtimes that convert the model to another format (LiteRT, OpenVINO), where a converter
can change what the model computes."""
BF16_RUNTIMES = ("tf-bf16", "openvino-bf16")
"""TensorFlow in bf16 (``precision=bf16``) and OpenVINO in bf16: what tune can pick on a CPU with
bf16 instructions (AVX512_BF16 or AMX) only."""
OTHER_RUNTIMES = (*BF16_RUNTIMES, "xla-aot")
"""The rest of what tune can pick for inference on a CPU: the bf16 ones and the model compiled
ahead of time by XLA (:func:`other_runtimes`: those of this CPU)."""
SAVED_RUNTIMES = ("litert", "openvino-f32")


def config_of(runtime: str) -> dict:
    return {"precision": "bf16"} if runtime == "tf-bf16" else {"runtime": runtime}


def other_runtimes() -> tuple[str, ...]:
    """:data:`OTHER_RUNTIMES` that tune can pick on this CPU."""
    from tfperf.worker.convert import cpu_has_bf16

    return OTHER_RUNTIMES if cpu_has_bf16() else tuple(
        r for r in OTHER_RUNTIMES if r not in BF16_RUNTIMES)


def forms(name: str, saved: Path, tiny: bool) -> dict[str, dict]:
    """The workload dicts of each form of model ``name``."""
    factory = f"{name}:{'make_tiny' if tiny else 'make'}"
    inputs = str(saved / f"{name}.npz")
    found = {
        "factory": {"kind": "model", "path": factory, "format": "factory", "batch": 1,
                    "search_path": str(HERE), "inputs": None},
    }
    if (saved / f"{name}.keras").exists():
        found["keras"] = {"kind": "model", "path": str(saved / f"{name}.keras"),
                          "format": "keras", "inputs": inputs, "batch": 1}
    found["savedmodel"] = {"kind": "model", "path": str(saved / f"{name}_savedmodel"),
                           "format": "savedmodel", "inputs": inputs, "batch": 1}
    return found


def plan(name: str, saved: Path, tiny: bool, every: bool = False) -> list[tuple[str, str]]:
    """(form, runtime) pairs to check, in order (``every``: ``OTHER_RUNTIMES`` too)."""
    pairs = []
    factory = (*RUNTIMES, *(other_runtimes() if every else ()))
    for form in forms(name, saved, tiny):
        runtimes = factory if form == "factory" else ("tf", *SAVED_RUNTIMES)
        if form == "keras" and input_count(name, saved) == 1:
            runtimes = ("tf",)  # the factory's conversion path again (module docstring)
        pairs += [(form, r) for r in runtimes]
    return pairs


def input_count(name: str, saved: Path) -> int:
    """How many inputs model ``name`` takes (its saved sample inputs, one array each)."""
    import numpy as np

    with np.load(saved / f"{name}.npz") as npz:
        return len(npz.files)


def row(model, form, runtime, status, comparison=None, reason="") -> dict:
    comparison = comparison or {}
    return {
        "model": model, "form": form, "runtime": runtime, "status": status,
        "max_rel_error": comparison.get("max_rel_error"),
        "max_abs_error": comparison.get("max_abs_error"),
        "top1_agreement": comparison.get("top1_agreement"),
        "accepted": comparison.get("accepted"),
        "guard_reason": comparison.get("reason", ""),
        "reason": reason or comparison.get("shape_mismatch") or "",
    }


def child(name: str, saved: Path, tiny: bool, skip: set[str], every: bool) -> None:
    """Check one model in this process; print a ``start`` line before each conversion."""
    import numpy as np

    from tfperf.accuracy import compare_outputs, guard
    from tfperf.worker.prepare import load_workload, prepare_loaded

    loaded_forms: dict[str, tuple] = {}
    with np.load(saved / f"{name}.reference.npz") as npz:
        before_saving = [npz[k] for k in sorted(npz.files, key=lambda k: int(k.split("_")[1]))]
    for form, runtime in plan(name, saved, tiny, every):
        key = f"{form}/{runtime}"
        if key in skip:
            continue
        print(json.dumps({"start": key}), flush=True)
        if form not in loaded_forms:
            loaded = load_workload(forms(name, saved, tiny)[form])
            loaded_forms[form] = (loaded, prepare_loaded(loaded, {}).outputs())
        loaded, reference = loaded_forms[form]
        if runtime == "tf":
            same = compare_outputs(before_saving, reference)
            print(json.dumps(row(name, form, "tf", "ok", same)))
            continue
        try:
            outputs = prepare_loaded(loaded, config_of(runtime)).outputs()
        except Exception as exc:  # a conversion that fails is a row, not the end
            print(json.dumps(row(name, form, runtime, "failed", None, str(exc).split("\n")[0])))
            continue
        # the accuracy guard tune applies, with its default tolerance
        print(json.dumps(row(name, form, runtime, "ok", guard(reference, outputs))))


def check(name: str, saved: Path, tiny: bool, every: bool = False):
    """Yield the rows for model ``name``, each conversion in a child process that is started
    again after one crashes."""
    skip: set[str] = set()
    while True:
        cmd = [sys.executable, __file__, name, "--saved", str(saved), "--child"]
        cmd += ["--tiny"] if tiny else []
        cmd += ["--every-runtime"] if every else []
        cmd += [a for key in sorted(skip) for a in ("--skip", key)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        current = None
        for line in proc.stdout:
            found = json.loads(line)
            if "start" in found:
                current = found["start"]
                continue
            skip.add(f"{found['form']}/{found['runtime']}")
            yield found
        code = proc.wait()
        if code == 0:
            return
        if current is None or current in skip:
            raise RuntimeError(f"checking {name} failed with exit code {code} before a conversion")
        skip.add(current)
        form, runtime = current.split("/")
        why = f"the process crashed (exit code {code}, signal {-code if code < 0 else 'none'})"
        yield row(name, form, runtime, "crashed", None, why)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="+")
    parser.add_argument("--saved", required=True, type=Path)
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--every-runtime", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--skip", action="append", default=[], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.names[0], args.saved, args.tiny, set(args.skip), args.every_runtime)
        return 0
    for name in args.names:
        for found in check(name, args.saved, args.tiny, args.every_runtime):
            print(json.dumps(found), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
