"""tfperf.core.stats on samples from seeded random generators with known truths."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tfperf.core import stats


def lognormal(rng: np.random.Generator, median_s: float, sigma: float, n: int) -> np.ndarray:
    return rng.lognormal(math.log(median_s), sigma, n)


def test_summarize_figures_and_units() -> None:
    rng = np.random.default_rng(1)
    samples = lognormal(rng, 0.004, 0.05, 200)
    s = stats.summarize(samples, batch=8)
    lat = s["latency_ms"]
    assert s["n"] == 200
    assert lat["p50"] == pytest.approx(np.median(samples) * 1e3)
    assert lat["p90"] == pytest.approx(np.percentile(samples, 90) * 1e3)
    assert lat["p50"] <= lat["p90"] <= lat["p99"]
    low, high = lat["p50_ci95"]
    assert low < lat["p50"] < high
    assert s["throughput_per_s"] == pytest.approx(8 / np.median(samples))
    assert s["cv"] == pytest.approx(np.std(samples, ddof=1) / np.mean(samples), rel=1e-9)
    assert s["warnings"] == []


def test_median_ci_ranks_match_binomial_tables() -> None:
    # Classic table values (1-based ranks): n=10 -> x(2)..x(9); n=20 -> x(6)..x(15).
    assert stats.order_stat_ranks(10) == (1, 8)
    assert stats.order_stat_ranks(20) == (5, 14)
    assert stats.order_stat_ranks(6) == (0, 5)
    assert stats.order_stat_ranks(5) is None


def test_median_ci_covers_true_median_at_least_95_percent() -> None:
    rng = np.random.default_rng(2)
    true_median = 0.01  # lognormal's median is exp(mu)
    hits = 0
    trials = 600
    for _ in range(trials):
        low, high = stats.median_ci(lognormal(rng, true_median, 0.4, 25))
        hits += low <= true_median <= high
    assert hits / trials >= 0.93


def test_summarize_warns_on_too_few_and_empty() -> None:
    s = stats.summarize([0.01, 0.011, 0.012])
    assert s["n"] == 3
    assert any("only 3 samples" in w for w in s["warnings"])
    assert s["latency_ms"]["p50_ci95"] == pytest.approx([10.0, 12.0])
    empty = stats.summarize([])
    assert empty["n"] == 0 and empty["latency_ms"]["p50"] is None and empty["warnings"]


def test_summarize_warns_on_drift_but_not_on_stationary_noise() -> None:
    rng = np.random.default_rng(3)
    steady = lognormal(rng, 0.002, 0.03, 90)
    drifting = steady * np.linspace(1.0, 1.3, 90)
    assert not any("drift" in w for w in stats.summarize(steady)["warnings"])
    assert any("drift" in w for w in stats.summarize(drifting)["warnings"])


def test_summarize_warns_on_wide_spread() -> None:
    rng = np.random.default_rng(4)
    wide = lognormal(rng, 0.002, 0.6, 60)
    assert any("wide spread" in w for w in stats.summarize(wide)["warnings"])


def test_rel_ci_halfwidth_shrinks_with_more_samples() -> None:
    rng = np.random.default_rng(5)
    assert stats.rel_ci_halfwidth([0.1] * 5) == math.inf
    small = stats.rel_ci_halfwidth(lognormal(rng, 0.002, 0.1, 20))
    large = stats.rel_ci_halfwidth(lognormal(rng, 0.002, 0.1, 2000))
    assert 0 < large < small
    low, high = stats.median_ci(np.array([1.0, 2, 3, 4, 5, 6, 7, 8, 9, 10]))
    assert stats.rel_ci_halfwidth([1.0, 2, 3, 4, 5, 6, 7, 8, 9, 10]) == pytest.approx(
        (high - low) / 2 / 5.5
    )


def paired(rng: np.random.Generator, n: int, speedup: float, pair_noise: float):
    """Baseline rounds drift by +-20% across the run; the candidate follows the same drift."""
    drift = np.linspace(1.0, 1.2, n) * lognormal(rng, 1.0, 0.05, n)
    base = 0.003 * drift * lognormal(rng, 1.0, pair_noise, n)
    cand = 0.003 / speedup * drift * lognormal(rng, 1.0, pair_noise, n)
    return base, cand


def test_paired_speedup_detects_faster_and_slower_despite_drift() -> None:
    rng = np.random.default_rng(6)
    base, cand = paired(rng, 30, 1.25, 0.02)
    r = stats.paired_speedup(base, cand)
    assert r["verdict"] == "faster"
    assert r["ci95"][0] <= 1.25 <= r["ci95"][1]
    assert r["p_value"] < 0.05 and r["n_pairs"] == 30
    slower = stats.paired_speedup(cand, base)
    assert slower["verdict"] == "slower"
    assert slower["median"] == pytest.approx(1 / r["median"], rel=0.02)


@pytest.mark.parametrize(("n", "truth"), [(7, 1.25), (8, 1.0), (13, 0.8)])
def test_inverse_reads_the_same_pairs_the_other_way(n: int, truth: float) -> None:
    rng = np.random.default_rng(n)
    base, cand = paired(rng, n, truth, 0.02)
    forward, backward = stats.paired_speedup(base, cand), stats.paired_speedup(cand, base)
    read = stats.inverse(forward)
    assert read["verdict"] == backward["verdict"]
    assert read["ci95"] == pytest.approx(backward["ci95"], rel=1e-9)
    assert read["p_value"] == pytest.approx(backward["p_value"])
    # the median of an even number of ratios is a mean of the middle two: close, not equal
    assert read["median"] == pytest.approx(backward["median"], rel=1e-9 if n % 2 else 0.02)


def test_paired_speedup_same_and_inconclusive() -> None:
    rng = np.random.default_rng(7)
    base, cand = paired(rng, 40, 1.0, 0.005)
    same = stats.paired_speedup(base, cand)
    assert same["verdict"] == "same"
    assert 1 / 1.03 <= same["ci95"][0] <= same["ci95"][1] <= 1.03
    noisy_b, noisy_c = paired(rng, 8, 1.0, 0.3)
    noisy = stats.paired_speedup(noisy_b, noisy_c)
    assert noisy["verdict"] == "inconclusive"
    assert any("wider than" in w for w in noisy["warnings"])


def test_paired_speedup_small_effect_within_threshold_is_not_faster() -> None:
    rng = np.random.default_rng(8)
    base, cand = paired(rng, 60, 1.01, 0.002)
    r = stats.paired_speedup(base, cand, threshold=0.03)
    assert r["p_value"] < 0.05
    assert r["verdict"] == "same"
    assert stats.paired_speedup(base, cand, threshold=0.001)["verdict"] == "faster"


def test_a_wide_interval_far_from_every_boundary_asks_for_no_more_rounds() -> None:
    # a 60x speedup measured to 50..70: more rounds cannot change "faster"
    rng = np.random.default_rng(9)
    base, cand = paired(rng, 12, 60.0, 0.15)
    r = stats.paired_speedup(base, cand)
    low, high = r["ci95"]
    assert r["verdict"] == "faster" and (high - low) / 2 / r["median"] > 0.03
    assert not any("wider than" in w for w in r["warnings"]), r["warnings"]
    slower = stats.paired_speedup(cand, base)
    assert slower["verdict"] == "slower"
    assert not any("wider than" in w for w in slower["warnings"]), slower["warnings"]


@pytest.mark.parametrize("speedup", [1.03, 1 / 1.03])
def test_a_wide_interval_across_a_boundary_asks_for_more_rounds(speedup: float) -> None:
    rng = np.random.default_rng(10)
    base, cand = paired(rng, 12, speedup, 0.15)
    r = stats.paired_speedup(base, cand)
    low, high = r["ci95"]
    assert low < speedup < high
    assert r["verdict"] == "inconclusive"
    assert any(
        w == f"the speedup's 95% interval ({low:.3f}..{high:.3f}) is wider than the 3% "
        "threshold; run more rounds"
        for w in r["warnings"]
    ), r["warnings"]


def test_paired_speedup_too_few_pairs_never_significant() -> None:
    r = stats.paired_speedup([2.0] * 5, [1.0] * 5)
    assert r["median"] == pytest.approx(2.0)
    assert r["verdict"] == "inconclusive"
    assert any("only 5 pairs" in w for w in r["warnings"])


def test_paired_speedup_mismatched_and_invalid_input() -> None:
    r = stats.paired_speedup([1.0, 1.0, 0.0, 1.0], [0.5, 0.5, 0.5])
    assert r["n_pairs"] == 2
    assert any("only the first 3 pairs" in w for w in r["warnings"])
    assert any("dropped" in w for w in r["warnings"])
    empty = stats.paired_speedup([], [])
    assert empty["median"] is None and empty["verdict"] == "inconclusive"
    with pytest.raises(ValueError):
        stats.paired_speedup([1.0], [1.0], threshold=-1)


def test_identical_pairs_are_same() -> None:
    r = stats.paired_speedup([0.01] * 10, [0.01] * 10)
    assert r["p_value"] == 1.0 and r["verdict"] == "same"


def test_detect_warmup_finds_the_slow_start() -> None:
    rng = np.random.default_rng(9)
    steady = lognormal(rng, 0.002, 0.02, 60)
    warm = np.array([0.5, 0.05, 0.02, 0.01, 0.006])
    assert stats.detect_warmup(np.concatenate([warm, steady])) == 5
    assert stats.detect_warmup(steady) == 0
    # A lone fast sample inside the warm-up does not end it.
    assert stats.detect_warmup(np.concatenate([[0.05, 0.002, 0.04, 0.03], steady])) == 4
    # A lone slow sample after the warm-up does not extend it.
    later = steady.copy()
    later[10] = 0.05
    assert stats.detect_warmup(np.concatenate([warm, later])) == 5
    assert stats.detect_warmup([0.3, 0.2]) == 0


def test_detect_warmup_is_capped_at_half() -> None:
    decreasing = np.geomspace(1.0, 0.001, 40)
    assert 0 <= stats.detect_warmup(decreasing) <= 20


def test_verdict_rarely_claims_a_difference_that_is_not_there() -> None:
    # 400 null experiments on a drifting machine with 5% noise per block: a significant
    # "faster"/"slower" must stay rarer than the 5% level the test promises.
    rng = np.random.default_rng(10)
    wrong = sum(
        stats.paired_speedup(*paired(rng, 15, 1.0, 0.05))["verdict"] in ("faster", "slower")
        for _ in range(400)
    )
    assert wrong / 400 <= 0.05


def test_verdict_finds_a_real_ten_percent_speedup() -> None:
    rng = np.random.default_rng(11)
    found = sum(
        stats.paired_speedup(*paired(rng, 12, 1.10, 0.02))["verdict"] == "faster"
        for _ in range(200)
    )
    assert found / 200 >= 0.95


@pytest.mark.parametrize(
    ("median", "low", "high", "p", "n", "expected"),
    [
        (1.10, 1.05, 1.15, 0.001, 12, "faster"),
        (1.02, 1.01, 1.03, 0.001, 12, "same"),  # significant, but under the 3% threshold
        (0.90, 0.85, 0.95, 0.001, 12, "slower"),
        (1.10, 0.95, 1.25, 0.200, 12, "inconclusive"),  # large but not significant
        (1.10, 1.05, 1.15, 0.001, 5, "inconclusive"),  # too few pairs for any verdict
        (1.00, 0.98, 1.02, 0.900, 12, "same"),
        (1.00, 0.95, 1.05, 0.900, 12, "inconclusive"),  # interval reaches past the threshold
    ],
)
def test_public_verdict_rule(median, low, high, p, n, expected) -> None:
    assert stats.verdict(median, low, high, p, n, 0.03) == expected


def test_paired_speedup_uses_the_public_verdict_rule() -> None:
    rng = np.random.default_rng(12)
    res = stats.paired_speedup(*paired(rng, 12, 1.10, 0.02))
    low, high = res["ci95"]
    expected = stats.verdict(res["median"], low, high, res["p_value"], res["n_pairs"], 0.03)
    assert res["verdict"] == expected == "faster"


def across_processes(rng, speedups, n=40, noise=0.01):
    """Pairs from one worker process per entry of ``speedups`` (that process's true ratio),
    with the process of each pair."""
    base, cand, procs = [], [], []
    for k, s in enumerate(speedups):
        b = 1.0 + noise * rng.standard_normal(n)
        base += list(b)
        cand += list(b / s * (1.0 + noise * rng.standard_normal(n)))
        procs += [k] * n
    return base, cand, procs


def test_a_process_effect_widens_the_interval_to_span_the_processes() -> None:
    rng = np.random.default_rng(20)
    base, cand, procs = across_processes(rng, [0.64, 0.78, 0.70])
    pooled = stats.paired_speedup(base, cand)
    res = stats.paired_speedup(base, cand, processes=procs)
    effect = res["processes"]
    assert effect["n"] == 3 and effect["effect"] and effect["p_value"] < 0.001
    assert effect["speedups"] == pytest.approx([0.64, 0.78, 0.70], rel=0.01)
    low, high = res["ci95"]
    assert low < 0.64 and high > 0.78  # spans every process
    assert not (pooled["ci95"][0] < 0.64 and pooled["ci95"][1] > 0.78)  # one sample cannot
    assert res["median"] == pytest.approx(math.exp(np.mean(np.log([0.64, 0.78, 0.70]))), 0.01)
    assert res["verdict"] == "slower"
    assert any("differs between the 3 worker processes" in w for w in res["warnings"])
    assert not any("drifted" in w for w in res["warnings"])


def test_processes_that_agree_change_nothing_but_are_reported() -> None:
    rng = np.random.default_rng(21)
    base, cand, procs = across_processes(rng, [0.70, 0.70, 0.70])
    pooled = stats.paired_speedup(base, cand)
    res = stats.paired_speedup(base, cand, processes=procs)
    assert not res["processes"]["effect"]
    assert (res["median"], res["ci95"], res["verdict"]) == (
        pooled["median"],
        pooled["ci95"],
        pooled["verdict"],
    )
    one = stats.paired_speedup(base, cand, processes=[0] * len(base))
    assert "processes" not in one  # one process: nothing to compare


def test_across_processes_the_interval_covers_the_mean_speedup() -> None:
    # 300 runs of 3 processes each, the process effect drawn with a 5% spread around 1.0:
    # the pooled interval of one run rarely covers 1.0, the across-process one does about
    # 95% of the time, and a wrong faster/slower verdict stays rare.
    rng = np.random.default_rng(22)
    pooled_cover = cover = wrong = 0
    runs = 300
    for _ in range(runs):
        base, cand, procs = across_processes(rng, np.exp(0.05 * rng.standard_normal(3)))
        low, high = stats.paired_speedup(base, cand)["ci95"]
        pooled_cover += low <= 1.0 <= high
        res = stats.paired_speedup(base, cand, processes=procs)
        cover += res["ci95"][0] <= 1.0 <= res["ci95"][1]
        wrong += res["verdict"] in ("faster", "slower")
    assert pooled_cover / runs < 0.5
    assert cover / runs >= 0.90
    assert wrong / runs <= 0.08


def test_a_verdict_never_contradicts_its_interval():
    # The signed-rank test weighs the sizes of the ratios (p = 0.025 here), the sign-test
    # interval only their order (it reaches 0.98): "faster" with an interval reaching below 1
    # was reported before; it is inconclusive, and the warning asks for more rounds.
    ratios = np.array([1.3, 1.3, 1.25, 1.2, 1.2, 1.15, 1.1, 0.99, 0.98, 0.97])
    result = stats.paired_speedup(ratios, np.ones_like(ratios))
    assert result["p_value"] < 0.05 and result["median"] > 1.03
    assert result["ci95"][0] < 1.0
    assert result["verdict"] == "inconclusive"
    assert any("run more rounds" in w for w in result["warnings"])
    slower = stats.paired_speedup(1.0 / ratios, np.ones_like(ratios))
    assert slower["ci95"][1] > 1.0 and slower["verdict"] == "inconclusive"
    assert stats.verdict(1.2, 1.05, 1.3, 0.01, 10, 0.03) == "faster"
    assert stats.verdict(1.2, 0.99, 1.3, 0.01, 10, 0.03) == "inconclusive"
