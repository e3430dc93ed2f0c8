"""tfperf.machine.facts on this machine, and the cgroup quota readers on v1 and v2 trees."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import cpu_quota_cgroup, run_in_cgroup
from tfperf.core import isa
from tfperf.machine import facts as machine


def test_collect_machine_on_this_machine() -> None:
    m = machine.collect_machine()
    json.dumps(m)  # JSON-ready
    cores = m["cores"]
    assert cores["logical"] == os.cpu_count()
    assert 1 <= cores["usable"] <= cores["affinity"] <= cores["logical"]
    assert cores["affinity"] == len(os.sched_getaffinity(0))
    assert 1 <= cores["physical"] <= cores["logical"]
    assert isinstance(m["isa"], list) and all(n == n.upper() for n in m["isa"])
    assert m["cpu"]["microarchitecture"]
    assert set(m["allocators_available"]) == {"tcmalloc", "jemalloc"}
    assert isinstance(m["gpus"], list)
    assert m["memory"]["total_bytes"] > 0
    assert re.fullmatch(r"[0-9a-f]{12}", m["fingerprint"])
    assert machine.collect_machine()["fingerprint"] == m["fingerprint"]


def test_fingerprint_follows_hardware_not_load() -> None:
    m = machine.collect_machine()
    busier = json.loads(json.dumps(m))
    busier["memory"]["available_bytes"] = 1
    busier["cores"]["usable"] = 1
    assert machine.fingerprint(busier) == m["fingerprint"]
    other = json.loads(json.dumps(m))
    other["isa"] = [*other["isa"], "AMX_TILE_X"]
    assert machine.fingerprint(other) != m["fingerprint"]


def test_collect_machine_does_not_import_tensorflow() -> None:
    code = (
        "import sys, tfperf.machine.facts as m; m.collect_machine(); "
        "print(any(k.split('.')[0] == 'tensorflow' for k in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_parse_real_cpuinfo() -> None:
    info = isa.parse_cpuinfo(Path("/proc/cpuinfo").read_text())
    assert info["logical"] == os.cpu_count()
    assert info["model"]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_quota_tightest_ancestor_wins(tmp_path: Path) -> None:
    _write(tmp_path / "cgroup.controllers", "cpuset cpu io memory pids\n")
    _write(tmp_path / "kubepods" / "cpu.max", "max 100000\n")
    _write(tmp_path / "kubepods" / "pod1" / "cpu.max", "150000 100000\n")
    assert machine.cgroup_cpu_quota(tmp_path, "0::/kubepods/pod1\n") == (1.5, 2)
    _write(tmp_path / "kubepods" / "cpu.max", "50000 100000\n")
    assert machine.cgroup_cpu_quota(tmp_path, "0::/kubepods/pod1\n") == (0.5, 2)


def test_cgroup_v2_unlimited(tmp_path: Path) -> None:
    _write(tmp_path / "cgroup.controllers", "cpu\n")
    _write(tmp_path / "cpu.max", "max 100000\n")
    assert machine.cgroup_cpu_quota(tmp_path, "0::/\n") == (None, 2)


def test_cgroup_v1_quota(tmp_path: Path) -> None:
    base = tmp_path / "cpu,cpuacct" / "docker" / "abc"
    _write(base / "cpu.cfs_quota_us", "200000\n")
    _write(base / "cpu.cfs_period_us", "100000\n")
    text = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n"
    assert machine.cgroup_cpu_quota(tmp_path, text) == (2.0, 1)
    _write(base / "cpu.cfs_quota_us", "-1\n")
    assert machine.cgroup_cpu_quota(tmp_path, text) == (None, 1)


def test_cgroup_v1_inside_a_container_namespace(tmp_path: Path) -> None:
    # /proc/self/cgroup names the host's path, but the container sees its own cgroup as root.
    _write(tmp_path / "cpu" / "cpu.cfs_quota_us", "150000\n")
    _write(tmp_path / "cpu" / "cpu.cfs_period_us", "100000\n")
    assert machine.cgroup_cpu_quota(tmp_path, "3:cpu:/docker/0123abcd\n") == (1.5, 1)


def test_no_cgroup_filesystem(tmp_path: Path) -> None:
    assert machine.cgroup_cpu_quota(tmp_path, "") == (None, None)


def test_this_process_cgroup_is_read() -> None:
    quota, version = machine.cgroup_cpu_quota()
    assert version in (1, 2, None)
    assert quota is None or quota > 0


@pytest.mark.parametrize(
    ("affinity", "quota", "usable"), [(16, None, 16), (16, 1.5, 2), (2, 8.0, 2), (4, 0.2, 1)]
)
def test_usable_cpus(affinity: int, quota: float | None, usable: int) -> None:
    assert machine.usable_cpus(affinity, quota) == usable


def test_affinity_limits_usable_cpus_in_a_real_child() -> None:
    code = "import json, tfperf.machine.facts as m; print(json.dumps(m.collect_machine()['cores']))"
    out = subprocess.run(
        [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{0}}); {code}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    cores = json.loads(out.stdout)
    assert cores["affinity"] == 1 and cores["usable"] == 1


def test_real_cgroup_quota_limits_usable_cpus() -> None:
    with cpu_quota_cgroup(0.5) as procs:
        code = (
            "import json, tfperf.machine.facts as m; "
            "print(json.dumps(m.collect_machine()['cores']))"
        )
        out = run_in_cgroup(procs, [sys.executable, "-c", code])
    assert out.returncode == 0, out.stderr
    cores = json.loads(out.stdout)
    assert cores["cgroup_quota"] == 0.5 and cores["usable"] == 1


def test_cgroup_memory_limit_tightest_of_v2_and_v1_paths(tmp_path: Path) -> None:
    _write(tmp_path / "kubepods" / "memory.max", "max\n")
    _write(tmp_path / "kubepods" / "pod1" / "memory.max", "629145600\n")
    assert machine.cgroup_memory_limit(tmp_path, "0::/kubepods/pod1\n") == 629145600
    assert machine.cgroup_memory_limit(tmp_path, "0::/kubepods\n") is None  # "max": none
    v1 = tmp_path / "memory" / "docker" / "abc"
    _write(v1 / "memory.limit_in_bytes", "1073741824\n")
    _write(tmp_path / "memory" / "memory.limit_in_bytes", "9223372036854771712\n")  # no limit
    assert machine.cgroup_memory_limit(tmp_path, "4:memory:/docker/abc\n") == 2**30
    assert machine.cgroup_memory_limit(tmp_path, "4:memory:/\n") is None
