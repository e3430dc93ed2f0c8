"""The library API: ``tfperf.doctor()``, ``bench()``, ``tune()``, ``compare()``, ``pipeline()``.

Contract: each function takes the command's options as keyword arguments under the command
line's names (``--max-trials`` is ``max_trials=``, ``--set`` is ``set=``), with the same
defaults, because both build the same option records (:class:`~tfperf.tuning.TuneOptions`,
:class:`~tfperf.benchmark.BenchOptions`,
:class:`~tfperf.input_pipeline.analyze.PipelineOptions`) and
call the same library functions. Each returns a typed result from :mod:`tfperf.api.results`
whose ``to_dict()`` is the command's ``--json`` document. Bad input raises
:class:`~tfperf.core.errors.UserError` (the command line's one sentence, exit 2). ``progress``
shows the command's live progress on stderr in a terminal or a notebook; ``progress=False``
keeps it silent. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tfperf.api.models import train_workload_for, workload_for
from tfperf.api.results import BenchResult, CompareResult, DoctorResult, PipelineResult, TuneResult
from tfperf.core.errors import UserError

PathLike = str | os.PathLike


def doctor(*, timeout: float = 120, python: str | None = None) -> DoctorResult:
    """Audit this machine and its TensorFlow install (``tfperf doctor``)."""
    from tfperf.diagnosis.audit import run_doctor

    return DoctorResult(run_doctor(timeout=timeout, python=python))


def _knob_args(values: Mapping[str, Any] | Sequence[str] | None) -> list[str]:
    """``{"onednn": "off"}`` or ``["onednn=off"]`` as the command line's ``KEY=VALUE`` list."""
    if values is None:
        return []
    if isinstance(values, Mapping):
        return [f"{k}={v}" for k, v in values.items()]
    if isinstance(values, str):
        return [values]
    return [str(v) for v in values]


def bench(
    model: Any = None,
    *,
    workload: str | None = None,
    inputs: Any = None,
    unsafe: bool = False,
    batch: int = 1,
    size: str = "standard",
    set: Mapping[str, Any] | Sequence[str] | None = None,
    env: Mapping[str, Any] | Sequence[str] | None = None,
    budget: float = 30.0,
    precision: float = 0.01,
    threshold: float = 0.03,
    timeout: float = 120.0,
    memory_limit: float | None = None,
    no_peak: bool = False,
    parallel_start: bool = False,
    processes: int | None = None,
    store: PathLike | None = None,
    progress: bool = True,
    mlflow: bool = False,
    train: bool = False,
    labels: Any = None,
    guard_steps: int | None = None,
) -> BenchResult:
    """Measure ``model`` (or the built-in ``workload``) under the default config and, with
    ``set``/``env``, one candidate config, interleaved (``tfperf bench``). ``train=True``
    measures its training step (``tfperf bench --train``): ``model`` is a TARGET string or
    a compiled Keras model with ``inputs`` and ``labels`` arrays (a dataset object cannot
    cross into a worker: return it from a ``module:function`` factory)."""
    from tfperf.benchmark import run_bench
    from tfperf.core.config import Config
    from tfperf.progress import NORMAL, QUIET, at_level
    from tfperf.progress.displays import bench_progress

    _mlflow_ready(mlflow)
    candidate = Config.parse(_knob_args(set), _knob_args(env))
    configs = [Config()] + ([candidate] if candidate != Config() else [])
    options = _bench_options(budget, precision, threshold, timeout, memory_limit, no_peak,
                             parallel_start, processes)
    with tempfile.TemporaryDirectory(prefix="tfperf-api-") as scratch:
        wl = _workload(model, workload, inputs, unsafe, batch, size, Path(scratch),
                       train=train, labels=labels, guard_steps=guard_steps, validation=None)
        with at_level(NORMAL if progress else QUIET), bench_progress() as listener:
            doc = run_bench(wl, configs, options, store=_path(store), listener=listener,
                            command="tfperf.bench()", kind="bench")
    return _logged(BenchResult(doc), mlflow, store)


def _workload(model: Any, workload: str | None, inputs: Any, unsafe: bool, batch: int,
              size: str, scratch: Path, *, train: bool, **training: Any) -> dict[str, Any]:
    """:func:`workload_for`, or with ``train`` :func:`train_workload_for` (Keras' batch of 32
    unless another is given)."""
    if not train:
        return workload_for(model, workload=workload, inputs=inputs, unsafe=unsafe, batch=batch,
                            size=size, scratch=scratch)
    if workload is not None:
        raise UserError("train=True takes your own model, not a built-in workload.")
    return train_workload_for(model, inputs=inputs, unsafe=unsafe,
                              batch=None if batch == 1 else batch, scratch=scratch, **training)


def _bench_options(budget: float, precision: float, threshold: float, timeout: float,
                   memory_limit: float | None, no_peak: bool, parallel_start: bool,
                   processes: int | None) -> Any:
    from tfperf.benchmark import BenchOptions, default_processes

    return BenchOptions(
        budget_s=budget,
        precision=precision,
        threshold=threshold,
        timeout_s=timeout,
        memory_limit_bytes=None if memory_limit is None else int(memory_limit * 2**30),
        peak=not no_peak,
        parallel_start=parallel_start,
        processes=default_processes(budget) if processes is None else processes,
    )


def tune(
    model: Any = None,
    *,
    workload: str | None = None,
    inputs: Any = None,
    unsafe: bool = False,
    batch: int = 1,
    size: str = "standard",
    throughput: bool = False,
    objective: str | None = None,
    slo_ms: float | None = None,
    batch_sizes: str | Sequence[int] | None = None,
    strategy: str = "staged",
    quick: bool = False,
    max_trials: int | None = None,
    budget: float | None = None,
    tolerance: str | float | None = None,
    labels: PathLike | None = None,
    runtimes: str | Sequence[str] | None = None,
    knobs: str | Sequence[str] | None = None,
    resume: int | str | None = None,
    profile_out: PathLike | None = None,
    out_dir: PathLike | None = None,
    confirm_rounds: int = 21,
    candidate_timeout: float = 300.0,
    seed: int = 0,
    store: PathLike | None = None,
    progress: bool = True,
    mlflow: bool = False,
    train: bool = False,
    guard_steps: int | None = None,
    validation: PathLike | None = None,
) -> TuneResult:
    """Find the fastest configuration of ``model`` whose outputs stay correct, and save it as a
    profile (``tfperf tune``); ``objective="server", slo_ms=X`` tunes the serving layout for
    the most requests per second within a p99 of ``X`` ms (docs/serving.md). ``train=True``:
    its training step (docs/train.md; ``labels`` the targets, ``tolerance`` the guard's)."""
    from tfperf.accuracy import load_labels
    from tfperf.progress import NORMAL, QUIET, at_level
    from tfperf.progress.displays import tune_progress
    from tfperf.tuning import tune as run_tune
    from tfperf.tuning.options import options_from_args

    options = options_from_args(
        strategy=strategy, quick=quick, max_trials=max_trials, budget=budget,
        tolerance=None if tolerance is None or train else str(tolerance), runtimes=_csv(runtimes),
        knobs=_csv(knobs), store=_path(store), resume=resume, profile_out=_path(profile_out),
        out_dir=_path(out_dir), confirm_rounds=confirm_rounds,
        candidate_timeout=candidate_timeout, seed=seed, throughput=throughput,
        objective=objective, slo_ms=slo_ms, batch_sizes=_csv(batch_sizes),
        command="tfperf.tune()", **_train_tolerance(train, tolerance),
    )
    sample_labels = load_labels(os.fspath(labels)) if labels is not None and not train else None
    _mlflow_ready(mlflow)
    with tempfile.TemporaryDirectory(prefix="tfperf-api-") as scratch:
        wl = _workload(model, workload, inputs, unsafe, batch, size, Path(scratch), train=train,
                       labels=labels, guard_steps=guard_steps, validation=validation)
        with at_level(NORMAL if progress else QUIET), tune_progress() as shown:
            doc = run_tune(wl, options, labels=sample_labels, progress=shown)
    return _logged(TuneResult(doc), mlflow, store)


def _train_tolerance(train: bool, tolerance: str | float | None) -> dict[str, Any]:
    """``tolerance`` as the training guard's (the accuracy guard's stays at its default)."""
    if not train:
        return {}
    from tfperf.tuning.trainguard import parse_train_tolerance

    text = None if tolerance is None else str(tolerance)
    return {"train_tolerance": parse_train_tolerance(text)}


def compare(
    a: int | str | PathLike, b: int | str | PathLike, *, store: PathLike | None = None,
    threshold: float = 0.03,
) -> CompareResult:
    """Compare run (or result file) ``b`` against ``a``, config by config (``tfperf compare A
    B``); ``result.regressions`` lists B's configs significantly slower than A's."""
    from tfperf.benchmark import compare_runs
    from tfperf.report.export import load_result

    if threshold < 0:
        raise UserError(f"threshold must be 0 or more, not {threshold}.")
    first, second = (load_result(str(_ref(ref)), _path(store)) for ref in (a, b))
    return CompareResult(compare_runs(first, second, threshold))


def pipeline(
    target: str | None = None,
    *,
    demo: bool = False,
    steps: int = 20,
    rounds: int = 6,
    stage_seconds: float = 0.3,
    min_block_seconds: float | None = None,
    timeout: float | None = None,
    store: PathLike | None = None,
) -> PipelineResult:
    """Find what bounds a training input pipeline (``target`` is ``module:function``
    returning the dataset, or ``demo=True``) and measure its fixes (``tfperf pipeline``)."""
    from dataclasses import replace

    from tfperf.input_pipeline.analyze import PipelineOptions, analyze_pipeline

    options = PipelineOptions(steps=steps, rounds=rounds, stage_seconds=stage_seconds,
                              store=_path(store))
    if min_block_seconds is not None:
        options = replace(options, min_block_s=min_block_seconds)
    if timeout is not None:
        options = replace(options, timeout=timeout)
    doc = analyze_pipeline(target, demo=demo, options=options, command="tfperf.pipeline()")
    return PipelineResult(doc)


def _path(value: PathLike | None) -> str | None:
    return None if value is None else os.fspath(value)


def _ref(value: int | str | PathLike) -> int | str:
    """A run id, ``latest``, or a result file's path, as the command line takes it."""
    return value if isinstance(value, int) else os.fspath(value)


def _csv(value: str | Sequence[Any] | None) -> str | None:
    """A comma-separated list (the command line's form) from a string or a sequence."""
    if value is None or isinstance(value, str):
        return value
    return ",".join(str(v) for v in value)


def _mlflow_ready(mlflow: bool) -> None:
    """With ``mlflow``, fail before measuring when MLflow cannot be imported."""
    if mlflow:
        from tfperf.report.mlflow_log import require_mlflow

        require_mlflow()


def _logged(result: Any, mlflow: bool, store: PathLike | None) -> Any:
    """``result``, logged to MLflow first when asked. A failure to log is a warning that names
    the stored run (nothing measured is lost), and the result is returned all the same."""
    if mlflow:
        import warnings

        from tfperf.core.paths import resolve_store_path
        from tfperf.report.mlflow_log import NotLogged, log_run

        try:
            log_run(result.to_dict(), store=resolve_store_path(_path(store)))
        except NotLogged as exc:
            warnings.warn(str(exc), RuntimeWarning, stacklevel=3)
    return result
