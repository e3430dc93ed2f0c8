"""``tfperf run --profile P -- CMD``: runs CMD with the profile's env, exits with its code."""

from __future__ import annotations

import sys

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
