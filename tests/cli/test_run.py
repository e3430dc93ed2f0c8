"""``tfperf run --profile P -- CMD``: runs CMD with the profile's env, exits with its code."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import require, run_cli
from tfperf.core.allocators import find_allocator
from tfperf.machine.facts import collect_machine
from tfperf.profiles import profile_from_tune, save_profile
from tfperf.tuning.space import to_config_dict

SHOW = (
    "import os, sys; maps = open('/proc/self/maps').read(); "
    "print('jemalloc' if 'libjemalloc' in maps else 'system', "
    "os.environ.get('TF_ENABLE_ONEDNN_OPTS'), os.environ.get('KEEP_ME')); sys.exit(7)"
)


def _save(tmp_path, config: dict, **changes):
    doc = {
        "workload": {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1},
        "install": {},
        "recommendation": {
            "label": "x",
            "config": to_config_dict(config),
            "speedup": None,
            "keep_default": False,
            "adoption": "env",
            "artifact": None,
        },
    }
    profile = profile_from_tune(doc, collect_machine())
    profile.update(changes)
    return save_profile(profile, tmp_path / "p.json")


def test_run_applies_the_allocator_and_env_and_returns_the_exit_code(tmp_path):
    require(find_allocator("jemalloc") is not None, "libjemalloc2 is not installed")
    path = _save(tmp_path, {"allocator": "jemalloc", "onednn": False})
    result = run_cli(
        "run", "--profile", str(path), "--", sys.executable, "-c", SHOW, env={"KEEP_ME": "yes"}
    )
    assert result.returncode == 7, result.stderr
    assert result.stdout.split() == ["jemalloc", "0", "yes"]
    assert "warning" not in result.stderr


def test_run_without_the_profile_knobs_is_plain(tmp_path):
    path = _save(tmp_path, {})
    result = run_cli("run", "--profile", str(path), "--", sys.executable, "-c", SHOW)
    assert result.returncode == 7
    assert result.stdout.split()[:2] == ["system", "None"]


def test_run_warns_when_the_machine_or_install_differs(tmp_path):
    path = _save(
        tmp_path,
        {"onednn": False},
        machine={"fingerprint": "feedbeef", "cpu": {"model": "Some Other CPU"}},
        install={"tf_distribution": "0.1"},
    )
    result = run_cli("run", "--profile", str(path), "--", sys.executable, "-c", "print('ran')")
    assert result.returncode == 0 and result.stdout.strip() == "ran"
    assert "Some Other CPU" in result.stderr and "TensorFlow 0.1" in result.stderr


def test_run_bad_input_exits_2(tmp_path):
    path = _save(tmp_path, {})
    no_command = run_cli("run", "--profile", str(path))
    assert no_command.returncode == 2 and "give the command" in no_command.stderr
    missing = run_cli("run", "--profile", str(path), "--", "no-such-program-here")
    assert missing.returncode == 2 and "no such program" in missing.stderr
    no_profile = run_cli("run", "--profile", str(tmp_path / "none.json"), "--", "true")
    assert no_profile.returncode == 2 and "Traceback" not in no_profile.stderr


# ------------------------------------------------------------------ a serving layout
REPORT = (
    "import json, os, sys; i = os.environ['TFPERF_INSTANCE']; "
    "json.dump({'instances': os.environ['TFPERF_INSTANCES'], "
    "'cpus': sorted(os.sched_getaffinity(0)), 'cores': os.environ.get('TFPERF_CORES'), "
    "'intra': os.environ.get('TF_NUM_INTRAOP_THREADS'), "
    "'threads': os.environ.get('TFPERF_THREADS'), "
    "'onednn': os.environ.get('TF_ENABLE_ONEDNN_OPTS')}, "
    "open(os.path.join(sys.argv[1], i + '.json'), 'w')); sys.exit(3 if i == sys.argv[2] else 0)"
)


def _serving(tmp_path, **layout):
    serving = {"instances": 2, "threads": 1, "max_batch": 4, "max_delay_ms": 2.0, **layout}
    return _save(
        tmp_path, {"onednn": False}, objective="server",
        serving=serving | {"max_qps_at_slo": 900.0, "slo_ms": 20.0},
    )


def _two_cpus() -> list[int]:
    cpus = sorted(os.sched_getaffinity(0))
    require(len(cpus) >= 2, "pinning two instances needs two usable CPUs")
    return cpus[:2]


def test_a_serving_profile_runs_one_pinned_copy_per_instance(tmp_path):
    first, second = _two_cpus()
    path = _serving(tmp_path, cores=[[first], [second]])
    result = run_cli(
        "run", "--profile", str(path), "--", sys.executable, "-c", REPORT, str(tmp_path), "none"
    )
    assert result.returncode == 0, result.stderr
    seen = {i: json.loads((tmp_path / f"{i}.json").read_text()) for i in (0, 1)}
    for index, cpu in ((0, first), (1, second)):
        assert seen[index] == {
            "instances": "2", "cpus": [cpu], "cores": str(cpu), "intra": "1", "threads": "1",
            "onednn": "0",
        }
    assert "starting 2 instances" in result.stderr


def test_a_copy_that_fails_is_reported_and_its_code_returned(tmp_path):
    path = _serving(tmp_path)
    result = run_cli(
        "run", "--profile", str(path), "--", sys.executable, "-c", REPORT, str(tmp_path), "1"
    )
    assert result.returncode == 3
    assert "instance 1 of 2 exited with code 3" in result.stderr
    unpinned = json.loads((tmp_path / "0.json").read_text())
    assert unpinned["cpus"] == sorted(os.sched_getaffinity(0)) and unpinned["cores"] is None


SERVE = (
    "import os, sys, time; "
    "open(os.path.join(sys.argv[1], os.environ['TFPERF_INSTANCE']), 'w').write(str(os.getpid()));"
    "time.sleep(600)"
)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def test_ctrl_c_stops_every_copy(tmp_path):
    path = _serving(tmp_path, instances=3, threads=None, max_batch=1, max_delay_ms=0.0)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tfperf", "run", "--profile", str(path), "--",
         sys.executable, "-c", SERVE, str(tmp_path)],
        stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("[0-9]"))) < 3 or any(
            not p.read_text() for p in tmp_path.glob("[0-9]")
        ):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
            time.sleep(0.1)
        pids = [int((tmp_path / str(i)).read_text()) for i in range(3)]
        assert not any(_gone(pid) for pid in pids)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert all(_gone(pid) for pid in pids)


def test_a_layout_pinned_to_cpus_this_machine_lacks_is_refused(tmp_path):
    path = _serving(tmp_path, cores=[[4096], [4097]])
    result = run_cli("run", "--profile", str(path), "--", sys.executable, "-c", "pass")
    assert result.returncode == 2
    assert "CPUs 4096" in result.stderr and "tune again" in result.stderr
