"""Measure one workload in the current environment (the baseline) and in candidate builds.

Contract of :func:`compare_builds`:

- Every candidate SPEC is checked first (:func:`tfperf.builds.envs.check_spec`): a requirement
  that does not parse is a :class:`UserError` naming it, before anything is installed.
- Each candidate SPEC gets its environment from :func:`tfperf.builds.envs.ensure_env`; one that
  cannot be installed is reported as ``{"spec", "status": "failed", "reason"}`` (one line on
  stderr as it happens, when there are several) and the others go on. None installable ->
  :class:`UserError` (for a single candidate, its one line).
- Measuring is :func:`tfperf.runner.measure.measure` with one interpreter per config
  (``Settings.pythons``: this Python, then each environment's): one worker per environment,
  started one after the other, then interleaved rounds of one block each, order rotated every
  round, until ``min_rounds`` and the time budget or the precision target. Speedups are
  :func:`tfperf.core.stats.paired_speedup` of the baseline's block medians over each candidate's
  (>1: the candidate is faster), with a 95% interval. A model the baseline cannot load (bad
  input) is a :class:`UserError`, with the run stored as failed.
- A worker must report the TensorFlow version its environment installed; one that imported
  another (packages leaking in from the parent) is a failed trial, never a wrong figure.
- Models reach every environment as a SavedModel: a ``.keras``/``.h5`` file is exported once in
  the baseline environment (:mod:`tfperf.worker.export`); SavedModel folders, ``.tflite`` files
  and built-in workloads are handed over as they are (the built-ins support Keras 2 and 3).
- Outputs of one call are compared with the baseline's (:func:`tfperf.accuracy.compare_outputs`)
  and a candidate beyond the default tolerance is marked ``rejected``.
- Everything is recorded in the store as a run of kind ``builds`` (trials, every block, the
  comparisons), so :mod:`tfperf.builds.explain` and the reports can quote it.

Returns a JSON-able dict (see ``docs/builds.md``). Never imports TensorFlow.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from tfperf.accuracy import DEFAULT_TOLERANCE, compare_outputs, load_outputs
from tfperf.builds.envs import (
    TF_DISTRIBUTIONS,
    CandidateEnv,
    CandidateError,
    cache_root,
    check_spec,
    ensure_env,
)
from tfperf.core import stats
from tfperf.core.config import Config
from tfperf.core.errors import UserError
from tfperf.core.paths import resolve_store_path
from tfperf.core.stats import DEFAULT_THRESHOLD
from tfperf.core.versions import same_release
from tfperf.core.workloads import builtin_workload
from tfperf.machine.facts import collect_machine
from tfperf.report.console import console, err_console
from tfperf.runner import launcher
from tfperf.runner.handle import WorkerFailed
from tfperf.runner.measure import Listener, Settings, measure
from tfperf.runner.recorder import MeasureRecorder, RunRecorder
from tfperf.store import Store

KIND = "builds"
"""Store run kind of a builds comparison."""


def resolve_workload(
    workload: str | None, model: str | None, size: str, batch: int
) -> dict[str, Any]:
    """The workload dict every environment receives (models as SavedModel, see above)."""
    if workload is not None:
        return builtin_workload(workload, size, batch)
    assert model is not None
    path = Path(model).expanduser().resolve()
    if not path.exists():
        raise UserError(f"{model} does not exist; pass a .keras file or a SavedModel folder.")
    if path.is_dir():
        if not (path / "saved_model.pb").is_file():
            raise UserError(f"{model} is a folder without saved_model.pb; pass a SavedModel.")
        fmt = "savedmodel"
    elif path.suffix in (".keras", ".h5"):
        path = export_savedmodel(path, _export_dir(path))
        fmt = "savedmodel"
    elif path.suffix == ".tflite":
        fmt = "tflite"
    else:
        raise UserError(f"{model} is not a .keras, .h5, .tflite file or SavedModel folder.")
    return {
        "kind": "model",
        "path": str(path),
        "format": fmt,
        "inputs": None,
        "unsafe": False,
        "batch": int(batch),
    }


def _export_dir(model: Path) -> Path:
    """Cache folder of a model file's SavedModel export, keyed by the file's content."""
    import hashlib


    digest = hashlib.sha256(model.read_bytes()).hexdigest()[:16]
    return cache_root().parent / "exports" / f"{model.stem}-{digest}"


EXPORT_TIMEOUT_S = 600.0
"""Exporting a Keras file to a SavedModel in the baseline environment may take this long."""


def export_savedmodel(src: Path, dst: Path, python: str = sys.executable) -> Path:
    """Export a Keras model file to a SavedModel in a subprocess of the baseline environment.

    An export already at ``dst`` is reused.
    """
    if (dst / "saved_model.pb").is_file():
        return dst
    dst.parent.mkdir(parents=True, exist_ok=True)
    ended = launcher.run(
        [python, "-m", "tfperf.worker.export", str(src), str(dst)], timeout_s=EXPORT_TIMEOUT_S
    )
    if not ended.ok or not (dst / "saved_model.pb").is_file():
        last = launcher.last_line(ended.tail) or ended.reason()
        raise UserError(
            f"{src} could not be exported as a SavedModel ({last}); "
            "export it yourself and pass the folder."
        )
    return dst


def prepare_candidates(
    specs: list[str], log: Any = None
) -> tuple[list[CandidateEnv], list[dict[str, Any]]]:
    """Ready environments, and one failure record per spec that could not be installed."""

    ready: list[CandidateEnv] = []
    failed: list[dict[str, Any]] = []
    for spec in specs:
        try:
            ready.append(ensure_env(spec, log=log))
        except CandidateError as exc:

            if len(specs) > 1:  # a single candidate's failure is the command's error line
                err_console().print(f"[red]candidate failed:[/] {escape(str(exc))}", soft_wrap=True)
            failed.append({"spec": spec, "status": "failed", "reason": exc.reason})
    return ready, failed


def _tf_version(versions: dict[str, str]) -> str | None:

    for name in TF_DISTRIBUTIONS:
        if name in versions and name != "intel-extension-for-tensorflow":
            return versions[name]
    return None


def compare_builds(
    candidates: list[str],
    workload: str | None = None,
    model: str | None = None,
    size: str = "standard",
    batch: int = 1,
    budget_s: float = 30.0,
    min_rounds: int = 8,
    store: str | None = None,
    progress: bool = True,
    blocks: int | None = None,
    calls: int | None = None,
) -> dict[str, Any]:
    """Compare the current environment with each candidate build; see the module docstring.

    ``blocks`` overrides ``min_rounds``; ``calls`` fixes the calls per block (otherwise
    :mod:`tfperf.runner.measure` sets them from each worker's warm-up).
    """

    if not candidates:
        raise UserError("give at least one --candidate (a pip requirement or a wheel path).")
    for spec in candidates:  # a typo is found before minutes of installing the others
        check_spec(spec)
    with tempfile.TemporaryDirectory(prefix="tfperf-builds-") as tmp:
        wl = resolve_workload(workload, model, size, batch)
        envs, failed = _installed(candidates)
        settings = Settings(
            budget_s=budget_s,
            min_rounds=blocks or min_rounds,
            pythons=(sys.executable, *(str(env.python) for env in envs)),
            calls_per_block=calls,
            outputs_dir=tmp,
        )
        expected = [None, *(_tf_version(env.versions) for env in envs)]
        command = "tfperf builds compare " + " ".join(f"--candidate {s}" for s in candidates)
        record = {"budget_s": settings.budget_s, "min_rounds": settings.min_rounds}
        with (
            Store.open(resolve_store_path(store)) as st,
            RunRecorder(st, KIND, command, wl, collect_machine(), record) as run,
        ):
            listener = MeasureRecorder(run, _Progress(progress, expected))
            m = measure(
                wl,
                [Config() for _ in expected],
                settings,
                listener,
                labels=["current", *(env.label for env in envs)],
            )
            result = _result(wl, m, envs, failed, _check_outputs(m.trials))
            _record_result(run, listener.trial_ids, result)
            result.update(run_id=run.run_id, store=str(st.path))
        return result


def _installed(candidates: list[str]) -> tuple[list[Any], list[dict[str, Any]]]:
    """The candidates' environments and the failed installs; a :class:`UserError` when not
    one candidate could be installed."""
    envs, failed = prepare_candidates(candidates)
    if len(failed) == 1 and not envs:
        only = failed[0]
        raise UserError(
            f"no candidate could be installed: {only['spec']}: {only['reason']}; fix the spec."
        )
    if not envs:
        raise UserError(
            f"no candidate could be installed ({len(failed)} failed, each named above); "
            "fix the specs."
        )
    return envs, failed


def _check_outputs(trials: list[Any]) -> dict[int, dict[str, Any]]:
    """Each candidate's outputs against the baseline's, with the default tolerance (the
    outputs :func:`tfperf.runner.measure.measure` had each live worker write)."""

    base = trials[0]
    if base.outputs_path is None:
        return {}
    ref = load_outputs(base.outputs_path)
    found: dict[int, dict[str, Any]] = {}
    for trial in trials[1:]:
        if trial.outputs_path is None:
            continue
        errors = compare_outputs(ref, load_outputs(trial.outputs_path))
        accepted, reason = DEFAULT_TOLERANCE.check(errors)
        found[trial.index] = {**errors, "accepted": accepted, "reason": reason}
    return found


def _result(
    wl: dict,
    m: Any,
    envs: list[CandidateEnv],
    failed: list[dict[str, Any]],
    accuracy: dict[int, dict[str, Any]],
) -> dict[str, Any]:

    batch = int(wl.get("batch", 1))
    base = m.trials[0]
    rows = []
    for trial in m.trials:
        env = envs[trial.index - 1] if trial.index else None
        row: dict[str, Any] = {
            "label": trial.label,
            "role": trial.role,
            "spec": env.spec if env else None,
            "python": trial.python,
            "env": str(env.path) if env else None,
            "versions": env.versions if env else {},
            "tf_version": (trial.ready.get("install") or {}).get("tf_version"),
            "status": trial.status,
            "error": trial.error,
            "summary": stats.summarize(trial.samples_s, batch) if trial.samples_s else None,
            "cold_start_s": trial.cold_start_s,
            "speedup": None,
            "accuracy": accuracy.get(trial.index),
        }
        if trial.index and trial.samples_s and base.samples_s:
            row["speedup"] = m.speedup(base, trial, DEFAULT_THRESHOLD)
        acc = accuracy.get(trial.index)
        if acc is not None and not acc["accepted"]:
            row["status"] = "rejected"
        rows.append(row)
    return {
        "kind": KIND,
        "workload": wl,
        "rounds": m.rounds,
        "stopped": m.stopped,
        "steady_s": m.steady_s,
        "results": rows,
        "failed_candidates": failed,
    }


class _Progress(Listener):
    """Shows progress on stderr, and refuses a worker that imported another TensorFlow than
    its environment holds (``expected[i]``: the version trial ``i`` must report, ``None``:
    any)."""

    def __init__(self, progress: bool, expected: list[str | None]) -> None:
        self.progress = progress
        self.expected = expected

    def _say(self, text: str) -> None:
        if self.progress:
            err_console().print(text, soft_wrap=True, markup=False, highlight=False)

    def trial(self, trial: Any, event: str) -> None:
        reason = f": {trial.error['reason']}" if event == "failed" and trial.error else ""
        self._say(f"{trial.label}: {event}{reason}")

    def refuse(self, trial: Any, ready: dict[str, Any]) -> WorkerFailed | None:
        want = self.expected[trial.index]
        got = (ready.get("install") or {}).get("tf_version")
        if want is None or got is None or same_release(got, want):
            return None
        return WorkerFailed(
            f"worker imported TensorFlow {got}, not the candidate's {want}; the parent's "
            "packages are on the worker's path (install tfperf from source)",
            kind="wrong-tensorflow",
        )

    def round(self, done: int, elapsed_s: float, budget_s: float) -> None:
        if done == 1 or done % 25 == 0:
            self._say(f"round {done} ({elapsed_s:.0f}/{budget_s:.0f} s)")


def _record_result(run: RunRecorder, trial_ids: dict[int, int], result: dict[str, Any]) -> None:
    """Close each trial with its row, store the comparisons with the baseline, close the run."""
    for row, tid in zip(result["results"], sorted(trial_ids.values()), strict=False):
        status = row["status"] if row["status"] in ("ok", "failed", "rejected") else "ok"
        info = {k: row[k] for k in ("summary", "tf_version", "versions", "spec", "accuracy")}
        run.finish_trial(tid, status, info, row["error"])
        if row["speedup"] is not None:
            run.comparison(trial_ids[0], tid, row["speedup"])
    keys = ("rounds", "stopped", "failed_candidates")
    run.finish("ok", {k: result[k] for k in keys})


def render_compare(result: dict[str, Any]) -> None:
    """Print the side-by-side table (people's view of :func:`compare_builds`)."""


    table = Table(
        title=f"builds compare, {result['rounds']} interleaved rounds "
        f"(stopped: {result['stopped']})",
        caption="speedup: baseline time / candidate time, paired by round (>1: candidate faster)",
    )
    for col in ("environment", "TF", "p50 ms", "speedup [95% CI]", "verdict", "status"):
        table.add_column(col, overflow="fold")
    for row in result["results"]:
        s = row["summary"] or {}
        med = (s.get("latency_ms") or {}).get("p50")
        sp = row["speedup"]
        if sp and sp["median"] is not None:
            low, high = sp["ci95"]
            speed = f"{sp['median']:.3f}x [{low:.3f}, {high:.3f}]"
            verdict = sp["verdict"]
        else:
            speed, verdict = ("1 (baseline)" if row["role"] == "baseline" else "-"), ""
        status = row["status"]
        if row["error"]:
            status += f": {row['error']['reason']}"
        table.add_row(
            row["label"],
            str(row["tf_version"] or "-"),
            f"{med:.3f}" if isinstance(med, (int, float)) else "-",
            speed,
            verdict,
            status,
        )
    console().print(table)
    for f in result["failed_candidates"]:
        console().print(f"not installed: {f['spec']}: {f['reason']}", soft_wrap=True)
    console().print(f"stored as run {result.get('run_id')} in {result.get('store')}")
