"""Parent side of ``tfperf pipeline``: run the worker, enforce its timeout, derive the report.

Contract: :func:`analyze_pipeline` never imports TensorFlow. It checks the ``module:function``
argument without importing it (:func:`check_target`), runs ``python -m tfperf.worker.pipeline.main``
in a fresh process (the current directory importable, as users expect), waits at most
``timeout`` seconds, and turns the worker's raw block times into the report::

    {"target", "verdict": "highly_input_bound"|"moderately_input_bound"|"not_input_bound"|None,
     "input_share": float|None, "input_share_ci95": [lo, hi],
     "dataset": {"batches_per_s", "summary"}, "compute": {"steps_per_s", ...} | None,
     "train": {"steps_per_s", ...} | None, "metric": "steps/s"|"batches/s",
     "stages": [{..., "python_code": bool}], "bounding_stage": str|None,
     "fixes": [{"name", "change", "baseline_per_s", "per_s", "speedup", "ci95", "p_value",
                "verdict", "measured": True, "warnings"} | {"name", "change"?, "reason",
                "measured": False}],
     "best_fix": {"name", "change", "speedup", "ci95", "verdict",
                  "unmeasured": [{"name", "change", "why_not_measured", "stage"}], "headline"},
     "gpu": {...}, "notes": [...], "tf_version", "batch", "steps", "rounds"}

``verdict`` is ``None`` only when no model was given (no training step to compare with).
``best_fix`` is the significantly faster fix (``verdict == "faster"``) with the highest median
end-to-end speedup, those whose 95% interval lies above 1 first; when none is, its ``name`` is
``None``; see :mod:`tfperf.input_pipeline.answer` for what went unmeasured and the headline.
Every failure (a user mistake reported by the worker, a crash, a signal, a timeout) raises
:class:`~tfperf.core.errors.UserError` with one sentence.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from tfperf.core.errors import UserError
from tfperf.core.inputbound import classify, input_share, verdict
from tfperf.core.paths import resolve_store_path
from tfperf.core.stats import DEFAULT_THRESHOLD, MIN_PAIRS, paired_speedup, summarize
from tfperf.input_pipeline import DEFAULT_MIN_BLOCK_S, DEFAULT_TIMEOUT
from tfperf.input_pipeline.answer import best_fix, headline
from tfperf.machine.facts import collect_machine
from tfperf.modelref import find_module
from tfperf.runner import launcher
from tfperf.runner.recorder import RunRecorder
from tfperf.store import Store


def check_target(spec: str) -> None:
    """Raise :class:`UserError` unless ``spec`` is ``module:function`` with a findable module.

    The module is located with :func:`tfperf.modelref.find_module` (the current directory
    first), not imported: importing it may import TensorFlow, which only the worker does.
    """
    module, sep, func = spec.partition(":")
    if not sep or not module or not func or not func.replace(".", "_").isidentifier():
        raise UserError(f"'{spec}' is not module:function; pass e.g. my_data:make_dataset")
    found = find_module(module)
    if found is None:
        raise UserError(
            f"cannot find module {module}; run from the directory that contains it or install it"
        )


def run_worker(
    args: list[str],
    timeout: float,
    on_progress: Callable[[str], None] | None = None,
) -> dict:
    """Run the worker with ``args``; return its result document or raise :class:`UserError`."""
    with tempfile.TemporaryDirectory(prefix="tfperf-pipeline-") as tmp:
        out = Path(tmp) / "result.json"
        prog = Path(tmp) / "progress.txt"
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (os.getcwd(), env.get("PYTHONPATH", "")) if p
        )
        cmd = [sys.executable, "-m", "tfperf.worker.pipeline.main", "--out", str(out)]
        cmd += ["--progress", str(prog), *args]
        seen = [""]

        def forward() -> None:
            if on_progress is None or not prog.exists():
                return
            lines = prog.read_text(encoding="utf-8", errors="replace").splitlines()
            if lines and lines[-1] != seen[0]:
                seen[0] = lines[-1]
                on_progress(seen[0])

        with launcher.Child(cmd, env=env) as child:  # Ctrl-C included: no worker is left
            ended = child.wait(timeout, on_poll=forward)
        return _result(ended, out, timeout)


def _result(ended: launcher.Ended, out: Path, timeout: float) -> dict:
    if ended.timed_out:
        raise UserError(
            f"the pipeline analysis did not finish within {timeout:g} s; raise --timeout, "
            "lower --steps/--rounds, or check that the dataset does not hang"
        )
    doc = None
    if out.exists():
        try:
            doc = json.loads(out.read_text(encoding="utf-8"))
        except ValueError:
            doc = None
    tail = _tail(ended.tail)
    if isinstance(doc, dict) and "error" in doc:
        err = doc["error"]
        if err.get("kind") == "user":
            raise UserError(err["message"])
        raise UserError(
            f"the pipeline worker failed ({err.get('message')}); its log ends with: {tail}"
        )
    if ended.signal is not None:
        hint = " (out of memory?)" if ended.signal == "SIGKILL" else ""
        raise UserError(
            f"the pipeline worker was killed by {ended.signal}{hint} while running the pipeline; "
            f"its log ends with: {tail}"
        )
    if ended.code != 0 or not isinstance(doc, dict):
        raise UserError(
            f"the pipeline worker exited with code {ended.code} without a result; its log ends "
            f"with: {tail}"
        )
    return doc


def _tail(text: str) -> str:
    return launcher.last_line(text) or "(empty log)"


def _per_s(blocks: list[float]) -> float | None:
    import statistics

    good = [b for b in blocks if b and b > 0]
    return 1.0 / statistics.median(good) if good else None


def _compare(name: str, change: str, base: list[float], cand: list[float]) -> dict:

    result = paired_speedup(base, cand, threshold=DEFAULT_THRESHOLD)
    return {
        "name": name,
        "change": change,
        "measured": True,
        "baseline_per_s": _per_s(base),
        "per_s": _per_s(cand),
        "speedup": result["median"],
        "ci95": result["ci95"],
        "p_value": result["p_value"],
        "verdict": result["verdict"],
        "warnings": result["warnings"],
    }


def _summary(blocks: list[float], batch: int) -> dict:

    return summarize(blocks, batch)


def report(raw: dict) -> dict:
    """The user-facing report (see the module docstring) from the worker's raw document."""

    blocks = raw["blocks"]
    batch = int(raw.get("batch") or 1)
    share = share_ci = name = None
    compute = train = None
    if raw.get("has_model"):
        # speedup of compute over train = train / compute; share = 1 - 1/ratio, pair by pair.
        ratio = paired_speedup(blocks["train"], blocks["compute"], threshold=DEFAULT_THRESHOLD)
        if ratio["median"] is not None:
            share = input_share(ratio["median"], 1.0)
            share_ci = [input_share(r, 1.0) if r else None for r in ratio["ci95"]]
        name = verdict(share)
        compute = {"steps_per_s": _per_s(blocks["compute"])}
        compute.update(summary=_summary(blocks["compute"], batch))
        train = {"steps_per_s": _per_s(blocks["train"])}
        train.update(summary=_summary(blocks["train"], batch))
    fixes = [_compare(f["name"], f["change"], f["baseline"], f["candidate"]) for f in raw["fixes"]]
    for combo in raw.get("combined") or []:
        row = _compare(combo["name"], combo["change"], combo["baseline"], combo["candidate"])
        row["parts"] = combo["parts"]
        fixes.append(row)
    unmeasured = [{**s, "measured": False} for s in raw.get("skipped", [])]
    unmeasured += [{**a, "measured": False} for a in raw.get("advice", [])]
    bounding = next((s["stage"] for s in raw["stages"] if s.get("bounding")), None)
    gpu_doc = dict(raw["gpu"])
    if gpu_doc.get("available"):
        gpu_doc["bound"] = classify((gpu_doc.get("utilization") or {}).get("mean_util"), name)
    doc = {
        "target": raw["target"],
        "verdict": name,
        "input_share": share,
        "input_share_ci95": share_ci,
        "dataset": {
            "batches_per_s": _per_s(blocks["dataset"]),
            "summary": _summary(blocks["dataset"], batch),
        },
        "compute": compute,
        "train": train,
        "metric": raw["metric"],
        "stages": raw["stages"],
        "bounding_stage": bounding,
        "fixes": fixes + unmeasured,
        "best_fix": best_fix(fixes, raw.get("advice")),
        "gpu": gpu_doc,
        "notes": [*raw.get("notes", []), *_notes(raw)],
        "tf_version": raw.get("tf_version"),
        "batch": batch,
        "steps": raw.get("steps"),
        "rounds": raw.get("rounds"),
    }
    doc["best_fix"]["headline"] = headline(doc)
    return doc


def _notes(raw: dict) -> list[str]:
    """Caveats the reader needs: too few rounds for a verdict, no training step."""

    notes = []
    if int(raw.get("rounds") or 0) < MIN_PAIRS:
        notes.append(
            f"{raw.get('rounds')} rounds: at least {MIN_PAIRS} are needed before any fix can be "
            "significantly faster (--rounds)"
        )
    if not raw.get("has_model"):
        notes.append(
            "no model was returned, so there is no training step to compare with: the verdict "
            "needs {'dataset': ds, 'model': model}"
        )
    return notes


@dataclass(frozen=True)
class PipelineOptions:
    """How long and how often ``tfperf pipeline`` measures (the command's options)."""

    steps: int = 20
    """Timed steps per block."""
    rounds: int = 6
    """Interleaved rounds (at least 6 for a significant verdict)."""
    stage_seconds: float = 0.3
    """Each prefix of the pipeline is timed for about this long."""
    timeout: float = DEFAULT_TIMEOUT
    min_block_s: float = DEFAULT_MIN_BLOCK_S
    """A block shorter than this gets more steps (the report's ``steps`` and notes say how
    many)."""
    store: str | None = None
    """Where the run is recorded (default: ``TFPERF_STORE`` or the user data dir)."""

    def worker_args(self) -> list[str]:
        """The pipeline worker's arguments for these options."""
        if self.steps < 1 or self.rounds < 1 or self.stage_seconds <= 0 or self.min_block_s < 0:
            raise UserError(
                "--steps and --rounds must be at least 1, --stage-seconds above 0 and "
                "--min-block-seconds at least 0"
            )
        return [
            "--steps", str(self.steps), "--rounds", str(self.rounds),
            "--stage-seconds", str(self.stage_seconds),
            "--min-block-seconds", str(self.min_block_s),
        ]


def analyze_pipeline(
    target: str | None = None,
    *,
    demo: bool = False,
    options: PipelineOptions | None = None,
    on_progress: Callable[[str], None] | None = None,
    command: str = "tfperf pipeline",
) -> dict:
    """Diagnose ``target`` (``module:function``) or the built-in demo; return the report
    (with the ``run_id`` it is stored as). Raises :class:`UserError` on bad input or when the
    worker fails, crashes or exceeds ``options.timeout`` seconds (the run is stored as failed).
    """
    options = options or PipelineOptions()
    if demo == (target is not None):
        raise UserError("give either a module:function or --demo")
    args = options.worker_args()
    if demo:
        args.append("--demo")
    else:
        assert target is not None
        check_target(target)
        args += ["--target", target]
    workload = {"kind": "pipeline", "target": target or "demo"}
    settings = {k: v for k, v in asdict(options).items() if k != "store"}
    with (
        Store.open(resolve_store_path(options.store)) as store,
        RunRecorder(store, "pipeline", command, workload, collect_machine(), settings) as run,
    ):
        raw = run_worker(args, options.timeout, on_progress)
        if raw.get("schema") != 1:
            raise UserError("the pipeline worker wrote an unknown result version; reinstall tfperf")
        doc = report(raw)
        doc["run_id"] = run.run_id
        run.finish("ok", doc)
    return doc
