"""Faults injected for real into a KServe server on loopback: errors for some requests, and
requests held far past the timeout. Each is counted; the level still ends; nothing crashes."""

from __future__ import annotations

import json

import pytest

from helpers import run_cli
from serving.remote.loopback import start_kserve

pytestmark = [pytest.mark.tf, pytest.mark.slow]


@pytest.fixture(scope="module")
def failing(kserve_python, two_input_model):
    """The first two requests and every 4th one answered with an error."""
    yield from start_kserve(
        kserve_python, two_input_model, "--fail-every", "4", "--fail-first", "2"
    )


@pytest.fixture(scope="module")
def stalling(kserve_python, two_input_model):
    """Every 10th request held 4 s (the tests give up after 0.5 s)."""
    yield from start_kserve(kserve_python, two_input_model, "--stall-every", "10", "--stall-s", "4")


def _run(url: str, tmp_path, *extra: str) -> dict:
    res = run_cli(
        "bench",
        "--url",
        url,
        "--level-requests",
        "40",
        "--level-seconds",
        "0.15",
        *extra,
        "--json",
        "--store",
        str(tmp_path / "s.sqlite"),
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


def test_errors_are_counted_by_status_with_the_first_message(failing, tmp_path):
    """The server fails the first request twice: a failure of the server, not of the inputs,
    so the first request is sent again before the levels start."""
    http, grpc = failing
    for url in (f"http://127.0.0.1:{http}/v2/models/two", f"grpc://127.0.0.1:{grpc}"):
        doc = _run(url, tmp_path, "--model-name", "two", "--concurrency", "2")
        (level,) = doc["levels"]
        # the first request failed twice before the level: kept, not dropped (over HTTP each
        # error's connection is closed by uvicorn: the request after it fails on it)
        statuses = [r["status"] for r in doc["warmup"]["retries"]]
        assert statuses.count("HTTP 500" if url.startswith("http") else "gRPC INTERNAL") >= 2
        assert level["sent"] == level["completed"] + level["failed"] + level["timed_out"]
        assert level["failed"] >= level["sent"] // 4 - 2 and level["completed"] > 0
        failures = dict(level["failures"])
        assert sum(failures.values()) == level["failed"]
        if url.startswith("http"):
            # KServe (uvicorn) closes the connection an error answer went on, unannounced: the
            # request sent next on it may find it gone, after it was written. That one failed
            # too, on its connection; it is never sent again and counted as completed.
            dropped = [k for k in failures if k.startswith("connection: ")]
            assert all("after the request was sent" in k for k in dropped), failures
            (key,) = set(failures) - set(dropped)  # one status, its first message
            assert key.startswith("HTTP 500: ") and "injected failure of request" in key
        else:
            (key,) = failures
            assert key.startswith("gRPC INTERNAL: ")  # KServe's gRPC hides the message


def test_a_stalled_request_times_out_and_the_level_still_ends(stalling, tmp_path):
    http, _ = stalling
    doc = _run(
        f"http://127.0.0.1:{http}/v2/models/two",
        tmp_path,
        "--rate",
        "40",
        "--request-timeout",
        "0.5",
    )
    (level,) = doc["levels"]
    assert level["timed_out"] >= 1
    assert level["sent"] == level["completed"] + level["failed"] + level["timed_out"]
    # the give-ups stay in the percentiles (too few requests to show p99.9: its estimate). The
    # slowest latency is then a give-up's (0.5 s at least), and the estimate lies between the
    # two slowest of the level's n latencies, 1 - 0.001 (n - 1) of the way to the slowest
    # (numpy's linear quantile): 0.5 s itself only where two gave up. Without the give-ups
    # every latency is the server's few milliseconds.
    n = level["sent"]
    assert level["p999_ms"] is None
    assert level["rough_ms"]["p99.9"] >= 500.0 * (1.0 - 0.001 * (n - 1))
    assert level["mean_ms"] * n >= 500.0 * level["timed_out"]
    assert level["duration_s"] < 10.0


def test_grpc_channels_never_resend_a_call_out_of_sight():
    # gRPC's transparent retry would send again a call the server's library refused before its
    # code saw it, and the level would count one request where the server got two.
    from tfperf.serving.remote import grpc_wire

    assert ("grpc.enable_retries", 0) in grpc_wire._OPTIONS
