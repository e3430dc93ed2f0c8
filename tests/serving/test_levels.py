"""A level's figures, the SLO rule and the answer, from records whose contents the test sets."""

from __future__ import annotations

import numpy as np

from tfperf.core.serving import ServingLayout
from tfperf.core.stats import quantile_ci
from tfperf.serving import LoadLevel, pinned
from tfperf.serving.generator import LevelRecord
from tfperf.serving.levels import HarnessFloor, floor_note, level_of, slo_answer


def _record(latencies_ms, *, failed=0, waited_ms=(), duration_s=1.0) -> LevelRecord:
    lat = [v / 1000.0 for v in latencies_ms]
    return LevelRecord(
        sent=len(lat) + failed + len(waited_ms),
        completed=len(lat),
        failed=failed,
        timed_out=len(waited_ms),
        latencies_s=lat,
        from_send_s=lat,
        waited_s=[v / 1000.0 for v in waited_ms],
        arrivals_s=duration_s,
        duration_s=duration_s,
        cpu_s=0.25 * duration_s,
    )


def test_a_level_reports_its_percentiles_interval_counts_and_generator_share():
    level = level_of(_record(range(1, 1001), duration_s=2.0), offered_qps=500.0)
    assert level.scenario == "open" and level.concurrency is None
    assert level.achieved_qps == 500.0
    assert level.p50_ms < level.p90_ms < level.p99_ms < level.p999_ms
    lo, hi = level.p99_ci_ms
    assert lo <= level.p99_ms <= hi
    for name, value in (("p50", level.p50_ms), ("p90", level.p90_ms), ("p99.9", level.p999_ms)):
        assert level.ci_ms[name][0] <= value <= level.ci_ms[name][1]
    assert level.generator_cpu == 0.25
    assert LoadLevel.from_dict(level.to_dict()) == level


def test_timed_out_requests_count_in_the_percentiles_with_the_time_they_waited():
    level = level_of(_record([1.0] * 95, waited_ms=[5000.0] * 5), concurrency=4)
    assert level.sent == 100 and level.timed_out == 5
    assert level.p99_ms == 5000.0


def test_the_slo_rule_needs_p99_within_and_almost_no_failures():
    ok = level_of(_record([2.0] * 200), offered_qps=100.0)
    failing = level_of(_record([2.0] * 200, failed=10), offered_qps=200.0)
    slow = level_of(_record([2.0] * 190 + [50.0] * 10), offered_qps=300.0)
    assert ok.within(10.0) and not failing.within(10.0) and not slow.within(10.0)
    assert slo_answer([ok, failing, slow], 10.0) == ok.achieved_qps
    assert slo_answer([slow], 10.0) is None


def test_the_answer_is_the_achieved_rate_of_the_highest_offered_level_within_the_slo():
    low = level_of(_record([1.0] * 100, duration_s=1.0), offered_qps=100.0)
    high = level_of(_record([1.0] * 100, duration_s=0.5), offered_qps=250.0)
    assert slo_answer([high, low], 5.0) == high.achieved_qps == 200.0


def test_a_level_keeps_its_harness_floor_and_notes_it_above_a_tenth_of_its_p50():
    floor = HarnessFloor(p50_ms=0.3, p99_ms=0.9, requests=80)
    slow = level_of(_record(range(1, 101)), concurrency=1, harness_floor=floor)  # p50 50.5 ms
    assert slow.to_dict()["harness_floor_ms"] == {"p50": 0.3, "p99": 0.9}
    assert slow.to_dict()["harness_floor_requests"] == 80
    assert LoadLevel.from_dict(slow.to_dict()) == slow
    assert floor_note(slow) is None
    fast = level_of(_record([1.0, 2.0, 3.0]), offered_qps=200.0, harness_floor=floor)
    note = floor_note(fast)
    assert note.startswith("offered 200/s:") and "15% of this level's 2 ms" in note
    bare = level_of(_record([1.0, 2.0, 3.0]), offered_qps=200.0)  # a server tfperf did not start
    assert bare.to_dict()["harness_floor_ms"] is None and floor_note(bare) is None
    assert LoadLevel.from_dict(bare.to_dict()) == bare


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
