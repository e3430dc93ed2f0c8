"""A TensorFlow Serving REST server on 127.0.0.1 whose model sums each row of its one input
``x`` (float32, N x 4): real HTTP, a real answer for every request, no TensorFlow. It keeps
the number of rows of every request it answered, and each request as it came (its path, its
headers, its body), so a test can see what was sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "summer"
SIGNATURE = {
    "model_spec": {"name": MODEL, "version": "1"},
    "metadata": {"signature_def": {"signature_def": {"serving_default": {
        "inputs": {"x": {"dtype": "DT_FLOAT", "name": "x:0",
                         "tensor_shape": {"dim": [{"size": "-1"}, {"size": "4"}]}}},
        "outputs": {"y": {"dtype": "DT_FLOAT", "name": "y:0",
                          "tensor_shape": {"dim": [{"size": "-1"}]}}},
        "method_name": "tensorflow/serving/predict",
    }}}},
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept-alive connections, as the load generator uses them
    server: _Server

    def log_message(self, *args: object) -> None:  # no access log on the test's stderr
        pass

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.split("?")[0] == f"/v1/models/{MODEL}/metadata":
            self._send(200, SIGNATURE)
        else:
            self._send(404, {"error": f"no route {self.path}"})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.sent.append((self.path, dict(self.headers.items()), raw))
        body = json.loads(raw)
        if self.path.split("?")[0] != f"/v1/models/{MODEL}:predict":
            self._send(404, {"error": f"no route {self.path}"})
            return
        columnar = "inputs" in body
        rows = body["inputs"] if columnar else body["instances"]
        if isinstance(rows, dict):  # columnar, the inputs named
            rows = rows["x"]
        rows = [r["x"] if isinstance(r, dict) else r for r in rows]  # rows, named or not
        self.server.rows.append((len(rows), "columnar" if columnar else "row"))
        sums = [sum(row) for row in rows]
        self._send(200, {"outputs": sums} if columnar else {"predictions": sums})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    rows: list[tuple[int, str]]
    sent: list[tuple[str, dict[str, str], bytes]]


@contextmanager
def summing_server() -> Iterator[_Server]:
    """The server, listening on a free port of 127.0.0.1 until the block ends."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.rows = []
    server.sent = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
