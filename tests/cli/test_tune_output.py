"""``tfperf tune``'s output off a terminal: whole labels in the ranked table, no stray lines.

The tune itself is covered by ``tests/test_tune_cli.py``; these check what people read when
stdout or stderr is a file or a pipe (CI logs, ``| tee``), without TensorFlow.
"""

from __future__ import annotations

from helpers import run_cli
from tfperf.cli.tune import render_tune
from tfperf.core.knobs import adoption, label
from tfperf.tuning.space import SpaceFacts, build_space


def _doc(configs: list[dict]) -> dict:
    """A tune result over ``configs`` in the shape :func:`tfperf.tuning.tuner.tune` returns."""
    rows = [
        {
            "label": label(c),
            "config": c,
            "status": "measured",
            "reason": "",
            "speedup": {"median": 1.0 + i / 10, "ci95": [1.0, 1.2 + i / 10]},
            "time_ms": 2.0 - i / 10,
            "max_abs_error": 1e-6,
            "max_rel_error": 1e-7,
            "adoption": adoption(c),
        }
        for i, c in enumerate(configs)
    ]
    return {
        "run_id": 1,
        "trials": len(rows),
        "stopped": "converged",
        "candidates": rows,
        "unavailable": [],
        "default": {"time_ms": 2.0},
        "recommendation": {"keep_default": True, "label": "default", "reason": "no step"},
        "warnings": [],
        "profile": "profile.json",
    }


def test_the_ranked_table_keeps_each_label_on_one_line_off_a_terminal(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")  # what a pipe gets: rich's default width
    space = build_space(
        SpaceFacts(cores=8, allocators={"jemalloc": "/lib/libjemalloc.so.2"}, openvino=True)
    )
    longest = sorted(space.points(), key=lambda c: len(label(c)))[-4:]
    assert all(len(label(c)) > 40 for c in longest)
    render_tune(_doc(longest))
    lines = capsys.readouterr().out.splitlines()
    for config in longest:
        assert any(label(config) in line for line in lines), (label(config), lines)


def test_an_error_inside_the_tune_is_its_first_line_on_stderr(tmp_path):
    # the unknown run is found inside tune(), while the progress display is up
    result = run_cli(
        "tune", "--workload", "mlp", "--resume", "999", "--store", str(tmp_path / "s.sqlite")
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: there is no run 999"), repr(result.stderr)
