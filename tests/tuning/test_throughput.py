"""``tfperf tune --throughput``: the batch knob, time per sample, and what the profile says.

Real tunes of tiny built-ins in real workers. No test asserts a timing: what is checked is
which batch sizes were tried, that each speedup is a ratio of times per sample (it agrees with
the per-call figures scaled by the batches, which a per-call speedup would not), and that the
recommendation and the profile name the batch.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import run_cli, tune_json
from tfperf.core.protocol import repeat_rows
from tfperf.store import Store


def test_repeat_rows_cycles_the_sample_rows():
    rows = np.arange(6).reshape(3, 2)
    assert repeat_rows(rows, 7)[:, 0].tolist() == [0, 2, 4, 0, 2, 4, 0]
    assert repeat_rows(rows, 2).tolist() == [[0, 1], [2, 3]]
    assert repeat_rows(rows, 3) is rows  # already that batch
    assert repeat_rows(np.float32(1.5), 8).ndim == 0  # a scalar has no rows
    with pytest.raises(ValueError):
        repeat_rows(np.zeros((0, 2)), 4)


@pytest.mark.tf
def test_a_workload_tiled_to_another_batch_repeats_its_rows():
    from tfperf.worker.loading import load_workload

    base = load_workload({"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 2})
    tiled = load_workload(
        {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 2, "tile_to": 5}
    )
    assert tiled.batch == 5
    np.testing.assert_array_equal(
        tiled.inputs["features"], base.inputs["features"][[0, 1, 0, 1, 0]]
    )
    assert tiled.flops_per_call == pytest.approx(base.flops_per_call * 5 / 2)
    assert any("repeated" in note for note in tiled.notes)


def test_batch_sizes_need_throughput_and_whole_numbers(tmp_path):
    store = ("--store", str(tmp_path / "s.sqlite"))
    alone = run_cli("tune", "--workload", "mlp", "--batch-sizes", "1,8", *store)
    assert alone.returncode == 2 and "--throughput" in alone.stderr
    assert "Traceback" not in alone.stderr
    bad = run_cli("tune", "--workload", "mlp", "--throughput", "--batch-sizes", "1,x", *store)
    assert bad.returncode == 2 and "1,8,32" in bad.stderr
    knob = run_cli("tune", "--workload", "mlp", "--knobs", "batch", *store)
    assert knob.returncode == 2 and "--throughput" in knob.stderr


def test_a_latency_tune_is_not_resumed_for_throughput(tmp_path):
    # its outcomes compare times per call; a throughput tune compares times per sample
    workload = {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1}
    with Store.open(tmp_path / "s.sqlite") as store:
        run_id = store.new_run("tune", "tfperf tune", workload, {}, {"objective": "latency"})
    result = run_cli(
        "tune",
        *("--workload", "mlp", "--size", "tiny", "--throughput", "--resume", str(run_id)),
        *("--store", str(tmp_path / "s.sqlite")),
    )
    assert result.returncode == 2 and "without --throughput" in result.stderr


@pytest.mark.tf
@pytest.mark.slow
def test_throughput_tune_of_mlp_tries_batches_and_recommends_one(tmp_path):
    doc = tune_json(
        tmp_path,
        "--workload",
        "mlp",
        "--size",
        "tiny",
        "--throughput",
        "--runtimes",
        "tf",
        "--knobs",
        "batch,onednn",
        "--max-trials",
        "5",
        "--confirm-rounds",
        "8",
    )
    assert doc["objective"] == "throughput"
    assert doc["default"]["batch"] == 1
    measured = [c for c in doc["candidates"] if c["status"] == "measured"]
    batches = {c["batch"] for c in measured}
    assert {4, 16, 64} <= batches  # the default ladder, without the workload's own batch 1
    for row in measured:
        # the guard compared each batch with the reference rows repeated: exact in fp32 TF
        assert row["max_abs_error"] < 1e-5
        assert row["config"].get("batch", 1) == row["batch"]
        assert row["samples_per_s"] == pytest.approx(row["batch"] / (row["time_ms"] / 1e3))
    # a batch of 64 tiny rows is tens of times more samples per second than one row
    rec = doc["recommendation"]
    assert not rec["keep_default"], rec["reason"]
    assert rec["config"]["batch"] == rec["batch"] > 1
    speedup = rec["speedup"]
    assert speedup["verdict"] == "faster" and speedup["default_batch"] == 1
    # per sample: the ratio of per-call times scaled by the batches, not the per-call ratio
    per_sample = (speedup["default_ms"] / speedup["candidate_ms"]) * speedup["candidate_batch"]
    assert speedup["median"] == pytest.approx(per_sample, rel=0.5)
    profile = json.loads((tmp_path / "profile.json").read_text())
    assert profile["objective"] == "throughput" and profile["batch"] == rec["batch"]
    assert profile["config"]["batch"] == rec["batch"]
    assert any(f"BATCH_SIZE = {rec['batch']}" in line for line in profile["code"])
    snippet = run_cli("apply", str(tmp_path / "profile.json"), "--format", "python")
    assert snippet.returncode == 0 and f"BATCH_SIZE = {rec['batch']}" in snippet.stdout
    assert "samples per second" in snippet.stdout
    with Store.open(tmp_path / "store.sqlite") as store:
        run = store.load_run(doc["run_id"])
    configs = [t["config"] for t in run["trials"] if t["role"] == "candidate"]
    assert {c.get("batch") for c in configs} >= {4, 16, 64}


@pytest.mark.tf
@pytest.mark.slow
def test_lstm_on_litert_gets_a_converted_model_per_batch(tmp_path):
    # An LSTM's tensor lists lower to LiteRT only with a fixed batch: each batch size
    # needs its own conversion, and the guard checks it on the repeated rows.
    doc = tune_json(
        tmp_path,
        "--workload",
        "lstm",
        "--size",
        "tiny",
        "--throughput",
        "--batch-sizes",
        "1,8",
        "--runtimes",
        "tf,litert",
        "--knobs",
        "batch,runtime",
        "--confirm-rounds",
        "8",
    )
    litert = {
        c["batch"]: c
        for c in doc["candidates"]
        if c["config"]["runtime"] == "litert" and c["status"] == "measured"
    }
    tried = [(c["label"], c["status"], c["reason"]) for c in doc["candidates"]]
    # the batch is visited first and batch 8 gives TensorFlow several times the samples per
    # second of batch 1, so the runtime is tried at batch 8 (LiteRT at batch 1 only when the
    # second sweep revisits the batch from there)
    assert 8 in litert, tried
    for batch, row in litert.items():
        assert any(f"fixed input shape ({batch}, 8, 8)" in n for n in row["notes"]), row["notes"]
        assert row["max_abs_error"] < 1e-4
    if 1 in litert:
        assert litert[1]["artifact"] != litert[8]["artifact"]
