"""``tfperf bench --url``: a server the user runs, measured under load and recorded.

Contract:

- :func:`prepare` asks the target for its model's inputs (the metadata endpoint of its
  protocol, on the target's own address), builds the request body once from ``--inputs``
  (checked against those inputs when the server published any) or from values generated to
  their shape and dtype, and says which (:attr:`Prepared.source`). Nothing answering at the
  address, no model of that name, no published inputs and no ``--inputs``, or inputs the
  server refuses (one request is sent before any level) each raise
  :class:`~tfperf.core.errors.UserError` with one sentence, before any level starts.
- :func:`run_remote` measures the target with the same levels, SLO search, statistics and
  recorder as a layout tfperf serves (:func:`tfperf.serving.load.measure_on` on a
  :class:`~tfperf.serving.remote.client.RemoteServer`), stores the run as kind ``load`` with
  the target as its workload (``{"kind": "remote", "url", "protocol", ...}``), and returns the
  document of :func:`tfperf.serving.run.run_load` with ``target`` and ``inputs`` added.
- ``connections`` workers (each one connection) send the requests: the largest
  ``--concurrency`` given, and at least :data:`CONNECTIONS`.
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
from tfperf.machine.facts import collect_machine, machine_summary
from tfperf.runner.recorder import RunRecorder
from tfperf.serving.load import LoadScenario, measure_on
from tfperf.serving.remote.client import RemoteServer
from tfperf.serving.remote.grpc_wire import ServingGrpcWire, V2GrpcWire
from tfperf.serving.remote.rest import RestWire
from tfperf.serving.remote.target import RemoteTarget
from tfperf.serving.remote.tensors import InputSpec, fit, from_npz, generated
from tfperf.serving.remote.wire import CallFailed, Unreachable, Wire
from tfperf.serving.run import KIND, SCHEMA_VERSION, LoadInterrupted, levels_kept, load_document

CONNECTIONS = 16
"""Connections (workers) at least: requests in flight at most, and the SLO search's probe."""
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
        raise UserError(
            f"{target.origin} did not give the metadata of {target.model!r} ({exc}): check "
            "--url and --protocol."
        ) from None


def prepare(target: RemoteTarget, inputs: str | None, batch: int = 1) -> Prepared:
    """The request for ``target`` (module docstring)."""
    wire = make_wire(target)
    specs, where = _ask_metadata(target, wire)
    if inputs:
        arrays = fit(from_npz(inputs), specs or [])
        source = f"--inputs {inputs}"
        specs = specs or [InputSpec(n, str(a.dtype), tuple(a.shape)) for n, a in arrays.items()]
    elif specs:
        arrays = generated(specs, batch)
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
    return Prepared(target, wire, body, tuple(specs), source)


_SERVER_SIDE = ("HTTP 5", "gRPC INTERNAL", "gRPC UNAVAILABLE", "gRPC UNKNOWN", "gRPC RESOURCE")
"""Statuses that blame the server, not the request: the first request is sent again on these."""
_WARM_TRIES = 3


def _warm(server: RemoteServer, prepared: Prepared, timeout_s: float) -> None:
    # A server that fails now and then must not read as a body it refuses: only a request
    # refused on every try, or refused with a client-side status, is the inputs' fault.
    for attempt in range(_WARM_TRIES):
        try:
            server.warm(timeout_s)
            return
        except CallFailed as exc:
            if not exc.status.startswith(_SERVER_SIDE) or attempt == _WARM_TRIES - 1:
                raise UserError(
                    f"{prepared.target.origin} refused the request built from {prepared.source} "
                    f"({exc.status}: {exc.message}): give --inputs that fit the model's signature."
                ) from None


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


def run_remote(
    prepared: Prepared,
    scenario: LoadScenario,
    *,
    store: Any,
    command: str = "bench",
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Measure, record and summarise the target (module docstring)."""
    target = prepared.target
    if not scenario.concurrency and not scenario.rates and scenario.slo_ms is None:
        scenario = dataclasses.replace(scenario, concurrency=(1,))
    connections = max([CONNECTIONS, *scenario.concurrency])
    about = {**target.to_dict(), "label": target.label()}
    server = RemoteServer(
        prepared.wire,
        prepared.body,
        connections,
        scenario.timeout_s,
        target=about,
        info={"inputs": prepared.describe()},
    )
    machine = collect_machine()
    settings = {"scenario": scenario.to_dict(), "target": about, "inputs": prepared.describe()}
    with server:
        _warm(server, prepared, scenario.timeout_s)
        with RunRecorder(store, KIND, command, target.to_dict(), machine, settings) as run:
            try:
                result = measure_on(server, scenario, progress=progress, recorder=run)
            except KeyboardInterrupt as exc:
                run.finish("interrupted", {"target": about})
                raise LoadInterrupted(run.run_id, levels_kept(store, run.run_id)) from exc
            doc = load_document([result], scenario, Config(), generator=GENERATOR)
            run.finish("ok", doc)
    out = _result_document(doc, prepared, run.run_id)
    out["machine"] = machine_summary(machine)
    return out
