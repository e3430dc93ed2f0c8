"""``tfperf.bench()`` under load: the load and layout keyword arguments, and the measurement.

Contract: :class:`LoadArgs` holds ``tfperf bench``'s scenario and layout options under their
command-line names (``--concurrency`` is ``concurrency=``, ``--threads-per-instance`` is
``threads_per_instance=``; lists may be given as the command line's ``"1,2,4"`` or as Python
sequences), and :class:`RemoteArgs` its ``--url`` options. :meth:`LoadArgs.wanted` says whether
they ask for a load measurement (layout options alone are the command line's mistake and its
sentence). :func:`refuse` refuses, as the command line does, each keyword given that a load run
cannot apply (:func:`tfperf.serving.run.refuse_dropped`, spelled ``name=``). :func:`measure`
runs a local load with :func:`tfperf.serving.run.run_load` and :func:`measure_remote` one
against ``url=`` with :func:`tfperf.serving.remote.run_remote`, as ``tfperf bench
--concurrency ...`` and ``tfperf bench --url ...`` do, and each returns the document that
command prints with ``--json``. The level limits left at ``None`` take the configuration
file's values (keyword > environment > file > default). Nothing here imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tfperf.core.errors import UserError

Levels = str | int | float | Sequence[int | float] | None
"""Load levels: the command line's ``"1,2,4"``, one number, or a sequence of numbers."""

LEVEL_DEFAULTS = {"level_requests": 300, "level_seconds": 3.0, "request_timeout": 10.0}
"""The command line's defaults for a level's length and a request's timeout."""


@dataclass(frozen=True)
class LoadArgs:
    """``tfperf bench``'s scenario and layout options (see ``docs/serving.md``)."""

    concurrency: Levels = None
    rate: Levels = None
    slo_ms: float | None = None
    instances: Levels = 1
    threads_per_instance: int | None = None
    pin: bool = False
    max_batch: int = 1
    max_delay_ms: float = 0.0
    streams: int | None = None
    hint: str | None = None
    level_requests: int | None = None
    level_seconds: float | None = None
    request_timeout: float | None = None

    def wanted(self) -> bool:
        """Whether a load measurement is asked for; layout options alone are a mistake."""
        if self.concurrency or self.rate or self.slo_ms:
            return True
        if _levels(self.instances, int, "instances") not in ((), (1,)) or self.pin or any(
            v not in (None, 1, 0.0)
            for v in (self.threads_per_instance, self.max_batch, self.max_delay_ms, self.streams,
                      self.hint)
        ):
            raise UserError(
                "the layout options (instances=, max_batch=, ...) describe a server under "
                "load: add concurrency=N, rate=QPS or slo_ms=X."
            )
        return False


@dataclass(frozen=True)
class RemoteArgs:
    """``tfperf bench --url``'s options: the server the user runs and how to talk to it."""

    url: str | None = None
    protocol: str | None = None
    model_name: str | None = None
    rest_format: str | None = None
    """``None`` when not given (``row`` for TensorFlow Serving; refused for another protocol)."""
    header: tuple[str, ...] = ()
    """``"NAME: VALUE"`` headers sent with every request (gRPC: as metadata)."""
    cacert: str | None = None
    inputs: str | None = None
    """Sample inputs (an ``.npz``) for the request body; else generated from the metadata."""
    batch: int | None = None
    """``None`` when not given: generated inputs have 1 row, ``inputs`` their own."""
    connections: int | None = None
    """The client's connections (``None``: as many as each level's load needs)."""

    def as_given(self, given: set[str]) -> RemoteArgs:
        """These arguments with ``rest_format`` and ``batch`` ``None`` where the caller did
        not give them (each applies only where given)."""
        return dataclasses.replace(
            self, rest_format=self.rest_format if "rest_format" in given else None,
            batch=self.batch if "batch" in given else None,
        )


SERVED_HERE = ("model", "workload", "set", "env", "unsafe", "instances", "threads_per_instance",
               "pin", "max_batch", "max_delay_ms", "streams", "hint")
"""Keywords that describe a server tfperf starts: refused with ``url=``."""


def refuse(given: set[str], remote: bool, under_load: bool) -> None:
    """One sentence (:class:`UserError`) for the first keyword in ``given`` a load run cannot
    apply, or, not ``under_load``, a load keyword a steady-state run cannot (module
    docstring)."""
    from tfperf.serving.run import refuse_dropped, refuse_without_load

    if not under_load:
        refuse_without_load(given, spell=lambda name: f"{name}=")
        return

    served = [f"{name}=" for name in SERVED_HERE if name in given] if remote else []
    if served:
        raise UserError(
            f"url= measures the server you run as it is: leave out {', '.join(served)}."
        )
    refuse_dropped(given, remote=remote, spell=lambda name: f"{name}=")


def _levels(value: Levels, kind: type, name: str) -> tuple[Any, ...]:
    """``"1,2,4"``, ``4`` or ``[1, 2, 4]`` as a tuple of ``kind``."""
    if value is None:
        return ()
    parts = value.split(",") if isinstance(value, str) else (
        value if isinstance(value, Sequence) else [value])
    try:
        return tuple(kind(p) for p in parts if str(p).strip())
    except (TypeError, ValueError):
        raise UserError(
            f"{name}= takes numbers like [1, 2, 4] or '1,2,4', not {value!r}."
        ) from None


def scenario_of(args: LoadArgs, limits: Mapping[str, Any]) -> Any:
    """The :class:`~tfperf.serving.LoadScenario` of ``args``, each level limit left at ``None``
    at the command line's default."""
    from tfperf.serving import LoadScenario
    from tfperf.serving.load import level_cap

    got = {k: v if v is not None else LEVEL_DEFAULTS[k] for k, v in limits.items()}
    return LoadScenario(
        concurrency=_levels(args.concurrency, int, "concurrency"),
        rates=_levels(args.rate, float, "rate"), slo_ms=args.slo_ms,
        requests=got["level_requests"], seconds=got["level_seconds"],
        max_seconds=level_cap(got["level_seconds"]), timeout_s=got["request_timeout"],
    )


def measure(
    workload: Mapping[str, Any], config: Any, args: LoadArgs, scenario: Any, options: Any, *,
    store: str | None, progress: Callable[[str], None],
) -> dict[str, Any]:
    """Measure ``workload`` under ``config`` served by each layout ``args`` names, with the
    run's :class:`~tfperf.serving.run.LoadRunOptions` ``options``."""
    from tfperf.core.paths import resolve_store_path
    from tfperf.core.serving import ServingLayout
    from tfperf.serving import pinned
    from tfperf.serving.load import check_layout
    from tfperf.serving.run import run_load
    from tfperf.store import Store

    layouts = []
    for k in _levels(args.instances, int, "instances") or (1,):
        layout = ServingLayout(instances=k, threads=args.threads_per_instance,
                               max_batch=args.max_batch, max_delay_ms=args.max_delay_ms,
                               streams=args.streams, hint=args.hint)
        layouts.append(pinned(layout) if args.pin else layout)
    for layout in layouts:
        check_layout(config, layout)
    config.worker_env({})  # a missing allocator is a user error before anything starts
    with Store.open(resolve_store_path(store)) as db:
        return run_load(workload, config, layouts, scenario, store=db,
                        command="tfperf.bench()", progress=progress, options=options)


def measure_remote(
    remote: RemoteArgs, scenario: Any, price_per_hour: float | None, *, store: str | None,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Measure the server ``remote.url`` names (``tfperf bench --url``)."""
    from tfperf.core.paths import resolve_store_path
    from tfperf.store import Store

    if remote.batch is not None and remote.batch < 1:
        raise UserError(f"batch= must be 1 or more, not {remote.batch}.")
    try:
        from tfperf.serving.remote import parse_target, prepare, run_remote
    except ImportError as exc:
        raise UserError(
            f"url= needs the HTTP and gRPC clients ({exc.name} is missing): "
            "pip install 'tfperf[remote]'."
        ) from None
    target = parse_target(remote.url, remote.protocol, remote.model_name, remote.rest_format,
                          headers=remote.header, cacert=remote.cacert)
    for warning in target.warnings:
        progress(f"warning: {warning}")
    prepared = prepare(target, remote.inputs, remote.batch)
    progress(f"{target.label()}: request body {prepared.source}")
    with Store.open(resolve_store_path(store)) as db:
        return run_remote(prepared, scenario, store=db, command="tfperf.bench()",
                          progress=progress, price_per_hour=price_per_hour,
                          connections=remote.connections)
