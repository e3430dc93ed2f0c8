"""CPU taken by other processes while measuring: real CPU hogs, real workers."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import psutil

from helpers import run_cli
from tfperf.machine import contention

HOG = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end: pass\n"


@contextmanager
def hogs(n: int, seconds: float) -> Iterator[list[subprocess.Popen]]:
    """``n`` busy-looping processes for ``seconds``."""
    procs = [subprocess.Popen([sys.executable, "-c", HOG.format(s=seconds)]) for _ in range(n)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_a_process_counted_as_ours_is_not_contention():
    with hogs(1, 3.0) as (hog,):
        start = contention.snapshot([hog.pid])
        time.sleep(1.5)
        end = contention.snapshot([hog.pid])
    assert start is not None and end is not None and hog.pid in start.ours_s
    as_ours = contention.other_cpu_share(start, end)
    without = {pid: cpu for pid, cpu in start.ours_s.items() if pid != hog.pid}
    as_other = contention.other_cpu_share(replace(start, ours_s=without), end)
    assert as_ours is not None and as_other is not None
    # the hog kept about one CPU busy: counted as someone else's, the share grows by its part
    cpus = psutil.cpu_count() or 1
    assert as_other - as_ours > 0.4 / cpus
    assert 0.0 <= as_ours <= as_other <= 1.0


def test_too_short_a_span_or_no_counters_tell_nothing():
    now = contention.snapshot([])
    assert contention.other_cpu_share(now, now) is None
    assert contention.other_cpu_share(None, now) is None
    assert contention.busy_warning(None) is None
    assert contention.busy_warning(contention.BUSY_SHARE) is None
    assert "quiet machine" in contention.busy_warning(0.6)


def test_bench_reports_the_cpu_others_took_and_warns(tmp_path):
    cpus = psutil.cpu_count() or 1
    with hogs(cpus, 120.0):
        res = run_cli(
            "bench", "--workload", "mlp", "--size", "tiny", "--set", "onednn=off",
            "--budget", "3", "--no-peak", "--json", "--store", str(tmp_path / "s.sqlite"),
        )  # fmt: skip
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["other_cpu_share"] > contention.BUSY_SHARE
    busy = [w for w in doc["warnings"] if w.startswith("other processes kept")]
    assert len(busy) == 1
    assert busy[0] in doc["comparisons"][0]["speedup"]["warnings"]
    stored = run_cli("report", "latest", "--json", "--store", str(tmp_path / "s.sqlite"))
    assert stored.returncode == 0, stored.stderr
    assert busy[0] in stored.stdout
