"""Statistics that turn raw timing samples into numbers that hold on a noisy machine.

Every function here is pure (no I/O, no TensorFlow) and distribution-free: timings are skewed
and heavy-tailed, so medians and order statistics are used, never means and normal intervals.

Contracts
---------

:func:`summarize` (one trial's steady-state samples, in seconds) returns::

    {"n": int,
     "latency_ms": {"p50", "p90", "p99", "mean", "p50_ci95": [low, high]},
     "throughput_per_s": float,   # batch / median latency
     "cv": float,                 # standard deviation / mean
     "warnings": [str, ...]}

``p50_ci95`` is the distribution-free interval for the median from order statistics
(:func:`median_ci`): it covers the true median with probability >= 95% whatever the
distribution. Quantiles use linear interpolation (numpy's default). Empty input gives ``None``
figures and a warning, never an exception.

:func:`paired_speedup` compares two configurations measured in alternation. Its inputs are the
per-round block medians in seconds, paired by index (round ``i`` of the baseline ran next to
round ``i`` of the candidate). ``speedup_i = baseline_i / candidate_i`` (> 1: the candidate is
faster). It returns::

    {"median": float,             # median of the pair ratios
     "ci95": [low, high],         # order-statistic (sign-test) interval for that median
     "p_value": float,            # two-sided Wilcoxon signed-rank test on log(speedup_i)
     "n_pairs": int, "threshold": float,
     "verdict": "faster" | "slower" | "same" | "inconclusive",
     "warnings": [str, ...]}

The verdict rule, with threshold ``t`` (default 0.03 = 3%):

- ``"faster"``: ``p_value < 0.05``, ``median >= 1 + t`` and the whole ``ci95`` above 1;
- ``"slower"``: ``p_value < 0.05``, ``median <= 1 / (1 + t)`` and the whole ``ci95`` below 1;
- ``"same"``: the whole ``ci95`` lies inside ``[1 / (1 + t), 1 + t]``;
- ``"inconclusive"`` otherwise, and always when there are fewer than :data:`MIN_PAIRS` pairs
  (with 5 pairs or fewer no two-sided test can reach 0.05, and no 95% interval exists).

The signed-rank test and the sign-test interval can disagree (the test uses the sizes of the
ratios, the interval only their order): a verdict never contradicts the interval it is
reported with, so a significant test whose interval still reaches 1 stays "inconclusive".

Its warnings include "the speedup's 95% interval (...) is wider than the t threshold; run more
rounds" only when more rounds could change the verdict: the interval is wider than
``+-max(t, 1%)`` of the median and contains ``1 + t`` or ``1 / (1 + t)``.

With ``processes`` (the worker process of each pair: each config ran in P > 1 fresh processes
one after the other) it also returns ``"processes": {"n", "speedups", "p_value", "effect"}``:
each process's median ratio, and a Kruskal-Wallis test of whether the log ratios differ
between processes. A config's speed can depend on its process (memory layout, thread
placement), a constant within one process that no number of rounds reveals. When that test
gives ``p < 0.05`` (``effect`` true) the pairs are not one sample: ``median`` becomes the
geometric mean of the per-process medians, ``ci95`` the t interval (P - 1 degrees of
freedom) of that mean -- the one normal-theory interval here, as few processes give no
distribution-free one -- widened to at least the pooled order-statistic interval,
``p_value`` the one-sample t-test of the per-process log medians, and a warning says so.
With fewer than :data:`MIN_PAIRS` pairs in some process nothing changes.

:func:`quantile_ci` is the distribution-free interval for any quantile (p99 of a load level,
say) from order statistics: ``[x_(l), x_(u)]`` with the binomial ranks around ``n q``; where
the upper rank would pass the largest sample (too few samples for that quantile), the largest
sample is the bound and the interval covers less than its confidence.

:func:`verdict` applies that rule to any speedup, paired or not.
:func:`detect_warmup` returns the index where the steady state begins (rule in its docstring).
:func:`rel_ci_halfwidth` is the half-width of the median's 95% interval relative to the median,
``inf`` when there are too few samples to form that interval: a precision target
("stop when <= 0.01") is then never met too early.

This module imports numpy at module level and scipy (half a second) at its first test or
interval: commands that only read a store (``history``, ``report``) and every bad-input exit
start without it, and ``tfperf --help`` imports neither.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def scipy_stats():
    """``scipy.stats``, imported at first use (see the module docstring)."""
    from scipy import stats

    return stats


CONFIDENCE = 0.95
ALPHA = 1.0 - CONFIDENCE
MIN_SAMPLES = 10
"""Fewer steady-state samples than this earn a "too few samples" warning."""
MIN_CI_SAMPLES = 6
"""The smallest n for which ``[min, max]`` covers the median with >= 95% probability."""
DEFAULT_THRESHOLD = 0.03
"""The size a speedup must reach to be called faster or slower (3%), wherever tfperf decides."""
MIN_PAIRS = 6
"""The smallest number of pairs for which a two-sided signed-rank test can reach 0.05."""
WIDE_CI = 0.05
"""A median whose 95% interval is wider than +-5% earns an "imprecise" warning."""
WIDE_SPREAD = 0.25
"""An interquartile range wider than 25% of the median earns a "wide spread" warning."""
DRIFT = 0.05
"""First and last thirds whose medians differ by more than 5% (and significantly) = drift."""
DRIFT_P = 0.01
WARMUP_K = 3.0
"""A sample is still warming up when it exceeds the steady median by WARMUP_K robust spreads."""


def _as_array(samples: Sequence[float]) -> np.ndarray:
    arr = np.asarray(list(samples), dtype=float)
    return arr[np.isfinite(arr)]


def order_stat_ranks(n: int, confidence: float = CONFIDENCE) -> tuple[int, int] | None:
    """0-based ranks ``(lo, hi)`` whose order statistics bracket the median at ``confidence``.

    The interval ``[x_(k), x_(n-k+1)]`` (1-based) covers the median with probability
    ``1 - 2 P(Binom(n, 1/2) <= k - 1)``; the largest ``k`` keeping that >= ``confidence`` is
    chosen. ``None`` when even ``[min, max]`` falls short (n < 6 at 95%).
    """
    if n < 1:
        return None
    tail = (1.0 - confidence) / 2.0
    # Largest k with P(B <= k-1) <= tail, i.e. k-1 = largest j with cdf(j) <= tail.
    binom = scipy_stats().binom
    j = int(binom.ppf(tail, n, 0.5))
    if binom.cdf(j, n, 0.5) > tail:
        j -= 1
    k = j + 1  # 1-based rank of the lower bound
    if k < 1:
        return None
    return k - 1, n - k


def median_ci(samples: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Distribution-free interval for the median; ``(min, max)`` when n is too small.

    Returns ``(nan, nan)`` for empty input. With fewer than :data:`MIN_CI_SAMPLES` samples the
    full range is returned and its coverage is below ``confidence`` (callers warn).
    """
    arr = np.sort(_as_array(samples))
    if arr.size == 0:
        return math.nan, math.nan
    ranks = order_stat_ranks(arr.size, confidence)
    if ranks is None:
        return float(arr[0]), float(arr[-1])
    lo, hi = ranks
    return float(arr[lo]), float(arr[hi])


def quantile_ci(
    samples: Sequence[float], q: float, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Distribution-free interval for the ``q`` quantile (0 < q < 1); see the module docstring.

    ``(nan, nan)`` for empty input.
    """
    arr = np.sort(_as_array(samples))
    n = arr.size
    if n == 0:
        return math.nan, math.nan
    tail = (1.0 - confidence) / 2.0
    binom = scipy_stats().binom
    lo = int(binom.ppf(tail, n, q))  # 1-based rank of the lower bound, at least 1
    hi = int(binom.ppf(1.0 - tail, n, q)) + 1
    return float(arr[max(lo, 1) - 1]), float(arr[min(hi, n) - 1])


def rel_ci_halfwidth(samples_s: Sequence[float]) -> float:
    """Half-width of the median's 95% interval divided by the median (``inf`` if n < 6)."""
    arr = _as_array(samples_s)
    if arr.size < MIN_CI_SAMPLES:
        return math.inf
    low, high = median_ci(arr)
    med = float(np.median(arr))
    if med <= 0:
        return math.inf
    return (high - low) / 2.0 / med


def _drift(arr: np.ndarray) -> tuple[float, float] | None:
    """(relative change of the median from the first to the last third, Mann-Whitney p)."""
    third = arr.size // 3
    if third < 3:
        return None
    first, last = arr[:third], arr[-third:]
    m_first, m_last = float(np.median(first)), float(np.median(last))
    if m_first <= 0:
        return None
    if np.ptp(np.concatenate([first, last])) == 0:
        return 0.0, 1.0
    p = float(scipy_stats().mannwhitneyu(first, last, alternative="two-sided").pvalue)
    return m_last / m_first - 1.0, p


def _drift_warning(arr: np.ndarray, what: str) -> str | None:
    found = _drift(arr)
    if found is None:
        return None
    change, p = found
    if abs(change) > DRIFT and p < DRIFT_P:
        return (
            f"{what} drifted by {change:+.1%} from the first to the last third of the run "
            "(the machine's speed changed); compare only side-by-side measurements"
        )
    return None


def summarize(samples_s: Sequence[float], batch: int = 1) -> dict:
    """Summarise steady-state latency samples (seconds per call) of one trial.

    ``batch`` is the number of examples per call; throughput is ``batch / p50``.
    See the module docstring for the returned dictionary and the warning rules:
    too few samples (< :data:`MIN_SAMPLES`), an imprecise median (CI half-width > 5%), wide
    spread (IQR > 25% of the median) and drift between the first and last thirds.
    """
    arr = _as_array(samples_s)
    n = int(arr.size)
    warnings: list[str] = []
    if n == 0:
        nothing = {"p50": None, "p90": None, "p99": None, "mean": None, "p50_ci95": [None, None]}
        return {
            "n": 0,
            "latency_ms": nothing,
            "throughput_per_s": None,
            "cv": None,
            "warnings": ["no steady-state samples were measured"],
        }
    ms = arr * 1e3
    p50, p90, p99 = (float(v) for v in np.percentile(ms, [50, 90, 99]))
    mean = float(ms.mean())
    low, high = median_ci(ms)
    cv = float(ms.std(ddof=1) / mean) if n > 1 and mean > 0 else 0.0
    if n < MIN_SAMPLES:
        warnings.append(f"only {n} samples; at least {MIN_SAMPLES} are needed for stable figures")
    if n < MIN_CI_SAMPLES:
        warnings.append("too few samples for a 95% interval of the median; showing min..max")
    elif p50 > 0 and (high - low) / 2.0 / p50 > WIDE_CI:
        warnings.append(
            f"imprecise median: its 95% interval is +-{(high - low) / 2.0 / p50:.1%}; "
            "measure longer"
        )
    if n >= 4 and p50 > 0:
        q25, q75 = np.percentile(ms, [25, 75])
        iqr = float(q75 - q25) / p50
        if iqr > WIDE_SPREAD:
            warnings.append(
                f"wide spread: the middle half of the samples spans {iqr:.0%} of the median "
                "(a busy or throttling machine)"
            )
    drift = _drift_warning(arr, "latency")
    if drift:
        warnings.append(drift)
    return {
        "n": n,
        "latency_ms": {"p50": p50, "p90": p90, "p99": p99, "mean": mean, "p50_ci95": [low, high]},
        "throughput_per_s": float(batch) * 1e3 / p50 if p50 > 0 else None,
        "cv": cv,
        "warnings": warnings,
    }


def _signed_rank_p(log_ratios: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p-value on log ratios (1.0 when all are zero)."""
    nonzero = log_ratios[log_ratios != 0]
    if nonzero.size == 0:
        return 1.0
    return float(scipy_stats().wilcoxon(nonzero, alternative="two-sided").pvalue)


def verdict(median: float, low: float, high: float, p: float, n: int, t: float) -> str:
    """The verdict rule of the module docstring for a speedup ``median`` with 95% interval
    ``[low, high]``, two-sided p-value ``p`` from ``n`` pairs (or samples) and threshold ``t``.

    Shared by the paired comparison here and the unpaired one of stored runs
    (:func:`tfperf.benchmark.unpaired_speedup`).
    """
    if n < MIN_PAIRS:
        return "inconclusive"
    if p < ALPHA and median >= 1.0 + t and low > 1.0:
        return "faster"
    if p < ALPHA and median <= 1.0 / (1.0 + t) and high < 1.0:
        return "slower"
    if low >= 1.0 / (1.0 + t) and high <= 1.0 + t:
        return "same"
    return "inconclusive"


def _could_change_verdict(median: float, low: float, high: float, t: float) -> bool:
    """Whether more rounds could change a speedup's verdict: its 95% interval is wider than
    +-``max(t, 1%)`` of the median *and* contains a verdict boundary (``1 + t`` or
    ``1 / (1 + t)``). A wide interval wholly on one side (say 50..70 for a 60x speedup) already
    gives its answer."""
    wide = (high - low) / 2.0 / median > max(t, 0.01)
    return wide and any(low <= bound <= high for bound in (1.0 + t, 1.0 / (1.0 + t)))


def _process_effect(log_ratios: np.ndarray, groups: np.ndarray) -> tuple[dict, np.ndarray] | None:
    """The ``processes`` entry of the module docstring for ``log_ratios`` grouped by
    ``groups``, and the per-process median log ratios; ``None`` with one process or one with
    fewer than MIN_PAIRS pairs."""
    labels = sorted(set(groups.tolist()))
    per = [log_ratios[groups == g] for g in labels]
    if len(per) < 2 or any(x.size < MIN_PAIRS for x in per):
        return None
    identical = np.ptp(np.concatenate(per)) == 0
    p = 1.0 if identical else float(scipy_stats().kruskal(*per).pvalue)
    logs = np.array([float(np.median(x)) for x in per])
    summary = {
        "n": len(per),
        "speedups": [float(math.exp(v)) for v in logs],
        "p_value": p,
        "effect": bool(p < ALPHA),
    }
    return summary, logs


def _across_processes(result: dict, effect: dict, logs: np.ndarray, threshold: float) -> None:
    """Replace median, interval and p-value by their across-process versions (docstring),
    from the per-process median log ratios ``logs``."""
    n = logs.size
    centre = float(logs.mean())
    se = float(logs.std(ddof=1)) / math.sqrt(n)
    t = scipy_stats().t
    half = float(t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * se
    low, high = result["ci95"]
    median = math.exp(centre)
    low, high = min(low, math.exp(centre - half)), max(high, math.exp(centre + half))
    p = 1.0 if se == 0 else float(2 * t.sf(abs(centre) / se, n - 1))
    result.update(
        median=median,
        ci95=[low, high],
        p_value=p,
        verdict=verdict(median, low, high, p, result["n_pairs"], threshold),
    )
    spread = ", ".join(f"{v:.3f}" for v in effect["speedups"])
    result["warnings"].append(
        f"the speedup differs between the {n} worker processes of each config ({spread}; "
        f"p = {effect['p_value']:.2g}): a per-process effect (memory layout, thread "
        "placement) that one process cannot show; the interval spans it, and more processes "
        "(--processes) narrow it"
    )


def _pair(
    baseline_blocks: Sequence[float], candidate_blocks: Sequence[float], warnings: list[str]
) -> tuple[np.ndarray, np.ndarray, int]:
    """The pair-by-pair ratios (valid pairs only), which pairs were valid, and how many pairs
    there were; each thing left out is a warning."""
    base = np.asarray(list(baseline_blocks), dtype=float)
    cand = np.asarray(list(candidate_blocks), dtype=float)
    if base.size != cand.size and min(base.size, cand.size) > 0:
        warnings.append(
            f"{base.size} baseline and {cand.size} candidate rounds; "
            f"only the first {min(base.size, cand.size)} pairs are used"
        )
    m = min(base.size, cand.size)
    base, cand = base[:m], cand[:m]
    ok = np.isfinite(base) & np.isfinite(cand) & (base > 0) & (cand > 0)
    if not ok.all():
        warnings.append(f"{int((~ok).sum())} pairs with a missing or invalid time were dropped")
    return base[ok] / cand[ok], ok, m


def _width_warning(median: float, low: float, high: float, n: int, threshold: float) -> str | None:
    if n < MIN_PAIRS:
        return f"only {n} pairs; at least {MIN_PAIRS} are needed for a significant verdict"
    if _could_change_verdict(median, low, high, threshold):
        return (
            f"the speedup's 95% interval ({low:.3f}..{high:.3f}) is wider than the "
            f"{threshold:.0%} threshold; run more rounds"
        )
    return None


def paired_speedup(
    baseline_blocks: Sequence[float],
    candidate_blocks: Sequence[float],
    threshold: float = DEFAULT_THRESHOLD,
    processes: Sequence[int] | None = None,
) -> dict:
    """Speedup of a candidate over a baseline from interleaved block medians (seconds).

    Pairs are taken by index; a pair with a non-positive or non-finite time is dropped, and
    extra rounds of the longer list are ignored (each with a warning). ``processes``, when
    given, names the worker process of each pair (same length as the pairs used). See the
    module docstring for the returned dictionary, the verdict rule and the process effect.
    """
    if threshold < 0:
        raise ValueError("threshold must be >= 0")
    warnings: list[str] = []
    ratios, ok, m = _pair(baseline_blocks, candidate_blocks, warnings)
    n = int(ratios.size)
    result: dict = {
        "median": None,
        "ci95": [None, None],
        "p_value": None,
        "n_pairs": n,
        "threshold": float(threshold),
        "verdict": "inconclusive",
        "warnings": warnings,
    }
    if n == 0:
        warnings.append("no pairs to compare")
        return result
    median = float(np.median(ratios))
    low, high = median_ci(ratios)
    p = _signed_rank_p(np.log(ratios))
    width = _width_warning(median, low, high, n, threshold)
    warnings.extend([width] if width else [])
    result.update(
        median=median,
        ci95=[low, high],
        p_value=p,
        verdict=verdict(median, low, high, p, n, threshold),
    )
    found = None
    if processes is not None:
        found = _process_effect(np.log(ratios), np.asarray(list(processes)[:m])[ok])
    if found is not None:
        effect, logs = found
        result["processes"] = effect
        if effect["effect"]:
            _across_processes(result, effect, logs, threshold)
    drift = _drift_warning(ratios, "the speedup")
    if drift and not (found and found[0]["effect"]):
        # with a process effect the thirds are different processes: not the machine drifting
        warnings.append(drift)
    return result


def inverse(speedup: dict) -> dict:
    """A :func:`paired_speedup` result read the other way (baseline over candidate): the same
    pairs, so the median and the interval's ends are the reciprocals (the median exactly for
    an odd number of pairs) and the p-value is the same; the verdict follows the same rule.
    Process figures and warnings are not carried over."""
    median = speedup.get("median")
    low, high = (speedup.get("ci95") or [None, None])[:2]
    out = {**{k: speedup.get(k) for k in ("p_value", "n_pairs", "threshold")},
           "median": None, "ci95": [None, None], "verdict": "inconclusive", "warnings": []}
    if not median or not low or not high:
        return out
    t = float(speedup.get("threshold") or DEFAULT_THRESHOLD)
    p, n = speedup.get("p_value"), int(speedup.get("n_pairs") or 0)
    out.update(median=1.0 / median, ci95=[1.0 / high, 1.0 / low])
    if p is not None:
        out["verdict"] = verdict(1.0 / median, 1.0 / high, 1.0 / low, p, n, t)
    return out


def detect_warmup(samples_s: Sequence[float]) -> int:
    """Index of the first steady-state sample in a series that starts with a warm-up.

    Rule: the steady level is the median ``m`` of the last half of the series and its spread
    ``s`` is the scaled median absolute deviation of that half (at least 1% of ``m``). A sample
    is *slow* when it exceeds ``m + 3 s``. The steady state begins at the first index ``i``
    where sample ``i`` is not slow and at most one sample of the window ``samples[i:i+w]`` is
    slow (``w = max(3, n // 10)``): a lone fast sample inside the warm-up does not end it, and
    a lone slow sample after it does not extend it. Series shorter than 4 samples, and
    those that never settle, return 0 (nothing can be told apart). The result is at most
    ``n // 2``.
    """
    arr = _as_array(samples_s)
    n = int(arr.size)
    if n < 4:
        return 0
    tail = arr[n // 2 :]
    level = float(np.median(tail))
    spread = max(1.4826 * float(np.median(np.abs(tail - level))), 0.01 * level)
    limit = level + WARMUP_K * spread
    w = max(3, n // 10)
    for i in range(n // 2 + 1):
        if arr[i] <= limit and int((arr[i : i + w] > limit).sum()) <= 1:
            return i
    return 0
