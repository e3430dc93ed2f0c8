"""CPU taken by other processes while measuring: real CPU hogs, real workers."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import psutil

from helpers import run_cli
from tfperf.machine import contention

HOG = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end: pass\n"
REPORT = "print(time.process_time())\n"


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


def _cpu_used(output: str) -> float:
    """The CPU seconds a hog printed it used (its own ``time.process_time()``)."""
    return float(output.strip().splitlines()[-1])


def test_a_worker_started_and_closed_between_two_snapshots_is_ours():
    # a bench of several processes per config replaces its workers during its rounds
    start = contention.snapshot()
    hog = subprocess.run([sys.executable, "-c", HOG.format(s=1.5) + REPORT], check=True,
                         capture_output=True, text=True)
    end = contention.snapshot()
    assert start is not None and end is not None
    used = _cpu_used(hog.stdout)
    assert used > 0.2 and end.ours_s - start.ours_s >= 0.95 * used
    # had it been counted as someone else's, the share would have grown by its part
    as_ours = contention.other_cpu_share(start, end)
    as_other = contention.other_cpu_share(start, replace(end, ours_s=end.ours_s - used))
    assert as_ours is not None and as_other is not None
    part = used / ((end.at - start.at) * (psutil.cpu_count() or 1))
    assert as_other - as_ours > 0.5 * part and 0.0 <= as_ours <= as_other <= 1.0


# Run in a process of its own, whose tree holds nothing else (a test process may hold the
# servers and clusters of other tests' fixtures): it starts a hog through a shell that exits
# at once, leaving the hog to init, and prints the CPU its tree used and the hog's own.
ORPHAN = """
import os, subprocess, sys, time
from tfperf.machine import contention
done = sys.argv[1]
start = contention.snapshot()
subprocess.run(["sh", "-c", f"{sys.executable} -c \\"$HOG\\" &"], check=True,
               env={**os.environ, "HOG": sys.argv[2]})
deadline = time.monotonic() + 30
while not os.path.exists(done) or not open(done).read():
    assert time.monotonic() < deadline, "the hog did not finish"
    time.sleep(0.05)
end = contention.snapshot()
print(end.ours_s - start.ours_s, open(done).read())
"""


def test_a_process_this_one_did_not_start_is_someone_elses(tmp_path):
    done = tmp_path / "used"
    hog = HOG.format(s=1.5) + f"open({str(done)!r}, 'w').write(str(time.process_time()))\n"
    probe = subprocess.run([sys.executable, "-c", ORPHAN, str(done), hog], check=True,
                           capture_output=True, text=True, timeout=60)
    ours, used = map(float, probe.stdout.split())
    assert used > 0.2 and ours < 0.3 * used


def test_too_short_a_span_or_no_counters_tell_nothing():
    now = contention.snapshot()
    assert contention.other_cpu_share(now, now) is None
    assert contention.other_cpu_share(None, now) is None
    assert contention.busy_warning(None) is None
    assert contention.busy_warning(contention.BUSY_SHARE) is None
    assert "quiet machine" in contention.busy_warning(0.6)


def test_bench_reports_the_cpu_others_took_and_warns(tmp_path):
    # Hogs on 40% of the CPUs: against the worker's own threads they still take over twice
    # BUSY_SHARE (one of two CPUs here, a third of them or more), and the CPUs left run the
    # bench and the other tests beside it rather than every CPU burnt for its whole run.
    cpus = psutil.cpu_count() or 1
    with hogs(max(1, math.ceil(0.4 * cpus)), 120.0):
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
