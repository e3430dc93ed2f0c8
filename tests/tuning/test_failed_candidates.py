"""Audit of `tfperf tune` / `apply` / `run` as a user meets them: real workers, tiny workloads."""

from __future__ import annotations

import json
import textwrap

import pytest

from helpers import require, run_cli
from tfperf.core.allocators import find_allocator
from tfperf.core.config import Config
from tfperf.core.knobs import openvino_available
from tfperf.runner.handle import Worker, WorkerFailed
from tfperf.tuning.evaluate import failure_reason

TINY_MLP = {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1}


@pytest.mark.tf
def test_openvino_under_a_preloaded_allocator_fails_with_the_reason(tmp_path, monkeypatch):
    require(openvino_available(), "the openvino package is not installed")
    allocator = next((a for a in ("tcmalloc", "jemalloc") if find_allocator(a)), None)
    require(allocator is not None, "neither tcmalloc nor jemalloc is installed")
    monkeypatch.setenv("TFPERF_CACHE_DIR", str(tmp_path / "cache"))
    config = {"runtime": "openvino-f32", "allocator": allocator}
    # Alone it crashes within seconds (SIGBUS or SIGABRT); after another test has imported
    # TensorFlow into this process it can hang instead, and the timeout kills it: both are
    # failures whose reason must name the preload, and the short timeout keeps the suite quick.
    worker = Worker(TINY_MLP, Config.from_dict(config), timeout_s=45)
    try:
        worker.start()
        worker.wait_ready()
        worker.run_block(5)
    except WorkerFailed as exc:
        failure = exc
    else:  # an OpenVINO build that tolerates the preload: nothing to explain
        pytest.skip("this OpenVINO runs with a preloaded allocator")
    finally:
        worker.close()
    assert failure.signal, failure.reason
    assert f"OpenVINO aborts with {allocator} preloaded" in failure_reason(failure, config)


@pytest.mark.tf
def test_a_model_needing_select_tf_ops_is_a_failed_candidate_with_one_sentence(tmp_path):
    (tmp_path / "cumprod_model.py").write_text(
        textwrap.dedent("""
        import numpy as np
        import tensorflow as tf

        def build():
            @tf.function(input_signature=[tf.TensorSpec([1, 8], tf.float32)])
            def model(x):
                return tf.math.cumprod(x, axis=-1)
            return model, np.linspace(0.5, 1.5, 8, dtype=np.float32).reshape(1, 8)
    """)
    )
    result = run_cli(
        "tune", "cumprod_model:build", "--knobs", "runtime", "--runtimes", "tf,litert",
        "--confirm-rounds", "6", "--store", str(tmp_path / "store.sqlite"),
        "--profile-out", str(tmp_path / "p.json"), "--json",
        env={"TFPERF_CACHE_DIR": str(tmp_path / "cache")}, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    (litert,) = [c for c in doc["candidates"] if c["config"]["runtime"] == "litert"]
    if litert["status"] == "failed":
        assert "SELECT_TF_OPS (Cumprod)" in litert["reason"], litert["reason"]
        assert "\n" not in litert["reason"]
        assert doc["recommendation"]["keep_default"] is True
    else:  # a LiteRT with the flex delegate: the notes say what was done
        assert any("SELECT_TF_OPS" in note for note in litert["notes"])


@pytest.mark.tf
@pytest.mark.timeout(2400)  # it may be the first test to need the runtime archive
def test_a_model_xla_aot_cannot_compile_is_a_failed_candidate_and_the_tune_goes_on(
    tmp_path, aot_runtime
):
    (tmp_path / "string_model.py").write_text(
        textwrap.dedent("""
        import numpy as np
        import tensorflow as tf

        def build():
            @tf.function(input_signature=[tf.TensorSpec([1, 8], tf.float32)])
            def model(x):
                return x + tf.cast(tf.strings.length(tf.strings.as_string(x)), tf.float32)
            return model, np.linspace(0.5, 1.5, 8, dtype=np.float32).reshape(1, 8)
    """)
    )
    result = run_cli(
        "tune", "string_model:build", "--knobs", "runtime", "--runtimes", "tf,xla-aot",
        "--confirm-rounds", "6", "--store", str(tmp_path / "store.sqlite"),
        "--profile-out", str(tmp_path / "p.json"), "--json", cwd=tmp_path, timeout=1800,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    doc = json.loads(result.stdout)
    (aot,) = [c for c in doc["candidates"] if c["config"]["runtime"] == "xla-aot"]
    assert aot["status"] == "failed" and "\n" not in aot["reason"]
    assert "XLA has no CPU kernel for the op(s) AsString" in aot["reason"], aot["reason"]
    assert doc["recommendation"]["keep_default"] is True


@pytest.mark.tf
@pytest.mark.slow
def test_a_quick_tune_bounds_an_ahead_of_time_compile_and_remembers_it(
    tmp_path, monkeypatch, aot_runtime
):
    # the compile runs past the bound (a worker never starts within 5 s: it is killed before
    # its compile ends, so nothing of it is cached), the candidate fails saying so, and the
    # next quick tune of it here does not wait again
    from tfperf.modelref import resolve_model
    from tfperf.tuning import compiles, tune
    from tfperf.tuning.options import TuneOptions
    from tfperf.tuning.space import Space

    (tmp_path / "dense_model.py").write_text(textwrap.dedent("""
        import numpy as np
        import keras

        def build():
            model = keras.Sequential([keras.Input((12,)), keras.layers.Dense(24),
                                      keras.layers.Dense(5)])
            return model, np.linspace(-1, 1, 12, dtype=np.float32).reshape(1, 12)
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(compiles, "QUICK_COMPILE_S", 5.0)  # a worker never starts in less
    monkeypatch.setattr(compiles, "cache_dir", lambda: tmp_path)
    workload = resolve_model("dense_model:build", unsafe=True)
    space = Space({"runtime": ("tf", "xla-aot")})

    def quick_tune(n: int) -> dict:
        options = TuneOptions(store_path=str(tmp_path / "s.db"), quick=True,
                              profile_out=str(tmp_path / f"p{n}.json"), confirm_rounds=6)
        (row,) = tune(workload, options, space=space)["candidates"]
        return row

    first = quick_tune(1)
    assert first["status"] == "failed"
    assert first["reason"].startswith("not tried: XLA's ahead-of-time compile of this model "
                                      "ran past the 5 s --quick gives it")
    again = quick_tune(2)
    assert again["status"] == "failed" and "when this model was tuned here before" in (
        again["reason"])
