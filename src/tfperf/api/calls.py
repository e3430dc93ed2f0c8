"""The library API: ``tfperf.doctor()``, ``bench()``, ``tune()``, ``compare()``, ``pipeline()``.

Contract: each function takes the command's options as keyword arguments under the command
line's names (``--max-trials`` is ``max_trials=``, ``--set`` is ``set=``), with the same
defaults, because both build the same option records (:class:`~tfperf.tuning.TuneOptions`,
:class:`~tfperf.benchmark.BenchOptions`,
:class:`~tfperf.input_pipeline.analyze.PipelineOptions`) and
call the same library functions. Options the configuration file can set (``tfperf.toml`` or
``[tool.tfperf]``: ``store``, ``tolerance``, ``budget``, ``max_trials``, ``processes``,
``runtimes``, the load levels) default to ``None``, which means what the command line does
without the flag: the environment (``TFPERF_STORE``), else the file (the command's table over
its top), else the built-in default, so a configured project's ``tfperf.tune()`` runs as its
``tfperf tune`` does. Each returns a typed result from :mod:`tfperf.api.results`
whose ``to_dict()`` is the command's ``--json`` document. Bad input raises
:class:`~tfperf.core.errors.UserError` (the command line's one sentence, exit 2). ``progress``
shows the command's live progress on stderr in a terminal or a notebook; ``progress=False``
keeps it silent. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tfperf.api import load
from tfperf.api.load import Levels
from tfperf.api.models import inputs_file, train_workload_for, workload_for
from tfperf.api.results import (
    BenchResult,
    CompareResult,
    DoctorResult,
    LoadResult,
    PipelineResult,
    TuneResult,
)
from tfperf.core.errors import FailOnTriggered, UserError

PathLike = str | os.PathLike


def doctor(
    *, timeout: float = 120, python: str | None = None, progress: bool = True
) -> DoctorResult:
    """Audit this machine and its TensorFlow install (``tfperf doctor``)."""
    from tfperf.diagnosis.audit import run_doctor
    from tfperf.progress import NORMAL, QUIET, at_level, status

    with at_level(NORMAL if progress else QUIET), status(
        "Importing TensorFlow in a probe, reading machine facts..."
    ):
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
    model: Any = None, *, workload: str | None = None, inputs: Any = None,
    unsafe: bool = False, batch: int = 1, size: str = "standard",
    set: Mapping[str, Any] | Sequence[str] | None = None,
    env: Mapping[str, Any] | Sequence[str] | None = None,
    budget: float | None = None, precision: float = 0.01, threshold: float = 0.03,
    timeout: float = 120.0, memory_limit: float | None = None, no_peak: bool = False,
    parallel_start: bool = False, processes: int | None = None,
    concurrency: Levels = None, rate: Levels = None, slo_ms: float | None = None,
    instances: Levels = 1, threads_per_instance: int | None = None, pin: bool = False,
    max_batch: int = 1, max_delay_ms: float = 0.0, streams: int | None = None,
    hint: str | None = None, level_requests: int | None = None, level_seconds: float | None = None,
    request_timeout: float | None = None, url: str | None = None, protocol: str | None = None,
    model_name: str | None = None, rest_format: str = "row", header: Sequence[str] = (),
    cacert: PathLike | None = None, connections: int | None = None, store: PathLike | None = None,
    progress: bool = True, mlflow: bool = False, ops: bool = False, train: bool = False,
    labels: Any = None, guard_steps: int | None = None, price_per_hour: float | None = None,
) -> BenchResult | LoadResult:
    """Measure ``model`` (or the built-in ``workload``) under the default config and, with
    ``set``/``env``, one candidate config, interleaved (``tfperf bench``). With
    ``concurrency``, ``rate`` or ``slo_ms``, measure the candidate config served under load by
    the layout the layout options describe instead, and return a :class:`LoadResult`
    (``tfperf bench --concurrency ...``, docs/serving.md); with ``url`` (``header``,
    ``cacert``...), a server you run (``--url``); a keyword a load run cannot apply is refused
    as the command line refuses it. ``ops=True`` profiles each config's ops (``--ops``,
    docs/ops.md); ``price_per_hour`` prices a million samples (docs/memory.md).
    ``train=True``: the training step (``--train``) of a TARGET string or a compiled Keras
    model with ``inputs`` and ``labels`` arrays (a dataset: from a ``module:function``)."""
    given = _given(bench, locals())  # first: the keywords as the caller passed them
    from tfperf.progress import NORMAL, QUIET, at_level

    args = load.LoadArgs(concurrency, rate, slo_ms, instances, threads_per_instance, pin,
                         max_batch, max_delay_ms, streams, hint)
    under_load = url is not None or args.wanted()
    load.refuse(given, remote=url is not None, under_load=under_load)
    _mlflow_ready(mlflow)
    configured = _configured("bench", budget=budget, processes=processes, store=store,
                             level_requests=level_requests, level_seconds=level_seconds,
                             request_timeout=request_timeout, price_per_hour=price_per_hour)
    store = configured.pop("store")
    with tempfile.TemporaryDirectory(prefix="tfperf-api-") as scratch, \
            at_level(NORMAL if progress else QUIET):
        if under_load:
            scenario = load.scenario_of(args, {k: configured[k] for k in load.LEVEL_DEFAULTS})
            options = _load_options(configured, timeout, memory_limit, ops, no_peak)
        if url is not None:
            remote = load.RemoteArgs(url, protocol, model_name, rest_format, _strs(header),
                                     _path(cacert), inputs_file(inputs, Path(scratch)), batch,
                                     connections).as_given(given)
            return LoadResult(load.measure_remote(remote, scenario, options.price_per_hour,
                                                  store=_path(store), progress=_note))
        wl = _workload(model, workload, inputs, unsafe, batch, size, Path(scratch),
                       train=train, labels=labels, guard_steps=guard_steps, validation=None)
        if under_load:
            return LoadResult(load.measure(wl, _candidate(set, env), args, scenario, options,
                                           store=_path(store), progress=_note))
        doc = _steady(wl, _candidate(set, env), _bench_options(
            configured, precision, threshold, timeout, memory_limit, no_peak, parallel_start,
            ops), store)
    return _logged(BenchResult(doc), mlflow, store)


def _given(fn: Any, values: Mapping[str, Any]) -> set[str]:
    """The keywords of ``fn`` whose value in ``values`` differs from their default: what the
    caller asked for (a value equal to the default asks for nothing)."""
    import inspect

    defaults = {n: p.default for n, p in inspect.signature(fn).parameters.items()}
    return {n for n, v in values.items()
            if n in defaults and v is not defaults[n] and not _equal(v, defaults[n])}


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # an array or a model object: not a default
        return False


def _strs(values: str | Sequence[str]) -> tuple[str, ...]:
    """One string or several, as a tuple (``header="Authorization: ..."`` is one header)."""
    return (values,) if isinstance(values, str) else tuple(values)


def _candidate(sets: Any, envs: Any) -> Any:
    """The config ``set=`` and ``env=`` describe."""
    from tfperf.core.config import Config

    return Config.parse(_knob_args(sets), _knob_args(envs))


def _load_options(configured: Mapping[str, Any], timeout: float, memory_limit: float | None,
                  ops: bool, no_peak: bool) -> Any:
    """A load run's :class:`~tfperf.serving.run.LoadRunOptions` from ``bench``'s keywords."""
    from tfperf.serving.run import LoadRunOptions

    if memory_limit is not None and memory_limit <= 0:
        raise UserError(f"memory_limit= must be a positive number of GiB, not {memory_limit}.")
    return LoadRunOptions(
        timeout_s=timeout,
        memory_limit_bytes=None if memory_limit is None else int(memory_limit * 2**30),
        price_per_hour=configured["price_per_hour"], ops=ops, peak=not no_peak,
    )


def _steady(wl: Mapping[str, Any], candidate: Any, options: Any, store: PathLike | None) -> dict:
    """The default config and ``candidate`` (when it differs) measured side by side."""
    from tfperf.benchmark import run_bench
    from tfperf.core.config import Config
    from tfperf.progress.displays import bench_progress

    configs = [Config()] + ([candidate] if candidate != Config() else [])
    with bench_progress() as listener:
        return run_bench(wl, configs, options, store=_path(store), listener=listener,
                         command="tfperf.bench()", kind="bench")


def _note(line: str) -> None:
    """A progress line on stderr (left out with ``progress=False``)."""
    from tfperf.progress import note

    note(line, markup=False)


def _workload(model: Any, workload: str | None, inputs: Any, unsafe: bool, batch: int,
              size: str, scratch: Path, *, train: bool, **training: Any) -> dict[str, Any]:
    """:func:`workload_for`, or with ``train`` (or a training built-in, which needs no
    ``train``) :func:`train_workload_for` (Keras' batch of 32 unless another is given) or
    :func:`tfperf.modelref.builtin_train_target`."""
    from tfperf.core.workloads import is_training_builtin

    if not train and not is_training_builtin(workload):
        return workload_for(model, workload=workload, inputs=inputs, unsafe=unsafe, batch=batch,
                            size=size, scratch=scratch)
    if workload is not None:
        from tfperf.modelref import TrainGuard, builtin_train_target

        if model is not None or inputs is not None or training.get("labels") is not None:
            raise UserError("a built-in workload brings its own model and data: leave out "
                            "model, inputs and labels.")
        guard = TrainGuard(training.get("guard_steps"),
                           validation=_path(training.get("validation")))
        return builtin_train_target(workload, size=size, batch=batch, guard=guard)
    return train_workload_for(model, inputs=inputs, unsafe=unsafe,
                              batch=None if batch == 1 else batch, scratch=scratch, **training)


def _bench_options(configured: Mapping[str, Any], precision: float, threshold: float,
                   timeout: float, memory_limit: float | None, no_peak: bool,
                   parallel_start: bool, ops: bool) -> Any:
    """A steady-state run's :class:`~tfperf.benchmark.BenchOptions` from ``bench``'s keywords
    (``configured``: those the configuration file may set)."""
    from tfperf.benchmark import BenchOptions, default_processes

    budget = _or_default(configured["budget"], 30.0)
    processes = configured["processes"]
    return BenchOptions(
        budget_s=budget,
        precision=precision,
        threshold=threshold,
        timeout_s=timeout,
        memory_limit_bytes=None if memory_limit is None else int(memory_limit * 2**30),
        peak=not no_peak,
        parallel_start=parallel_start,
        processes=default_processes(budget) if processes is None else processes,
        ops=ops,
        price_per_hour=configured["price_per_hour"],
    )


def tune(
    model: Any = None, *, workload: str | None = None, inputs: Any = None,
    unsafe: bool = False, batch: int = 1, size: str = "standard", throughput: bool = False,
    objective: str | None = None, slo_ms: float | None = None,
    batch_sizes: str | Sequence[int] | None = None, strategy: str = "staged",
    quick: bool = False, max_trials: int | None = None, budget: float | None = None,
    tolerance: str | float | None = None, labels: PathLike | None = None,
    runtimes: str | Sequence[str] | None = None, knobs: str | Sequence[str] | None = None,
    resume: int | str | None = None, profile_out: PathLike | None = None,
    out_dir: PathLike | None = None, confirm_rounds: int | None = None,
    candidate_timeout: float = 300.0, seed: int = 0, store: PathLike | None = None,
    progress: bool = True, mlflow: bool = False, ops: bool = False, train: bool = False,
    guard_steps: int | None = None, validation: PathLike | None = None,
    max_memory_mb: float | None = None, price_per_hour: float | None = None,
) -> TuneResult:
    """Find the fastest configuration of ``model`` whose outputs stay correct, and save it as a
    profile (``tfperf tune``); ``objective="server", slo_ms=X`` tunes the serving layout for
    the most requests per second within a p99 of ``X`` ms (docs/serving.md); ``ops=True``
    profiles the default and the answer op by op (``tune --ops``, docs/ops.md). ``train=True``:
    its training step (docs/train.md; ``labels`` the targets, ``tolerance`` the guard's).
    ``max_memory_mb`` rejects a candidate whose peak exceeds it; ``price_per_hour`` prices the
    default and the answer (docs/memory.md)."""
    from tfperf.accuracy import load_labels
    from tfperf.core.workloads import is_training_builtin
    from tfperf.progress import NORMAL, QUIET, at_level
    from tfperf.progress.displays import tune_progress
    from tfperf.tuning import tune as run_tune
    from tfperf.tuning.options import options_from_args

    train = train or is_training_builtin(workload)  # tolerance is then the training guard's
    limits = {} if quick else {"max_trials": max_trials, "budget": budget}  # --quick's own
    given = {"max_trials": max_trials, "budget": budget} | _configured(
        "tune", store=store, tolerance=tolerance, runtimes=_csv(runtimes),
        max_memory_mb=max_memory_mb, price_per_hour=price_per_hour, **limits)
    store, tolerance = given.pop("store"), given.pop("tolerance")
    options = options_from_args(
        strategy=strategy, quick=quick,
        tolerance=None if tolerance is None or train else str(tolerance),
        **given, knobs=_csv(knobs), store=_path(store), resume=resume,
        profile_out=_path(profile_out), out_dir=_path(out_dir), confirm_rounds=confirm_rounds,
        candidate_timeout=candidate_timeout, seed=seed, throughput=throughput,
        objective=objective, slo_ms=slo_ms, batch_sizes=_csv(batch_sizes),
        command="tfperf.tune()", **_train_tolerance(train, tolerance),
    )
    options = dataclasses.replace(options, ops=ops)
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
    threshold: float = 0.03, fail_on_memory_growth: float | None = None,
) -> CompareResult:
    """Compare run (or result file) ``b`` against ``a``, config by config (``tfperf compare A
    B``); ``result.regressions`` lists B's configs significantly slower than A's. With
    ``fail_on_memory_growth=PCT`` (``--fail-on-memory-growth``), a config whose peak memory in
    ``b`` is more than PCT percent above ``a``'s raises :class:`FailOnTriggered` with the
    command's sentence (its exit 1); the exception's ``result`` is the comparison."""
    from tfperf.benchmark import compare_runs, memory_growth_in
    from tfperf.report.export import load_result

    if threshold < 0:
        raise UserError(f"threshold must be 0 or more, not {threshold}.")
    if fail_on_memory_growth is not None and not fail_on_memory_growth >= 0:
        raise UserError("fail_on_memory_growth= must be 0 or more percent, not "
                        f"{fail_on_memory_growth:g}.")
    store = _configured("compare", store=store)["store"]
    first, second = (load_result(str(_ref(ref)), _path(store)) for ref in (a, b))
    result = CompareResult(compare_runs(first, second, threshold))
    if fail_on_memory_growth is not None:
        grown = memory_growth_in(result.doc, fail_on_memory_growth)
        if grown:
            failed = FailOnTriggered(f"memory grew over {fail_on_memory_growth:g}%: "
                                     f"{', '.join(grown)}.")
            failed.result = result  # type: ignore[attr-defined]
            raise failed
    return result


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
    progress: bool = True,
) -> PipelineResult:
    """Find what bounds a training input pipeline (``target`` is ``module:function``
    returning the dataset, or ``demo=True``) and measure its fixes (``tfperf pipeline``)."""
    from dataclasses import replace

    from tfperf.input_pipeline.analyze import PipelineOptions, analyze_pipeline
    from tfperf.progress import NORMAL, QUIET, at_level, status

    store = _configured("pipeline", store=store)["store"]
    options = PipelineOptions(steps=steps, rounds=rounds, stage_seconds=stage_seconds,
                              store=_path(store))
    if min_block_seconds is not None:
        options = replace(options, min_block_s=min_block_seconds)
    if timeout is not None:
        options = replace(options, timeout=timeout)
    with at_level(NORMAL if progress else QUIET), status("starting the pipeline worker") as shown:
        doc = analyze_pipeline(target, demo=demo, options=options, on_progress=shown.update,
                               command="tfperf.pipeline()")
    return PipelineResult(doc)


def _configured(command: str, **given: Any) -> dict[str, Any]:
    """``given``, each option left at ``None`` taking the configuration file's value for
    ``command`` unless its environment variable is set (``tfperf.settings.for_command``): the
    command line's precedence, keyword > environment > file > built-in default."""
    from tfperf.settings import for_command, load

    unset = [name for name, value in given.items() if value is None]
    return given | for_command(load(), command, unset)


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


def _or_default(value: Any, default: Any) -> Any:
    """``value`` unless it is ``None`` (an option neither given nor configured)."""
    return default if value is None else value
