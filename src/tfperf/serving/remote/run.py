"""``tfperf bench --url``: a server the user runs, measured under load and recorded.

Contract:

- :func:`prepare` asks the target for its model's inputs (the metadata endpoint of its
  protocol, on the target's own address), builds the request body once from ``--inputs``
  (checked against those inputs when the server published any; with ``--batch``, their rows
  cycled to that many, as a workload at another batch repeats its sample rows) or from values
  generated to their shape and dtype (``--batch`` rows where the first dimension is free), and
  says which (:attr:`Prepared.source`). Nothing answering at the
  address, a TLS handshake that fails, no model of that name, no published inputs and no
  ``--inputs``, or a first request that fails (one is sent before any level) each raise
  :class:`~tfperf.core.errors.UserError` with one sentence, before any level starts. That
  first request's sentence blames what failed (:func:`first_failure`): no answer within the
  timeout, its connection (gRPC UNAVAILABLE too), an answer that is not the protocol's, a
  server error (a 5xx, gRPC INTERNAL/UNKNOWN: tried :data:`_WARM_TRIES` times first),
  credentials (401/403), and only a 400/422 or gRPC INVALID_ARGUMENT the inputs.
- The command line is stored with each ``--header`` value redacted; the target's record names
  its headers, never their values.
- :func:`run_remote` measures the target with the same levels, SLO search, statistics and
  recorder as a layout tfperf serves (:func:`tfperf.serving.load.measure_on` on a
  :class:`~tfperf.serving.remote.client.RemoteServer`), stores the run as kind ``load`` with
  the target as its workload (``{"kind": "remote", "url", "protocol", ...}``), and returns the
  document of :func:`tfperf.serving.run.run_load` with ``target`` and ``inputs`` added.
- The client's connections (:class:`~tfperf.serving.remote.client.Pool`): without
  ``connections``, at least :data:`CONNECTIONS` and the largest ``--concurrency`` given, opened
  and warmed before the first level, and as many more as each level's load needs
  (``--connections N``: exactly N; requests that find none free wait in tfperf's client, and
  the levels say how long). Every request of the warm-up is kept in the document's ``warmup``
  (``requests``, ``seconds``, ``connections``, and each failure on the way under ``retries``:
  a server error or a dropped connection tried again before the first level), not dropped.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfperf.core.config import Config
from tfperf.core.errors import UserError
from tfperf.core.protocol import repeat_rows
from tfperf.machine.facts import collect_machine, machine_summary
from tfperf.runner.recorder import RunRecorder
from tfperf.serving.load import LoadScenario, measure_on
from tfperf.serving.remote.access import redact_command
from tfperf.serving.remote.client import Pool, RemoteServer
from tfperf.serving.remote.grpc_wire import ServingGrpcWire, V2GrpcWire
from tfperf.serving.remote.rest import RestWire
from tfperf.serving.remote.target import RemoteTarget
from tfperf.serving.remote.tensors import InputSpec, fit, from_npz, generated
from tfperf.serving.remote.wire import CallFailed, Unreachable, Untrusted, Wire
from tfperf.serving.run import KIND, SCHEMA_VERSION, LoadInterrupted, levels_kept, load_document

CONNECTIONS = 16
"""Connections opened before the first level at least, and where the SLO search's probe
starts."""
METADATA_TIMEOUT_S = 10.0
GENERATOR = (
    "the load generator runs in the tfperf process (an asyncio client on a thread of its own, "
    "one kept-alive connection or gRPC channel per worker); generator_cpu is its own CPU use "
    "per level (share of one core)"
)


@dataclass(frozen=True)
class Prepared:
    """What is sent to a target: its wire, the request body and where its values came from."""

    target: RemoteTarget
    wire: Wire
    body: Any
    specs: tuple[InputSpec, ...]
    source: str
    """``"--inputs FILE"`` or ``"generated from <metadata endpoint>"``."""

    batch: int = 1
    """Samples in each request: the leading dimension of the inputs sent."""

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "inputs": [s.describe() for s in self.specs],
        }


def make_wire(target: RemoteTarget) -> Wire:
    if target.protocol == "v2-grpc":
        return V2GrpcWire(target)
    if target.protocol == "tfserving-grpc":
        return ServingGrpcWire(target)
    return RestWire(target)


async def _metadata(wire: Wire) -> tuple[list[InputSpec] | None, str]:
    conn = await wire.open()
    try:
        return await wire.metadata(conn, METADATA_TIMEOUT_S)  # type: ignore[call-arg]
    finally:
        await wire.close(conn)


def _ask_metadata(target: RemoteTarget, wire: Wire) -> tuple[list[InputSpec] | None, str]:
    try:
        return asyncio.run(_metadata(wire))
    except Untrusted as exc:
        raise UserError(
            f"TLS with {target.origin} failed ({exc}): give --cacert FILE with the certificate "
            "of the CA that signed the server's."
        ) from None
    except Unreachable as exc:
        raise UserError(
            f"nothing answers at {target.origin} ({exc}): start the server or fix --url."
        ) from None
    except CallFailed as exc:
        if exc.status in (
            "HTTP 404",
            "gRPC NOT_FOUND",
            "gRPC UNIMPLEMENTED",
            "gRPC INVALID_ARGUMENT",
        ):
            raise UserError(
                f"no model {target.model!r} at {target.origin} ({exc.status}: {exc.message}): "
                "check the model name in --url or --model-name."
            ) from None
        if exc.status.startswith(_CREDENTIALS):
            raise UserError(_credentials(target.origin, f"({exc})")) from None
        raise UserError(
            f"{target.origin} did not give the metadata of {target.model!r} ({exc}): check "
            "--url and --protocol."
        ) from None


def _given_rows(arrays: dict[str, np.ndarray], batch: int | None) -> dict[str, np.ndarray]:
    """``--inputs``' arrays with ``batch`` rows (their own cycled), where ``--batch`` is given."""
    if batch is None:
        return arrays
    return {name: repeat_rows(array, batch) for name, array in arrays.items()}


def prepare(target: RemoteTarget, inputs: str | None, batch: int | None = None) -> Prepared:
    """The request for ``target`` (module docstring); ``batch`` ``None`` when not given."""
    wire = make_wire(target)
    specs, where = _ask_metadata(target, wire)
    if inputs:
        given = from_npz(inputs)
        arrays = fit(_given_rows(given, batch), specs or [])
        rows = {np.asarray(a).shape[0] for a in given.values() if np.asarray(a).ndim}
        source = f"--inputs {inputs}" + (
            f", its rows repeated to {batch} (--batch)" if batch is not None and rows != {batch}
            else "")
        specs = specs or [InputSpec(n, str(a.dtype), tuple(a.shape)) for n, a in arrays.items()]
    elif specs:
        arrays = generated(specs, batch or 1)
        source = f"generated to the shapes and dtypes of {where}"
    else:
        raise UserError(
            f"{target.origin} publishes no inputs for {target.model!r}: give --inputs "
            "sample.npz (one array per input, named after it)."
        )
    try:
        body = wire.encode({k: np.asarray(v) for k, v in arrays.items()})
    except KeyError as exc:
        raise UserError(f"{target.protocol} cannot send an input of dtype {exc}.") from None
    first = np.asarray(next(iter(arrays.values()), 0))
    return Prepared(target, wire, body, tuple(specs), source, first.shape[0] if first.ndim else 1)


_SERVER_SIDE = ("HTTP 5", "gRPC INTERNAL", "gRPC UNAVAILABLE", "gRPC UNKNOWN", "gRPC RESOURCE")
"""Statuses that blame the server, not the request: the first request is sent again on these."""
_INPUTS_SIDE = ("HTTP 400", "HTTP 422", "gRPC INVALID_ARGUMENT")
"""Statuses that say the request's inputs do not fit the model."""
_CREDENTIALS = ("HTTP 401", "HTTP 403", "gRPC UNAUTHENTICATED", "gRPC PERMISSION_DENIED")
_WARM_TRIES = 3


def _warm(server: RemoteServer, prepared: Prepared, timeout_s: float) -> None:
    # A server that fails now and then must not read as a body it refuses: a server error is
    # tried again, and so is a connection the server closed (uvicorn closes the one an error
    # answer went on, unannounced, so the next request may find it gone).
    answered = 0
    for _ in range(2 * _WARM_TRIES):
        try:
            server.warm(timeout_s)
            return
        except CallFailed as exc:
            failure = exc
        if failure.status == "connection":
            continue
        answered += 1
        if not failure.status.startswith(_SERVER_SIDE) or answered == _WARM_TRIES:
            break
    raise UserError(first_failure(prepared, failure, answered))


def first_failure(prepared: Prepared, exc: CallFailed, tries: int) -> str:
    """Why the first request failed, in one sentence that blames what failed."""
    origin, said = prepared.target.origin, f"({exc.status}: {exc.message})"
    if exc.status == "timeout":
        return (
            f"{origin} gave no answer to the first request within the request timeout {said}: "
            "check that the server is up and serving, or raise --request-timeout."
        )
    if exc.status in ("connection", "gRPC UNAVAILABLE"):
        return f"the first request to {origin} failed on its connection {said}: check the server."
    if exc.status == "bad answer":
        return (
            f"{origin} answered the first request with something that is not a "
            f"{prepared.target.protocol} answer {said}: check --url and --protocol."
        )
    if exc.status.startswith(_SERVER_SIDE):
        return (
            f"{origin} failed the first request with a server error {tries} time(s) {said}: "
            "the server's own code failed; its log says more."
        )
    if exc.status.startswith(_CREDENTIALS):
        return _credentials(origin, said)
    if exc.status.startswith(_INPUTS_SIDE):
        return (
            f"{origin} refused the request built from {prepared.source} {said}: give "
            "--inputs that fit the model's signature."
        )
    return f"{origin} refused the first request {said}: check --url, --protocol and --header."


def _credentials(origin: str, said: str) -> str:
    return (
        f"{origin} refused this client's credentials {said}: give them with --header "
        "'Authorization: Bearer TOKEN' (or the header the server asks for)."
    )


def _result_document(doc: dict[str, Any], prepared: Prepared, run_id: int) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "kind": KIND,
        "workload": prepared.target.to_dict(),
        **doc,
        "target": prepared.target.to_dict(),
        "inputs": prepared.describe(),
    }


def pool_of(scenario: LoadScenario, connections: int | None) -> Pool:
    """The client's pool for ``scenario``: ``connections`` fixed, or a growing one (module
    docstring)."""
    if connections is not None:
        if connections < 1:
            raise UserError(f"--connections takes 1 or more, not {connections}.")
        return Pool(connections, grow=False)
    return Pool(max([CONNECTIONS, *scenario.concurrency]), grow=True)


def run_remote(
    prepared: Prepared,
    scenario: LoadScenario,
    *,
    store: Any,
    command: str = "bench",
    progress: Callable[[str], None] | None = None,
    price_per_hour: float | None = None,
    connections: int | None = None,
) -> dict[str, Any]:
    """Measure, record and summarise the target (module docstring); with ``price_per_hour``,
    each level and the SLO answer are priced as a local load run's."""
    target = prepared.target
    if not scenario.concurrency and not scenario.rates and scenario.slo_ms is None:
        scenario = dataclasses.replace(scenario, concurrency=(1,))
    about = {**target.to_dict(), "label": target.label()}
    server = RemoteServer(
        prepared.wire,
        prepared.body,
        pool_of(scenario, connections),
        scenario.timeout_s,
        target=about,
        info={"inputs": prepared.describe(), "batch": prepared.batch},
    )
    machine = collect_machine()
    settings = {"scenario": scenario.to_dict(), "target": about, "inputs": prepared.describe()}
    with server:
        _warm(server, prepared, scenario.timeout_s)
        server.warm_all(scenario.timeout_s)
        stored = redact_command(command)
        with RunRecorder(store, KIND, stored, target.to_dict(), machine, settings) as run:
            try:
                result = measure_on(server, scenario, progress=progress, recorder=run)
            except KeyboardInterrupt as exc:
                run.finish("interrupted", {"target": about})
                raise LoadInterrupted(run.run_id, levels_kept(store, run.run_id)) from exc
            doc = load_document([result], scenario, Config(), generator=GENERATOR,
                                price_per_hour=price_per_hour)
            doc["notes"] = [f"warning: {w}" for w in target.warnings] + doc["notes"]
            doc["warmup"] = {**server.warmup, "connections": server.opened()}
            run.finish("ok", doc)
    out = _result_document(doc, prepared, run.run_id)
    out["machine"] = machine_summary(machine)
    return out
