"""This machine's wake-up latency, measured for real with two threads and two pipes."""

from __future__ import annotations

import os

from tfperf.machine.wakeup import wakeup_latency


def test_wake_ups_are_timed_on_two_cpus_and_the_budget_bounds_how_many():
    # a 2 ms gap before each wake-up and 30 ms in all leave room for 15 of the 1000 asked
    wakeup = wakeup_latency(rounds=1000, gap_s=0.002, budget_s=0.03)
    assert wakeup is not None
    assert 1 <= wakeup.samples <= 15
    assert 0 < wakeup.p50_ms <= wakeup.p99_ms
    assert wakeup.cross_cpu == (len(os.sched_getaffinity(0)) > 1)
    assert set(wakeup.to_dict()) == {"p50_ms", "p99_ms", "samples", "cross_cpu"}


def test_the_rounds_asked_are_all_taken_within_a_budget_that_holds_them():
    wakeup = wakeup_latency(rounds=5, gap_s=0.001, budget_s=5.0)
    assert wakeup is not None and wakeup.samples == 5
