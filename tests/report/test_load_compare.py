"""The regression rule for the highest rate within the SLO, on levels written out by hand (the
rule itself; the end-to-end comparisons of real runs are in tests/serving/remote)."""

from __future__ import annotations

from tfperf.report.load_compare import line_up, verdict


def _open(rate: float, p99: float, ci: tuple[float, float], failed: int = 0) -> dict:
    return {
        "scenario": "open",
        "offered_qps": rate,
        "achieved_qps": rate,
        "p99_ms": p99,
        "p99_ci_ms": list(ci),
        "sent": 300,
        "failed": failed,
    }


def _section(levels: list[dict], answer: float | None, slo: float = 20.0) -> dict:
    return {"layout_label": "s", "levels": levels, "slo_ms": slo, "max_qps_at_slo": answer}


A = _section([_open(500, 10, (9, 11)), _open(1000, 15, (14, 16)), _open(1500, 40, (35, 45))], 1000)


def test_a_lower_rate_with_a_level_missing_the_slo_below_a_s_rate_is_slower():
    b = _section([_open(500, 12, (11, 13)), _open(800, 25, (22, 28))], 500)
    assert verdict(A, b, 0.05) == ("slower", None)


def test_a_lower_rate_whose_levels_all_met_the_slo_is_inconclusive():
    b = _section([_open(500, 10, (9, 11))], 500)
    said, warning = verdict(A, b, 0.05)
    assert said == "inconclusive" and "none of its levels" in warning


def test_p99_interval_above_the_baseline_s_counts_as_shown():
    b = _section([_open(500, 18, (17, 19)), _open(900, 19, (18, 19.5))], 500)
    assert verdict(A, b, 0.05)[0] == "slower"


def test_within_the_threshold_or_at_the_same_offered_rate_is_the_same():
    noisy = _section(
        [_open(500, 10, (9, 11)), {**_open(1000, 15, (14, 16)), "achieved_qps": 900}], 900
    )
    assert verdict(A, noisy, 0.05)[0] == "same"
    assert verdict(A, _section(A["levels"], 980), 0.05)[0] == "same"


def test_faster_none_and_different_slos():
    assert verdict(A, _section([_open(1500, 15, (14, 16))], 1500), 0.05)[0] == "faster"
    assert verdict(A, _section([_open(500, 30, (28, 32))], None), 0.05)[0] == "slower"
    said, warning = verdict(A, _section(A["levels"], 1000, slo=30.0), 0.05)
    assert said == "inconclusive" and "SLOs differ" in warning


def test_levels_line_up_by_concurrency_and_by_rate_within_five_percent():
    a = [{"scenario": "closed", "concurrency": 4}, _open(100, 1, (1, 1)), _open(200, 1, (1, 1))]
    b = [_open(104, 1, (1, 1)), {"scenario": "closed", "concurrency": 4}, _open(300, 1, (1, 1))]
    rows = line_up(a, b)
    assert [(r["load"], r["a"] is not None, r["b"] is not None) for r in rows] == [
        ("c=4", True, True),
        ("100/s", True, True),
        ("200/s", True, False),
        ("300/s", False, True),
    ]


def test_a_level_whose_p99_does_not_stand_is_evidence_of_nothing_and_timeouts_fail():
    """B's only level below A's rate has too few requests for its p99 to stand (``null``):
    it shows nothing, so a lower rate stays inconclusive; a level whose requests timed out
    beyond 1% missed the SLO as a failing one does."""
    short = {**_open(500, 30, (28, 32)), "p99_ms": None, "rough_ms": {"p99": 30.0}}
    said, _ = verdict(A, _section([short], 500), 0.05)
    assert said == "inconclusive"
    late = {**_open(500, 12, (11, 13)), "timed_out": 6}  # 2% of 300 given up
    assert verdict(A, _section([late], 500), 0.05)[0] == "slower"
