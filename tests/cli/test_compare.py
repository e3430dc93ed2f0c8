"""`tfperf compare`: several candidates interleaved in one real run, and two stored runs
compared as a CI gate (exit 1 on a significant regression)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from helpers import run_cli
from tfperf.store import Store

WORKLOAD = {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1}


def _add_trial(
    store: Store, run: int, label: str, config: dict, seconds: float, seed: int, role: str
) -> int:
    """A finished trial of ``run`` with 12 blocks of lognormal samples around ``seconds``."""
    rng = np.random.default_rng(seed)
    trial = store.new_trial(run, label, config, role)
    for _ in range(12):
        store.add_block(trial, (seconds * rng.lognormal(0, 0.03, 20)).tolist(), "steady")
    store.finish_trial(trial, "ok", {"batch": 1}, None)
    return trial


def _stored_run(
    store: Store, seconds: float, seed: int, label: str = "default", config: dict | None = None
) -> int:
    """A finished run whose one trial (``default`` unless named) runs around ``seconds``."""
    run = store.new_run("bench", "tfperf bench", WORKLOAD, {"fingerprint": "m"}, {})
    _add_trial(store, run, label, config or {}, seconds, seed, "baseline")
    store.finish_run(run, "ok", {})
    return run


def _compare(store_path: Path, a: int, b: int, *flags: str):
    return run_cli(
        "compare", str(a), str(b), "--store", str(store_path), *flags, env={"COLUMNS": "200"}
    )


@pytest.fixture
def two_runs(store_path: Path) -> tuple[int, int, int]:
    with Store.open(store_path) as store:
        return (
            _stored_run(store, 0.010, 1),
            _stored_run(store, 0.013, 2),
            _stored_run(store, 0.008, 3),
        )


def test_regression_gate_exits_1_when_b_is_slower(store_path, two_runs):
    base, slower, _ = two_runs
    res = _compare(store_path, base, slower, "--fail-on-regression", "--json")
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    assert doc["schema_version"] == 1 and doc["kind"] == "compare-runs"
    (comp,) = doc["comparisons"]
    assert comp["speedup"]["verdict"] == "slower"
    assert comp["speedup"]["median"] == pytest.approx(0.010 / 0.013, rel=0.05)
    low, high = comp["speedup"]["ci95"]
    assert low <= comp["speedup"]["median"] <= high < 1
    assert doc["regressions"] == ["default"]
    assert "significantly slower" in res.stderr


def test_a_faster_b_passes_the_gate(store_path, two_runs):
    base, _, faster = two_runs
    res = _compare(store_path, base, faster, "--fail-on-regression")
    assert res.returncode == 0, res.stderr
    assert "faster" in res.stdout


def test_without_the_flag_a_regression_is_reported_not_gated(store_path, two_runs):
    base, slower, _ = two_runs
    res = _compare(store_path, base, slower, "--json")
    assert res.returncode == 0
    assert json.loads(res.stdout)["regressions"] == ["default"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["1"], "two run ids"),
        (["1", "999"], "no run 999"),
        (["1", "x"], "not a run id"),
        (["--workload", "mlp"], "at least one candidate"),
        (["1", "2", "--threshold", "-1"], "--threshold"),
    ],
)
def test_bad_input_is_exit_2(args, needle, store_path, two_runs):
    res = run_cli("compare", *args, "--store", str(store_path))
    assert res.returncode == 2, res.stderr
    assert needle in res.stderr and "Traceback" not in res.stderr


def _compare_tiny_mlp(store: Path, *flags: str):
    """``tfperf compare --workload mlp --size tiny FLAGS --no-peak --json`` into ``store``."""
    return run_cli(
        "compare",
        "--workload",
        "mlp",
        "--size",
        "tiny",
        *flags,
        "--no-peak",
        "--store",
        str(store),
        "--json",
    )


def test_interleaved_candidates_then_the_run_against_itself(tmp_path):
    store = tmp_path / "store.sqlite"
    res = _compare_tiny_mlp(
        store,
        "--set",
        "inter_threads=1,intra_threads=1",
        "--env",
        "OMP_NUM_THREADS=1",
        "--budget",
        "2",
        "--parallel-start",
    )
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["kind"] == "compare"
    labels = [r["label"] for r in doc["results"]]
    assert labels == ["default", "intra_threads=1,inter_threads=1", "env:OMP_NUM_THREADS=1"]
    assert [c["candidate"] for c in doc["comparisons"]] == labels[1:]
    for comp in doc["comparisons"]:
        assert comp["speedup"]["n_pairs"] == doc["rounds"]
    same = run_cli(
        "compare",
        str(doc["run_id"]),
        "latest",
        "--store",
        str(store),
        "--fail-on-regression",
        "--json",
    )
    assert same.returncode == 0, same.stderr
    again = json.loads(same.stdout)
    assert [c["label_a"] for c in again["comparisons"]] == labels
    for comp in again["comparisons"]:
        assert comp["speedup"]["median"] == pytest.approx(1.0)
        assert comp["speedup"]["verdict"] != "slower"


def test_the_gate_trips_on_a_candidate_that_crashed(tmp_path):
    res = _compare_tiny_mlp(
        tmp_path / "store.sqlite",
        "--env",
        "TFPERF_INJECT_FAULT=segfault-on-run",
        "--budget",
        "1",
        "--fail-on-regression",
    )
    assert res.returncode == 1, res.stderr[-2000:]
    doc = json.loads(res.stdout)  # the document is printed before the gate trips
    assert [r["status"] for r in doc["results"]] == ["ok", "failed"]
    assert "failed: env:TFPERF_INJECT_FAULT=segfault-on-run (worker crashed with SIGSEGV)" in (
        res.stderr
    )
    assert "Traceback" not in res.stderr


def test_a_run_stored_with_the_old_label_order_still_pairs_by_its_config(store_path):
    # Labels once listed knobs in another order ("intra_threads=2,xla=jit"); today's label of
    # the same config is "xla=jit,intra_threads=2": the two runs still compare trial by trial.
    config = {"intra_threads": 2, "xla": "jit", "env": {}}
    extra = {"intra_threads": 2, "xla": "off", "env": {}}  # another config: never its pair
    with Store.open(store_path) as store:
        old = _stored_run(store, 0.010, 4, "intra_threads=2,xla=jit", config)
        new = _stored_run(store, 0.013, 5, "xla=jit,intra_threads=2", config)
        _add_trial(store, new, "intra_threads=2", extra, 0.001, 6, "candidate")
    res = _compare(store_path, old, new, "--json")
    assert res.returncode == 0, res.stderr
    (comp,) = json.loads(res.stdout)["comparisons"]
    assert comp["speedup"]["verdict"] == "slower"


def test_a_run_stored_with_the_former_thread_knob_name_pairs_with_todays(store_path):
    # The runtime's thread count was stored as litert_threads; today it is runtime_threads.
    before = {"runtime": "litert", "litert_threads": 2, "env": {}}
    today = {"runtime": "litert", "runtime_threads": 2, "env": {}}
    with Store.open(store_path) as store:
        old = _stored_run(store, 0.010, 7, "runtime=litert,litert_threads=2", before)
        new = store.new_run("bench", "tfperf bench", WORKLOAD, {"fingerprint": "m"}, {})
        _add_trial(store, new, "runtime=litert", {"runtime": "litert"}, 0.001, 8, "baseline")
        _add_trial(store, new, "runtime=litert,runtime_threads=2", today, 0.013, 9, "candidate")
        store.finish_run(new, "ok", {})
    res = _compare(store_path, old, new, "--json")
    assert res.returncode == 0, res.stderr
    (comp,) = json.loads(res.stdout)["comparisons"]
    assert (comp["label_a"], comp["label_b"]) == (
        "runtime=litert,litert_threads=2",
        "runtime=litert,runtime_threads=2",
    )
    assert comp["speedup"]["verdict"] == "slower"


COMPARE_TWO_APPLIES = {"runs", "store", "as_json", "export", "threshold", "fail_on_regression",
                       "fail_on_memory_growth", "quiet", "verbose"}


def test_comparing_two_runs_refuses_every_option_that_would_measure(tmp_path, monkeypatch):
    """Each option of the command itself that ``compare A B`` does not apply (a measurement's:
    --budget, --ops, --set ...), typed beside two run ids, is one sentence naming it, before
    any run is read."""
    import click
    from click.testing import CliRunner

    from tfperf.cli import app
    from tfperf.core.errors import UserError

    monkeypatch.chdir(tmp_path)  # no configuration file
    command = app.commands["compare"]
    walked = []
    for param in command.params:
        if not isinstance(param, click.Option) or param.name in COMPARE_TWO_APPLIES:
            continue
        flag = max(param.opts, key=len)
        typed = [flag] if param.is_flag else [flag, "2" if param.name != "size" else "tiny"]
        result = CliRunner().invoke(app, ["compare", "1", "2", *typed,
                                          "--store", str(tmp_path / "none.sqlite")])
        assert isinstance(result.exception, UserError), (typed, result.output)
        said = str(result.exception)
        # --model and --workload name the other way of comparing
        assert flag in said or "tfperf compare --workload NAME" in said, (typed, said)
        walked.append(flag)
    assert {"--budget", "--ops", "--set", "--price-per-hour", "--no-peak"} <= set(walked)
