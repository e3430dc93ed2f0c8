"""``tfperf tune`` for real: tiny built-ins, real workers, real faults, a real interruption.

No test asserts a timing: what is checked is the structure of the answer, the statuses and
reasons of candidates, and the rule that a recommendation is always a significant speedup.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from helpers import run_cli, tune_json
from tfperf.store import Store

pytestmark = [pytest.mark.tf, pytest.mark.slow]

QUICK = ("--size", "tiny", "--confirm-rounds", "8", "--knobs", "runtime")


def _check_recommendation(doc):
    rec = doc["recommendation"]
    assert {"config", "speedup", "max_abs_error", "adoption"} <= set(rec)
    if rec["keep_default"]:
        assert rec["label"] == "default" and rec["reason"]
    else:
        # the rule, not a timing: a recommendation is significantly faster than the default
        assert rec["speedup"]["verdict"] == "faster"
        assert rec["speedup"]["ci95"][0] <= rec["speedup"]["median"] <= rec["speedup"]["ci95"][1]
        assert rec["speedup"]["p_value"] < 0.05
        assert any(
            c["label"] == rec["label"] and c["status"] == "measured" for c in doc["candidates"]
        )


def test_tune_lstm_measures_rejects_and_survives_a_crash(tmp_path):
    doc = tune_json(
        tmp_path,
        "--workload",
        "lstm",
        *QUICK,
        "--max-trials",
        "3",
        "--runtimes",
        "tf,litert,litert-dynint8,litert-int8",
        "--tolerance",
        "abs=1e-5",
        "--out-dir",
        str(tmp_path / "model"),
        "--confirm-rounds",
        "14",  # two pairs of confirmation workers, 7 rounds each
    )
    _check_recommendation(doc)
    by_label = {c["label"]: c for c in doc["candidates"]}
    assert set(by_label) == {"runtime=litert", "runtime=litert-dynint8", "runtime=litert-int8"}
    measured = by_label["runtime=litert"]
    assert measured["status"] == "measured"
    assert measured["speedup"]["median"] > 0 and len(measured["speedup"]["ci95"]) == 2
    assert measured["max_abs_error"] < 1e-5 and measured["adoption"] == "model"
    assert any("fixed input shape" in n for n in measured["notes"])
    # int8 weights move the outputs beyond abs=1e-5: rejected, with its error shown
    rejected = by_label["runtime=litert-dynint8"]
    assert rejected["status"] == "rejected" and "max abs error" in rejected["reason"]
    assert rejected["max_abs_error"] > 1e-5
    # full int8 conversion of an LSTM segfaults inside the converter: a real crash
    crashed = by_label["runtime=litert-int8"]
    assert crashed["status"] == "failed" and "SIGSEGV" in crashed["reason"]
    with Store.open(tmp_path / "store.sqlite") as store:
        loaded = store.load_run(doc["run_id"])
    assert loaded["run"]["kind"] == "tune" and loaded["run"]["status"] == "ok"
    statuses = {t["label"]: t["status"] for t in loaded["trials"] if t["role"] == "candidate"}
    roles = {t["role"] for t in loaded["trials"]}
    assert "baseline" in roles
    assert len(loaded["comparisons"]) >= 1
    # LiteRT beats TensorFlow on this model: confirmed by two fresh pairs of workers in turn
    (confirmation,) = [t for t in loaded["trials"] if t["role"] == "confirmation"]
    steady = [b["info"].get("process", 0) for b in confirmation["blocks"]]
    assert steady == [0] * 7 + [1] * 7
    assert doc["recommendation"]["speedup"]["processes"]["n"] == 2
    assert statuses == {
        "runtime=litert": "ok",
        "runtime=litert-dynint8": "rejected",
        "runtime=litert-int8": "failed",
    }
    assert doc["tolerance"]["abs"] == 1e-5
    profile = json.loads((tmp_path / "profile.json").read_text())
    assert profile["label"] == doc["recommendation"]["label"]
    if doc["recommendation"]["artifact"]:
        assert (tmp_path / "model" / "model.tflite").is_file()
        assert (tmp_path / "model" / "run_model.py").is_file()


def test_a_conversion_that_hangs_fails_on_its_timeout(tmp_path):
    (tmp_path / "slowconv.py").write_text(
        textwrap.dedent("""
        import inspect, time
        import numpy as np
        import tensorflow as tf

        def model(x):
            # hangs only while tfperf converts it, so the default runs normally
            if any(f.filename.endswith("tfperf/worker/convert.py") for f in inspect.stack()):
                time.sleep(3600)
            return tf.nn.relu(x * 2.0)

        def build():
            return model, np.ones((1, 8), np.float32)
    """)
    )
    doc = tune_json(
        tmp_path,
        "slowconv:build",
        "--runtimes",
        "tf,litert",
        "--max-trials",
        "1",
        "--candidate-timeout",
        "10",
        "--knobs",
        "runtime",
        cwd=tmp_path,
    )
    [row] = doc["candidates"]
    assert row["status"] == "failed" and "timeout" in row["reason"]
    assert doc["recommendation"]["keep_default"] is True


def test_bad_input_is_one_sentence_and_exit_2(tmp_path):
    for args in (
        ("--workload", "nope"),
        ("--workload", "mlp", "--tolerance", "fast"),
        ("--workload", "mlp", "--runtimes", "onnx"),
        ("--workload", "mlp", "--max-trials", "0"),
        ("--workload", "mlp", "--knobs", "speed"),
    ):
        result = run_cli("tune", *args, "--store", str(tmp_path / "s.sqlite"))
        assert result.returncode == 2, (args, result.stderr)
        assert "Traceback" not in result.stderr and "error" in result.stderr.lower()


def test_a_model_that_does_not_run_by_default_is_exit_2(tmp_path):
    (tmp_path / "broken.py").write_text(
        textwrap.dedent("""
        import numpy as np

        def model(x):
            raise ValueError("this model is broken")

        def build():
            return model, np.ones((1, 4), np.float32)
    """)
    )
    result = run_cli(
        "tune", "broken:build", "--store", str(tmp_path / "s.sqlite"), cwd=tmp_path, timeout=300
    )
    assert result.returncode == 2, result.stderr[-1000:]
    assert "default configuration" in result.stderr and "Traceback" not in result.stderr
    with Store.open(tmp_path / "s.sqlite") as store:
        assert store.list_runs()[0]["status"] == "failed"


@contextmanager
def tune_until_a_candidate_finishes(store: Path, tmp_path: Path) -> Iterator[subprocess.Popen]:
    """A real ``tfperf tune`` (own session, like a shell job) running until the store holds a
    finished candidate; killed (SIGKILL to its group) on the way out if it still runs."""
    args = [
        sys.executable, "-m", "tfperf", "tune", "--workload", "mlp", "--size", "tiny",
        "--runtimes", "tf,litert,litert-fp16,litert-dynint8", "--max-trials", "3",
        "--confirm-rounds", "8", "--knobs", "runtime", "--json", "--store", str(store),
        "--profile-out", str(tmp_path / "p.json"),
    ]  # fmt: skip
    err = (tmp_path / "tune.stderr").open("wb")
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    finished: list[dict] = []
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(1)
            if store.exists():
                with Store.open(store) as s:
                    runs = s.list_runs()
                    if runs:
                        trials = s.load_run(runs[0]["id"])["trials"]
                        finished = [t for t in trials if t["role"] == "candidate" and t["info"]]
                if finished:
                    break
        assert finished, "no candidate finished before the deadline"
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        err.close()


def test_ctrl_c_names_the_run_to_resume_and_exits_130(tmp_path):
    store = tmp_path / "store.sqlite"
    with tune_until_a_candidate_finishes(store, tmp_path) as proc:
        workers = psutil.Process(proc.pid).children(recursive=True)
        os.kill(proc.pid, signal.SIGINT)  # what Ctrl-C sends the foreground process
        code = proc.wait(timeout=60)
    err = (tmp_path / "tune.stderr").read_text()
    assert code == 130, err[-2000:]
    _, alive = psutil.wait_procs(workers, timeout=30)
    assert not alive, f"Ctrl-C left {[p.pid for p in alive]} running"
    with Store.open(store) as s:
        run = s.load_run("latest")
    finished = sum(t["role"] == "candidate" and bool(t["info"]) for t in run["trials"])
    assert run["run"]["status"] == "interrupted" and finished >= 1
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"Interrupted: run {run['run']['id']} keeps its {finished} finished")
    assert f"--resume {run['run']['id']}" in last and "Traceback" not in err


def test_resume_after_sigkill_keeps_every_finished_trial(tmp_path):
    store = tmp_path / "store.sqlite"
    with tune_until_a_candidate_finishes(store, tmp_path) as proc:
        os.killpg(proc.pid, signal.SIGKILL)
    with Store.open(store) as s:
        first = s.load_run("latest")
    assert first["run"]["status"] == "interrupted"
    done = {
        t["label"]: t["info"]["outcome"]
        for t in first["trials"]
        if t["role"] == "candidate" and t["info"]
    }
    assert done
    doc = tune_json(
        tmp_path,
        "--workload",
        "mlp",
        *QUICK,
        "--runtimes",
        "tf,litert,litert-fp16,litert-dynint8",
        "--max-trials",
        "3",
        "--resume",
        str(first["run"]["id"]),
    )
    assert doc["trials"] == 3
    with Store.open(store) as s:
        resumed = s.load_run(doc["run_id"])
    again = {
        t["label"]: t["info"]["outcome"] for t in resumed["trials"] if t["role"] == "candidate"
    }
    for name, outcome in done.items():
        # replayed from the store, not measured again: the very same samples' verdicts
        assert again[name]["speedup"] == outcome["speedup"]
        assert again[name]["info"]["elapsed_s"] == outcome["info"]["elapsed_s"]


def test_constant_reference_outputs_are_flagged():
    import numpy as np

    from tfperf.tuning.evaluate import Evaluator

    evaluator = Evaluator({"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1})
    try:
        evaluator.reference = [np.full((1, 1000), 1e-3, np.float32)]
        assert evaluator.reference_is_flat()
        evaluator.reference = [np.linspace(0, 1, 10).reshape(1, 10)]
        assert not evaluator.reference_is_flat()
        # one score of one request (the built-in wide-deep at batch 1): nothing to flag
        evaluator.reference = [np.array([[0.637]], np.float32)]
        assert not evaluator.reference_is_flat()
        evaluator.reference = [np.array([[0.637]], np.float32), np.zeros((1, 4), np.float32)]
        assert evaluator.reference_is_flat()
    finally:
        evaluator.close()
