"""The measuring loop with real workers: interleaving, stop rules, a failing worker that does
not stop the run, the store written as blocks arrive, and the machine's matmul peak."""

from __future__ import annotations

import json

import pytest

from tfperf.benchmark import BenchOptions, bench
from tfperf.core.config import Config
from tfperf.report.html import build_report
from tfperf.runner.measure import Listener
from tfperf.store import Store

TINY_MLP = {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 2}
MIN_ROUNDS = 8


class Recorder(Listener):
    """Remembers every event in order."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def trial(self, trial, event):
        self.events.append(("trial", trial.index, event))

    def block(self, trial, samples_s, phase, info):
        self.events.append(("block", trial.index, phase, info.get("round"), len(samples_s)))

    def round(self, done, elapsed_s, budget_s):
        self.events.append(("round", done))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One bench run: default, a harmless candidate, and a candidate whose worker segfaults."""
    store = Store.open(tmp_path_factory.mktemp("store") / "store.sqlite")
    configs = [
        Config(),
        Config.parse(["inter_threads=1"], []),
        Config.parse([], ["TFPERF_INJECT_FAULT=segfault-on-run"]),
    ]
    recorder = Recorder()
    doc = bench(
        TINY_MLP,
        configs,
        store=store,
        listener=recorder,
        options=BenchOptions(
            budget_s=60,
            precision=0.5,
            min_rounds=MIN_ROUNDS,
            block_s=0.02,
            parallel_start=True,
            timeout_s=60,
            peak=False,
        ),
    )
    yield doc, recorder, store
    store.close()


def test_a_failing_worker_is_a_failed_trial_and_the_others_go_on(run):
    doc, _, _ = run
    ok, other, failed = doc["results"]
    assert [r["status"] for r in doc["results"]] == ["ok", "ok", "failed"]
    assert failed["error"]["reason"] == "worker crashed with SIGSEGV"
    assert failed["n"] == 0
    assert ok["n"] > 0 and other["n"] > 0


def test_rounds_interleave_every_live_config_in_a_shuffled_order(run):
    doc, recorder, _ = run
    steady = [(e[3], e[1]) for e in recorder.events if e[0] == "block" and e[2] == "steady"]
    by_round: dict[int, list[int]] = {}
    for round_no, index in steady:
        by_round.setdefault(round_no, []).append(index)
    assert len(by_round) == doc["rounds"]
    assert all(sorted(order) == [0, 1] for order in by_round.values())
    # the seeded shuffle puts each config first in some round and second in another
    assert {tuple(order) for order in by_round.values()} == {(0, 1), (1, 0)}
    # warm-up blocks come first, before any steady block, one per started trial
    phases = [e[2] for e in recorder.events if e[0] == "block"]
    assert phases[:3] == ["warmup"] * 3 and "warmup" not in phases[3:]


def test_a_loose_precision_target_stops_the_run_after_the_minimum_rounds(run):
    doc, _, _ = run
    assert doc["stopped"] == "precision"
    assert doc["rounds"] >= MIN_ROUNDS


def test_results_carry_the_figures_and_their_names(run):
    doc, _, _ = run
    res = doc["results"][0]
    lat = res["latency_ms"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"]
    low, high = lat["p50_ci95"]
    assert low <= lat["p50"] <= high
    assert res["throughput_per_s"] == pytest.approx(2 / (lat["p50"] / 1e3))
    assert res["cold_start_s"] >= res["import_s"] + res["load_s"] + res["first_call_s"]
    assert res["blocks"] == doc["rounds"]
    assert res["flops"]["per_call"] and res["flops"]["source"] == "analytic"
    assert res["flops"]["gflops_per_s"] > 0 and res["flops"]["share_of_peak"] is None
    for style in ("eager", "predict"):
        assert res["call_styles"][style]["vs_function"] > 0
    assert doc["results"][1]["call_styles"] == {}


def test_call_styles_are_timed_for_a_tenth_of_a_short_budget():
    # information only: a one-second bench does not spend two more seconds on them
    assert BenchOptions(budget_s=1.0).settings().extra_s == pytest.approx(0.1)
    assert BenchOptions(budget_s=60.0).settings().extra_s == 1.0


def test_the_comparison_has_a_speedup_interval_and_verdict(run):
    doc, _, _ = run
    assert len(doc["comparisons"]) == 1
    comp = doc["comparisons"][0]
    assert (comp["baseline"], comp["candidate"]) == ("default", "inter_threads=1")
    speed = comp["speedup"]
    assert speed["n_pairs"] == doc["rounds"]
    low, high = speed["ci95"]
    assert low <= speed["median"] <= high
    assert speed["verdict"] in ("faster", "slower", "same", "inconclusive")


def test_the_store_holds_every_block_and_the_failure(run):
    doc, _, store = run
    loaded = store.load_run(doc["run_id"])
    assert loaded["run"]["status"] == "partial"
    trials = {t["label"]: t for t in loaded["trials"]}
    assert len(trials) == 3
    base = trials["default"]
    steady_blocks = [b for b in base["blocks"] if b["phase"] == "steady"]
    assert len(steady_blocks) == doc["rounds"]
    assert len(base["samples_s"]) == doc["results"][0]["n"]
    failed = trials["env:TFPERF_INJECT_FAULT=segfault-on-run"]
    assert failed["status"] == "failed"
    assert failed["error"]["reason"] == "worker crashed with SIGSEGV"
    assert len(loaded["comparisons"]) == 1
    json.dumps(loaded)  # everything stored is JSON


def test_peak_probe_is_measured_once_and_cached(tmp_path, monkeypatch):
    from tfperf.machine.facts import collect_machine
    from tfperf.peak import cache_path, get_peak, has_bf16, share_of_peak

    monkeypatch.setenv("TFPERF_CACHE_DIR", str(tmp_path))
    machine = collect_machine()
    peak = get_peak(machine, matrix=256)
    assert peak is not None and peak["fp32_gflops"] > 0
    assert (peak["bf16_gflops"] is not None) == has_bf16(machine)
    path = cache_path(machine["fingerprint"])
    assert json.loads(path.read_text()) == peak
    path.write_text(json.dumps({**peak, "fp32_gflops": 123.0}))
    assert get_peak(machine)["fp32_gflops"] == 123.0
    used, share = share_of_peak(12.3e9, {"fp32_gflops": 123.0})
    assert (used, share) == (123.0, pytest.approx(0.1))


def test_a_baseline_that_crashes_is_reported_not_raised(tmp_path):
    """A crash is a finding about the workload, not bad input: a document comes back."""
    with Store.open(tmp_path / "store.sqlite") as store:
        doc = bench(
            TINY_MLP,
            [Config.parse([], ["TFPERF_INJECT_FAULT=segfault-on-run"])],
            store=store,
            options=BenchOptions(
                budget_s=1,
                timeout_s=60,
                peak=False,
                extras=(),
            ),
        )
        loaded = store.load_run(doc["run_id"])
    (base,) = doc["results"]
    assert base["role"] == "baseline" and base["status"] == "failed"
    assert base["error"]["reason"] == "worker crashed with SIGSEGV"
    assert any("the baseline" in w and "SIGSEGV" in w for w in doc["warnings"])
    assert loaded["run"]["status"] == "failed"
    assert loaded["trials"][0]["error"]["kind"] is None


class Vetting(Recorder):
    """Refuses the third worker once it is ready, the way builds compare refuses a worker
    that imported another TensorFlow."""

    def __init__(self) -> None:
        super().__init__()
        self.ready_pids: dict[int, int] = {}

    def refuse(self, trial, ready):
        from tfperf.runner.handle import WorkerFailed

        self.ready_pids[trial.index] = trial.worker.pid
        if trial.index == 2:
            return WorkerFailed(f"refused {ready['install']['tf_version']}", kind="refused")
        return None


def test_per_config_interpreters_labels_fixed_blocks_and_outputs(tmp_path):
    import os
    import stat
    import sys

    import numpy as np
    import psutil

    from tfperf.runner.measure import Settings, measure

    marker = tmp_path / "wrapper-ran"
    wrapper = tmp_path / "other-python"
    wrapper.write_text(f'#!/bin/sh\ntouch "{marker}"\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    settings = Settings(
        budget_s=0.5,
        min_rounds=3,
        precision=1.0,
        calls_per_block=4,
        pythons=(sys.executable, str(wrapper), sys.executable),
        outputs_dir=str(tmp_path),
        parallel_start=True,
    )
    listener = Vetting()
    m = measure(TINY_MLP, [Config()] * 3, settings, listener, labels=["here", "there", "refused"])
    here, there, refused = m.trials
    assert [t.label for t in m.trials] == ["here", "there", "refused"]
    assert [t.python for t in m.trials] == list(settings.pythons)
    assert marker.exists()  # the second worker really ran through its own interpreter
    assert [t.status for t in m.trials] == ["ok", "ok", "failed"]
    assert refused.error["reason"].startswith("refused ") and not refused.blocks
    assert not psutil.pid_exists(listener.ready_pids[2]) or (
        psutil.Process(listener.ready_pids[2]).status() == "zombie"
    )
    for trial in (here, there):
        assert trial.calls_per_block == 4 and len(trial.blocks) == m.rounds >= 3
        assert all(len(b) == 4 for b in trial.blocks.values())
        with np.load(trial.outputs_path) as data:
            assert data["output_0"].shape[0] == TINY_MLP["batch"]
    assert refused.outputs_path is None
    assert os.path.dirname(here.outputs_path) == str(tmp_path)


def test_per_config_lists_must_match_the_configs():
    from tfperf.runner.measure import Settings, measure

    with pytest.raises(ValueError, match="one entry per config"):
        measure(TINY_MLP, [Config()], Settings(pythons=("a", "b")))
    with pytest.raises(ValueError, match="one entry per config"):
        measure(TINY_MLP, [Config(), Config()], labels=["only one"])


def test_several_processes_per_config_one_after_the_other(tmp_path):
    """``processes=2``: every config's worker is replaced by a fresh one halfway, the blocks
    say which process measured them, and the comparison reports each process's speedup."""
    store = Store.open(tmp_path / "store.sqlite")
    recorder = Recorder()
    doc = bench(
        TINY_MLP,
        [Config(), Config.parse(["inter_threads=1"], [])],
        store=store,
        listener=recorder,
        options=BenchOptions(
            budget_s=1.0,
            precision=0.5,
            min_rounds=MIN_ROUNDS,
            block_s=0.01,
            processes=2,
            timeout_s=60,
            peak=False,
        ),
    )
    loaded = store.load_run(doc["run_id"])
    for trial in loaded["trials"]:
        steady = [b for b in trial["blocks"] if b["phase"] == "steady"]
        processes = [b["info"].get("process", 0) for b in steady]
        assert processes == sorted(processes) and set(processes) == {0, 1}
        assert processes.count(1) >= MIN_ROUNDS  # each segment has its minimum rounds
        warmups = [b for b in trial["blocks"] if b["phase"] == "warmup"]
        assert [b["info"].get("process", 0) for b in warmups] == [0, 1]
        assert len(trial["info"]["restart_cold_start_s"]) == 1
    assert loaded["run"]["settings"]["processes"] == 2
    (comp,) = doc["comparisons"]
    assert comp["speedup"]["processes"]["n"] == 2
    assert len(comp["speedup"]["processes"]["speedups"]) == 2
    (reported,) = build_report(loaded)["comparisons"]  # `tfperf report --json` keeps them
    assert reported["speedup"]["processes"] == comp["speedup"]["processes"]
    store.close()


def test_a_fresh_process_that_fails_keeps_what_the_first_measured(tmp_path):
    """The candidate's second process exits at start (its interpreter refuses to run twice):
    the candidate becomes a failed trial with that reason, keeps its first process's blocks,
    and the baseline goes on in its own second process."""
    import sys

    from tfperf.runner.measure import Settings, measure

    marker = tmp_path / "ran-once"
    wrapper = tmp_path / "once-python"
    wrapper.write_text(
        f'#!/bin/sh\nif [ -e "{marker}" ]; then exit 17; fi\ntouch "{marker}"\n'
        f'exec "{sys.executable}" "$@"\n'
    )
    wrapper.chmod(0o755)
    settings = Settings(
        budget_s=0.4,
        min_rounds=3,
        precision=1.0,
        calls_per_block=4,
        processes=2,
        pythons=(sys.executable, str(wrapper)),
    )
    m = measure(TINY_MLP, [Config(), Config()], settings, Recorder(), labels=["base", "once"])
    base, once = m.trials
    assert base.status == "ok" and set(base.process_of.values()) == {0, 1}
    assert once.status == "failed" and "17" in once.error["reason"]
    assert len(once.blocks) >= 3 and set(once.process_of[r] for r in once.blocks) == {0}
    assert len(base.blocks) > len(once.blocks)
