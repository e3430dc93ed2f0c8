"""``tfperf bench --train`` of custom training loops and of training under ``tf.distribute``
strategies, in real workers, as a new user runs it; and the exit codes a script can trust.

Loops are those of ``tests/models/loop_factories.py``; strategies those of
``tests/models/strategy_factories.py``, which splits the CPU into two logical devices when a
worker imports it. Each run measures the default and one knob side by side; what cannot run
ends with one sentence and exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_cli
from tfperf.benchmark import unrunnable
from tfperf.core.errors import UserError
from tfperf.modelref import check_keras_backend

FACTORIES = Path(__file__).resolve().parent.parent / "models"
QUICK = ["--no-peak", "--budget", "1", "--processes", "1", "--guard-steps", "50"]


def bench(target: str, *args: str, store: Path, env: dict | None = None):
    return run_cli("bench", "--train", target, *QUICK, *args, "--store", str(store), "--json",
                   cwd=FACTORIES, env=env)


def sentence(res) -> str:
    """The last line on stderr, the one sentence a user reads, without its ``error:``."""
    return res.stderr.strip().splitlines()[-1].removeprefix("error: ")


@pytest.mark.tf
@pytest.mark.slow
def test_a_plain_python_loop_and_its_graph_are_measured_side_by_side(tmp_path):
    res = bench("loop_factories:eager_regression", "--set", "graph=on", store=tmp_path / "s.db")
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    base, graph = doc["results"]
    assert base["model"] == graph["model"]  # the same variables and batches in both workers
    train = base["train"]
    assert train["baseline"]["step"] == "loop" and train["baseline"]["graph"] is False
    low, high = train["steps_per_s_ci95"]
    assert low <= train["steps_per_s"] <= high and train["samples_per_s"] > 0
    assert train["ms_per_step"] > 0 and train["first_steps_s"] > 0
    assert 0 <= train["input_wait_share"] < 1
    assert base["memory"]["peak_rss_mb"] > 0
    (comparison,) = doc["comparisons"]
    assert comparison["candidate"] == "graph=on"


@pytest.mark.tf
@pytest.mark.slow
def test_an_unseeded_loop_is_the_same_model_in_every_worker(tmp_path):
    # its weights come from np.random.default_rng() with no seed: without the default's
    # initial values handed over, the second worker's fingerprint differs and the run stops
    res = bench("loop_factories:unseeded_weights", "--set", "intra_threads=1",
                store=tmp_path / "s.db")
    assert res.returncode == 0, res.stderr[-2000:]
    base, cand = json.loads(res.stdout)["results"]
    assert base["model"] == cand["model"] and cand["status"] == "ok"


@pytest.mark.tf
@pytest.mark.slow
@pytest.mark.parametrize(("target", "args", "env", "words"), [
    ("loop_factories:not_iterable", (), None,
     "returned data of type int, which is not a dataset"),
    ("loop_factories:raises", (), None, "Your step raised at loop_factories.py:"),
    ("loop_factories:eager_regression", ("--set", "runtime=keras-jax"), None,
     "runtime=keras-jax cannot run: not tried: Keras on JAX runs Keras' own train step"),
    # torch is not installed: the backend is named, with those tfperf measures
    ("loop_factories:eager_regression", (), {"KERAS_BACKEND": "torch"},
     "Keras here runs on torch (KERAS_BACKEND=torch), a backend tfperf does not measure: it "
     "measures training on Keras' tensorflow and jax backends"),
    ("strategy_factories:multi_worker_loop", (), None,
     "Your step runs under MultiWorkerMirroredStrategy, which spans processes (or devices) "
     "tfperf does not start: tfperf measures one process, so measure the same step under "
     "MirroredStrategy over this machine's devices"),
])
def test_what_cannot_run_is_one_sentence_and_exit_2(target, args, env, words, tmp_path):
    res = bench(target, *args, store=tmp_path / "s.db", env=env)
    assert res.returncode == 2, res.stdout[-1000:] + res.stderr[-2000:]
    assert words in sentence(res) and "Traceback" not in res.stderr


@pytest.mark.tf
@pytest.mark.slow
@pytest.mark.parametrize(("target", "knob", "steps_per_call"), [
    ("strategy_factories:mirrored_loop", "steps_per_execution=4", 4),
    ("strategy_factories:mirrored_keras", "inter_threads=1", 1),
    ("strategy_factories:one_device_loop", "xla=jit", 1),
])
def test_training_under_a_strategy_is_measured_as_written(target, knob, steps_per_call,
                                                          tmp_path):
    res = bench(target, "--set", knob, store=tmp_path / "s.db")
    assert res.returncode == 0, res.stderr[-2000:]
    base, cand = json.loads(res.stdout)["results"]
    replicas = "1 replica" if "one_device" in target else "2 replicas"
    assert base["train"]["baseline"]["strategy"].endswith(f"Strategy ({replicas})")
    assert cand["status"] == "ok" and cand["train"]["steps_per_call"] == steps_per_call


@pytest.mark.tf
@pytest.mark.slow
def test_xla_across_a_mirrored_strategys_devices_is_one_sentence(tmp_path):
    res = bench("strategy_factories:mirrored_loop", "--set", "xla=jit", store=tmp_path / "s.db")
    assert res.returncode == 2
    assert sentence(res) == (
        "xla=jit cannot run: not tried: XLA compiles your step for one device, and "
        "MirroredStrategy keeps its replicas' variables on CPU:0 and CPU:1 (the default's "
        "figures are above).")
    base = json.loads(res.stdout)["results"][0]  # the default ran: its figures are printed
    assert any("under MirroredStrategy over CPU:0, CPU:1" in n for n in base["notes"])


@pytest.mark.tf
@pytest.mark.slow
def test_the_builtin_gan_loop_is_measured_and_guarded_on_both_losses(tmp_path):
    res = run_cli("bench", "--workload", "gan-train", "--size", "tiny", *QUICK, "--set",
                  "steps_per_execution=4", "--store", str(tmp_path / "s.db"), "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    base, steps = json.loads(res.stdout)["results"]
    assert base["train"]["loss_keys"] == ["d_loss", "g_loss"]
    assert base["train"]["baseline"]["step"] == "loop" and steps["status"] == "ok"


def test_a_training_knob_on_an_inference_workload_is_refused(tmp_path):
    res = run_cli("bench", "--workload", "mlp", "--size", "tiny", "--set", "graph=on",
                  "--store", str(tmp_path / "s.db"))
    assert res.returncode == 2
    assert sentence(res) == ("graph acts on a training step: add --train (and your training "
                             "factory), or leave it out.")


def test_keras_backends_other_than_tensorflow_and_jax_are_named():
    for backend in ("tensorflow", "jax"):
        check_keras_backend({"KERAS_BACKEND": backend})
    with pytest.raises(UserError, match=r"on openvino \(KERAS_BACKEND=openvino\)"):
        check_keras_backend({"KERAS_BACKEND": "openvino"})


def _result(label: str, status: str, n: int = 0, kind: str | None = None) -> dict:
    error = {"reason": f"worker reported: {label} broke", "kind": kind,
             "message": f"{label} broke"} if status == "failed" else None
    return {"label": label, "status": status, "n": n, "error": error}


def test_a_bench_whose_default_or_only_candidate_cannot_run_has_a_sentence():
    ok = _result("default", "ok", 40)
    assert unrunnable({"results": [ok, _result("xla=jit", "ok", 40)]}) is None
    assert unrunnable({"results": [_result("default", "failed", kind="exception")]}) == (
        "The default configuration cannot run: default broke.")
    assert unrunnable({"results": [ok, _result("runtime=keras-jax", "failed", kind="user")]}) == (
        "runtime=keras-jax cannot run: runtime=keras-jax broke (the default's figures are "
        "above).")
    # a crash is a finding about that configuration, and one of several candidates fails alone
    assert unrunnable({"results": [ok, _result("a", "failed", kind=None)]}) is None
    assert unrunnable({"results": [ok, _result("a", "failed", kind="user"),
                                   _result("b", "ok", 40)]}) is None


def test_the_table_s_title_names_the_batch_the_step_ran():
    # a factory's dataset batches its own rows: the workload's batch (32 unless --batch) is
    # that of arrays only
    from tfperf.cli.bench import _workload_name

    workload = {"kind": "train", "path": "guide:make", "batch": 32}
    assert _workload_name({"workload": workload, "results": [{"train": {"batch": 64}}]}) == (
        "guide:make (batch 64)")
    assert _workload_name({"workload": workload, "results": []}) == "guide:make (batch 32)"
