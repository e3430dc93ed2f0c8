"""The cached matmul peak against what runs achieve: a peak that a run beats is probed again
once and the larger figure kept; a rate still above it is shown with a warning that names the
cache file to delete."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from helpers import run_cli
from tfperf.peak import above_peak_warning, recheck_peak

LOW_PEAK = 1e-6
"""GFLOP/s: far below what even the tiny mlp achieves, as if the probe had run on a busy
machine."""
HIGH_BF16 = 1e9
"""GFLOP/s: higher than any probe measures, so that keeping the larger figure is visible."""


def _cached_peak(cache: Path, monkeypatch, **fields) -> Path:
    """Write this machine's peak cache file under ``cache`` with ``fields``; its path."""
    from tfperf.machine.facts import collect_machine
    from tfperf.peak import cache_path

    monkeypatch.setenv("TFPERF_CACHE_DIR", str(cache))
    fingerprint = collect_machine()["fingerprint"]
    path = cache_path(fingerprint)
    record = {
        "fingerprint": fingerprint,
        "fp32_gflops": LOW_PEAK,
        "bf16_gflops": None,
        "matrix": 256,
        "bandwidth_gbs": 5.0,
        "tf_version": "2.21.0",
        "measured_at": time.time(),
        **fields,
    }
    path.write_text(json.dumps(record))
    return path


def _bench(tmp_path: Path, cache: Path) -> dict:
    """``tfperf bench --json`` of the tiny mlp with the peak probe on, cache dir ``cache``."""
    args = ["bench", "--workload", "mlp", "--size", "tiny", "--budget", "1", "--json"]
    store = str(tmp_path / "s.sqlite")
    res = run_cli(*args, "--store", store, env={"TFPERF_CACHE_DIR": str(cache)})
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)


def _above(doc: dict) -> list[str]:
    return [w for r in doc["results"] for w in r["warnings"] if "above the measured peak" in w]


@pytest.mark.tf
@pytest.mark.slow
def test_a_peak_the_run_beats_is_probed_again_and_the_larger_figures_kept(
    tmp_path: Path, monkeypatch
):
    cache = tmp_path / "cache"
    path = _cached_peak(cache, monkeypatch, bf16_gflops=HIGH_BF16)
    doc = _bench(tmp_path, cache)
    stored = json.loads(path.read_text())
    assert stored["fp32_gflops"] > LOW_PEAK  # the new probe's figure
    assert stored["bf16_gflops"] == HIGH_BF16  # the old one, larger than any probe's
    assert stored["rechecked_at"] > stored["measured_at"]
    assert doc["peak"] == stored
    (result,) = doc["results"]
    flops = result["flops"]
    assert flops["peak_gflops"] == stored["fp32_gflops"]
    assert 0 < flops["share_of_peak"] < 1
    assert not _above(doc)


@pytest.mark.tf
@pytest.mark.slow
def test_a_rate_above_a_recently_rechecked_peak_is_shown_with_a_warning(
    tmp_path: Path, monkeypatch
):
    cache = tmp_path / "cache"
    path = _cached_peak(cache, monkeypatch, rechecked_at=time.time())
    before = path.read_text()
    doc = _bench(tmp_path, cache)
    assert path.read_text() == before  # not probed again within a day
    (result,) = doc["results"]
    assert result["flops"]["share_of_peak"] > 1  # shown as measured, not capped
    (warning,) = _above(doc)
    assert f"delete {path} to re-measure" in warning
    assert "busy machine" in warning


def test_no_recheck_without_a_rate_above_the_peak():
    peak = {"fingerprint": "x", "fp32_gflops": 100.0, "bf16_gflops": None, "matrix": 256}
    # a probe that cannot start would leave the peak as it is, so `python` proves nothing
    # here; the identity does: the very record comes back, not a merged copy
    assert recheck_peak(peak, [(50e9, "fp32"), (None, "fp32")], {}) is peak
    assert recheck_peak(None, [(50e9, "fp32")], {}) is None
    recent = dict(peak, rechecked_at=time.time())
    assert recheck_peak(recent, [(500e9, "fp32")], {}) is recent


def test_a_probe_that_cannot_run_keeps_the_cached_peak(tmp_path: Path):
    peak = {"fingerprint": "x", "fp32_gflops": 100.0, "matrix": 256}
    missing = str(tmp_path / "no-such-python")
    assert recheck_peak(peak, [(500e9, "fp32")], {}, python=missing) is peak


def test_above_peak_warning(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TFPERF_CACHE_DIR", str(tmp_path))
    peak = {"fingerprint": "abc", "fp32_gflops": 10.0}
    assert above_peak_warning(None, peak) is None
    assert above_peak_warning(1.0, peak) is None
    warning = above_peak_warning(1.31, peak)
    assert warning is not None and warning.startswith("131% of peak is above the measured peak")
    assert str(tmp_path / "peak-abc.json") in warning
