"""`tfperf bench` through the real CLI: one real run on a tiny built-in, and bad input that
gets one sentence and exit 2 before any worker starts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from helpers import run_cli

WIDE = {"COLUMNS": "200"}


FACTORY = """
import keras
import numpy as np


def make():
    inp = keras.Input((8,), name="features")
    model = keras.Model(inp, keras.layers.Dense(4)(keras.layers.Dense(16)(inp)))
    return model, np.ones((1, 8), "float32")
"""


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    """``tfperf bench tiny_factory:make --set onednn=off --json`` (the user's own model, from a
    module:function factory in the working directory) with a short budget; the store comes
    from TFPERF_STORE, and a speed variable the user had set is reported."""
    work = tmp_path_factory.mktemp("bench")
    (work / "tiny_factory.py").write_text(FACTORY)
    store = work / "nested" / "store.sqlite"
    res = run_cli(
        "bench",
        "tiny_factory:make",
        "--set",
        "onednn=off",
        "--budget",
        "2",
        "--no-peak",
        "--json",
        env={"TFPERF_STORE": str(store), "OMP_NUM_THREADS": "2"},
        cwd=work,
    )
    return res, store


def test_bench_json_names_the_figures(bench_run):
    res, _ = bench_run
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["schema_version"] == 1 and doc["kind"] == "bench"
    assert doc["workload"]["format"] == "factory" and doc["workload"]["batch"] == 1
    assert [r["label"] for r in doc["results"]] == ["default", "onednn=off"]
    for r in doc["results"]:
        assert r["status"] == "ok" and r["batch"] == 1
        lat = r["latency_ms"]
        assert set(lat) >= {"p50", "p90", "p99", "p50_ci95"}
        assert lat["p50_ci95"][0] <= lat["p50"] <= lat["p50_ci95"][1]
        assert r["install"]["TF_ENABLE_ONEDNN_OPTS"] == ("0" if r["role"] == "candidate" else None)
    (comp,) = doc["comparisons"]
    assert set(comp["speedup"]) >= {"median", "ci95", "verdict", "p_value", "n_pairs"}
    assert comp["speedup"]["verdict"] in ("faster", "slower", "same", "inconclusive")
    assert doc["environment"]["not_inherited"]["OMP_NUM_THREADS"] == "2"
    assert doc["stopped"] in ("budget", "precision")


def test_bench_records_the_run_in_the_store(bench_run):
    res, store = bench_run
    doc = json.loads(res.stdout)
    assert store.exists()
    history = run_cli("history", "--store", str(store), "--json")
    if history.returncode == 0:  # history is its own command; the store is checked below too
        assert doc["run_id"] in [r["id"] for r in json.loads(history.stdout)["runs"]]
    from tfperf.store import Store

    with Store.open(store) as st:
        loaded = st.load_run(doc["run_id"])
    assert loaded["run"]["status"] == "ok" and loaded["run"]["kind"] == "bench"
    assert loaded["run"]["workload"]["fingerprint"] == doc["workload_fingerprint"]
    assert [t["status"] for t in loaded["trials"]] == ["ok", "ok"]
    assert len(loaded["trials"][0]["samples_s"]) == doc["results"][0]["n"]


def test_bench_table_renders_the_same_document(bench_run, capsys):
    from tfperf.cli.bench import render_bench

    doc = json.loads(bench_run[0].stdout)
    render_bench(doc)
    out = capsys.readouterr().out
    assert f"tfperf run {doc['run_id']}" in out
    assert "onednn=off" in out and doc["comparisons"][0]["speedup"]["verdict"] in out
    assert "OMP_NUM_THREADS" in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--workload", "nope"], "Unknown workload"),
        (["--workload", "mlp", "--batch", "0"], "Batch size"),
        ([], "exactly one"),
        (["model.keras", "--workload", "mlp"], "exactly one"),
        (["--workload", "mlp", "--set", "onednn=maybe"], "on, off or default"),
        (["--workload", "mlp", "--set", "speed=max"], "unknown knob"),
        (["--workload", "mlp", "--budget", "0"], "--budget"),
        (["--workload", "mlp", "--processes", "0"], "--processes"),
        (["--workload", "mlp", "--memory-limit", "-1"], "--memory-limit"),
        (["--workload", "mlp", "--inputs", "x.npz"], "--inputs"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(args, needle, tmp_path):
    res = run_cli("bench", *args, "--store", str(tmp_path / "s.sqlite"))
    assert res.returncode == 2, res.stderr
    assert needle in res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "s.sqlite").exists()


def test_not_a_model_and_a_corrupt_model(tmp_path: Path):
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    corrupt = tmp_path / "broken.keras"
    corrupt.write_bytes(b"\x00garbage")
    for path in (text, corrupt, tmp_path / "missing.keras"):
        res = run_cli("bench", str(path), "--store", str(tmp_path / "s.sqlite"))
        assert res.returncode == 2, res.stderr
        assert "Traceback" not in res.stderr and str(path.name) in res.stderr


MODELS = """
import sys

import keras

keras.utils.set_random_seed(3)
out = sys.argv[1]
inp = keras.Input((8,), name="features")
keras.Model(inp, keras.layers.Dense(4)(inp)).save(f"{out}/good.keras")
doubled = keras.layers.Lambda(lambda x: x * 2.0)(inp)
keras.Model(inp, keras.layers.Dense(4)(doubled)).save(f"{out}/lambda.keras")
"""

NOT_A_PAIR = """
import keras


def make():
    inp = keras.Input((8,))
    return keras.Model(inp, keras.layers.Dense(4)(inp))
"""


@pytest.fixture(scope="module")
def bad_models(tmp_path_factory) -> Path:
    """Model files that pass the parent-side check and fail only when a worker loads them: a
    .keras whose config is readable but whose weights are garbage, one with a Lambda layer
    (needs --unsafe), a factory that returns the wrong thing, and inputs of the wrong shape."""
    import subprocess
    import sys
    import zipfile

    import numpy as np

    work = tmp_path_factory.mktemp("bad-models")
    proc = subprocess.run(
        [sys.executable, "-c", MODELS, str(work)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    with (
        zipfile.ZipFile(work / "good.keras") as src,
        zipfile.ZipFile(work / "corrupt.keras", "w") as dst,
    ):
        names = src.namelist()
        assert "config.json" in names and "model.weights.h5" in names
        for name in names:
            data = src.read(name)
            dst.writestr(name, b"not an HDF5 file" if name == "model.weights.h5" else data)
    (work / "not_a_pair.py").write_text(NOT_A_PAIR)
    np.savez(work / "wrong_shape.npz", features=np.ones((1, 5), "float32"))
    return work


@pytest.mark.parametrize(
    ("command", "args", "needle"),
    [
        (["bench"], ["corrupt.keras", "--set", "onednn=off"], "Cannot load corrupt.keras"),
        # A candidate started beside the baseline (--parallel-start) is closed, not measured.
        (
            ["compare", "--parallel-start", "--set", "onednn=off", "--model"],
            ["lambda.keras"],
            "pass --unsafe",
        ),
        (["bench"], ["not_a_pair:make"], "must return a tuple (model, inputs)"),
        (["bench"], ["good.keras", "--inputs", "wrong_shape.npz"], "has shape (1, 5)"),
    ],
)
def test_bad_input_found_by_the_baseline_worker_is_one_sentence_and_exit_2(
    bad_models, command, args, needle
):
    from tfperf.store import Store

    store = bad_models / f"{command[0]}-{args[0]}.sqlite"
    res = run_cli(
        *command,
        *args,
        "--budget",
        "1",
        "--no-peak",
        "--store",
        str(store),
        cwd=bad_models,
        env=WIDE,
    )
    assert res.returncode == 2, res.stderr[-2000:]
    # the sentence is the first line: no blank line left by the progress display off a terminal
    assert res.stderr.startswith("error: "), repr(res.stderr[-2000:])
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr[-2000:]
    assert needle in lines[0] and "worker" not in lines[0]
    assert res.stdout == ""
    with Store.open(store) as st:  # nothing is lost: the failed trial is in the store
        loaded = st.load_run("latest")
    assert loaded["run"]["status"] == "failed"
    base, *others = loaded["trials"]
    assert base["role"] == "baseline" and base["status"] == "failed"
    assert base["error"]["kind"] == "user" and needle in base["error"]["message"]
    assert [t["status"] for t in others] == (["failed"] if command[0] == "compare" else [])
    for other in others:
        assert other["error"]["kind"] == "skipped"


def test_unwritable_store(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    res = run_cli(
        "bench", "--workload", "mlp", "--size", "tiny", "--store", str(blocker / "s.sqlite")
    )
    assert res.returncode == 2
    assert "Traceback" not in res.stderr and "error:" in res.stderr


def _tiny_bench(store: Path, *args: str) -> list[str]:
    """Arguments of ``tfperf bench`` on the tiny built-in mlp into ``store``, no peak probe."""
    base = ["bench", "--workload", "mlp", "--size", "tiny", "--no-peak", "--store", str(store)]
    return [*base, *args]


@contextmanager
def _bench_in_steady_state(store: Path, *args: str, blocks: int = 3) -> Iterator[tuple]:
    """A real ``tfperf bench`` subprocess (``_tiny_bench``, a 300 s budget) once the store
    holds at least ``blocks`` steady blocks: yields ``(process, steady blocks, its workers)``;
    the process is killed on the way out if it still runs."""
    import subprocess
    import sys
    import time

    import psutil

    from tfperf.store import Store

    cmd = [sys.executable, "-m", "tfperf", *_tiny_bench(store, "--budget", "300", *args)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        steady = 0
        while steady < blocks and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
            if store.exists():
                with Store.open(store) as st:
                    runs = st.list_runs(1)
                    if runs:
                        trials = st.load_run(runs[0]["id"])["trials"]
                        steady = sum(b["phase"] == "steady" for t in trials for b in t["blocks"])
        assert steady >= blocks, "the run never reached its steady phase"
        workers = psutil.Process(proc.pid).children()
        assert workers
        yield proc, steady, workers
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=60)


def _steady_blocks(store: Path) -> tuple[dict, int]:
    """The latest stored run and its number of steady blocks."""
    from tfperf.store import Store

    with Store.open(store) as st:
        loaded = st.load_run("latest")
    return loaded, sum(b["phase"] == "steady" for t in loaded["trials"] for b in t["blocks"])


def test_a_run_killed_with_sigkill_keeps_its_blocks_and_leaves_no_worker(tmp_path: Path):
    import os
    import signal

    import psutil

    store = tmp_path / "store.sqlite"
    with _bench_in_steady_state(store) as (proc, steady, workers):
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    _, alive = psutil.wait_procs(workers, timeout=30)
    assert not alive
    loaded, kept = _steady_blocks(store)
    assert loaded["run"]["status"] == "interrupted"
    assert kept >= steady


@pytest.mark.tf
@pytest.mark.slow
def test_ctrl_c_names_the_stored_run_and_exits_130(tmp_path: Path):
    """SIGINT (Ctrl-C) to a real bench once blocks are stored: one sentence naming the run
    and the rounds it keeps, exit 130, no traceback, every worker closed."""
    import os
    import re
    import signal

    import psutil

    store = tmp_path / "store.sqlite"
    with _bench_in_steady_state(store, "--set", "onednn=off", blocks=4) as (proc, _, workers):
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    loaded, kept = _steady_blocks(store)
    run_id = loaded["run"]["id"]
    said = re.fullmatch(
        rf"Interrupted: run {run_id} keeps the (\d+) rounds? measured so far; "
        rf"see `tfperf report {run_id}`\.\n",
        err,
    )
    assert said, repr(err)
    assert out == ""
    rounds = int(said.group(1))
    assert rounds >= 1 and kept >= 2 * rounds  # two configs, one block each per round
    assert loaded["run"]["status"] == "interrupted"
    _, alive = psutil.wait_procs(workers, timeout=30)
    assert not alive
    report = run_cli("report", str(run_id), "--store", str(store))
    assert report.returncode == 0, report.stderr[-2000:]
    assert "interrupted" in report.stdout


def test_a_converted_runtime_is_measured_and_written_under_the_parents_cache_dir(
    tmp_path: Path,
):
    """``--set runtime=litert-dynint8``: the parent accepts every runtime a worker builds, the
    worker converts the model and writes it under the parent's ``TFPERF_CACHE_DIR``."""
    cache = tmp_path / "cache"
    res = run_cli(
        "bench",
        "--workload",
        "lstm",
        "--size",
        "tiny",
        "--set",
        "runtime=litert-dynint8",
        "--budget",
        "1",
        "--no-peak",
        "--json",
        "--store",
        str(tmp_path / "s.sqlite"),
        env={"TFPERF_CACHE_DIR": str(cache)},
    )
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    base, cand = doc["results"]
    assert cand["label"] == "runtime=litert-dynint8"
    assert [base["status"], cand["status"]] == ["ok", "ok"], cand.get("error")
    (artifact,) = [n.split(": ", 1)[1] for n in cand["notes"] if n.startswith("converted model: ")]
    assert Path(artifact).is_file() and Path(artifact).is_relative_to(cache)
    assert any(n.startswith("LiteRT") for n in cand["notes"])


LONG_ENV = "TFPERF_A_RATHER_LONG_VARIABLE_NAME=with-a-value-as-long-as-a-real-path-would-be"
LONG_LABEL = f"intra_threads=1,inter_threads=1,env:{LONG_ENV}"


@pytest.mark.tf
@pytest.mark.slow
def test_piped_tables_print_long_config_labels_whole(tmp_path: Path):
    """Off a terminal (stdout captured, 80 columns) the results and speedup tables of
    ``bench`` and of ``compare RUN_A RUN_B`` are as wide as their labels need."""
    store = tmp_path / "s.sqlite"
    sets = ["--set", "intra_threads=1", "--set", "inter_threads=1", "--env", LONG_ENV]
    res = run_cli(*_tiny_bench(store, *sets, "--budget", "1"), env={"COLUMNS": "80"})
    assert res.returncode == 0, res.stderr[-2000:]
    rows = [ln for ln in res.stdout.splitlines() if LONG_LABEL in ln and ln.startswith("│")]
    assert len(rows) == 2, res.stdout  # its row in the results table and in the speedup table
    assert any("tfperf run" in ln for ln in res.stdout.splitlines())
    runs = run_cli("compare", "latest", "latest", "--store", str(store), env={"COLUMNS": "80"})
    assert runs.returncode == 0, runs.stderr[-2000:]
    assert any(LONG_LABEL in ln and ln.startswith("│") for ln in runs.stdout.splitlines()), (
        runs.stdout
    )


@pytest.mark.tf
@pytest.mark.slow
def test_a_crashed_candidate_is_one_line_on_stderr(tmp_path: Path):
    """Off a terminal the progress display is off: a worker fault is one line on stderr, with
    no blank line that a live display leaves behind."""
    fault = ("--env", "TFPERF_INJECT_FAULT=segfault-on-run")
    res = run_cli(*_tiny_bench(tmp_path / "s.sqlite", *fault, "--budget", "1"))
    assert res.returncode == 0, res.stderr[-2000:]
    (line,) = res.stderr.splitlines()  # nothing else, not even an empty line
    assert line.startswith("env:TFPERF_INJECT_FAULT=segfault-on-run: "), repr(res.stderr)
    assert "SIGSEGV" in line
