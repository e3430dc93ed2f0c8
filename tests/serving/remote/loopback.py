"""Loopback model servers for the ``--url`` tests: free ports, start, wait, stop."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

SERVERS = Path(__file__).parent / "servers"
LOOPBACK = "127.0.0.1"


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1.0) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"the server did not get ready at {url} in {timeout_s:g} s")


def wait_line(proc: subprocess.Popen, word: str) -> None:
    for line in proc.stdout:
        if line.strip() == word:
            return
    raise RuntimeError("the server exited before it was ready")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def start_kserve(python: Path, model: Path, *faults: str) -> Iterator[tuple[int, int]]:
    """KServe serving ``model`` as ``two`` on loopback: yields (HTTP port, gRPC port). Its
    output goes to a file: a pipe nobody reads would fill with its access log and stall it."""
    http, grpc = free_port(), free_port()
    log = tempfile.NamedTemporaryFile("w", prefix="kserve-", suffix=".log", delete=False)  # noqa: SIM115 - the server writes it while the tests run
    proc = subprocess.Popen(
        [
            str(python),
            str(SERVERS / "kserve_keras.py"),
            str(model),
            "two",
            str(http),
            str(grpc),
            *faults,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    try:
        _wait_http(f"http://{LOOPBACK}:{http}/v2/models/two/ready", proc, Path(log.name))
        yield http, grpc
    finally:
        stop(proc)
        log.close()
        os.unlink(log.name)
