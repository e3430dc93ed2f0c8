"""A level's figures, the SLO rule and the answer, from records whose contents the test sets."""

from __future__ import annotations

import numpy as np
import pytest

from tfperf.core.serving import ServingLayout
from tfperf.core.stats import quantile_ci
from tfperf.serving import LoadLevel, pinned
from tfperf.serving.generator import LevelRecord
from tfperf.serving.levels import (
    HarnessFloor,
    drain_note,
    floor_note,
    level_of,
    queue_note,
    short_note,
    slo_answer,
)
from tfperf.serving.tail import needed


def _record(latencies_ms, *, failed=0, waited_ms=(), duration_s=1.0) -> LevelRecord:
    lat = [v / 1000.0 for v in latencies_ms]
    n = len(lat)
    return LevelRecord(
        sent=n + failed + len(waited_ms),
        completed=n,
        failed=failed,
        timed_out=len(waited_ms),
        latencies_s=lat,
        from_send_s=lat,
        answered_s=[duration_s * i / max(n, 1) for i in range(n)],
        waited_s=[v / 1000.0 for v in waited_ms],
        arrivals_s=duration_s,
        duration_s=duration_s,
        cpu_s=0.25 * duration_s,
    )


def test_a_level_reports_its_percentiles_interval_counts_and_generator_share():
    level = level_of(_record(range(1, 10001), duration_s=2.0), offered_qps=5000.0)
    assert level.scenario == "open" and level.concurrency is None
    assert level.achieved_qps == 5000.0
    assert level.p50_ms < level.p90_ms < level.p99_ms < level.p999_ms
    lo, hi = level.p99_ci_ms
    assert lo <= level.p99_ms <= hi
    for name, value in (("p50", level.p50_ms), ("p90", level.p90_ms), ("p99.9", level.p999_ms)):
        assert level.ci_ms[name][0] <= value <= level.ci_ms[name][1]
    assert level.generator_cpu == 0.25 and level.needs == {} and level.rough_ms == {}
    assert LoadLevel.from_dict(level.to_dict()) == level


def test_a_percentile_is_shown_only_where_ten_requests_lie_beyond_it():
    assert [needed(q) for q in (0.5, 0.9, 0.99, 0.999)] == [20, 100, 1000, 10000]
    level = level_of(_record(range(1, 301)), offered_qps=300.0)  # 300 put p99 on three
    assert level.p50_ms is not None and level.p90_ms is not None
    assert level.p99_ms is None and level.p999_ms is None
    assert level.needs == {"p99": 1000, "p99.9": 10000}
    assert level.rough_ms["p99"] == pytest.approx(np.quantile(range(1, 301), 0.99))
    note = short_note(level)
    assert note.startswith("offered 300/s: p99 needs 1000 requests (10 beyond it)")
    assert "had 300" in note and "3.33 s at this rate" in note
    assert not level.within(1e9)  # no SLO answer from a p99 that does not stand
    enough = level_of(_record([1.0] * 1000), offered_qps=300.0)
    assert enough.p99_ms == 1.0 and enough.within(2.0) and short_note(enough) is None
    assert enough.p999_ms is None and enough.needs == {"p99.9": 10000}
    assert LoadLevel.from_dict(level.to_dict()) == level


def test_timed_out_requests_count_in_the_percentiles_with_the_time_they_waited():
    level = level_of(_record([1.0] * 980, waited_ms=[5000.0] * 20), concurrency=4)
    assert level.sent == 1000 and level.timed_out == 20
    assert level.p99_ms == 5000.0


def test_a_timed_out_request_is_outside_the_slo_whatever_it_had_waited():
    """Two percent given up after 3 ms (a library caller's timeout below its SLO): the p99 of
    what they waited is within 10 ms, but a request given up is a failure, never within."""
    level = level_of(_record([1.0] * 980, waited_ms=[3.0] * 20), offered_qps=100.0)
    assert level.p99_ms <= 10.0 and level.failed == 0
    assert not level.within(10.0)
    assert level_of(_record([1.0] * 995, waited_ms=[3.0] * 5), offered_qps=100.0).within(10.0)


def test_the_slo_rule_needs_p99_within_and_almost_no_failures():
    ok = level_of(_record([2.0] * 2000), offered_qps=100.0)
    failing = level_of(_record([2.0] * 2000, failed=100), offered_qps=200.0)
    slow = level_of(_record([2.0] * 1900 + [50.0] * 100), offered_qps=300.0)
    assert ok.within(10.0) and not failing.within(10.0) and not slow.within(10.0)
    assert slo_answer([ok, failing, slow], 10.0) == ok.achieved_qps
    assert slo_answer([slow], 10.0) is None


def test_the_answer_is_the_achieved_rate_of_the_highest_offered_level_within_the_slo():
    low = level_of(_record([1.0] * 1000, duration_s=1.0), offered_qps=1000.0)
    high = level_of(_record([1.0] * 1000, duration_s=0.5), offered_qps=2500.0)
    again = level_of(_record([1.0] * 1000, duration_s=0.4), offered_qps=2500.0)
    assert slo_answer([high, low], 5.0) == high.achieved_qps == 2000.0
    # two passing levels of one rate: the lower achieved rate answers
    assert slo_answer([again, high, low], 5.0) == 2000.0
    # a rate the search decided against answers nothing, however one level of it went
    assert slo_answer([high, low], 5.0, failed_rates={2500.0}) == low.achieved_qps


def test_the_rate_is_taken_over_the_window_of_arrivals_and_the_straggler_is_named():
    """300 requests offered over 3 s, one of them answered 10 s after it arrived: the rate is
    that of the 3 s window, and the drain names the straggler."""
    record = _record([2.0] * 299 + [10000.0], duration_s=3.0)
    record.answered_s[-1] = 10.5
    record.duration_s, record.drain_s, record.open_at_close = 10.5, 7.5, 1
    record.straggler = (0.5, 10.0, "completed")
    level = level_of(record, offered_qps=100.0, tail=0)
    assert level.achieved_qps == pytest.approx(299 / 3.0)
    assert level.window_s == 3.0 and level.drain_s == 7.5
    assert level.straggler == {"arrived_s": 0.5, "latency_ms": 10000.0, "ended": "completed"}
    note = drain_note(level)
    assert note.startswith("offered 100/s: 1 request(s) still open when the arrivals ended")
    assert "waited 7.5 s more" in note
    assert "arrived 0.5 s into the level, answered after 10 s" in note
    assert drain_note(level_of(_record([2.0] * 300, duration_s=3.0), offered_qps=100.0)) is None
    assert LoadLevel.from_dict(level.to_dict()) == level


def test_a_level_keeps_its_harness_floor_and_notes_it_above_a_tenth_of_its_p50():
    floor = HarnessFloor(p50_ms=0.3, p99_ms=0.9, requests=80)
    slow = level_of(_record(range(1, 101)), concurrency=1, harness_floor=floor)  # p50 50.5 ms
    assert slow.to_dict()["harness_floor_ms"] == {"p50": 0.3, "p99": 0.9}
    assert slow.to_dict()["harness_floor_requests"] == 80
    assert LoadLevel.from_dict(slow.to_dict()) == slow
    assert floor_note(slow) is None
    fast = level_of(_record([1.0, 2.0, 3.0] * 10), offered_qps=200.0, harness_floor=floor)
    note = floor_note(fast)
    assert note.startswith("offered 200/s:") and "15% of this level's 2 ms" in note
    assert "tfperf's dispatch" in note and "batcher" not in note
    bare = level_of(_record([1.0, 2.0, 3.0]), offered_qps=200.0)  # a server tfperf did not start
    assert bare.to_dict()["harness_floor_ms"] is None and floor_note(bare) is None
    assert LoadLevel.from_dict(bare.to_dict()) == bare


def test_the_floor_note_of_a_batching_layout_names_the_batcher_s_delay():
    floor = HarnessFloor(p50_ms=2.1, p99_ms=None, requests=200, batch_delay_ms=2.0)
    level = level_of(_record([3.0] * 30), offered_qps=200.0, harness_floor=floor)
    note = floor_note(level)
    assert "the dynamic batcher's delay (a request waits up to 2 ms for a batch to fill)" in note
    assert LoadLevel.from_dict(level.to_dict()) == level


def test_a_wait_for_a_client_connection_is_recorded_and_noted_past_a_tenth_of_the_p50():
    record = _record([4.0] * 100)
    record.queued_s = [0.0] * 40 + [0.001] * 60  # p50 1 ms of the level's 4 ms
    level = level_of(record, offered_qps=100.0, client_queue=True)
    assert level.client_queue_ms["p50"] == pytest.approx(1.0)
    assert level.client_queue_ms["p99"] is None  # 100 requests: too few for it
    assert "waited in tfperf's client for a free connection (p50 1 ms, 25%" in queue_note(level)
    record.queued_s = [0.0] * 100
    assert queue_note(level_of(record, offered_qps=100.0, client_queue=True)) is None
    assert level_of(record, offered_qps=100.0).client_queue_ms is None  # tfperf's own harness


def test_quantile_interval_brackets_the_quantile_and_narrows_with_more_samples():
    rng = np.random.default_rng(0)
    small, large = rng.exponential(1.0, 300), rng.exponential(1.0, 30000)
    for samples in (small, large):
        lo, hi = quantile_ci(samples, 0.99)
        assert lo <= np.quantile(samples, 0.99) <= hi
    (a, b), (c, d) = quantile_ci(small, 0.99), quantile_ci(large, 0.99)
    assert d - c < b - a
    assert all(np.isnan(quantile_ci([], 0.5)))


def test_pinning_splits_the_cpus_evenly_and_wraps_when_instances_outnumber_them():
    assert pinned(ServingLayout(instances=2), [0, 1, 2, 3]).cores == ((0, 1), (2, 3))
    assert pinned(ServingLayout(instances=3), [0, 1]).cores == ((0,), (1,), (0,))
    assert pinned(ServingLayout(), [0, 1]).cores == ((0, 1),)
