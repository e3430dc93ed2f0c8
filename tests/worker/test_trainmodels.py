"""The built-in training workload (``cnn-train``): a factory measured as the user's own.

``builtin_workload`` gives the very dict ``--train`` gives for the same factory, so bench and
tune measure it through the training step and its guard; its labels follow from its images, so
the guard sees a loss that falls.
"""

from __future__ import annotations

import json

import pytest

from helpers import run_cli
from tfperf.core.workloads import builtin_workload
from tfperf.modelref import resolve_train_target

pytestmark = [pytest.mark.tf, pytest.mark.slow]


def test_bench_measures_the_builtin_training_workload_as_a_training_step(tmp_path):
    own = resolve_train_target("tfperf.worker.trainmodels:cnn_train_tiny")
    del own["search_path"]  # the factory is tfperf's: importable from anywhere
    workload = builtin_workload("cnn-train", "tiny")
    assert workload == {**own, "builtin": "cnn-train", "size": "tiny"}
    assert builtin_workload("cnn-train")["batch"] == 64  # the size's batch, not the CLI's 1
    assert builtin_workload("cnn-train", "tiny", batch=8)["batch"] == 8
    res = run_cli("bench", "--workload", "cnn-train", "--size", "tiny", "--no-peak", "--budget",
                  "1", "--processes", "1", "--guard-steps", "50", "--store",
                  str(tmp_path / "s.db"), "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert doc["workload"] == {**workload, "guard_steps": 50}
    (result,) = doc["results"]
    train = result["train"]
    assert (train["batch"], train["steps_per_call"], result["batch"]) == (32, 1, 32)
    assert train["steps_per_s"] > 0 and train["first_steps_s"] > 0
    assert train["baseline"] == {"jit_compile": False, "steps_per_execution": 1,
                                 "policy": "float32", "policy_source": "tfperf", "data": "arrays",
                                 "notes": [], "step": "fit", "graph": True, "strategy": None,
                                 "unpacks": True}


def test_the_builtin_training_workload_learns_over_the_guard_steps():
    pytest.importorskip("tensorflow")
    from tfperf.worker.training import train_prepared

    workload = {**builtin_workload("cnn-train", "tiny"), "guard_steps": 50}
    losses = train_prepared(workload, {}).outputs()[0].ravel()
    assert len(losses) == 50
    assert losses[-10:].mean() < 0.9 * losses[:10].mean()


def test_what_only_your_own_model_takes_is_refused_for_a_builtin_in_one_sentence(tmp_path):
    store = ["--store", str(tmp_path / "s.db")]
    for args, words in (
        (["--train", "--workload", "lstm"], "lstm is an inference workload"),
        (["--workload", "cnn-train", "--labels", "y.npz"], "--labels applies to your own MODEL"),
        (["--workload", "cnn-train", "--rate", "5"], "--workload cnn-train measures training"),
    ):
        res = run_cli("bench", *args, *store)
        assert res.returncode == 2, res.stderr[-2000:]
        assert words in res.stderr and "Traceback" not in res.stderr
