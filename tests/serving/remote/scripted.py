"""A scripted v2 REST server on loopback, in the test's own process: it publishes a model's
metadata and answers each POST as its script says (``ok``; ``drop``: the connection closed
after the request was read; ``not-an-answer``: a 200 whose body is HTML; ``error``: KServe's
500; ``invalid``: a 400; ``stall``), optionally over TLS, and counts what it did. As a script
asks, it closes a connection idle for ``keepalive_s`` (as uvicorn does after 5 s), serves at
most ``at_once`` POSTs at a time (the rest wait for one of them), and keeps the statistics
extension's counters the way Triton serves them (``GET /v2/models/m/stats``; gRPC's
``ModelStatistics``), each answered request adding :data:`STATS_NS`.

No TensorFlow: it answers in milliseconds, so the accounting tests stay fast. The model servers
the protocols are tested against are in ``servers/``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from serving.remote.loopback import LOOPBACK

METADATA = {
    "name": "m",
    "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
    "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 1]}],
}
ANSWER = {"model_name": "m", "outputs": [{"name": "y", "shape": [1, 1], "datatype": "FP32",
                                          "data": [0.5]}]}
KSERVE_500 = {"error": "RuntimeError : the model's own code failed on request"}
"""What KServe answers (HTTP 500) when a model's own Python code raises."""
INVALID = {"error": "Invalid input: expected shape [-1, 4]"}
"""A 400: the request's inputs do not fit the model."""
STATS_NS = {"queue": 2_000_000, "compute_input": 100_000, "compute_infer": 3_000_000,
            "compute_output": 200_000}
"""What each answered request adds to the scripted statistics (ns): 2 ms queued, 3.3 ms of
compute (0.1 input, 3 infer, 0.2 output)."""


@dataclass
class Script:
    """What the server does with the ``n``-th POST (from 1): ``answer(n)`` names it."""

    answer: Callable[[int], str] = lambda n: "ok"
    metadata: bytes = json.dumps(METADATA).encode()
    require: dict[str, str] = field(default_factory=dict)
    """Headers a request must carry, else it is answered 401."""
    stop_after: int | None = None
    """Stop listening once this many POSTs were answered (later connections are refused)."""
    stall_s: float = 0.0
    keepalive_s: float | None = None
    """Close a connection that brings no request for this long."""
    at_once: int | None = None
    """Serve at most this many POSTs at a time."""
    stats: bool = False
    """Serve the statistics extension as Triton does."""
    done: Counter = field(default_factory=Counter)
    """What was done, by name; ``"posts"`` counts every POST read."""
    seen_headers: list[dict[str, str]] = field(default_factory=list)


_COUNTING = threading.Lock()


def _answered(script: Script) -> None:
    """One more request answered, counted before its answer is written (as Triton counts it
    once the request is done, before the client has read it)."""
    with _COUNTING:
        script.done["answered"] += 1


def stats_document(answered: int, name: str = "m") -> dict[str, Any]:
    """The statistics extension's answer after ``answered`` requests, as Triton writes it."""
    stages = {stage: {"count": answered, "ns": answered * ns} for stage, ns in STATS_NS.items()}
    return {"model_stats": [{
        "name": name, "version": "1", "last_inference": 0, "inference_count": answered,
        "execution_count": answered,
        "inference_stats": {"success": {"count": answered, "ns": answered * 6_000_000},
                            "fail": {"count": 0, "ns": 0}, **stages,
                            "cache_hit": {"count": 0, "ns": 0}},
        "batch_stats": [],
    }]}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, script: Script) -> None:
        super().__init__((LOOPBACK, 0), _handler(script))
        self.script = script
        self.serving_one = threading.Semaphore(script.at_once or 1_000_000)
        self.open_connections: set[Any] = set()
        self.serving = threading.Event()
        self.stopped = threading.Event()

    def serve(self) -> None:
        self.serving.set()
        try:
            self.serve_forever(poll_interval=0.05)
        finally:
            self.serving.clear()

    def stop_listening(self, keep: Any) -> None:
        """Refuse every later connection, and end the open ones but ``keep`` (whose answer is
        still to be written): a client finds each closed before it sends again."""
        if self.stopped.is_set():
            return
        self.stopped.set()
        self.shutdown()
        self.socket.close()
        for conn in list(self.open_connections):
            if conn is not keep:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms ACK wait
        timeout = script.keepalive_s  # an idle connection is closed after it
        server: _Server

        def setup(self) -> None:
            super().setup()
            self.server.open_connections.add(self.connection)

        def finish(self) -> None:
            self.server.open_connections.discard(self.connection)
            super().finish()

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if not self._allowed():
                return
            if self.path.endswith("/stats"):
                if not script.stats:
                    self._send(404, b'{"error": "Not Found"}')
                    return
                self._send(200, json.dumps(stats_document(script.done["answered"])).encode())
                return
            self._send(200, script.metadata)

        def _allowed(self) -> bool:
            script.seen_headers.append(dict(self.headers.items()))
            if all(self.headers.get(k) == v for k, v in script.require.items()):
                return True
            self._send(401, b'{"error": "missing or wrong credentials"}')
            return False

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            if not self._allowed():
                return
            with self.server.serving_one:
                self._post()

        def _post(self) -> None:
            script.done["posts"] += 1
            what = script.answer(script.done["posts"])
            script.done[what] += 1
            if what == "drop":  # the whole request was read: close without a word
                self.close_connection = True
                return
            if what == "stall":
                time.sleep(script.stall_s)
            if script.stop_after is not None and script.done["posts"] >= script.stop_after:
                self.close_connection = True
                self.server.stop_listening(keep=self.connection)
            if what == "not-an-answer":
                self._send(200, b"<html><body>Welcome to the proxy</body></html>")
                return
            status, body = {"error": (500, KSERVE_500), "invalid": (400, INVALID)}.get(
                what, (200, ANSWER)
            )
            if status == 200:
                _answered(script)
            self._send(status, json.dumps(body).encode())

    return Handler


@contextmanager
def scripted(script: Script, tls: tuple[str, str] | None = None) -> Iterator[int]:
    """Serve ``script`` on a free loopback port (over TLS with ``(certfile, keyfile)``); yields
    the port."""
    server = _Server(script)
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        if not server.stopped.is_set():
            server.shutdown()
        server.server_close()
        thread.join(10)


@contextmanager
def scripted_grpc(script: Script, tls: tuple[str, str] | None = None) -> Iterator[int]:
    """The v2 gRPC service on a free loopback port as ``script`` says: ``ok`` answers one
    output, ``empty`` an empty ModelInferResponse; a call without ``script.require``'s
    metadata is UNAUTHENTICATED. Yields the port."""
    import grpc
    from google.protobuf import json_format
    from tritonclient.grpc import service_pb2 as pb
    from tritonclient.grpc import service_pb2_grpc as pb_grpc

    class Service(pb_grpc.GRPCInferenceServiceServicer):
        def _check(self, context: Any) -> None:
            got = dict(context.invocation_metadata())
            script.seen_headers.append(got)
            if any(got.get(k.lower()) != v for k, v in script.require.items()):
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong credentials")

        def ModelMetadata(self, request: Any, context: Any) -> Any:
            self._check(context)
            answer = pb.ModelMetadataResponse(name=request.name)
            for spec in json.loads(script.metadata)["inputs"]:
                answer.inputs.add(name=spec["name"], datatype=spec["datatype"],
                                  shape=spec["shape"])
            return answer

        def ModelStatistics(self, request: Any, context: Any) -> Any:
            if not script.stats:
                context.abort(grpc.StatusCode.UNIMPLEMENTED, "no statistics here")
            answer = pb.ModelStatisticsResponse()
            answer.model_stats.append(json_format.ParseDict(
                stats_document(script.done["answered"], request.name)["model_stats"][0],
                pb.ModelStatistics(), ignore_unknown_fields=True))
            return answer

        def ModelInfer(self, request: Any, context: Any) -> Any:
            self._check(context)
            script.done["posts"] += 1
            what = script.answer(script.done["posts"])
            script.done[what] += 1
            if what == "empty":
                return pb.ModelInferResponse()
            answer = pb.ModelInferResponse(model_name=request.model_name)
            answer.outputs.add(name="y", datatype="FP32", shape=[1, 1])
            answer.raw_output_contents.append(b"\0\0\0?")
            _answered(script)
            return answer

    from concurrent import futures

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(Service(), server)
    if tls is None:
        port = server.add_insecure_port(f"{LOOPBACK}:0")
    else:
        with open(tls[0], "rb") as cert, open(tls[1], "rb") as key:
            credentials = grpc.ssl_server_credentials([(key.read(), cert.read())])
        port = server.add_secure_port(f"{LOOPBACK}:0", credentials)
    server.start()
    try:
        yield port
    finally:
        server.stop(None)


def self_signed(folder: Any) -> tuple[str, str]:
    """A certificate for 127.0.0.1 signed by itself, and its key: PEM files in ``folder``
    (made with the cryptography package where it is installed, else the openssl command)."""
    cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
    try:
        _with_cryptography(cert, key)
    except ImportError:
        import subprocess

        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-keyout", key, "-out", cert, "-subj", "/CN=localhost",
             "-addext", f"subjectAltName=IP:{LOOPBACK},DNS:localhost"],
            check=True, capture_output=True, timeout=60,
        )
    return cert, key


def _with_cryptography(cert_path: str, key_path: str) -> None:
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([
            x509.IPAddress(ipaddress.ip_address(LOOPBACK)), x509.DNSName("localhost")
        ]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    with open(cert_path, "wb") as handle:
        handle.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as handle:
        handle.write(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
