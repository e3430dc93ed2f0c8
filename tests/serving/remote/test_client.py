"""The client's connections and the server's own time, against scripted servers on loopback
(``scripted.py``): every connection is opened and warmed before the first level, reconnects
are counted per level, a wait for a free connection is recorded, the capacity probe is never
capped by the client, a server that keeps the statistics extension as Triton does has its
queue and compute time read beside the client's latency, and a wait cut short leaves nothing
running on the client's loop."""

from __future__ import annotations

import json

import pytest

from helpers import run_cli
from serving.remote.scripted import STATS_NS, Script, scripted, scripted_grpc

pytestmark = pytest.mark.slow


def _bench(url: str, tmp_path, *args: str) -> dict:
    res = run_cli("bench", "--url", url, *args, "--json", "--store", str(tmp_path / "s.sqlite"),
                  timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    for level in doc["levels"]:
        assert level["sent"] == level["completed"] + level["failed"] + level["timed_out"]
    return doc


def test_every_connection_is_warmed_before_the_first_level_which_makes_none(tmp_path):
    """16 requests at once from the first moment: each finds a connection opened and warmed
    before the clock (one request each, not counted), so the level makes no connection."""
    script = Script()
    with scripted(script) as port:
        doc = _bench(f"http://127.0.0.1:{port}/v2/models/m", tmp_path, "--concurrency", "16",
                     "--level-requests", "200", "--level-seconds", "0.1")
    (level,), warmup = doc["levels"], doc["warmup"]
    assert warmup["connections"] == 16 and warmup["retries"] == []
    # one request each; a connection left idle over REWARM_IDLE_S before the level (the first
    # one, warmed before the other 15, on a busy machine) is warmed once more
    assert 16 <= warmup["requests"] <= 32
    # the warm-up is not in the level
    assert script.done["posts"] == warmup["requests"] + level["sent"]
    assert level["reconnects"] == 0  # every connection was open before the clock


def test_a_connection_the_server_closed_while_it_idled_is_counted_as_a_reconnect(tmp_path):
    """The server closes a connection idle for 0.15 s (uvicorn: 5 s). At 3 requests a second
    most gaps are longer, so requests find their connection gone and make it again: each such
    handshake is in that request's latency, and the level counts them. At 20 a second a gap
    that long is rare, and the client sends on the connection that came free last, so one
    connection stays warm (sent round the 16 in turn, each would idle 0.8 s and be closed:
    every request would reconnect). Not none: two requests that overlap take two connections,
    and the one below on the stack idles until the next overlap (8-9 reconnects in 41
    requests here, 11 on a CI machine busy with other tests), so the bound is half."""
    script = Script(keepalive_s=0.15)
    with scripted(script) as port:
        doc = _bench(f"http://127.0.0.1:{port}/v2/models/m", tmp_path, "--rate", "20,3",
                     "--level-requests", "8", "--level-seconds", "0.6")
    busy, idle = doc["levels"]
    for level in (busy, idle):
        # a request written just as the server closed its connection fails, never sent twice
        # (the server may have read it): that race, counted as a failure, and nothing else
        assert level["failed"] <= 1, level["failures"]
        assert all("after the request was sent" in why for why in level["failures"]), level
    assert busy["sent"] >= 30 and busy["reconnects"] <= busy["sent"] / 2
    assert 1 <= idle["reconnects"] <= idle["sent"] + idle["retried"]


def test_a_wait_for_a_free_connection_is_recorded_and_the_default_pool_leaves_none(tmp_path):
    script = Script(answer=lambda n: "stall", stall_s=0.004)
    url_args = ("--concurrency", "4", "--level-requests", "120", "--level-seconds", "0.2")
    with scripted(script) as port:
        url = f"http://127.0.0.1:{port}/v2/models/m"
        fixed = _bench(url, tmp_path, *url_args, "--connections", "1")
        grown = _bench(url, tmp_path, *url_args)
    (one,), (pool,) = fixed["levels"], grown["levels"]
    # one connection for four requests at a time: three wait for it, about 3 service times
    assert one["client_queue_ms"]["p50"] > 4.0
    assert any("waited in tfperf's client for a free connection" in n for n in fixed["notes"])
    assert fixed["warmup"]["connections"] == 1
    assert pool["client_queue_ms"]["p50"] < 1.0 and pool["reconnects"] == 0
    assert not any("free connection" in n for n in grown["notes"])


def test_the_capacity_probe_is_not_capped_by_the_client_s_connections(tmp_path):
    """A server that serves four requests at a time, 20 ms each (200/s at most), measured with
    two connections: the probe doubles its concurrency (the connections it needs with it)
    until the rate stops rising, so the capacity is the server's, not two connections'."""
    script = Script(answer=lambda n: "stall", stall_s=0.02, at_once=4)
    with scripted(script) as port:
        doc = _bench(f"http://127.0.0.1:{port}/v2/models/m", tmp_path, "--slo-ms", "1000",
                     "--connections", "2", "--level-requests", "20", "--level-seconds", "0.15",
                     "--request-timeout", "5")
    probes = [lv for lv in doc["levels"] if lv["scenario"] == "closed"]
    assert [lv["concurrency"] for lv in probes][:3] == [2, 4, 8]
    two = probes[0]["achieved_qps"]
    capacity = doc["layouts"][0]["capacity_qps"]
    assert capacity > 1.5 * two  # two connections alone: about 100/s


@pytest.mark.parametrize("protocol", ["v2-rest", "v2-grpc"])
def test_the_server_s_own_queue_and_compute_time_is_read_around_each_level(protocol, tmp_path):
    """The scripted server keeps Triton's statistics (each request: 2 ms queued, 3.3 ms of
    compute): read before and after each level, they give that time per request beside the
    client's latency, over the level's requests alone (the warm-up's left out)."""
    script = Script(stats=True)
    serve = scripted if protocol == "v2-rest" else scripted_grpc
    with serve(script) as port:
        url = (f"http://127.0.0.1:{port}/v2/models/m" if protocol == "v2-rest"
               else f"grpc://127.0.0.1:{port}")
        doc = _bench(url, tmp_path, "--model-name", "m", "--concurrency", "2,1",
                     "--level-requests", "40", "--level-seconds", "0.1")
    for level in doc["levels"]:
        server = level["server_ms"]
        assert server["requests"] == level["completed"]
        assert server["queue_ms"] == pytest.approx(STATS_NS["queue"] / 1e6)
        assert server["compute_ms"] == pytest.approx(3.3)
        assert server["compute_infer_ms"] == pytest.approx(3.0)
    assert not any("no time of its own" in note for note in doc["notes"])


def test_a_server_without_statistics_is_said_to_give_none(tmp_path):
    with scripted(Script()) as port:
        doc = _bench(f"http://127.0.0.1:{port}/v2/models/m", tmp_path, "--concurrency", "1",
                     "--level-requests", "20", "--level-seconds", "0.1")
    assert doc["levels"][0]["server_ms"] is None
    (said,) = [n for n in doc["notes"] if "no time of its own" in n]
    assert "GET /v2/models/m/stats answered HTTP 404" in said


def test_connections_an_earlier_level_left_idle_are_warmed_again_before_the_next(tmp_path):
    """The server closes a connection idle for 1.5 s. One request at a time for 2.5 s uses one
    connection and leaves the other seven idle past it since their warm-up: before the level
    of eight at once they are made again outside the clock, so that level makes none."""
    script = Script(keepalive_s=1.5)
    with scripted(script) as port:
        doc = _bench(f"http://127.0.0.1:{port}/v2/models/m", tmp_path, "--concurrency", "1,8",
                     "--connections", "8", "--level-requests", "20", "--level-seconds", "2.5")
    one, eight = doc["levels"]
    assert one["duration_s"] >= 2.5 and eight["reconnects"] == 0, eight
    # the warm-up: one request on each of the eight, then the seven idle ones again
    assert doc["warmup"]["requests"] >= 8 + 7 and doc["warmup"]["retries"] == []


def test_a_wait_cut_short_cancels_what_it_waited_for_on_the_client_s_loop():
    """A level's preparation cut short (its timeout here; Ctrl-C takes the same path) leaves
    nothing running on the client's loop: a warm-up left running sent on the connections the
    close then closed, and its error was printed after the run's last sentence."""
    import asyncio
    import concurrent.futures
    import time

    from tfperf.serving.remote.client import RemoteServer

    cancelled = []

    async def a_long_warm_up() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    server = RemoteServer(wire=None, body=None, pool=1, call_timeout_s=1.0)  # type: ignore
    server._thread.start()
    try:
        with pytest.raises(concurrent.futures.TimeoutError):
            server._run(a_long_warm_up(), 0.2)
        deadline = time.monotonic() + 5
        while not cancelled and time.monotonic() < deadline:
            time.sleep(0.01)
        assert cancelled == [True]
    finally:
        server.close()


def test_a_call_that_runs_on_past_its_cancellation_ends_before_the_close_returns():
    """A Ctrl-C during a level's warm-up: the close waits for what still runs on the client's
    loop before it closes the connections, even a call that goes on after its cancellation
    (a warm-up was seen sending on a connection closed under it, its error printed after the
    run's last sentence)."""
    import asyncio
    import concurrent.futures
    import contextlib

    from tfperf.serving.remote.client import RemoteServer

    ended = []

    async def a_warm_up_that_goes_on() -> None:
        with contextlib.suppress(asyncio.CancelledError):  # the cancellation lost on the way
            await asyncio.sleep(30)
        try:
            await asyncio.sleep(0.3)  # the next connection's request
        finally:
            ended.append(True)  # run to its end, or cancelled again: not left pending

    server = RemoteServer(wire=None, body=None, pool=1, call_timeout_s=1.0)  # type: ignore
    server._thread.start()
    try:
        with pytest.raises(concurrent.futures.TimeoutError):
            server._run(a_warm_up_that_goes_on(), 0.2)
    finally:
        server.close()
    assert ended == [True]
    assert not server._runs
