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
  connection, no redirects followed and nothing taken from the environment (no proxy; the CA
  to trust comes from :class:`~tfperf.serving.remote.access.Access`, which also gives the
  headers sent with every request, metadata included).
- A request is sent again, once, on a new connection only when the server cannot have read it
  whole: its connection could not be made, or writing it failed before its body was written
  whole (httpcore swallows that write error and reads on, so its trace says so). Once the body
  was written, the request is never sent again: a POST may have been run by then (Go's client
  does not resend it either); a read or protocol error then fails it as ``connection``, with
  its cause. "Written" is the trace's: the body handed to the event loop's transport, which
  buffers it; a reset while that buffer drains still reads as written, so in doubt a request
  is failed, never sent twice. Every resend is counted.
- Each call counts the connections it made (httpx's trace of a TCP connect): a kept-alive
  connection the server closed while it idled is made again by the next request on it.
- ``stats``: the statistics extension (``GET /v2/models/NAME[/versions/V]/stats``,
  :mod:`tfperf.serving.remote.stats`) for ``v2-rest``; TensorFlow Serving has none.
- An answer is checked: a 200 whose body is not JSON with ``outputs`` (``v2-rest``) or with
  ``predictions`` or ``outputs`` (``tfserving-rest``) fails as ``bad answer`` with its first
  bytes. String inputs (``object`` arrays of bytes) go as JSON strings, shape kept (v2 flat,
  as its ``data`` is); bytes that are not UTF-8 go as ``{"b64": ...}`` to TensorFlow Serving
  and are refused for v2, whose JSON has no such form.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import numpy as np

from tfperf.core.errors import UserError
from tfperf.serving.remote.stats import NONE_GIVEN, Counters, from_json
from tfperf.serving.remote.target import RemoteTarget
from tfperf.serving.remote.tensors import NUMPY_TO_V2, TF_DTYPES, V2_DTYPES, InputSpec, dtype_of
from tfperf.serving.remote.wire import (
    CallFailed,
    Sent,
    Unreachable,
    Untrusted,
    first_bytes,
    short,
    why,
)

_HEADERS = {"content-type": "application/json"}
_ANSWER_KEYS = {"v2-rest": ("outputs",), "tfserving-rest": ("predictions", "outputs")}


def _text(value: Any, b64: bool) -> Any:
    """One string element as JSON takes it (module docstring)."""
    if isinstance(value, str):
        return value
    raw = bytes(value)
    try:
        return raw.decode()
    except UnicodeDecodeError:
        if b64:
            return {"b64": base64.b64encode(raw).decode()}
        raise UserError(
            f"v2-rest sends BYTES as JSON text and {raw[:20]!r}... is not UTF-8: use "
            "--protocol v2-grpc, or --inputs whose strings are text."
        ) from None


def _jsonable(array: np.ndarray, b64: bool = True) -> Any:
    """``array`` as nested lists (its shape kept), strings as :func:`_text` makes them."""
    if array.dtype != object:
        return array.tolist()
    texts = [_text(v, b64) for v in array.ravel()]
    shaped = np.empty(len(texts), dtype=object)
    shaped[:] = texts
    return shaped.reshape(array.shape).tolist()


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
        self.stats_path = f"/v2/models/{target.model}{version}/stats"
        if target.query:  # the URL's own query (a gateway's key, say) goes with every request
            self.predict_path += f"?{target.query}"
            self.metadata_paths = tuple(f"{p}?{target.query}" for p in self.metadata_paths)
            self.stats_path += f"?{target.query}"
        self.headers = {**_HEADERS, **dict(target.access.headers)}
        self.verify: Any = target.access.ssl_context() if target.tls else True

    async def open(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.target.origin,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            follow_redirects=False,
            trust_env=False,
            timeout=None,
            headers=self.headers,
            verify=self.verify,
        )

    async def close(self, conn: httpx.AsyncClient) -> None:
        await conn.aclose()

    async def _get(self, conn: httpx.AsyncClient, path: str, timeout_s: float) -> httpx.Response:
        try:
            return await conn.get(path, timeout=timeout_s)
        except httpx.TimeoutException:
            raise Unreachable(f"no answer within {timeout_s:g} s") from None
        except httpx.TransportError as exc:
            reason = why(exc)
            raise (Untrusted if reason.startswith("TLS") else Unreachable)(reason) from None

    async def metadata(
        self, conn: httpx.AsyncClient, timeout_s: float = 10.0
    ) -> tuple[list[InputSpec] | None, str]:
        """The inputs the server publishes, and the path they came from; a 404 everywhere
        raises :class:`CallFailed` (no model of that name there), as does a 401 or 403
        anywhere; a body that is not JSON raises :class:`~tfperf.core.errors.UserError`."""
        last: httpx.Response | None = None
        for path in self.metadata_paths:
            response = await self._get(conn, path, timeout_s)
            if response.status_code in (401, 403):  # credentials: no other path will do
                raise CallFailed(f"HTTP {response.status_code}", short(response.text))
            shown = f"GET {path.split('?')[0]}"  # the query's values are secrets
            if response.status_code == 200:
                specs = parse_metadata(_json_of(response, f"{self.target.origin} {shown}"))
                if specs is not None:
                    return specs, shown
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
                        "data": _jsonable(a.ravel(), b64=False),
                    }
                    for name, a in arrays.items()
                ]
            }
        elif self.target.rest_format == "columnar":
            columns = {name: _jsonable(a) for name, a in arrays.items()}
            body = {"inputs": next(iter(columns.values())) if len(columns) == 1 else columns}
        else:
            rows = len(next(iter(arrays.values())))
            if len(arrays) == 1:
                body = {"instances": _jsonable(next(iter(arrays.values())))}
            else:
                body = {
                    "instances": [
                        {n: _jsonable(a[i]) for n, a in arrays.items()} for i in range(rows)
                    ]
                }
        return json.dumps(body).encode()

    async def _once(self, conn: httpx.AsyncClient, body: bytes, timeout_s: float,
                    sent: Sent) -> Sent:
        """One send, its answer checked; ``sent`` with this send's connections added is
        returned. A transport error other than a timeout raises :class:`_SendFailed`."""
        written = False
        connects = 0

        async def trace(event: str, info: dict[str, Any]) -> None:
            nonlocal written, connects
            if event.endswith(".send_request_body.complete"):
                written = True
            elif event == "connection.connect_tcp.started":
                connects += 1

        try:
            response = await conn.post(
                self.predict_path, content=body, timeout=timeout_s, extensions={"trace": trace}
            )
        except httpx.TimeoutException:
            raise CallFailed("timeout", f"no answer within {timeout_s:g} s", sent.resent,
                             sent.connects + connects) from None
        except httpx.TransportError as exc:
            raise _SendFailed(exc, written, sent.connects + connects) from None
        done = Sent(sent.resent, sent.connects + connects)
        self.check(response, done)
        return done

    async def call(self, conn: httpx.AsyncClient, body: bytes, timeout_s: float) -> Sent:
        try:
            return await self._once(conn, body, timeout_s, Sent())
        except _SendFailed as failed:
            if not failed.unread:
                raise CallFailed("connection", failed.reason(), 0, failed.connects) from None
            connects = failed.connects
        try:  # the server cannot have run it: on a new connection, once
            return await self._once(conn, body, timeout_s, Sent(1, connects))
        except _SendFailed as failed:
            raise CallFailed("connection", failed.reason(), 1, failed.connects) from None

    async def stats(self, conn: httpx.AsyncClient, timeout_s: float) -> Counters | str:
        """The statistics extension's figures of the model, or why there are none."""
        if self.target.protocol != "v2-rest":
            return NONE_GIVEN
        try:
            response = await conn.get(self.stats_path, timeout=timeout_s)
        except httpx.HTTPError as exc:
            return f"GET {self.stats_path.split('?')[0]} failed ({why(exc)})"
        if response.status_code != 200:
            return f"GET {self.stats_path.split('?')[0]} answered HTTP {response.status_code}"
        try:
            doc = response.json()
        except ValueError:
            return f"GET {self.stats_path.split('?')[0]} answered what is not JSON"
        return from_json(doc, self.target.model, self.target.version)

    def check(self, response: httpx.Response, sent: Sent = Sent()) -> None:
        """Raise :class:`CallFailed` unless ``response`` is the protocol's answer."""
        resent, connects = sent.resent, sent.connects
        if response.status_code != 200:
            raise CallFailed(f"HTTP {response.status_code}", short(response.text), resent,
                             connects)
        keys = _ANSWER_KEYS[self.target.protocol]
        try:
            doc = json.loads(response.content)
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or not any(k in doc for k in keys):
            raise CallFailed(
                "bad answer",
                f"HTTP 200 whose body is not a {self.target.protocol} answer (JSON with "
                f"{' or '.join(repr(k) for k in keys)}): {first_bytes(response.content)}",
                resent,
                connects,
            )


class _SendFailed(Exception):
    """A send that failed on its connection: the error, and whether the body was written
    whole before it."""

    def __init__(self, cause: httpx.TransportError, written: bool, connects: int) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.written = written
        self.connects = connects

    @property
    def unread(self) -> bool:
        """The server cannot have read the request whole (module docstring)."""
        return isinstance(self.cause, httpx.ConnectError) or not self.written

    def reason(self) -> str:
        if isinstance(self.cause, httpx.ConnectError):
            return f"cannot connect: {why(self.cause)}"
        if self.written:
            return f"the connection failed after the request was sent, before its answer: " \
                f"{why(self.cause)}"
        return f"the connection failed while the request was written: {why(self.cause)}"


def _json_of(response: httpx.Response, where: str) -> Any:
    try:
        return response.json()
    except ValueError:
        raise UserError(
            f"{where} answered metadata that is not JSON ({first_bytes(response.content)}): "
            "check --url and --protocol."
        ) from None


def _tf_shape(shape: dict[str, Any]) -> tuple[int, ...] | None:
    if shape.get("unknown_rank"):
        return None
    return tuple(int(d.get("size", -1)) for d in shape.get("dim", []))


def _v2_input(entry: Any) -> InputSpec:
    if not isinstance(entry, dict) or "name" not in entry or "datatype" not in entry:
        raise UserError(
            f"the server's v2 metadata gives an input without a name or a datatype "
            f"({short(json.dumps(entry), 80)}): give --inputs and check the server's model."
        )
    shape = entry.get("shape")
    return InputSpec(
        str(entry["name"]),
        dtype_of(V2_DTYPES, entry["datatype"], entry["name"]),
        None if shape is None else tuple(int(d) for d in shape),
    )


def parse_metadata(doc: Any) -> list[InputSpec] | None:
    """The inputs of a v2 model metadata document or of TensorFlow Serving's signature
    metadata (its ``serving_default``); ``None`` when the document has neither. An input
    without a datatype, or of one tfperf cannot send, is a
    :class:`~tfperf.core.errors.UserError`."""
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("inputs"), list) and doc["inputs"]:
        return [_v2_input(i) for i in doc["inputs"]]
    sigs = ((doc.get("metadata") or {}).get("signature_def") or {}).get("signature_def") or {}
    sig = sigs.get("serving_default") or next(iter(sigs.values()), None)
    if not sig or not sig.get("inputs"):
        return None
    return [
        InputSpec(
            name,
            dtype_of(TF_DTYPES, info.get("dtype"), name),
            _tf_shape(info.get("tensor_shape") or {}),
        )
        for name, info in sorted(sig["inputs"].items())
    ]
