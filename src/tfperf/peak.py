"""This machine's measured matmul peak (GFLOP/s), fp32 and, where the CPU has it, bf16.

Contract:

- :func:`get_peak` returns ``{"fingerprint", "fp32_gflops", "bf16_gflops" (None when the CPU
  has neither AVX512_BF16 nor AMX_BF16), "bandwidth_gbs" (memory bandwidth, for the roofline
  of ``bench --ops``), "matrix", "tf_version", "measured_at"}``, reading the
  cache file ``<cache dir>/peak-<machine fingerprint>.json`` when present and otherwise running
  the probe once and caching its answer. It returns ``None`` (never raises) when the probe
  cannot run (no TensorFlow, a crash); achieved-vs-peak figures are then simply not shown.
- The probe runs in its own process (``python -m tfperf.worker.peak --out FILE``): the parent never
  imports TensorFlow. It times a square ``tf.function`` matmul (default 1024, all cores) for
  about a second per precision and reports the best block median as ``2 n^3 / t``.
- :func:`share_of_peak` turns achieved FLOP/s into a share of that peak for a precision.
- A probe that ran while the machine was busy caches a peak that is too low, and later runs
  then achieve more than "100%" of it. :func:`recheck_peak` takes the achieved rates of a run:
  when one is above the peak, the probe runs once more (in its own process) and each cached
  figure becomes the larger of the old and the new one (``rechecked_at`` is set). A peak
  re-checked less than :data:`RECHECK_AFTER_S` ago is not probed again: a workload whose FLOP
  count is overstated would otherwise pay a probe on every run. A rate still above the peak is
  shown as it is, with :func:`above_peak_warning` saying how to re-measure.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tfperf.core.errors import UserError
from tfperf.core.paths import cache_dir
from tfperf.machine.facts import collect_machine
from tfperf.runner import launcher
from tfperf.runner.envpolicy import worker_base_env
from tfperf.runner.handle import is_parent_interpreter, tfperf_source_dir

BF16_ISA = ("AVX512_BF16", "AMX_BF16")
PROBE_TIMEOUT_S = 300.0
RECHECK_AFTER_S = 24 * 3600.0
"""A peak re-checked this recently is not probed again when a rate exceeds it."""
PEAK_KEYS = ("fp32_gflops", "bf16_gflops")


def has_bf16(machine: dict[str, Any]) -> bool:
    """Whether the CPU executes bf16 matmuls natively."""
    return any(isa in (machine.get("isa") or []) for isa in BF16_ISA)


def cache_path(fingerprint: str) -> Path:
    """Where the peak of machine ``fingerprint`` is cached."""
    return cache_dir() / f"peak-{fingerprint}.json"


def get_peak(
    machine: dict[str, Any] | None = None,
    *,
    python: str = sys.executable,
    refresh: bool = False,
    matrix: int = 1024,
) -> dict[str, Any] | None:
    """The cached (or freshly measured) peak of this machine; ``None`` if it cannot be had."""
    machine = machine or collect_machine()
    path = _cache_file(machine)
    if path is not None and path.exists() and not refresh:
        try:
            cached = json.loads(path.read_text())
            if "bandwidth_gbs" in cached:
                return cached
            # a figure cached before the bandwidth probe existed: measured again, once
        except (OSError, ValueError):
            pass  # a broken cache entry is measured again
    record = _run_probe(python, matrix, has_bf16(machine))
    if record is None:
        return None
    record["fingerprint"] = machine["fingerprint"]
    _save(path, record)
    return record


def _save(path: Path | None, record: dict[str, Any]) -> None:
    """Write ``record`` to the cache file ``path`` atomically (nothing when ``path`` is None)."""
    if path is None:
        return
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(record, indent=2))
        tmp.replace(path)
    except OSError:
        pass  # an unwritable cache only costs a re-measurement next time


def _cache_file(record: dict[str, Any]) -> Path | None:
    """The peak cache file of the machine (or peak) ``record`` names by its ``fingerprint``;
    ``None`` without one or without a usable cache dir."""

    try:
        return cache_path(record["fingerprint"]) if record.get("fingerprint") else None
    except UserError:
        return None


def recheck_peak(
    peak: dict[str, Any] | None,
    achieved: list[tuple[float | None, str]],
    machine: dict[str, Any],
    *,
    python: str = sys.executable,
    now: float | None = None,
) -> dict[str, Any] | None:
    """The peak to report against, given the ``(FLOP/s, precision)`` rates a run achieved.

    ``peak`` itself unless a rate is above it (share > 1) and the peak was not re-checked in
    the last :data:`RECHECK_AFTER_S` seconds; then the probe runs again and the returned (and
    cached) record keeps, per precision, the larger of the old and the new figure. ``peak`` is
    returned unchanged when the probe cannot run.
    """
    now = time.time() if now is None else now
    if not peak or not any((share_of_peak(f, peak, p)[1] or 0.0) > 1.0 for f, p in achieved):
        return peak
    if now - float(peak.get("rechecked_at") or 0.0) < RECHECK_AFTER_S:
        return peak
    fresh = _run_probe(python, int(peak.get("matrix") or 1024), has_bf16(machine))
    if fresh is None:
        return peak
    merged = dict(peak, rechecked_at=now)
    for key in PEAK_KEYS:
        figures = [v for v in (peak.get(key), fresh.get(key)) if v]
        merged[key] = max(figures) if figures else None
    _save(_cache_file(merged), merged)
    return merged


def above_peak_warning(share: float | None, peak: dict[str, Any] | None) -> str | None:
    """The warning for an achieved ``share`` of ``peak`` above 1 (``None`` otherwise)."""
    if share is None or share <= 1.0 or not peak:
        return None
    path = _cache_file(peak)
    where = str(path) if path is not None else "the cached peak (peak-*.json in the cache dir)"
    return (
        f"{share:.0%} of peak is above the measured peak; the peak probe may have run on a busy "
        f"machine: delete {where} to re-measure"
    )


def share_of_peak(
    flops_per_s: float | None, peak: dict[str, Any] | None, precision: str = "fp32"
) -> tuple[float | None, float | None]:
    """``(peak GFLOP/s used, achieved share)`` for ``precision``; ``None`` when unknown."""
    if not flops_per_s or not peak:
        return None, None
    key = "bf16_gflops" if precision in ("bf16", "mixed_bfloat16") else "fp32_gflops"
    ref = peak.get(key) or peak.get("fp32_gflops")
    if not ref:
        return None, None
    return float(ref), flops_per_s / 1e9 / float(ref)


def _run_probe(python: str, matrix: int, bf16: bool) -> dict[str, Any] | None:
    env, _ = worker_base_env(os.environ)
    if is_parent_interpreter(python):
        # Another environment imports tfperf through its own link; the parent's source dir
        # could be its site-packages, whose TensorFlow must not load there.
        env["PYTHONPATH"] = tfperf_source_dir()
    with tempfile.TemporaryDirectory(prefix="tfperf-peak-") as tmp:
        out = Path(tmp) / "peak.json"
        cmd = [python, "-m", "tfperf.worker.peak", "--out", str(out), "--matrix", str(matrix)]
        if bf16:
            cmd.append("--bf16")
        try:
            ended = launcher.run(cmd, env=env, timeout_s=PROBE_TIMEOUT_S)
            return json.loads(out.read_text()) if ended.ok else None
        except (OSError, ValueError):
            return None
