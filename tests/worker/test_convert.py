"""Model variants for real: LiteRT conversions with their converter traps, bf16, failures."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tfperf.accuracy import compare_outputs
from tfperf.core.protocol import ARTIFACT_NOTE, artifact_from_notes
from tfperf.worker.convert import ConversionError, cpu_has_bf16

pytestmark = pytest.mark.tf


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TFPERF_CACHE_DIR", str(tmp_path / "cache"))


def _variant(workload: dict, config: dict):
    from tfperf.worker.prepare import load_workload, prepare_loaded

    loaded = load_workload(workload)
    reference = prepare_loaded(loaded, {}).outputs()
    prepared = prepare_loaded(loaded, config)
    return prepared, compare_outputs(reference, prepared.outputs())


def test_lstm_converts_only_with_a_fixed_batch_and_says_so():
    from tfperf.core.workloads import builtin_workload

    prepared, cmp = _variant(builtin_workload("lstm", "tiny"), {"runtime": "litert"})
    assert any("fixed input shape" in n for n in prepared.notes)
    assert cmp["max_rel_error"] < 1e-4
    path = artifact_from_notes(prepared.notes)
    assert path and path.endswith(".tflite")
    snippet = (__import__("pathlib").Path(path).parent / "run_model.py").read_text()
    proc = subprocess.run(
        [sys.executable, "-c", snippet], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-500:]
    assert "(1, " in proc.stdout


def test_quantized_litert_variants_run_and_reuse_the_cache():
    from tfperf.core.workloads import builtin_workload
    from tfperf.worker.prepare import load_workload, prepare_loaded

    loaded = load_workload(builtin_workload("mlp", "tiny"))
    reference = prepare_loaded(loaded, {}).outputs()
    errors = {}
    for runtime in ("litert-dynint8", "litert-fp16", "litert-int8"):
        prepared = prepare_loaded(loaded, {"runtime": runtime, "runtime_threads": 1})
        prepared.call()
        errors[runtime] = compare_outputs(reference, prepared.outputs())["max_rel_error"]
        again = prepare_loaded(loaded, {"runtime": runtime})
        assert "reused the converted model from the cache" in again.notes
        assert artifact_from_notes(again.notes) == artifact_from_notes(prepared.notes)
    assert 0 < errors["litert-fp16"] < errors["litert-dynint8"] < 0.1
    assert 0 < errors["litert-int8"] < 0.1
    notes = prepare_loaded(loaded, {"runtime": "litert-int8"}).notes
    assert any("calibrated on the sample inputs" in n for n in notes)


@pytest.mark.skipif(not cpu_has_bf16(), reason="the CPU has no bf16 support")
def test_bf16_keras_policy_changes_the_arithmetic_not_the_answer():
    from tfperf.core.workloads import builtin_workload

    prepared, cmp = _variant(builtin_workload("encoder", "tiny"), {"precision": "bf16"})
    assert any("mixed_bfloat16" in n for n in prepared.notes)
    assert 0 < cmp["max_rel_error"] < 0.05
    assert all(o.dtype == np.float32 for o in prepared.outputs())


@pytest.mark.skipif(not cpu_has_bf16(), reason="the CPU has no bf16 support")
def test_bf16_for_a_savedmodel_uses_the_graph_rewrite(tmp_path):
    import keras

    from tfperf.modelref import resolve_model

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(8)]
    )
    model.export(str(tmp_path / "sm"), verbose=False)
    try:
        prepared, cmp = _variant(resolve_model(str(tmp_path / "sm")), {"precision": "bf16"})
    finally:  # the rewrite is process-wide (a worker serves one config); undo it here
        import tensorflow as tf

        tf.config.optimizer.set_experimental_options(
            {"auto_mixed_precision_onednn_bfloat16": False}
        )
    assert any("auto_mixed_precision_onednn_bfloat16" in n for n in prepared.notes)
    assert cmp["max_rel_error"] < 0.05


def test_a_model_that_cannot_convert_is_a_conversion_error(tmp_path, monkeypatch):
    (tmp_path / "pyfunc_model.py").write_text(
        textwrap.dedent("""
        import numpy as np
        import tensorflow as tf

        def build():
            def model(x):
                return tf.py_function(lambda t: t * 2.0, [x], tf.float32)
            return model, np.ones((1, 4), np.float32)
    """)
    )
    from tfperf.modelref import resolve_model
    from tfperf.worker.prepare import load_workload, prepare_loaded

    monkeypatch.chdir(tmp_path)
    loaded = load_workload(resolve_model("pyfunc_model:build"))
    with pytest.raises(ConversionError, match="LiteRT"):
        prepare_loaded(loaded, {"runtime": "litert"})


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        ("tf.math.cumprod(x, axis=-1)", r"SELECT_TF_OPS \(Cumprod\) and this LiteRT has no flex"),
        ("tf.math.bessel_i1e(x)", r"no LiteRT kernel, even through SELECT_TF_OPS: BesselI1e"),
    ],
)
def test_ops_litert_lacks_are_named_in_one_sentence(tmp_path, monkeypatch, op, expected):
    module = f"odd_ops_{op.split('(')[0].rsplit('.', 1)[-1]}"  # one module per case
    (tmp_path / f"{module}.py").write_text(
        textwrap.dedent(f"""
        import numpy as np
        import tensorflow as tf

        def build():
            @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
            def model(x):
                return {op}
            return model, np.ones((1, 4), np.float32)
    """)
    )
    from tfperf.modelref import resolve_model
    from tfperf.worker.prepare import load_workload, prepare_loaded

    monkeypatch.chdir(tmp_path)
    loaded = load_workload(resolve_model(f"{module}:build"))
    try:
        prepared = prepare_loaded(loaded, {"runtime": "litert"})
    except ConversionError as exc:
        message = str(exc)
        assert "\n" not in message and len(message) < 300, message
        assert re.search(expected, message), message
    else:  # a LiteRT build with the flex delegate runs the op, and the notes say how
        assert "flex" in expected and "needs SELECT_TF_OPS" in " ".join(prepared.notes)


def test_impossible_variants_say_why():
    from tfperf.core.workloads import builtin_workload
    from tfperf.worker.prepare import load_workload, prepare_loaded

    loaded = load_workload(builtin_workload("mlp", "tiny"))
    with pytest.raises(ConversionError, match="GPU"):
        prepare_loaded(loaded, {"precision": "mixed_float16"})
    with pytest.raises(ConversionError, match="precision"):
        prepare_loaded(loaded, {"runtime": "litert", "precision": "bf16"})
    with pytest.raises(ConversionError, match="unknown runtime"):
        prepare_loaded(loaded, {"runtime": "onnx"})
    try:
        import openvino  # noqa: F401
    except ImportError:
        with pytest.raises(ConversionError, match="not installed"):
            prepare_loaded(loaded, {"runtime": "openvino-f32"})


def test_openvino_variants_when_installed():
    pytest.importorskip("openvino", reason="the optional extra tfperf[openvino] is not installed")
    from tfperf.core.workloads import builtin_workload
    from tfperf.worker.prepare import load_workload, prepare_loaded

    loaded = load_workload(builtin_workload("mlp", "tiny"))
    reference = prepare_loaded(loaded, {}).outputs()
    errors = {}
    runtimes = ("openvino-f32", "openvino-bf16") if cpu_has_bf16() else ("openvino-f32",)
    for runtime in runtimes:
        prepared = prepare_loaded(loaded, {"runtime": runtime, "runtime_threads": 1})
        prepared.call()
        errors[runtime] = compare_outputs(reference, prepared.outputs())["max_rel_error"]
        assert artifact_from_notes(prepared.notes).endswith("model.xml")
    assert errors["openvino-f32"] < 1e-5
    # The model file read back from the cache (what the user adopts) keeps fp32 weights.
    again = prepare_loaded(loaded, {"runtime": "openvino-f32"})
    assert "reused the converted model from the cache" in again.notes
    assert compare_outputs(reference, again.outputs())["max_rel_error"] < 1e-5
    if cpu_has_bf16():
        assert 0 < errors["openvino-bf16"] < 0.05
    elif _openvino_emulates_bf16():
        # asked for by name, a bf16 run in software is measured as asked (tune never offers it)
        prepared = prepare_loaded(loaded, {"runtime": "openvino-bf16", "runtime_threads": 1})
        assert 0 < compare_outputs(reference, prepared.outputs())["max_rel_error"] < 0.05
    else:
        # an OpenVINO that runs f32 under the bf16 hint: refused, not a duplicate
        with pytest.raises(ConversionError, match="not bf16: this CPU has no bf16 support"):
            prepare_loaded(loaded, {"runtime": "openvino-bf16"})


def _openvino_emulates_bf16() -> bool:
    """Whether OpenVINO runs a plain matmul in bf16 on this CPU under the bf16 hint (in
    software, where the CPU has no bf16 instructions), told by its numbers rather than by the
    runtime graph the worker reads: inputs rounded to bf16's 8 bits of mantissa are off by
    about 1e-3, an f32 matmul of 16 terms by about 1e-7."""
    import openvino as ov
    from openvino import opset13 as ops

    x = ops.parameter([1, 16], np.float32)
    model = ov.Model([ops.matmul(x, ops.constant(np.ones((16, 16), np.float32)), False, False)],
                     [x])
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "bf16"})
    feed = np.random.default_rng(0).normal(size=(1, 16)).astype(np.float32)
    got = np.asarray(compiled(feed)[0])
    want = feed @ np.ones((16, 16), np.float32)
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want))) > 1e-4


def test_artifact_note_round_trip():
    assert artifact_from_notes(["x", ARTIFACT_NOTE + "/a/model.tflite"]) == "/a/model.tflite"
    assert artifact_from_notes(["x"]) is None
    assert cpu_has_bf16(["avx2", "amx_bf16"]) and not cpu_has_bf16(["avx2"])


def test_writers_of_the_same_converted_model_at_once_all_succeed(tmp_path):
    """The instances of a served layout convert the same model at the same moment: every
    writer's rename must find its own file, and the model left is one of theirs, whole."""
    from concurrent.futures import ThreadPoolExecutor

    from tfperf.worker.convert import _write_artifact

    payloads = [bytes([i]) * 100_000 for i in range(8)]

    def write(data: bytes):
        return _write_artifact(tmp_path, "model.tflite", data, "# snippet\n")

    with ThreadPoolExecutor(8) as pool:
        paths = list(pool.map(write, payloads * 4))
    assert {p.name for p in paths} == {"model.tflite"}
    assert (tmp_path / "model.tflite").read_bytes() in payloads
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.tflite", "run_model.py"]
