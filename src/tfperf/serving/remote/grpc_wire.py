"""The Open Inference Protocol v2 over gRPC and TensorFlow Serving's gRPC PredictionService.

Contract (see :mod:`tfperf.serving.remote.wire` for what a wire does):

- ``v2-grpc``: ``inference.GRPCInferenceService`` ``ModelMetadata`` and ``ModelInfer`` (the
  tensors as ``raw_input_contents``), through the message definitions and stub that
  ``tritonclient`` ships (``tritonclient.grpc.service_pb2``: Triton's service, a superset of
  the protocol's ``grpc_predict_v2.proto`` with the same messages and field numbers).
- ``tfserving-grpc``: ``tensorflow.serving.PredictionService`` ``GetModelMetadata`` (the
  ``signature_def`` field) and ``Predict`` (``serving_default``, each input a ``TensorProto``
  with ``tensor_content``), through ``tensorflow-serving-api``. Its messages import
  TensorFlow's own ``tensor_pb2`` and friends from the ``tensorflow`` package, whose
  ``__init__`` would load all of TensorFlow in this process: :func:`serving_api` imports them
  with the package's directory standing in for it, so only the generated message modules load.
- A channel is ``grpc.aio.insecure_channel`` to ``target.origin`` (``grpc://``), or
  ``grpc.aio.secure_channel`` with the roots of :class:`~tfperf.serving.remote.access.Access`
  (``grpcs://``), with its own subchannel pool (so one channel per worker is one connection
  of its own, not one shared behind them all) and no proxy from the environment; every call
  carries ``--header``'s headers as metadata. Either package missing is a
  :class:`~tfperf.core.errors.UserError` saying how to install it.
- An answer is checked: a reply without outputs (an empty message parses as any message) fails
  as ``bad answer`` with the first bytes of the reply; one that does not parse is gRPC's own
  failure (``gRPC INTERNAL``). Strings (``BYTES``, ``DT_STRING``) are sent as the typed
  ``bytes_contents`` / ``string_val``; beside them, v2's other inputs go in their typed
  contents too, as the protocol takes either raw or typed contents for all the inputs of a
  request, never a mix. gRPC's own retries are off (``grpc.enable_retries`` 0, transparent
  retries included): a call the server's library refused is failed, not sent again unseen;
  every call's resends are 0. A call made on a channel that is not connected (gRPC's
  ``READY``) counts one connection made: the channel connects first (after the server closed
  an idle one, say), and that handshake is in the call's latency.
- ``stats``: ``ModelStatistics`` (the statistics extension, :mod:`tfperf.serving.remote.stats`)
  for ``v2-grpc``; a server that does not implement it, and TensorFlow Serving, give none.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

import grpc
import numpy as np

from tfperf.core.errors import UserError
from tfperf.serving.remote.stats import NONE_GIVEN, Counters, from_proto
from tfperf.serving.remote.target import RemoteTarget
from tfperf.serving.remote.tensors import (
    NUMPY_TO_TF,
    NUMPY_TO_V2,
    TF_DTYPES,
    V2_DTYPES,
    InputSpec,
    dtype_of,
)
from tfperf.serving.remote.wire import (
    CallFailed,
    Sent,
    Unreachable,
    Untrusted,
    first_bytes,
    short,
)

_OPTIONS = [
    ("grpc.enable_http_proxy", 0),
    # gRPC otherwise resends, out of sight, a call that never left this client or that the
    # server's library refused before the server's code saw it: a load run counts such a
    # call as failed (UNAVAILABLE, with its message) and never sends it twice
    ("grpc.enable_retries", 0),
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
]
_INSTALL = "pip install --no-deps {}"


def v2_api() -> Any:
    """``tritonclient.grpc.service_pb2`` and its stub module."""
    try:
        from tritonclient.grpc import service_pb2, service_pb2_grpc
    except (ImportError, RuntimeError):
        raise UserError(
            "--protocol v2-grpc needs the v2 message definitions: "
            + _INSTALL.format("tritonclient")
            + " python-rapidjson (no-deps: it would pin its own protobuf)."
        ) from None
    return service_pb2, service_pb2_grpc


def serving_api() -> tuple[Any, Any, Any, Any]:
    """``predict_pb2``, ``get_model_metadata_pb2``, ``prediction_service_pb2_grpc`` and
    TensorFlow's ``types_pb2``, without TensorFlow's runtime (module docstring)."""
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or importlib.util.find_spec("tensorflow_serving") is None:
        raise UserError(
            "--protocol tfserving-grpc needs TensorFlow Serving's API and TensorFlow's message "
            "definitions: " + _INSTALL.format("tensorflow-serving-api") + " beside TensorFlow."
        )
    stand_in = None
    if "tensorflow" not in sys.modules:
        stand_in = types.ModuleType("tensorflow")
        stand_in.__path__ = list(spec.submodule_search_locations or [])
        sys.modules["tensorflow"] = stand_in
    try:
        modules = tuple(
            importlib.import_module(name)
            for name in (
                "tensorflow_serving.apis.predict_pb2",
                "tensorflow_serving.apis.get_model_metadata_pb2",
                "tensorflow_serving.apis.prediction_service_pb2_grpc",
                "tensorflow.core.framework.types_pb2",
            )
        )
    finally:
        if stand_in is not None and sys.modules.get("tensorflow") is stand_in:
            del sys.modules["tensorflow"]
    return modules  # type: ignore[return-value]


def _rpc_error(exc: grpc.aio.AioRpcError) -> CallFailed:
    return CallFailed(f"gRPC {exc.code().name}", short(exc.details() or ""))


def _unavailable(details: str) -> str:
    """gRPC's UNAVAILABLE in words: a refused connection said as that."""
    if "Connection refused" in details or "connection refused" in details:
        return f"connection refused ({short(details, 120)})"
    return short(details)


_TYPED = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}
"""v2's typed contents field of each datatype (FP16 has none: raw only)."""


def _typed_contents(contents: Any, datatype: str, array: np.ndarray) -> None:
    if datatype not in _TYPED:
        raise UserError(
            f"v2-grpc sends {datatype} only as raw contents, which cannot go beside a string "
            "input in one request: give --inputs of another dtype."
        )
    values = array.ravel().tolist() if datatype != "BYTES" else [bytes(v) for v in array.ravel()]
    getattr(contents, _TYPED[datatype]).extend(values)


class _GrpcWire:
    """What both gRPC protocols share: the channel, its errors."""

    def __init__(self, target: RemoteTarget) -> None:
        self.target = target
        self.metadata_headers = target.access.grpc_metadata() or None
        self.credentials = (
            grpc.ssl_channel_credentials(target.access.root_certificates())
            if target.tls
            else None
        )

    def _stub(self, channel: grpc.aio.Channel) -> Any:
        raise NotImplementedError

    async def open(self) -> tuple[grpc.aio.Channel, Any]:
        """A channel and its stub (made once: a stub builds a callable per method)."""
        if self.credentials is None:
            channel = grpc.aio.insecure_channel(self.target.origin, options=_OPTIONS)
        else:
            channel = grpc.aio.secure_channel(
                self.target.origin, self.credentials, options=_OPTIONS
            )
        return channel, self._stub(channel)

    async def close(self, conn: tuple[grpc.aio.Channel, Any]) -> None:
        await conn[0].close()

    async def _ask(self, method: Any, request: Any, timeout_s: float) -> Any:
        try:
            return await method(request, timeout=timeout_s, metadata=self.metadata_headers)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise Unreachable(f"no answer within {timeout_s:g} s") from None
            if exc.code() == grpc.StatusCode.UNAVAILABLE:
                details = exc.details() or exc.code().name
                tls = any(word in details for word in ("ssl", "SSL", "TLS", "handshake"))
                raise (Untrusted if tls else Unreachable)(_unavailable(details)) from None
            raise _rpc_error(exc) from None

    async def _call(self, conn: Any, method: Any, request: Any, timeout_s: float) -> Sent:
        ready = conn[0].get_state(try_to_connect=False) == grpc.ChannelConnectivity.READY
        connects = 0 if ready else 1
        try:
            reply = await method(request, timeout=timeout_s, metadata=self.metadata_headers)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise CallFailed("timeout", f"no answer within {timeout_s:g} s", 0,
                                 connects) from None
            failed = _rpc_error(exc)
            failed.connects = connects
            raise failed from None
        if not reply.outputs:
            raise CallFailed(
                "bad answer",
                f"a {type(reply).__name__} without outputs: "
                f"{first_bytes(reply.SerializeToString())}",
                0,
                connects,
            )
        return Sent(0, connects)

    async def stats(self, conn: Any, timeout_s: float) -> Counters | str:
        """The statistics extension's figures (``ModelStatistics``), or why there are none."""
        return NONE_GIVEN


class V2GrpcWire(_GrpcWire):
    """``v2-grpc`` (module docstring)."""

    def __init__(self, target: RemoteTarget) -> None:
        super().__init__(target)
        self.pb, self.grpc_pb = v2_api()

    def _stub(self, channel: grpc.aio.Channel) -> Any:
        return self.grpc_pb.GRPCInferenceServiceStub(channel)

    async def metadata(
        self, conn: Any, timeout_s: float = 10.0
    ) -> tuple[list[InputSpec] | None, str]:
        request = self.pb.ModelMetadataRequest(
            name=self.target.model, version=self.target.version or ""
        )
        answer = await self._ask(conn[1].ModelMetadata, request, timeout_s)
        specs = [
            InputSpec(i.name, dtype_of(V2_DTYPES, i.datatype, i.name), tuple(i.shape))
            for i in answer.inputs
        ]
        return (specs or None), "ModelMetadata"

    def encode(self, arrays: dict[str, np.ndarray]) -> Any:
        request = self.pb.ModelInferRequest(
            model_name=self.target.model, model_version=self.target.version or ""
        )
        typed = any(a.dtype == object for a in arrays.values())
        for name, array in arrays.items():
            datatype = NUMPY_TO_V2[str(array.dtype)]
            tensor = request.inputs.add(name=name, datatype=datatype, shape=list(array.shape))
            if typed:
                _typed_contents(tensor.contents, datatype, array)
        if not typed:
            request.raw_input_contents.extend(
                np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
                for a in arrays.values()
            )
        return request

    async def call(self, conn: Any, body: Any, timeout_s: float) -> Sent:
        return await self._call(conn, conn[1].ModelInfer, body, timeout_s)

    async def stats(self, conn: Any, timeout_s: float) -> Counters | str:
        request = self.pb.ModelStatisticsRequest(
            name=self.target.model, version=self.target.version or ""
        )
        try:
            answer = await conn[1].ModelStatistics(
                request, timeout=timeout_s, metadata=self.metadata_headers
            )
        except grpc.aio.AioRpcError as exc:
            return f"ModelStatistics answered gRPC {exc.code().name}"
        return from_proto(answer, self.target.model, self.target.version)


class ServingGrpcWire(_GrpcWire):
    """``tfserving-grpc`` (module docstring)."""

    signature = "serving_default"

    def __init__(self, target: RemoteTarget) -> None:
        super().__init__(target)
        self.predict_pb, self.meta_pb, self.service, self.types_pb = serving_api()

    def _stub(self, channel: grpc.aio.Channel) -> Any:
        return self.service.PredictionServiceStub(channel)

    def _spec(self, request: Any) -> None:
        request.model_spec.name = self.target.model
        if self.target.version:
            request.model_spec.version.value = int(self.target.version)

    async def metadata(
        self, conn: Any, timeout_s: float = 10.0
    ) -> tuple[list[InputSpec] | None, str]:
        request = self.meta_pb.GetModelMetadataRequest(metadata_field=["signature_def"])
        self._spec(request)
        answer = await self._ask(conn[1].GetModelMetadata, request, timeout_s)
        sigs = self.meta_pb.SignatureDefMap()
        if "signature_def" not in answer.metadata or not answer.metadata["signature_def"].Unpack(
            sigs
        ):
            return None, "GetModelMetadata (no signature)"
        sig = sigs.signature_def.get(self.signature)
        if sig is None:
            return None, f"GetModelMetadata (no {self.signature})"
        specs = []
        for name in sorted(sig.inputs):
            info = sig.inputs[name]
            dtype = dtype_of(TF_DTYPES, self.types_pb.DataType.Name(info.dtype), name)
            shape = (
                None
                if info.tensor_shape.unknown_rank
                else tuple(d.size for d in info.tensor_shape.dim)
            )
            specs.append(InputSpec(name, dtype, shape))
        return specs, "GetModelMetadata"

    def encode(self, arrays: dict[str, np.ndarray]) -> Any:
        request = self.predict_pb.PredictRequest()
        self._spec(request)
        request.model_spec.signature_name = self.signature
        for name, array in arrays.items():
            tensor = request.inputs[name]
            tensor.dtype = self.types_pb.DataType.Value(NUMPY_TO_TF[str(array.dtype)])
            for size in array.shape:
                tensor.tensor_shape.dim.add(size=size)
            if array.dtype == object:
                tensor.string_val.extend(bytes(v) for v in array.ravel())
            else:
                tensor.tensor_content = np.ascontiguousarray(array).tobytes()
        return request

    async def call(self, conn: Any, body: Any, timeout_s: float) -> Sent:
        return await self._call(conn, conn[1].Predict, body, timeout_s)
