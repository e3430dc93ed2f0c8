"""``tfperf fleet`` without a cluster: the sentence that names one, and Ray loaded only by the
fleet commands. (The commands on a real cluster: tests/fleet/test_on_a_ray_cluster.py.)"""

from __future__ import annotations

import subprocess
import sys

from helpers import run_cli


def test_fleet_without_a_cluster_named_says_how_to_name_one(tmp_path):
    res = run_cli("fleet", "doctor", "--store", str(tmp_path / "s.sqlite"), env={"RAY_ADDRESS": ""})
    assert res.returncode == 2
    assert "--ray-address" in res.stderr and "RAY_ADDRESS" in res.stderr
    assert "Traceback" not in res.stderr


def test_fleet_report_of_a_store_without_fleet_runs_says_what_to_run(tmp_path):
    store = tmp_path / "s.sqlite"
    from tfperf.store import Store

    Store.open(store).close()
    res = run_cli("fleet", "report", "--store", str(store))
    assert res.returncode == 2 and "tfperf fleet bench" in res.stderr


def test_the_help_does_not_load_ray():
    code = (
        "import sys\nfrom tfperf.cli import main\nmain(['fleet', '--help'])\n"
        "assert 'ray' not in sys.modules, 'ray loaded'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "bench" in done.stdout and "tune" in done.stdout


def test_a_cluster_address_nobody_answers_on_is_one_sentence_at_once(tmp_path):
    import socket

    with socket.socket() as probe:  # a loopback port that was free a moment ago: closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    res = run_cli(
        "fleet",
        "bench",
        "--workload",
        "mlp",
        "--ray-address",
        f"127.0.0.1:{port}",
        "--store",
        str(tmp_path / "s.sqlite"),
        timeout=60,
    )
    assert res.returncode == 2
    assert f"nothing answers at 127.0.0.1:{port}" in res.stderr and "Traceback" not in res.stderr
