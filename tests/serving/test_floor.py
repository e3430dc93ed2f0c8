"""The floor's level and the breakdown of traced requests, from stamps the test sets (the floor
measured on real instances is in ``test_load.py``)."""

from __future__ import annotations

import pytest

from tfperf.serving.floor import FLOOR_MAX_S, FLOOR_REQUESTS, breakdown, floor_load
from tfperf.serving.generator import ClosedLoop, OpenLoop
from tfperf.serving.tail import LevelLength

LEVEL = LevelLength(300, 3.0, 30.0, precision=0.1, tail=10)


def test_the_floor_offers_the_same_load_in_a_short_level():
    opened = floor_load(OpenLoop(250.0, LEVEL, seed=4))
    assert (opened.rate, opened.seed, opened.length.min_requests) == (250.0, 4, FLOOR_REQUESTS)
    assert opened.length.max_s == FLOOR_MAX_S and not opened.length.extends
    assert opened.schedule().tolist() == OpenLoop(250.0, LEVEL, seed=4).schedule()[
        : len(opened.schedule())].tolist()  # the level's own first arrivals
    closed = floor_load(ClosedLoop(8, LEVEL))
    assert (closed.concurrency, closed.length.max_s) == (8, FLOOR_MAX_S)


def _trace(at: float, call_ms: float) -> dict:
    ms = 1e-3
    return {"submit": at, "received": at + 1 * ms, "taken": at + 3 * ms,
            "call": [at + 3 * ms, at + (3 + call_ms) * ms], "woke": at + (4 + call_ms) * ms,
            "read": at + (4.5 + call_ms) * ms}


def test_traced_requests_are_split_into_their_stages():
    traced = {i: _trace(10.0 + i, call_ms=2.0) for i in range(5)}
    traced[5] = {"submit": 20.0}  # sent, never answered: left out
    stages = breakdown(traced)
    expected = {"to worker": 1.0, "to executor": 2.0, "model call": 2.0, "answer": 1.0,
                "read": 0.5, "total": 6.5}
    for name, ms in expected.items():
        assert stages[name] == pytest.approx((ms, ms), abs=1e-6)
    assert breakdown({}) == {}
