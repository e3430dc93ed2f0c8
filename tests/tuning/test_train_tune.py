"""``tune --train``: candidates of the user's own training step, guarded over many steps.

Real workers train the tabular MLP with dropout of ``tests/models/train_factories.py`` (an
unseeded factory) for the guard's 50 steps. A learning-rate knob that only this test
registers in the knob table plants a candidate that breaks training: it runs as fast as the
default, and the guard must reject it with its figures, while the default's own loss falls.
(A candidate that cannot become the answer, or is clearly slower, is not guarded: the test
turns both off, so that the guard alone decides.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tfperf.core import knobs
from tfperf.modelref import resolve_train_target
from tfperf.report.html import build_report, render_html
from tfperf.store import Store
from tfperf.tuning import traintune, tune
from tfperf.tuning.options import TuneOptions
from tfperf.tuning.space import Space

pytestmark = [pytest.mark.tf, pytest.mark.slow]

FACTORIES = Path(__file__).resolve().parent.parent / "models"
LR = "train_lr_scale"


@pytest.fixture
def planted_knob(monkeypatch):
    """A learning-rate multiplier in the knob table (the worker's testing hook reads it)."""
    knob = knobs.Knob(LR, None, float, knobs.TF_ONLY, "model", "code", "test only")
    monkeypatch.setitem(knobs.KNOBS, LR, knob)


def test_the_guard_rejects_a_candidate_that_breaks_training(planted_knob, monkeypatch, tmp_path):
    # A same-speed candidate cannot become the answer, and on a busy machine it can time
    # "clearly slower": either way it would not be guarded. Here every candidate is taken as
    # one that could be the answer, so the guard's verdict alone decides.
    monkeypatch.setattr(traintune, "CLEARLY_SLOWER", 0.0)
    monkeypatch.setattr(traintune, "could_answer", lambda *_: True)
    monkeypatch.chdir(FACTORIES)
    workload = resolve_train_target("train_factories:tabular_mlp", guard_steps=50)
    space = Space({"runtime": ("tf",), LR: (None, 400.0)})
    options = TuneOptions(
        store_path=str(tmp_path / "s.db"), profile_out=str(tmp_path / "p.json"),
        confirm_rounds=6, min_rounds=4, max_rounds=6, candidate_timeout_s=180,
    )
    doc = tune(workload, options, space=space)
    (row,) = doc["candidates"]
    assert row["label"] == f"{LR}=400.0"
    assert row["status"] == "rejected"
    guard = row["guard"]
    assert guard["verdict"] == "rejected" and guard["steps"] == 50
    assert guard["default_final_loss"] < guard["default_first_loss"]  # the default learns
    assert row["reason"].startswith("final loss") or "became" in row["reason"]
    assert doc["recommendation"]["keep_default"] is True
    train = doc["train"]
    assert len(train["default_losses"]) == 50
    assert train["default"]["steps_per_call"] == 1
    assert len(train["trajectories"][row["label"]]) == 50
    with Store.open(tmp_path / "s.db") as store:
        loaded = store.load_run(doc["run_id"])
        page = render_html(build_report(loaded))
    # the input wait is measured in the default's worker only (the one the report shows)
    assert train["default"]["input_wait_share"] is not None
    (trial,) = [t for t in loaded["trials"] if t["label"] == row["label"]]
    assert trial["info"]["outcome"]["info"]["train"]["input_wait_share"] is None
    assert "Loss during the training guard" in page and f"{LR}=400.0" in page


def test_a_factory_that_sets_mixed_bfloat16_has_float32_tried_under_the_guard(
    monkeypatch, tmp_path
):
    # the user's own bf16 is the default; float32 held over it is the candidate, guarded
    # with the reduced-precision tolerance, and adopting it is one line of the script
    monkeypatch.setattr(traintune, "CLEARLY_SLOWER", 0.0)
    monkeypatch.setattr(traintune, "could_answer", lambda *_: True)
    monkeypatch.chdir(FACTORIES)
    workload = resolve_train_target("train_factories:own_policy", guard_steps=50)
    options = TuneOptions(
        store_path=str(tmp_path / "s.db"), profile_out=str(tmp_path / "p.json"),
        confirm_rounds=6, min_rounds=4, max_rounds=6, candidate_timeout_s=180,
    )
    doc = tune(workload, options, space=Space({"precision": ("fp32", "float32")}))
    assert doc["train"]["baseline"]["policy"] == "mixed_bfloat16"
    (row,) = doc["candidates"]
    # bf16 and float32 part by some share of the loss: either verdict is the guard's own
    assert row["label"] == "precision=float32" and row["status"] in ("measured", "rejected")
    assert row["guard"]["verdict"] in ("accepted", "rejected") and row["guard"]["steps"] == 50
    assert row["guard"]["limits"] == doc["train"]["tolerance"]["reduced"]
    assert any("held at float32" in note for note in row["notes"])
    rec = doc["recommendation"]
    if not rec["keep_default"]:
        assert any('set_global_policy("float32")' in line for line in rec["code"])


def test_a_fit_that_crashes_keeps_the_confirmed_answer_and_says_it_was_not_timed(
    monkeypatch, tmp_path
):
    # the timed fit is information beside the confirmation: a worker that dies in it (a real
    # segfault in the fit call of every worker) leaves the confirmed answer standing
    monkeypatch.setenv("TFPERF_INJECT_FAULT", "segfault-on-extra")
    monkeypatch.chdir(FACTORIES)
    workload = resolve_train_target("train_factories:tabular_mlp", guard_steps=50)
    options = TuneOptions(
        store_path=str(tmp_path / "s.db"), profile_out=str(tmp_path / "p.json"), quick=True,
        confirm_rounds=6, min_rounds=4, max_rounds=6, candidate_timeout_s=180,
    )
    doc = tune(workload, options, space=Space({"steps_per_execution": (None, 32)}))
    rec = doc["recommendation"]
    assert not rec["keep_default"], rec["reason"]
    assert rec["label"].startswith("steps_per_execution=") and rec["fit_speedup"] is None
    assert any(note.startswith("fit not timed: worker crashed with SIGSEGV")
               for note in rec["notes"])
    assert not any("failed during confirmation" in w for w in doc["warnings"])


def test_a_step_of_half_a_second_gets_its_guard_past_a_short_candidate_timeout(
    monkeypatch, tmp_path
):
    # 70 guard steps of 0.5 s take 35 s, past the 30 s a request may take (the default's start
    # alone, TensorFlow's import with it, may take 20 s on a loaded machine): the guard's reply
    # waits for what its steps need at the default's step time
    monkeypatch.chdir(FACTORIES)
    workload = resolve_train_target("train_factories:slow_step", guard_steps=70)
    options = TuneOptions(store_path=str(tmp_path / "s.db"),
                          profile_out=str(tmp_path / "p.json"), candidate_timeout_s=30)
    doc = tune(workload, options, space=Space({"runtime": ("tf",)}))
    assert len(doc["train"]["default_losses"]) == 70
    assert doc["recommendation"]["keep_default"] is True


def test_a_default_slower_than_the_candidate_timeout_names_the_option(tmp_path):
    from helpers import run_cli

    result = run_cli("tune", "--train", "train_factories:slow_build", "--candidate-timeout",
                     "5", "--store", str(tmp_path / "s.db"), cwd=FACTORIES)
    assert result.returncode == 2
    said = result.stderr.strip()
    assert "larger --candidate-timeout" in said and said.count("\n") == 0, said
    assert "does not run under the default configuration" not in said
