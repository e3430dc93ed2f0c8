"""A finished tfperf run logged to MLflow (``tfperf bench --mlflow``, ``tfperf tune --mlflow``).

Contract
--------

:func:`log_run` ``(doc, *, store, artifacts=(), run_name=None) -> str`` logs one finished run
and returns the MLflow run id. ``doc`` is the document ``tfperf bench --json`` or
``tfperf tune --json`` prints (what :func:`tfperf.benchmark.bench` and :func:`tfperf.tuning.tune`
return; a ``compare`` document works too); ``store`` is the tfperf store that holds
``doc["run_id"]``. What it logs (:func:`run_record` builds everything but the files):

- params: ``tfperf.version``, ``tfperf.run_id``, ``tfperf.store``; ``workload`` and
  ``workload.*``; ``machine.cpu``, ``machine.microarchitecture``, ``machine.cores`` (usable),
  ``machine.logical_cpus``, ``machine.isa`` (the instruction sets, space-separated),
  ``machine.fingerprint``, ``machine.gpus``; ``tensorflow.version``, ``tensorflow.variant``
  (the distribution: ``tensorflow-cpu``, ``tf-nightly``...), ``tensorflow.channel``,
  ``tensorflow.onednn``, ``keras.version``, ``python.version``; ``settings.*`` (what the run
  was asked for); ``config.label`` and ``config.<knob>`` (``default`` where TensorFlow's
  default applies) of the run's answer: tune's recommendation, bench's candidate (or the
  default config when there is none).
- metrics, per config (the label made a valid key by :func:`metric_key`: ``xla=jit`` ->
  ``xla-jit``): ``<key>.p50_ms``, ``<key>.p99_ms``, ``<key>.samples_per_s``, and for a
  candidate ``<key>.speedup``, ``<key>.speedup_low``, ``<key>.speedup_high`` (the 95%
  interval), ``<key>.speedup_p_value``, tune's ``<key>.max_rel_error``, ``<key>.max_abs_error``;
  ``<key>.peak_rss_mb``, ``<key>.steady_rss_mb``, ``<key>.model_mb``, ``<key>.artifact_mb``
  where measured and ``<key>.cost_per_million_samples`` with a price (``docs/memory.md``);
  the same names without ``<key>.`` for the run's answer (so runs line up in MLflow's table);
  bench's ``rounds``, ``steady_s``, ``other_cpu_share``; tune's ``trials``, ``elapsed_s``.
  Tune's p50 is its ``time_ms`` (the median time of one call); its p99 comes from that
  config's trial in the store.
- tags: ``tfperf.kind`` (``bench`` | ``compare`` | ``tune``), ``tfperf.run_id``,
  ``tfperf.workload``, ``tfperf.verdict`` (the answer's speedup verdict), tune's
  ``tfperf.keep_default`` (``true`` | ``false``) and ``tfperf.recommendation``; bench's
  ``tfperf.verdict.<key>`` per candidate. The run's description is its command line.
- artifacts: ``report.html`` (:func:`tfperf.report.html.write_html`), ``tfperf.json`` (``doc``),
  tune's profile under ``profile/`` and its converted model under ``model/`` when they were
  written, and each path of ``artifacts`` (a folder keeps its name).

Where it goes is MLflow's choice, as for any MLflow code: the tracking URI
(``MLFLOW_TRACKING_URI`` or ``mlflow.set_tracking_uri``) and the experiment
(``MLFLOW_EXPERIMENT_NAME``/``_ID`` or ``mlflow.set_experiment``). When a run is active in the
calling process, or ``MLFLOW_RUN_ID`` names one, tfperf's run becomes its child (a nested run),
so that several tfperf runs can hang under one run of the user's without their parameters
colliding (MLflow never lets a parameter change once logged); otherwise it is a run of its own.

Failures: MLflow that cannot be imported is a :class:`~tfperf.core.errors.UserError` saying how
to install it (:func:`require_mlflow`, which the CLI calls before measuring anything). Anything
that fails while logging (a tracking server that cannot be reached, a store that refuses the
run) raises :class:`NotLogged`, one sentence naming the run kept in tfperf's store: nothing
measured is lost. :func:`log_and_tell` is the CLI's: it prints either where the run went or
that warning, and never changes the command's exit code.

MLflow is imported inside the functions that use it; nothing here imports TensorFlow.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfperf import __version__
from tfperf.core.errors import UserError
from tfperf.core.knobs import show_value
from tfperf.core.paths import resolve_store_path
from tfperf.report.console import err_console
from tfperf.report.html import build_report, describe_workload, write_html
from tfperf.store import Store

INSTALL = 'install it: pip install "tfperf[mlflow]"'
MAX_KEY = 200
"""Longest config part of a metric key (MLflow allows 250 characters in all)."""


class NotLogged(Exception):
    """Logging to MLflow failed after the run was measured; the run is still in tfperf's store."""

    def __init__(self, run_id: int, store: Path, reason: str) -> None:
        super().__init__(
            f"the run was not logged to MLflow ({reason}); it is kept as run {run_id} in the "
            f"store {store} (see `tfperf report {run_id} --store {store}`)."
        )
        self.run_id = run_id
        self.store = store
        self.reason = reason


@dataclass(frozen=True)
class MlflowRecord:
    """What one tfperf run becomes in MLflow, files apart (see the module docstring)."""

    run_name: str
    description: str
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]


def require_mlflow() -> Any:
    """The ``mlflow`` module; a :class:`UserError` that says how to install it when it cannot
    be imported."""
    try:
        import mlflow
    except ImportError as exc:
        raise UserError(f"MLflow cannot be imported ({exc}); {INSTALL}.") from None
    return mlflow


_NOT_IN_KEY = re.compile(r"[^A-Za-z0-9_.-]+")


def metric_key(label: str) -> str:
    """A config label as a part of an MLflow key, which allows neither ``=`` nor ``,``:
    ``xla=jit`` -> ``xla-jit``, ``onednn=off,intra_threads=2`` -> ``onednn-off_intra_threads-2``."""
    text = _NOT_IN_KEY.sub("_", label.replace("=", "-").replace(",", "_"))
    # a key must not read as a relative path (".", ".." or a leading dot)
    return text.strip("._")[:MAX_KEY] or "config"


def _keys(labels: Sequence[str]) -> dict[str, str]:
    """One distinct key per label, numbered where two labels would give the same key."""
    keys: dict[str, str] = {}
    for label in labels:
        if label in keys:
            continue
        key = base = metric_key(label)
        n = 1
        while key in keys.values():
            n += 1
            key = f"{base}-{n}"
        keys[label] = key
    return keys


def _figures(prefix: str, p50_ms: Any, p99_ms: Any, per_s: Any) -> dict[str, float]:
    """A config's latency and rate metrics, named ``<prefix>p50_ms`` ...; unknowns left out."""
    return _numbers(prefix, {"p50_ms": p50_ms, "p99_ms": p99_ms, "samples_per_s": per_s})


def _speedup(prefix: str, speedup: Mapping[str, Any] | None) -> dict[str, float]:
    if not speedup:
        return {}
    low, high = speedup.get("ci95") or (None, None)
    return _numbers(
        prefix,
        {
            "speedup": speedup.get("median"),
            "speedup_low": low,
            "speedup_high": high,
            "speedup_p_value": speedup.get("p_value"),
        },
    )


def _numbers(prefix: str, values: Mapping[str, Any]) -> dict[str, float]:
    return {
        prefix + name: float(value)
        for name, value in values.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
    }


def _flat(prefix: str, value: Any, none: str | None = None) -> dict[str, str]:
    """``value`` as params: a mapping's keys joined with dots (``config.env.OMP_NUM_THREADS``),
    a list as ``a,b`` (``None`` in it: TensorFlow's ``default``); ``None`` and empty lists left
    out, or ``None`` written ``none``."""
    if isinstance(value, Mapping):
        out: dict[str, str] = {}
        for key, item in value.items():
            out.update(_flat(f"{prefix}.{metric_key(str(key))}", item, none))
        return out
    if value is None:
        return {} if none is None else {prefix: none}
    if isinstance(value, (list, tuple)):
        text = ",".join("default" if v is None else show_value(v) for v in value)
        return {prefix: text} if text else {}
    return {prefix: show_value(value)}


def _machine(machine: Mapping[str, Any], brief: Mapping[str, Any]) -> dict[str, str]:
    """The machine's params from the store's full record, else the document's summary."""
    cpu = machine.get("cpu")
    cpu = cpu if isinstance(cpu, Mapping) else {"model": cpu}
    cores = machine.get("cores") if isinstance(machine.get("cores"), Mapping) else {}
    gpus = [str(g.get("name")) for g in machine.get("gpus") or [] if isinstance(g, Mapping)]
    values = {
        "cpu": cpu.get("model") or brief.get("cpu"),
        "microarchitecture": cpu.get("microarchitecture"),
        "cores": cores.get("usable") or brief.get("cores"),
        "logical_cpus": cores.get("logical"),
        "isa": " ".join(machine.get("isa") or []) or None,
        "fingerprint": machine.get("fingerprint") or brief.get("fingerprint"),
        "gpus": ", ".join(gpus) or None,
    }
    return _flat("machine", values)


def _install(doc: Mapping[str, Any]) -> dict[str, str]:
    """The worker's TensorFlow (tune's ``install``, bench's first result that has one)."""
    install = doc.get("install") or next(
        (r["install"] for r in doc.get("results", []) if r.get("install")), {}
    )
    values = {
        "tensorflow.version": install.get("tf_version"),
        "tensorflow.variant": (install.get("distribution") or {}).get("name"),
        "tensorflow.channel": (install.get("distribution") or {}).get("channel"),
        "tensorflow.onednn": (install.get("onednn") or {}).get("enabled"),
        "keras.version": install.get("keras_version"),
        "python.version": (install.get("python") or {}).get("version"),
    }
    return {k: show_value(v) for k, v in values.items() if v is not None}


@dataclass(frozen=True)
class _Answer:
    """What a run found, in MLflow's terms: its metrics and tags, and the config it is about."""

    metrics: dict[str, float]
    tags: dict[str, str]
    label: str
    config: Mapping[str, Any]


def _bench_answer(doc: Mapping[str, Any]) -> _Answer:
    """Every config's figures and every candidate's speedup. The answer is the last config
    (the candidate, or the default alone); a compare of several candidates has none."""
    results = doc["results"]
    keys = _keys([r["label"] for r in results])
    metrics: dict[str, float] = {}
    tags: dict[str, str] = {}
    for r in results:
        if r.get("n"):  # a config that failed before its first block has no figures
            lat = r.get("latency_ms") or {}
            prefix = keys[r["label"]] + "."
            metrics.update(_figures(prefix, lat.get("p50"), lat.get("p99"), r["throughput_per_s"]))
            metrics.update(_costs(prefix, r))
    for c in doc.get("comparisons", []):
        metrics.update(_speedup(keys[c["candidate"]] + ".", c["speedup"]))
        tags[f"tfperf.verdict.{keys[c['candidate']]}"] = str(c["speedup"].get("verdict"))
    metrics.update(_numbers("", {k: doc.get(k) for k in ("rounds", "steady_s", "other_cpu_share")}))
    if len(results) > 2:
        return _Answer(metrics, tags, " | ".join(keys), {})
    head = results[-1]
    prefix = keys[head["label"]] + "."
    metrics.update({k[len(prefix) :]: v for k, v in metrics.items() if k.startswith(prefix)})
    if doc.get("comparisons"):
        tags["tfperf.verdict"] = str(doc["comparisons"][0]["speedup"].get("verdict"))
    return _Answer(metrics, tags, head["label"], head.get("config") or {})


_ERRORS = ("max_rel_error", "max_abs_error")
_MEMORY = ("peak_rss_mb", "steady_rss_mb", "model_mb", "artifact_mb")


def _costs(prefix: str, row: Mapping[str, Any]) -> dict[str, float]:
    """A config's memory figures and, with a price, its ``cost_per_million_samples``."""
    memory = row.get("memory") or {}
    out = _numbers(prefix, {k: memory.get(k) for k in _MEMORY})
    per_million = (row.get("cost") or {}).get("per_million_samples")
    return out | _numbers(prefix, {"cost_per_million_samples": per_million})


def _tune_answer(doc: Mapping[str, Any], report: Mapping[str, Any]) -> _Answer:
    """The default's and every candidate's figures, speedups and errors; the answer is the
    recommendation. p99 is that of the config's trial in the store (the document has none)."""
    p99 = {
        r["label"]: r["latency_ms"]["p99"]
        for r in report["results"]
        if r["role"] in ("baseline", "candidate") and r["n"]
    }
    rows = [{"label": "default", **doc["default"]}, *doc["candidates"]]
    keys = _keys([row["label"] for row in rows])
    metrics: dict[str, float] = {}
    for row in [*rows, doc["recommendation"]]:
        prefix = "" if row is doc["recommendation"] else keys[row["label"]] + "."
        metrics.update(
            _figures(prefix, row.get("time_ms"), p99.get(row["label"]), row.get("samples_per_s"))
        )
        metrics.update(_speedup(prefix, row.get("speedup")))
        metrics.update(_numbers(prefix, {k: row.get(k) for k in _ERRORS}))
        metrics.update(_costs(prefix, row))
    metrics.update(_numbers("", {k: doc.get(k) for k in ("trials", "elapsed_s")}))
    rec = doc["recommendation"]
    tags = {
        "tfperf.keep_default": "true" if rec["keep_default"] else "false",
        "tfperf.recommendation": rec["label"],
    }
    if (rec.get("speedup") or {}).get("verdict"):
        tags["tfperf.verdict"] = str(rec["speedup"]["verdict"])
    return _Answer(metrics, tags, rec["label"], rec.get("config") or {})


def run_record(
    doc: Mapping[str, Any], loaded: Mapping[str, Any], store: Path, run_name: str | None = None
) -> MlflowRecord:
    """What :func:`log_run` logs for ``doc``, whose run ``loaded`` is (``Store.load_run``'s
    dictionary, from the store at ``store``)."""
    run = loaded["run"]
    kind = str(run["kind"])
    workload = doc.get("workload") or run.get("workload") or {}
    answer = _tune_answer(doc, build_report(loaded)) if kind == "tune" else _bench_answer(doc)
    params = {
        "tfperf.version": __version__,
        "tfperf.run_id": str(run["id"]),
        "tfperf.store": str(store),
        "workload": describe_workload(workload),
        **_flat("workload", workload),
        **_machine(run.get("machine") or {}, doc.get("machine") or {}),
        **_install(doc),
        **_flat("settings", run.get("settings")),
        "config.label": answer.label,
        **_flat("config", answer.config, none="default"),
    }
    tags = {
        "tfperf.kind": kind,
        "tfperf.run_id": str(run["id"]),
        "tfperf.workload": describe_workload(workload),
        **answer.tags,
    }
    name = run_name or f"{kind} {describe_workload(workload)} #{run['id']}"
    return MlflowRecord(name, str(run.get("command") or ""), params, answer.metrics, tags)


def _files(
    doc: Mapping[str, Any], extra: Sequence[str | os.PathLike[str]]
) -> list[tuple[Path, str | None]]:
    """(path, folder in the MLflow run) of every file to attach besides the report: tune's
    profile and converted model where they were written, then ``extra`` (each must exist)."""
    files = [
        (Path(str(doc[key])), folder)
        for key, folder in (("profile", "profile"), ("artifacts_dir", "model"))
        if doc.get(key) and Path(str(doc[key])).exists()
    ]
    for item in map(Path, extra):
        if not item.exists():
            raise UserError(f"the artifact {item} does not exist; pass a file or folder that does.")
        files.append((item, item.name if item.is_dir() else None))
    return files


@contextlib.contextmanager
def _mlflow_run(mlflow: Any, record: MlflowRecord) -> Iterator[Any]:
    """A new MLflow run for ``record``: a child of the active run or of the run
    ``MLFLOW_RUN_ID`` names (which ``start_run`` would otherwise take over), else a run of
    its own in the active experiment. It ends FINISHED, or FAILED when logging raised."""
    tags = dict(record.tags)
    parent = mlflow.active_run()
    from_env = None if parent is not None else os.environ.pop("MLFLOW_RUN_ID", None)
    if from_env:
        tags["mlflow.parentRunId"] = from_env
    try:
        with mlflow.start_run(
            run_name=record.run_name,
            nested=parent is not None,
            tags=tags,
            description=record.description or None,
        ) as active:
            yield active
    finally:
        if from_env is not None:
            os.environ["MLFLOW_RUN_ID"] = from_env


def log_run(
    doc: Mapping[str, Any],
    *,
    store: str | os.PathLike[str],
    artifacts: Sequence[str | os.PathLike[str]] = (),
    run_name: str | None = None,
) -> str:
    """Log the finished run ``doc`` to MLflow and return the MLflow run id (see the module
    docstring for what is logged and where).

    Raises :class:`UserError` when MLflow cannot be imported, ``store`` does not hold
    ``doc["run_id"]`` or an ``artifacts`` path does not exist, and :class:`NotLogged` when
    MLflow fails while logging (the run stays in ``store`` as it was).
    """
    mlflow = require_mlflow()
    path = Path(store).expanduser().resolve()
    with Store.open(path, create=False) as db:
        loaded = db.load_run(doc["run_id"])
    record = run_record(doc, loaded, path, run_name)
    files = _files(doc, artifacts)
    with tempfile.TemporaryDirectory(prefix="tfperf-mlflow-") as tmp:
        report = write_html(loaded, Path(tmp) / "report.html")
        try:
            with _mlflow_run(mlflow, record) as active:
                mlflow.log_params(record.params)
                mlflow.log_metrics(record.metrics)
                mlflow.log_dict(dict(doc), "tfperf.json")
                mlflow.log_artifact(str(report))
                for item, folder in files:
                    if item.is_dir():
                        mlflow.log_artifacts(str(item), folder)
                    else:
                        mlflow.log_artifact(str(item), folder)
                return str(active.info.run_id)
        # Whatever MLflow raises (a server out of reach, a refused write, a bad artifact
        # store), the measured run is safe in tfperf's store: say so, lose nothing.
        except Exception as exc:
            raise NotLogged(int(doc["run_id"]), path, _reason(exc)) from exc


def _reason(exc: Exception) -> str:
    """A short reason: the exception's first line, or its last clause when that is long
    (an HTTP client's message ends with the cause: ``[Errno 111] Connection refused``)."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if len(text) > 160:
        text = text.rsplit(": ", 1)[-1].strip("\"')( ")
    return f"{type(exc).__name__}: {text}"


def log_and_tell(doc: Mapping[str, Any], store: str | os.PathLike[str] | None) -> str | None:
    """:func:`log_run` for the CLI (``store`` as ``--store`` gave it): one line on stderr that
    says which MLflow run it became, or the :class:`NotLogged` warning; the MLflow run id or
    ``None``. The command's exit code does not change either way."""
    from rich.markup import escape

    out = err_console()
    try:
        run_id = log_run(doc, store=resolve_store_path(store))
    except NotLogged as exc:
        out.print(f"[yellow]warning:[/] {escape(str(exc))}", soft_wrap=True)
        return None
    import mlflow

    out.print(
        f"logged to MLflow: run {run_id} at {mlflow.get_tracking_uri()}",
        soft_wrap=True,
        markup=False,
    )
    return run_id
