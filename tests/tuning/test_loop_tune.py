"""``tfperf tune --train`` of a custom loop, as a new user runs it: the plain Python step of
TensorFlow's guide without its ``@tf.function`` (``tests/models/loop_factories.py``).

One quick tune over the knobs of the step's form (graph, steps per call, XLA), shared by the
tests below: the search, the guard and the answer are the same as for a Keras model's; the
answer is adopted by the diff ``tfperf apply`` and ``tfperf run`` print.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_cli

pytestmark = [pytest.mark.tf, pytest.mark.slow]

FACTORIES = Path(__file__).resolve().parent.parent / "models"


@pytest.fixture(scope="module")
def tuned(tmp_path_factory) -> tuple[dict, Path]:
    root = tmp_path_factory.mktemp("looptune")
    profile = root / "p.json"
    res = run_cli("tune", "--train", "loop_factories:eager_regression", "--quick", "--knobs",
                  "graph,steps_per_execution,xla", "--guard-steps", "50", "--store",
                  str(root / "s.db"), "--profile-out", str(profile), "--json", cwd=FACTORIES,
                  timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout), profile


def test_the_loop_is_tuned_on_the_same_search_and_guard_as_a_keras_model(tuned):
    doc, _ = tuned
    assert doc["train"]["baseline"]["step"] == "loop"
    assert doc["train"]["baseline"]["graph"] is False
    rows = {row["label"]: row for row in doc["candidates"]}
    # the step left eager is tried as a graph, and guarded before it can be the answer
    assert rows["graph=on"]["guard"]["verdict"] == "accepted"
    assert rows["graph=on"]["speedup"]["verdict"] == "faster"
    rec = doc["recommendation"]
    assert not rec["keep_default"] and rec["speedup"]["verdict"] == "faster"
    assert rec["guard"]["verdict"] == "accepted"
    assert rec["label"] != "default"


def test_the_answer_is_a_diff_against_the_step_as_written(tuned):
    doc, profile = tuned
    code = doc["recommendation"]["code"]
    assert code and all(line[:2] in ("+ ", "- ", "  ") or line == "+" for line in code)
    assert any(line.startswith("+ @tf.function") for line in code)
    python = run_cli("apply", str(profile), "--format", "python")
    assert python.returncode == 0, python.stderr
    assert "# change your training loop (a diff against a step written the usual way):" in (
        python.stdout)
    run = run_cli("run", "--profile", str(profile), "--", "python", "-c", "print('trained')")
    assert run.returncode == 0 and "trained" in run.stdout
    assert "change your training loop" in run.stderr
    assert "+ @tf.function" in run.stderr


def test_a_model_under_mirrored_strategy_is_guarded_in_its_scope_and_told_what_it_cannot_try(
    tmp_path,
):
    # the default's guard runs in every tune: its loss recorder's variables are made in the
    # strategy's scope, one per replica, and fit's distributed batches feed it
    res = run_cli("tune", "--train", "strategy_factories:mirrored_keras", "--knobs",
                  "xla,steps_per_execution", "--max-trials", "1", "--guard-steps",
                  "50", "--store", str(tmp_path / "s.db"), "--profile-out",
                  str(tmp_path / "p.json"), "--json", cwd=FACTORIES, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert doc["train"]["baseline"]["strategy"] == "MirroredStrategy (2 replicas)"
    losses = doc["train"]["default_losses"]
    assert len(losses) == 50 and losses[-5] < losses[0]
    why = {(u["knob"], u["value"]): u["reason"] for u in doc["unavailable"]}
    assert why[("xla", "jit")].startswith("not tried under MirroredStrategy: XLA compiles")
    assert any(knob == "steps_per_execution" and "Keras' own fit fails" in reason
               for (knob, _), reason in why.items())
