"""``-q`` and ``-v`` on every command: accepted everywhere, exclusive, never in ``--json``'s way,
and ``-q`` leaves only the results."""

from __future__ import annotations

import json

import click
import pytest

from helpers import run_cli
from tfperf.cli import app


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path under ``group`` (``("builds", "plan")``, ...)."""
    paths = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            paths += _commands(command, (*prefix, name))
        else:
            paths.append((*prefix, name))
    return paths


def _cheap(tmp) -> dict[tuple[str, ...], list[str]]:
    """An invocation of each command that ends before any worker starts."""
    store = str(tmp / "none.sqlite")
    return {
        ("doctor",): ["--python", str(tmp / "no-python")],
        ("bench",): ["--workload", "nope"],
        ("compare",): ["1", "2", "--store", store],
        ("tune",): ["--workload", "nope"],
        ("run",): ["--profile", str(tmp / "none.json"), "--", "true"],
        ("apply",): [str(tmp / "none.json")],
        ("pipeline",): [],
        ("builds", "plan"): ["--json"],
        ("builds", "register"): [str(tmp / "none.whl")],
        ("builds", "compare"): ["--candidate", "x"],
        ("builds", "explain"): ["--store", store, "--json"],
        ("history",): ["--store", store],
        ("report",): ["latest", "--store", store],
        ("fleet", "doctor"): ["--store", store],  # no cluster named (RAY_ADDRESS unset)
        ("fleet", "bench"): ["--workload", "nope"],
        ("fleet", "tune"): ["--workload", "nope"],
        ("fleet", "report"): ["--store", store],
    }


def test_every_command_has_quiet_and_verbose():
    for path in _commands(app):
        command = app
        for name in path:
            command = command.commands[name]
        options = {opt for p in command.params for opt in p.opts}
        assert {"-q", "--quiet", "-v", "--verbose"} <= options, path


@pytest.mark.parametrize("flag", ["-q", "-v"])
def test_every_command_accepts_quiet_and_verbose(tmp_path, flag):
    cheap = _cheap(tmp_path)
    assert set(cheap) == set(_commands(app)), "give each command a cheap invocation here"
    for path, args in cheap.items():
        result = run_cli(*path, flag, *args, timeout=60)
        assert result.returncode in (0, 2), (path, result.stderr)
        assert "No such option" not in result.stderr and "Traceback" not in result.stderr, path
        if result.returncode == 2:  # an error still prints; under -q nothing else does
            errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
            assert errors, (path, result.stderr)
            if flag == "-q":
                assert result.stderr.startswith("error:"), (path, result.stderr)


@pytest.mark.parametrize(
    "args",
    [("history", "-q", "-v"), ("history", "--verbose", "--quiet"), ("-q", "history", "-v")],
)
def test_quiet_and_verbose_together_is_one_sentence_and_exit_2(tmp_path, args):
    result = run_cli(*args, "--store", str(tmp_path / "s.sqlite"), timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: -q/--quiet and -v/--verbose contradict each other: give one of them."
    )


def test_verbose_json_is_one_clean_document(tmp_path):
    result = run_cli("history", "-v", "--json", "--store", str(tmp_path / "s.sqlite"), timeout=60)
    assert result.returncode == 0
    assert json.loads(result.stdout)["runs"] == []


@pytest.mark.tf
@pytest.mark.slow
def test_quiet_bench_prints_the_results_and_nothing_else(tmp_path):
    result = run_cli(
        "bench",
        "--workload",
        "mlp",
        "--size",
        "tiny",
        "--budget",
        "1",
        "--no-peak",
        "-q",
        "--store",
        str(tmp_path / "s.sqlite"),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr == ""
    assert "p50 ms" in result.stdout and "stopped:" in result.stdout


@pytest.mark.parametrize(("flag", "lines"), [("-q", 0), (None, 1), ("-v", 3)])
def test_quiet_silences_tune_progress_and_verbose_adds_its_phases(capsys, flag, lines):
    from tfperf.progress.displays import tune_progress
    from tfperf.tuning.search import Outcome

    failed = Outcome({"runtime": "litert"}, "failed", reason="crashed", info={"error": {}})
    ctx = app.make_context("tfperf", [flag, "history"] if flag else ["history"])
    with ctx, tune_progress() as progress:
        progress.phase("starting the default configuration")
        progress.start(2)
        progress.candidate(failed.label)
        progress.done(failed)
        progress.phase("confirming")
    err = capsys.readouterr().err
    assert len(err.splitlines()) == lines, err
    if lines:
        assert "trial 1/2  runtime=litert  -  -  failed: crashed" in err
