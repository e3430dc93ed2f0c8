"""The model zoo (``benchmarks/zoo``) at tiny sizes: models tfperf was not written around.

Each is an unseeded factory a user could have written, also saved as a ``.keras`` file (all but
the ``tf.Module``) and a SavedModel with its inputs. For each: every converting runtime tune can
pick (LiteRT and its quantized models, OpenVINO) converts the factory's model (the fp32 ones
within 1e-4 of TensorFlow, fp16 within 2%) and tune's accuracy guard accepts exactly the
conversions the documented tolerance allows, int8 and dynamic-range int8 included; on one model
(:data:`EVERY_RUNTIME_MODEL`, to keep the module's cost) the rest of what tune can pick runs
too, XLA AOT and, on a CPU with bf16 instructions, TensorFlow and OpenVINO in bf16, so that
every runtime tune can pick meets the guard on at least one model of the zoo; the saved forms
load to the same outputs and convert on the fp32 runtimes (an input fed in the wrong order would
show there; a one-input model's ``.keras`` file, the factory's conversion path again, only
loads), and ``tfperf tune`` ends with a recommendation or a stated reason.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, run_cli
from tfperf.core.knobs import INTERPRETERS
from tfperf.worker.convert import cpu_has_bf16

pytestmark = [pytest.mark.tf, pytest.mark.slow]

ZOO = REPO / "benchmarks" / "zoo"
NAMES = (
    "text_classifier",
    "recommender",
    "audio_conv1d",
    "attention",
    "keras_application",
    "unet",
    "tf_module",
)
RUNTIMES = ("litert", "litert-fp16", "litert-dynint8", "litert-int8", "openvino-f32")
BF16_PICKS = {"tf-bf16", "openvino-bf16"}
TUNE_PICKS = {*INTERPRETERS, "tf-bf16"} - (set() if cpu_has_bf16() else BF16_PICKS)
"""Every runtime an inference tune can pick besides TensorFlow's default on this CPU (bf16 ones
on a CPU with bf16 instructions only)."""
EVERY_RUNTIME_MODEL = "attention"
"""The model that runs every one of :data:`TUNE_PICKS` (a transformer: bf16 moves its
LayerNorm and softmax, and XLA AOT compiles it in seconds)."""
FP32_LIMIT = 1e-4
FP16_LIMIT = 0.02
KNOWN_FAILURES = {
    # A GRU's loop only lowers to LiteRT builtins with static shapes; a SavedModel's signature
    # keeps its dynamic batch, and the pip LiteRT has no flex delegate for the TF ops left.
    ("text_classifier", "savedmodel", "litert"): "flex delegate",
    # TensorFlow's full-int8 calibration of a recurrent model crashes the process.
    ("text_classifier", "factory", "litert-int8"): "crashed",
}


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("zoo")
    proc = subprocess.run(
        [sys.executable, str(ZOO / "save.py"), *NAMES, "--tiny", "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One converted-model cache for the module: the tunes reuse the factories' conversions
    the conversion test made (as a user's second command would), and start from no other."""
    return tmp_path_factory.mktemp("cache")


def conversions(name: str, saved: Path, cache: Path, every: bool = False) -> list[dict]:
    every_runtime = ["--every-runtime"] if every else []
    proc = subprocess.run(
        [sys.executable, str(ZOO / "conversions.py"), name, "--tiny", "--saved", str(saved),
         *every_runtime],
        capture_output=True, text=True, timeout=600, env={**_env(), "TFPERF_CACHE_DIR": str(cache)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _env() -> dict:
    return dict(os.environ)


def _share_runtime_archive(archive: Path, cache: Path) -> None:
    """XLA AOT links this install's runtime archive, built once per install into tfperf's cache
    (minutes): the module's own cache gets it, not a build of its own."""
    shared = archive.parents[2]  # <cache>/xla-aot-runtime/<install>/build/libtf_xla_runtime.a
    if not (cache / shared.name).exists():
        (cache / shared.name).symlink_to(shared, target_is_directory=True)


def documented_verdict(row: dict) -> bool:
    """The default tolerance as docs/tune.md states it: the largest error at most 2% of the
    reference's largest magnitude, and the top-1 class the same on at least 99% of rows."""
    top1 = row["top1_agreement"]
    return row["max_rel_error"] <= 0.02 and (top1 is None or top1 >= 0.99)


@pytest.mark.parametrize("name", NAMES)
def test_every_runtime_converts_every_form_and_the_guard_follows_the_tolerance(
    name, saved, cache, request
):
    every = name == EVERY_RUNTIME_MODEL
    if every:
        _share_runtime_archive(request.getfixturevalue("aot_runtime"), cache)
    rows = conversions(name, saved, cache, every)
    forms = {r["form"] for r in rows}
    assert forms == ({"factory", "savedmodel"} if name == "tf_module" else
                     {"factory", "keras", "savedmodel"})
    factory = {r["runtime"] for r in rows if r["form"] == "factory"}
    assert factory == (TUNE_PICKS if every else set(RUNTIMES))
    for row in rows:
        where = (row["model"], row["form"], row["runtime"])
        if where in KNOWN_FAILURES:
            assert row["status"] != "ok" or row["max_rel_error"] <= FP32_LIMIT, row
            if row["status"] != "ok":
                assert KNOWN_FAILURES[where] in row["reason"] + row["status"], row
            continue
        assert row["status"] == "ok", row
        error = row["max_rel_error"]
        assert error is not None and math.isfinite(error), row
        if row["runtime"] in ("tf", "litert", "openvino-f32", "xla-aot"):
            assert error <= FP32_LIMIT, row  # the same computation: inputs in the right order
        elif row["runtime"] == "litert-fp16":
            assert error <= FP16_LIMIT, row
        if row["runtime"] != "tf":  # tune's guard, on every runtime it can pick
            assert row["accepted"] is documented_verdict(row), row
            assert row["accepted"] or row["guard_reason"].startswith(("max relative", "top-1"))


@pytest.mark.parametrize("name", NAMES)
def test_tune_ends_with_a_recommendation_or_a_stated_reason(name, tmp_path, cache):
    # The runtime is the knob a model tfperf was not written around can break (its conversion,
    # its inputs fed to another runtime); the threads' search and the pruning of what the
    # answer adds are the same on every model (tests/tuning), and doubled each tune's time here.
    res = run_cli(
        "tune", f"{name}:make_tiny", "--knobs", "runtime", "--max-trials", "1",
        "--confirm-rounds", "6", "--json",
        "--store", str(tmp_path / "s.sqlite"), "--profile-out", str(tmp_path / "p.json"),
        cwd=ZOO, env={"TFPERF_CACHE_DIR": str(cache)}, timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    rec = doc["recommendation"]
    assert doc["trials"] >= 1 and doc["candidates"]
    for row in doc["candidates"]:
        assert row["status"] in ("measured", "rejected", "failed")
        assert row["status"] == "measured" or row["reason"], row
    if rec["keep_default"]:
        why = rec["keep_default_why"]
        assert why["case"] in ("none_faster", "rejected", "failed")
        assert rec["reason"] and why["summary"]
        assert why["rejected"] == sum(c["status"] == "rejected" for c in doc["candidates"])
    else:
        assert rec["keep_default_why"] is None
        assert rec["speedup"]["verdict"] == "faster" and rec["speedup"]["ci95"][0] > 1.0
        assert rec["max_rel_error"] <= 0.02
