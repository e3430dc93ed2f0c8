"""Progress off a terminal (CI logs, pipes): one plain line per finished thing, nothing animated.

The real CLI with its output captured (not a terminal), and the tune display fed real
outcome records in-process.
"""

from __future__ import annotations

import json
import re

import pytest

from helpers import run_cli
from tfperf.progress.displays import trial_line, tune_progress
from tfperf.tuning.search import Outcome

TRIAL = re.compile(
    r"^trial (\d+)/(\d+)  (\S+)  (\S+ ms|-)  (\S+x|-)  (ok|rejected: .+|failed: .+)$"
)


def _not_animated(text: str) -> None:
    assert "\r" not in text and "\x1b" not in text, repr(text[:500])


def _outcomes() -> list[Outcome]:
    speedup = {"median": 4.1, "ci95": [3.9, 4.3], "verdict": "faster"}
    return [
        Outcome({"runtime": "litert"}, "measured", speedup=speedup, time_ms=1.92),
        Outcome({"runtime": "litert-dynint8"}, "rejected", reason="max abs error 0.3", time_ms=2.0),
        Outcome(
            {"allocator": "jemalloc"},
            "failed",
            reason="worker killed by\nsignal 11",
            info={"error": {"stderr_tail": "Segmentation fault"}},
        ),
    ]


def test_trial_lines_count_on_from_a_resumed_tune(capsys):
    with tune_progress() as progress:
        progress.phase("starting the default configuration")
        progress.start(12, 120.0, resumed=2)
        for outcome in _outcomes():
            progress.candidate(outcome.label)
            progress.done(outcome)
        progress.phase("confirming runtime=litert against the default")
    err = capsys.readouterr().err
    _not_animated(err)
    assert err.splitlines() == [
        "trial 3/12  runtime=litert  1.92 ms  4.10x  ok",
        "trial 4/12  runtime=litert-dynint8  2 ms  -  rejected: max abs error 0.3",
        "trial 5/12  allocator=jemalloc  -  -  failed: worker killed by signal 11",
    ]


def test_verbose_shows_a_crashed_workers_log_but_not_the_traceback_of_a_not_tried(capsys):
    from tfperf.progress import VERBOSE, at_level

    not_tried = "not tried: the model's train_step uses TensorFlow (tf.GradientTape, m.py:9)"
    outcomes = [
        _outcomes()[2],
        Outcome({"runtime": "keras-jax"}, "failed", reason=f"worker reported: {not_tried}",
                info={"error": {"message": not_tried, "kind": "user",
                                "stderr_tail": "Traceback (most recent call last):\n  UserError"}}),
    ]
    with at_level(VERBOSE), tune_progress() as progress:
        progress.start(2, None)
        for outcome in outcomes:
            progress.candidate(outcome.label)
            progress.done(outcome)
    err = capsys.readouterr().err
    assert "    | Segmentation fault" in err.splitlines()
    assert f"failed: worker reported: {not_tried}" in err and "Traceback" not in err


def test_a_notice_is_a_plain_line_where_phases_are_shown_only_with_verbose(capsys):
    with tune_progress() as progress:
        progress.phase("starting the default configuration")
        progress.notice("--quick's time limit grows from 110 s to 300 s: ...")
    err = capsys.readouterr().err
    _not_animated(err)
    assert err.splitlines() == ["--quick's time limit grows from 110 s to 300 s: ..."]


def test_a_trial_line_without_a_trial_limit_has_no_total():
    line = trial_line("7", _outcomes()[0])
    assert line == "trial 7  runtime=litert  1.92 ms  4.10x  ok"


def test_the_eta_is_the_sooner_of_the_time_and_the_trial_limits():
    progress = tune_progress()
    assert progress.eta() is None  # before the search: unknown
    progress.start(None, 120.0)
    assert 119.0 < progress.eta() <= 120.0
    progress.start(12, None)
    assert progress.eta() is None  # no trial finished yet: no rate to go by
    progress.phase("confirming")
    assert progress.eta() is None


@pytest.mark.tf
@pytest.mark.slow
def test_tune_off_a_terminal_prints_one_line_per_finished_trial(tmp_path):
    result = run_cli(
        "tune",
        "--workload",
        "mlp",
        "--quick",
        "--max-trials",
        "2",
        "--size",
        "tiny",
        "--knobs",
        "runtime",
        "--json",
        "--store",
        str(tmp_path / "s.sqlite"),
        "--profile-out",
        str(tmp_path / "profile.json"),
        timeout=500,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    doc = json.loads(result.stdout)
    _not_animated(result.stderr)
    lines = [m for m in map(TRIAL.match, result.stderr.splitlines()) if m]
    assert len(lines) == doc["trials"] == 2, result.stderr
    assert [m.group(1) for m in lines] == ["1", "2"] and {m.group(2) for m in lines} == {"2"}
    assert {m.group(3) for m in lines} == {c["label"] for c in doc["candidates"]}


@pytest.mark.tf
@pytest.mark.slow
def test_verbose_bench_off_a_terminal_says_each_worker_ready_and_each_block(tmp_path):
    result = run_cli(
        "bench",
        "--workload",
        "mlp",
        "--size",
        "tiny",
        "--budget",
        "1",
        "--no-peak",
        "-v",
        "--json",
        "--store",
        str(tmp_path / "s.sqlite"),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    doc = json.loads(result.stdout)  # -v never reaches --json's stdout
    _not_animated(result.stderr)
    lines = result.stderr.splitlines()
    assert [line for line in lines if ": ready" in line] == [
        line for line in lines if line.startswith("default: ready, cold start ")
    ]
    assert len([line for line in lines if ": ready" in line]) == 1
    steady = [line for line in lines if line.startswith("default: steady block round ")]
    assert len(steady) == doc["rounds"]
