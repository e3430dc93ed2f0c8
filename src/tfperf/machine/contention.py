"""How busy other processes kept the CPUs while tfperf measured.

Interleaving cancels slow drift that hits every worker alike, but not contention that favours
one worker over another: on this 2-core machine, with other processes taking about half the
CPU, two workers of the very same config came out up to 1.3x apart, each with a tight interval.
So a measurement states how much CPU others took while it ran.

Contract:

- :func:`snapshot` records the machine's busy CPU seconds (everything but idle and iowait,
  hypervisor steal included: another guest is contention too), the CPU seconds of this
  process and every process it started (tfperf's workers: those alive, and those it reaped,
  whose time the kernel adds to this process's children's), and a monotonic time.
- :func:`other_cpu_share` is the CPU time that none of those used between two snapshots, as
  a share of all CPUs over the wall time (0 = only tfperf ran, 1 = others kept every CPU
  busy). A worker started and closed between the two counts as ours: a bench of several
  processes per config replaces its workers during the rounds, and each one's start (its
  import of TensorFlow, its model, its warm-up) was counted as others' before (a quiet
  machine read as 54-57% busy). A child that exited but was not reaped yet when the second
  snapshot is taken counts as having used nothing more (so the share can only err upward);
  ``None`` when the span is too short to tell or the counters are unavailable.
- :func:`busy_warning` turns a share above :data:`BUSY_SHARE` into one sentence.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

BUSY_SHARE = 0.15
"""Above this share of the CPUs taken by others, results carry a warning."""
MIN_SPAN_S = 0.5


@dataclass(frozen=True)
class Snapshot:
    """CPU counters at one moment (seconds)."""

    at: float
    machine_busy_s: float
    ours_s: float
    """CPU seconds of this process and every process it started (see the module docstring)."""


def _tree_cpu_s() -> float:
    """CPU seconds of this process, its live descendants and the children it reaped."""
    import psutil

    own = os.times()
    total = own.user + own.system + own.children_user + own.children_system
    for child in psutil.Process().children(recursive=True):
        try:
            t = child.cpu_times()
        except (psutil.Error, OSError):
            continue  # gone since it was listed: counted once reaped, or never (errs upward)
        total += t.user + t.system + t.children_user + t.children_system
    return float(total)


def snapshot() -> Snapshot | None:
    """Counters now for the machine and for this process's tree; ``None`` when the machine's
    counters cannot be read."""
    import psutil

    try:
        t = psutil.cpu_times()
    except (OSError, RuntimeError):
        return None
    idle = float(t.idle) + float(getattr(t, "iowait", 0.0))
    busy = float(sum(t)) - idle
    # guest time is already counted in user on Linux
    busy -= float(getattr(t, "guest", 0.0)) + float(getattr(t, "guest_nice", 0.0))
    return Snapshot(time.monotonic(), busy, _tree_cpu_s())


def other_cpu_share(start: Snapshot | None, end: Snapshot | None) -> float | None:
    """Share of all CPUs that other processes kept busy between ``start`` and ``end``."""
    import psutil

    if start is None or end is None:
        return None
    wall = end.at - start.at
    if wall < MIN_SPAN_S:
        return None
    ours = max(0.0, end.ours_s - start.ours_s)
    others = (end.machine_busy_s - start.machine_busy_s) - ours
    cpus = psutil.cpu_count() or 1
    return min(1.0, max(0.0, others / (wall * cpus)))


def busy_warning(share: float | None) -> str | None:
    """One sentence when others took more than :data:`BUSY_SHARE` of the CPUs, else ``None``."""
    if share is None or share <= BUSY_SHARE:
        return None
    return (
        f"other processes kept {share:.0%} of the CPUs busy while this was measured; "
        "interleaving cancels drift but not contention that favours one worker: "
        "measure again on a quiet machine"
    )
