"""TensorFlow Serving's REST predict API and the Open Inference Protocol v2 over HTTP (httpx).

Contract (see :mod:`tfperf.serving.remote.wire` for what a wire does):

- ``tfserving-rest``: ``POST /v1/models/NAME[/versions/V]:predict`` with ``{"instances": [...]}``
  (row format: one entry per batch row, a dict of inputs when there are several) or
  ``{"inputs": ...}`` (columnar). Its metadata is TensorFlow Serving's
  ``GET /v1/models/NAME/metadata`` (the ``serving_default`` signature); a server without that
  endpoint (KServe's v1 protocol) is asked for the v2 model metadata on the same address.
- ``v2-rest``: ``POST /v2/models/NAME[/versions/V]/infer`` with
  ``{"inputs": [{"name", "shape", "datatype", "data"}]}``; metadata ``GET /v2/models/NAME``.
- Each connection is an ``httpx.AsyncClient`` bound to the target's origin with one kept-alive
  connection, no redirects followed and no proxy taken from the environment. A request that
  finds that connection closed by the server (read, write or protocol error, no answer) is sent
  once more on a new one; a second such error fails it as ``connection``.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import numpy as np

from tfperf.serving.remote.target import RemoteTarget
from tfperf.serving.remote.tensors import NUMPY_TO_V2, TF_DTYPES, V2_DTYPES, InputSpec
from tfperf.serving.remote.wire import CallFailed, Unreachable, short

_HEADERS = {"content-type": "application/json"}
_STALE = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)
"""A kept-alive connection the server closed: nothing was answered on it."""


def _jsonable(array: np.ndarray) -> Any:
    if array.dtype == object:
        return [v.decode() if isinstance(v, bytes) else v for v in array.ravel()]
    return array.tolist()


class RestWire:
    """``tfserving-rest`` or ``v2-rest`` (module docstring)."""

    def __init__(self, target: RemoteTarget) -> None:
        self.target = target
        version = f"/versions/{target.version}" if target.version else ""
        if target.protocol == "tfserving-rest":
            self.predict_path = f"/v1/models/{target.model}{version}:predict"
            self.metadata_paths = (
                f"/v1/models/{target.model}{version}/metadata",
                f"/v2/models/{target.model}{version}",
            )
        else:
            self.predict_path = f"/v2/models/{target.model}{version}/infer"
            self.metadata_paths = (f"/v2/models/{target.model}{version}",)

    async def open(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.target.origin,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            follow_redirects=False,
            trust_env=False,
            timeout=None,
        )

    async def close(self, conn: httpx.AsyncClient) -> None:
        await conn.aclose()

    async def _get(self, conn: httpx.AsyncClient, path: str, timeout_s: float) -> httpx.Response:
        try:
            return await conn.get(path, timeout=timeout_s)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadTimeout) as exc:
            raise Unreachable(short(str(exc) or type(exc).__name__)) from None
        except httpx.TransportError as exc:
            raise Unreachable(short(str(exc) or type(exc).__name__)) from None

    async def metadata(
        self, conn: httpx.AsyncClient, timeout_s: float = 10.0
    ) -> tuple[list[InputSpec] | None, str]:
        """The inputs the server publishes, and the path they came from; a 404 everywhere
        raises :class:`CallFailed` (no model of that name there)."""
        last: httpx.Response | None = None
        for path in self.metadata_paths:
            response = await self._get(conn, path, timeout_s)
            if response.status_code == 200:
                specs = parse_metadata(response.json())
                if specs is not None:
                    return specs, f"GET {path}"
            last = response
        if last is not None and last.status_code == 404:
            raise CallFailed("HTTP 404", short(last.text))
        return None, "none published"

    def encode(self, arrays: dict[str, np.ndarray]) -> bytes:
        if self.target.protocol == "v2-rest":
            body: Any = {
                "inputs": [
                    {
                        "name": name,
                        "shape": list(a.shape),
                        "datatype": NUMPY_TO_V2[str(a.dtype)],
                        "data": _jsonable(a),
                    }
                    for name, a in arrays.items()
                ]
            }
        elif self.target.rest_format == "columnar":
            columns = {
                name: _jsonable(a) if a.dtype == object else a.tolist()
                for name, a in arrays.items()
            }
            body = {"inputs": next(iter(columns.values())) if len(columns) == 1 else columns}
        else:
            rows = len(next(iter(arrays.values())))
            if len(arrays) == 1:
                body = {"instances": next(iter(arrays.values())).tolist()}
            else:
                body = {
                    "instances": [
                        {n: a[i].tolist() for n, a in arrays.items()} for i in range(rows)
                    ]
                }
        return json.dumps(body).encode()

    async def _post(self, conn: httpx.AsyncClient, body: bytes, timeout_s: float) -> httpx.Response:
        return await conn.post(self.predict_path, content=body, headers=_HEADERS, timeout=timeout_s)

    async def call(self, conn: httpx.AsyncClient, body: bytes, timeout_s: float) -> None:
        try:
            try:
                response = await self._post(conn, body, timeout_s)
            except _STALE:
                # A server may close a kept-alive connection without saying so (uvicorn does
                # after an error answer): the request never reached it, so it goes once more on
                # a new connection, as Go's and urllib3's clients do. Its latency still counts
                # from its arrival.
                response = await self._post(conn, body, timeout_s)
        except httpx.TimeoutException:
            raise CallFailed("timeout", f"no answer within {timeout_s:g} s") from None
        except httpx.TransportError as exc:
            raise CallFailed("connection", short(str(exc) or type(exc).__name__)) from None
        if response.status_code != 200:
            raise CallFailed(f"HTTP {response.status_code}", short(response.text))


def _tf_shape(shape: dict[str, Any]) -> tuple[int, ...] | None:
    if shape.get("unknown_rank"):
        return None
    return tuple(int(d.get("size", -1)) for d in shape.get("dim", []))


def parse_metadata(doc: dict[str, Any]) -> list[InputSpec] | None:
    """The inputs of a v2 model metadata document or of TensorFlow Serving's signature
    metadata (its ``serving_default``); ``None`` when the document has neither."""
    if isinstance(doc.get("inputs"), list) and doc["inputs"]:
        return [
            InputSpec(i["name"], V2_DTYPES.get(i["datatype"], "float32"), tuple(i["shape"]))
            for i in doc["inputs"]
        ]
    sigs = ((doc.get("metadata") or {}).get("signature_def") or {}).get("signature_def") or {}
    sig = sigs.get("serving_default") or next(iter(sigs.values()), None)
    if not sig or not sig.get("inputs"):
        return None
    return [
        InputSpec(
            name,
            TF_DTYPES.get(info.get("dtype", ""), "float32"),
            _tf_shape(info.get("tensor_shape") or {}),
        )
        for name, info in sorted(sig["inputs"].items())
    ]
