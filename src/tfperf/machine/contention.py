"""How busy other processes kept the CPUs while tfperf measured.

Interleaving cancels slow drift that hits every worker alike, but not contention that favours
one worker over another: on this 2-core machine, with other processes taking about half the
CPU, two workers of the very same config came out up to 1.3x apart, each with a tight interval.
So a measurement states how much CPU others took while it ran.

Contract:

- :func:`snapshot` records the machine's busy CPU seconds (everything but idle and iowait,
  hypervisor steal included: another guest is contention too), the CPU seconds of the given
  processes (tfperf's workers) and of this process, and a monotonic time.
- :func:`other_cpu_share` is the CPU time that neither the given processes nor this one used
  between two snapshots, as a share of all CPUs over the wall time (0 = only tfperf ran,
  1 = others kept every CPU busy). A process that exited between the two snapshots counts as
  having used nothing more after the first (so the share can only err upward); ``None`` when
  the span is too short to tell or the counters are unavailable.
- :func:`busy_warning` turns a share above :data:`BUSY_SHARE` into one sentence.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

BUSY_SHARE = 0.15
"""Above this share of the CPUs taken by others, results carry a warning."""
MIN_SPAN_S = 0.5


@dataclass(frozen=True)
class Snapshot:
    """CPU counters at one moment (seconds)."""

    at: float
    machine_busy_s: float
    ours_s: dict[int, float] = field(default_factory=dict)
    """CPU seconds per pid (this process included)."""


def _process_cpu_s(pid: int) -> float | None:
    import psutil

    try:
        t = psutil.Process(pid).cpu_times()
    except (psutil.Error, OSError):
        return None
    return float(t.user + t.system)


def snapshot(pids: Iterable[int | None]) -> Snapshot | None:
    """Counters now for the machine, the processes ``pids`` and this process; ``None`` when
    the machine's counters cannot be read."""
    import psutil

    try:
        t = psutil.cpu_times()
    except (OSError, RuntimeError):
        return None
    idle = float(t.idle) + float(getattr(t, "iowait", 0.0))
    busy = float(sum(t)) - idle
    # guest time is already counted in user on Linux
    busy -= float(getattr(t, "guest", 0.0)) + float(getattr(t, "guest_nice", 0.0))
    ours: dict[int, float] = {}
    for pid in {os.getpid(), *(p for p in pids if p)}:
        cpu = _process_cpu_s(pid)
        if cpu is not None:
            ours[pid] = cpu
    return Snapshot(time.monotonic(), busy, ours)


def other_cpu_share(start: Snapshot | None, end: Snapshot | None) -> float | None:
    """Share of all CPUs that other processes kept busy between ``start`` and ``end``."""
    import psutil

    if start is None or end is None:
        return None
    wall = end.at - start.at
    if wall < MIN_SPAN_S:
        return None
    ours = sum(max(0.0, end.ours_s.get(pid, cpu) - cpu) for pid, cpu in start.ours_s.items())
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
