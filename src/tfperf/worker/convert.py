"""Worker side: turn a loaded model into a variant (another runtime or precision) and time it.

Contract
--------

:func:`prepare_variant` ``(loaded, config) -> Prepared`` is called by
:func:`tfperf.worker.prepare.prepare` for every config whose ``runtime`` is not ``"tf"`` or whose
``precision`` is not ``"fp32"``. ``loaded`` is a :class:`tfperf.worker.prepare.Loaded`.

- ``runtime="litert"`` / ``"litert-dynint8"`` / ``"litert-fp16"`` / ``"litert-int8"``: the model
  is converted with ``tf.lite.TFLiteConverter`` (fp32; dynamic-range int8 weights; fp16
  weights; full int8 calibrated on the sample inputs, float inputs and outputs kept) and run
  by LiteRT with ``runtime_threads`` threads. Conversions are tried in this order: a concrete
  function with the sample inputs' fixed shapes (XNNPACK then takes the whole graph, and an
  LSTM's tensor lists only lower with a static batch); the Keras model or SavedModel as saved
  (dynamic batch); each with builtin ops, then with TensorFlow ops inside LiteRT
  (``SELECT_TF_OPS``, which needs an interpreter with the flex delegate). What was done is
  said in ``Prepared.notes``.
- ``runtime="openvino-f32"`` / ``"openvino-bf16"``: ``openvino.convert_model`` and a CPU
  compiled model with that inference precision (and ``runtime_threads`` as its thread count when
  given). Raises :class:`ConversionError` ("not installed") without the ``openvino`` package,
  and for ``openvino-bf16`` when OpenVINO compiles in another precision (a CPU without bf16).
- ``runtime="tf"`` with ``precision="bf16"``: a Keras model is cloned under the
  ``mixed_bfloat16`` policy with the same weights; any other model gets TensorFlow's
  ``auto_mixed_precision_onednn_bfloat16`` graph rewrite. Only where the CPU has AVX512_BF16 or
  AMX. ``precision="mixed_float16"`` needs a GPU.

Every converted model file is written under the cache directory (one folder per model, inputs
and variant) with ``run_model.py``, a snippet that loads and runs it; ``Prepared.notes`` holds
``ARTIFACT_NOTE + path`` so that the parent can find it (:func:`artifact_from_notes`). A variant
that cannot be built raises :class:`ConversionError` with one sentence (the worker reports it
as the trial's error). TensorFlow is imported inside functions only: the parent may import this
module for its constants.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tfperf.core.knobs import (
    KERAS_JAX,
    KERAS_TF,
    LITERT_RUNTIMES,
    OPENVINO_RUNTIMES,
    RUNTIMES,
    XLA_AOT,
    openvino_available,
)
from tfperf.core.protocol import ARTIFACT_NOTE
from tfperf.worker.aot import aot_prepared
from tfperf.worker.artifacts import ConversionError, first_error, inputs_of
from tfperf.worker.artifacts import artifact_dir as _artifact_dir
from tfperf.worker.deployed import openvino_properties
from tfperf.worker.litert import litert_prepared
from tfperf.worker.opprofile import layer_table, openvino_profiler
from tfperf.worker.tfrun import tf_prepared
from tfperf.worker.workload import Prepared, TimedCall

__all__ = ["ConversionError", "convert_litert", "cpu_has_bf16", "policy_clone", "prepare_variant"]

BF16_FLAGS = ("avx512_bf16", "amx_bf16")


# ----------------------------------------------------------------------------- helpers
def cpu_has_bf16(flags: Sequence[str] | None = None) -> bool:
    """Whether the CPU runs bf16 natively (AVX512_BF16 or AMX); reads /proc/cpuinfo by default."""
    if flags is None:
        try:
            text = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
        flags = next(
            (
                line.split(":", 1)[1].split()
                for line in text.splitlines()
                if line.startswith("flags")
            ),
            [],
        )
    return any(f in flags for f in BF16_FLAGS)


def _fixed_function(loaded: Any) -> Any:
    """A concrete function of the model with the sample inputs' exact shapes and dtypes."""
    import tensorflow as tf

    names = list(loaded.input_names)
    signature = [tf.TensorSpec(x.shape, tf.as_dtype(x.dtype)) for x in inputs_of(loaded)]

    def call(*args: Any) -> Any:
        return loaded.call_model(dict(zip(names, args, strict=True)))

    return tf.function(call, input_signature=signature).get_concrete_function()


def _is_keras(loaded: Any) -> bool:
    try:
        import keras
    except ImportError:  # pragma: no cover - keras ships with tensorflow
        return False
    return isinstance(loaded.model, keras.Model)


def _is_savedmodel(loaded: Any) -> bool:
    return loaded.format == "savedmodel"


# ----------------------------------------------------------------------------- LiteRT
def _quantize(converter: Any, runtime: str, inputs: list, notes: list[str]) -> None:
    import tensorflow as tf

    if runtime == "litert":
        return
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if runtime == "litert-fp16":
        converter.target_spec.supported_types = [tf.float16]
    elif runtime == "litert-int8":
        converter.representative_dataset = lambda: iter([list(inputs)])
        ops = list(converter.target_spec.supported_ops or [])
        converter.target_spec.supported_ops = [
            tf.lite.OpsSet.TFLITE_BUILTINS_INT8,
            *[op for op in ops if op == tf.lite.OpsSet.SELECT_TF_OPS],
        ]
        notes.append("full int8 calibrated on the sample inputs (float inputs and outputs kept)")


def _converters(loaded: Any) -> list[tuple[str, Callable[[], Any]]]:
    """Converter factories in the order they are tried, each with what it means.

    The sample inputs' fixed shapes come first: with static shapes LiteRT's XNNPACK delegate
    takes the whole graph (with a dynamic batch a transformer is split into a dozen delegated
    pieces with shape arithmetic between them, and runs no faster than TensorFlow), and an
    LSTM's tensor lists only lower with a static batch. The model as saved (dynamic batch)
    is the fallback.
    """
    import tensorflow as tf

    shapes = ", ".join(str(tuple(x.shape)) for x in inputs_of(loaded))
    out: list[tuple[str, Callable[[], Any]]] = [
        (
            f"converted for the fixed input shape {shapes} (whole graph in XNNPACK; "
            "other shapes need another conversion)",
            lambda: tf.lite.TFLiteConverter.from_concrete_functions([_fixed_function(loaded)]),
        )
    ]
    dynamic = "converted with the model's own (dynamic) input shapes"
    if _is_keras(loaded):
        out.append((dynamic, lambda: tf.lite.TFLiteConverter.from_keras_model(loaded.model)))
    elif _is_savedmodel(loaded):
        out.append((dynamic, lambda: tf.lite.TFLiteConverter.from_saved_model(loaded.source)))
    return out


def _interpreter_ok(model_bytes: bytes) -> str | None:
    """``None`` when LiteRT can allocate the model, else why not."""
    from ai_edge_litert.interpreter import Interpreter

    try:
        Interpreter(model_content=model_bytes).allocate_tensors()
    except Exception as exc:
        return str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
    return None


def convert_litert(loaded: Any, runtime: str, notes: list[str]) -> bytes:
    """Convert ``loaded`` to a LiteRT flatbuffer for ``runtime``; notes say what was done.

    Tries builtin ops first (dynamic batch, then fixed shape), then ``SELECT_TF_OPS``; raises
    :class:`ConversionError` with the last reason when nothing converts into a runnable model.
    """
    import tensorflow as tf

    inputs = inputs_of(loaded)
    reasons: list[str] = []
    for select in (False, True):
        for what, factory in _converters(loaded):
            converter = factory()
            if select:
                converter.target_spec.supported_ops = [
                    tf.lite.OpsSet.TFLITE_BUILTINS,
                    tf.lite.OpsSet.SELECT_TF_OPS,
                ]
                converter._experimental_lower_tensor_list_ops = False
            local: list[str] = []
            _quantize(converter, runtime, inputs, local)
            try:
                model_bytes = converter.convert()
            except Exception as exc:
                reasons.append(_op_reason(str(exc)) or first_error(exc))
                continue
            problem = _interpreter_ok(model_bytes)
            if problem is not None:
                reasons.append(
                    _op_reason(problem)
                    or f"the converted model does not run in LiteRT: {problem[-300:]}"
                )
                continue
            notes.extend(n for n in (what,) if n)
            if select:
                notes.append("needs SELECT_TF_OPS (TensorFlow ops inside LiteRT)")
            notes.extend(local)
            return model_bytes
    raise ConversionError(f"LiteRT conversion failed: {_best_reason(reasons)}")


_OP_LIST = re.compile(r"^\s*(TF Select ops|Flex ops|Custom ops):\s*(.+)$", re.MULTILINE)
_FLEX_NODE = re.compile(r"\(Flex(\w+)\) failed to prepare")
NO_FLEX = "this LiteRT has no flex delegate (the pip ai-edge-litert ships none)"


def _op_reason(text: str) -> str | None:
    """One sentence for a converter or interpreter error about unsupported ops, else ``None``.

    The converter lists the ops it cannot lower (``TF Select ops: Cumprod``; ``Custom ops:
    BesselI1e`` for ops with no kernel at all); the interpreter names the node it cannot
    prepare when a flex op meets a build without the flex delegate.
    """
    found: dict[str, list[str]] = {}
    for kind, names in _OP_LIST.findall(text):
        ops = [n.strip().removeprefix("Flex") for n in names.split(",") if n.strip()]
        found.setdefault(kind, []).extend(o for o in ops if o not in found.get(kind, []))
    if found.get("Custom ops"):
        return "TensorFlow ops with no LiteRT kernel, even through SELECT_TF_OPS: " + ", ".join(
            found["Custom ops"]
        )
    select = found.get("TF Select ops") or found.get("Flex ops")
    if select:
        return f"needs TensorFlow ops inside LiteRT (SELECT_TF_OPS: {', '.join(select)})"
    if "Flex delegate" in text or "Select TensorFlow op" in text:
        ops = sorted(set(_FLEX_NODE.findall(text)))
        which = f" ({', '.join(ops)})" if ops else ""
        return f"needs SELECT_TF_OPS{which} and {NO_FLEX}"
    return None


def _best_reason(reasons: Sequence[str]) -> str:
    """The most telling of the attempts' reasons: no kernel at all, then a missing flex
    delegate, then the last one."""
    for mark in ("no LiteRT kernel", NO_FLEX):
        for reason in reasons:
            if mark in reason:
                return reason
    return reasons[-1] if reasons else "unknown"


_LITERT_SNIPPET = '''"""Load and run the converted model with LiteRT (ai-edge-litert)."""
import numpy as np
from ai_edge_litert.interpreter import Interpreter

interpreter = Interpreter(model_path={path!r}, num_threads={threads})
interpreter.allocate_tensors()
inputs = {inputs}  # one array per input: shape, dtype
for detail, (shape, dtype) in zip(interpreter.get_input_details(), inputs):
    interpreter.set_tensor(detail["index"], np.zeros(shape, dtype))
interpreter.invoke()
outputs = [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]
print([o.shape for o in outputs])
'''


def _write_artifact(folder: Path, name: str, data: bytes, snippet: str) -> Path:
    path = folder / name
    # A file of its own per writer: the instances of a served layout convert the same model at
    # once, and with one shared temporary name the first rename took the others' file away.
    with tempfile.NamedTemporaryFile(dir=folder, prefix=f"{path.stem}.", delete=False) as tmp:
        tmp.write(data)
    os.replace(tmp.name, path)
    (folder / "run_model.py").write_text(snippet)
    return path


def _litert_variant(loaded: Any, config: dict) -> Any:

    runtime = config["runtime"]
    threads = config.get("runtime_threads")
    folder = _artifact_dir(loaded, runtime)
    path = folder / "model.tflite"
    meta_path = folder / "notes.json"
    if path.exists() and meta_path.exists():
        notes = json.loads(meta_path.read_text())
        notes.append("reused the converted model from the cache")
    else:
        notes = []
        data = convert_litert(loaded, runtime, notes)
        shapes = [(tuple(x.shape), x.dtype.name) for x in inputs_of(loaded)]
        snippet = _LITERT_SNIPPET.format(path=str(path), threads=threads, inputs=shapes)
        _write_artifact(folder, "model.tflite", data, snippet)
        meta_path.write_text(json.dumps(notes))
    return litert_prepared(
        str(path),
        loaded.inputs,
        threads,
        flops_per_call=loaded.flops_per_call,
        flops_source=loaded.flops_source,
        notes=[*loaded.notes, *notes, ARTIFACT_NOTE + str(path)],
    )


# ----------------------------------------------------------------------------- OpenVINO
_OV_SNIPPET = '''"""Load and run the converted model with OpenVINO (pip install openvino)."""
import numpy as np
import openvino as ov

compiled = ov.Core().compile_model({path!r}, "CPU", {properties!r})
inputs = {inputs}  # one array per input: shape, dtype
outputs = compiled([np.zeros(shape, dtype) for shape, dtype in inputs])
print([o.shape for o in outputs.values()])
'''


def _openvino_runs_bf16(compiled: Any) -> bool | None:
    """Whether any layer of the compiled model runs in bf16, read from its runtime graph (each
    layer's ``runtimePrecision``); None where OpenVINO does not say. The property
    ``INFERENCE_PRECISION_HINT`` only repeats the hint on some CPUs without bf16 instructions."""
    try:
        infos = [layer.get_rt_info() for layer in compiled.get_runtime_model().get_ordered_ops()]
        precisions = {str(info["runtimePrecision"].astype(str)).lower()
                      for info in infos if "runtimePrecision" in info}
    except Exception:  # an OpenVINO without the runtime graph's precisions: not refused
        return None
    return "bf16" in precisions if precisions else None


def _openvino_model(loaded: Any, runtime: str, xml: Path, notes: list[str]) -> Any:
    """The OpenVINO model of ``loaded``: read from the cache, or converted and cached."""
    import openvino as ov  # an optional runtime: imported when a candidate asks for it

    if xml.exists():
        notes.append("reused the converted model from the cache")
        return ov.Core().read_model(str(xml))
    inputs = inputs_of(loaded)
    try:
        source = loaded.source if _is_savedmodel(loaded) else loaded.model
        example = inputs if len(inputs) > 1 else inputs[0]
        ov_model = ov.convert_model(source, example_input=example)
    except Exception as exc:
        raise ConversionError(f"OpenVINO conversion failed: {first_error(exc)}") from None
    # save_model compresses weights to fp16 unless told not to: an "f32" model read back
    # from the cache would then carry fp16 weights (errors of 1e-3, not 1e-6).
    ov.save_model(ov_model, str(xml), compress_to_fp16=False)
    return ov_model


def _openvino_compiled(ov_model: Any, runtime: str, config: dict) -> tuple[Any, dict]:
    """The model compiled for the CPU at the runtime's precision, and its properties."""
    import openvino as ov

    properties = openvino_properties(runtime, config.get("runtime_threads"))
    if config.get("streams"):  # a serving instance's throughput streams (worker.requests)
        properties["NUM_STREAMS"] = str(config["streams"])
    if config.get("hint"):  # a serving instance's PERFORMANCE_HINT (THROUGHPUT, LATENCY)
        properties["PERFORMANCE_HINT"] = str(config["hint"])
    if config.get("perf_count"):  # bench --ops: a profiled copy, never the timed model
        properties["PERF_COUNT"] = "YES"
    compiled = ov.Core().compile_model(ov_model, "CPU", properties)
    if runtime.endswith("bf16") and _openvino_runs_bf16(compiled) is False:
        raise ConversionError(
            "OpenVINO compiled every layer in f32, not bf16: this CPU has no bf16 support, "
            "so this candidate would repeat openvino-f32."
        )
    return compiled, properties


def _openvino_variant(loaded: Any, config: dict) -> Any:
    if not openvino_available():
        raise ConversionError(
            "OpenVINO is not installed; install it with pip install 'tfperf[openvino]'."
        )
    import numpy as np

    runtime = config["runtime"]
    notes: list[str] = []
    folder = _artifact_dir(loaded, runtime)
    xml = folder / "model.xml"
    ov_model = _openvino_model(loaded, runtime, xml, notes)
    compiled, properties = _openvino_compiled(ov_model, runtime, config)
    feed = _openvino_feed(compiled, loaded)
    order = _openvino_output_order(compiled, loaded)
    shapes = [(tuple(x.shape), x.dtype.name) for x in inputs_of(loaded)]
    (folder / "run_model.py").write_text(
        _OV_SNIPPET.format(path=str(xml), properties=properties, inputs=shapes)
    )
    notes.append(f"OpenVINO CPU plugin, {properties}")

    request, ports = compiled.create_infer_request(), list(feed)

    def run(arrays: list[Any]) -> list[Any]:
        # infer copies the inputs in and the outputs out (share_* default to False)
        result = request.infer(dict(zip(ports, arrays)))  # noqa: B905 (Python 3.9)
        return [result[i] for i in order]

    def async_queue() -> tuple[Any, Any]:
        """OpenVINO's own serving: as many asynchronous requests as the model asks for."""
        import openvino as ov

        jobs = int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        return ov.AsyncInferQueue(compiled, jobs), dict(feed)

    call = TimedCall(run, list(feed.values()))
    return Prepared(
        call=call,
        outputs=lambda: [np.array(a) for a in call()],
        batch=loaded.batch,
        flops_per_call=loaded.flops_per_call,
        flops_source=loaded.flops_source,
        extra={},
        notes=[*loaded.notes, *notes, ARTIFACT_NOTE + str(xml)],
        async_queue=async_queue,
        profile=openvino_profiler(
            lambda: _openvino_compiled(ov_model, runtime, {**config, "perf_count": True})[0],
            feed, lambda: layer_table(loaded.model, loaded.batch),
        ),
    )


def _openvino_feed(compiled: Any, loaded: Any) -> dict[int, Any]:
    """The sample inputs by OpenVINO input index, matched by name where every input's name
    is one of the model's (a SavedModel's inputs come out of the converter sorted by name,
    not in its signature's order), else by position."""
    arrays = [loaded.inputs[n] for n in loaded.input_names]
    index = {}
    for i, port in enumerate(compiled.inputs):
        for name in port.get_names():
            index.setdefault(name.split(":")[0], i)
    if set(loaded.input_names) <= set(index) and len(index) >= len(arrays):
        return {index[n]: loaded.inputs[n] for n in loaded.input_names}
    return dict(enumerate(arrays))


def _openvino_output_order(compiled: Any, loaded: Any) -> list[int]:
    """Output indices in TensorFlow's order: a SavedModel signature returns a dict, which
    TensorFlow flattens by sorted key; OpenVINO names each output by that key."""
    count = len(compiled.outputs)
    if loaded.format != "savedmodel":
        return list(range(count))
    names = [sorted(port.get_names() or {""})[0] for port in compiled.outputs]
    return sorted(range(count), key=lambda i: names[i])


# ----------------------------------------------------------------------------- precision
def policy_clone(model: Any, policy: str = "mixed_bfloat16") -> Any:
    """A clone of a Keras model whose layers compute under ``policy``, with the same weights.

    Keras saves each layer's dtype policy in its config, so the global policy alone would not
    reach a clone: every layer is rebuilt from its config with ``dtype=policy``.
    """
    import keras

    def rebuild(layer: Any) -> Any:
        config = layer.get_config()
        if "dtype" in config:
            config["dtype"] = policy
        return layer.__class__.from_config(config)

    try:
        clone = keras.models.clone_model(model, clone_function=rebuild)
        clone.set_weights(model.get_weights())
    except Exception as exc:  # subclassed models cannot be cloned
        raise ConversionError(
            f"cannot clone the Keras model under the {policy} policy: {first_error(exc)}"
        ) from None
    return clone


def _precision_variant(loaded: Any, config: dict) -> Any:
    from dataclasses import replace


    precision = config.get("precision") or "fp32"
    if precision == "mixed_float16":
        import tensorflow as tf

        if not tf.config.list_physical_devices("GPU"):
            raise ConversionError("mixed_float16 needs a GPU; this worker sees none.")
        if not _is_keras(loaded):
            raise ConversionError("mixed_float16 is tuned for Keras models only.")
        loaded = replace(loaded, model=policy_clone(loaded.model, "mixed_float16"))
        note = "mixed_float16: Keras policy (model cloned, weights copied)"
    elif precision != "bf16":
        raise ConversionError(f"unknown precision {precision!r}: use fp32 or bf16.")
    elif not cpu_has_bf16():
        raise ConversionError("bf16 needs a CPU with AVX512_BF16 or AMX; this one has neither.")
    elif _is_keras(loaded):
        loaded = replace(loaded, model=policy_clone(loaded.model, "mixed_bfloat16"))
        note = "bf16: Keras mixed_bfloat16 policy (model cloned, weights copied)"
    else:
        import tensorflow as tf

        tf.config.optimizer.set_experimental_options({"auto_mixed_precision_onednn_bfloat16": True})
        note = "bf16: TensorFlow graph rewrite auto_mixed_precision_onednn_bfloat16"
    prepared = tf_prepared(loaded, {**config, "precision": "fp32"})
    prepared.notes = [*prepared.notes, note]
    low_precision_outputs = prepared.outputs
    prepared.outputs = lambda: [_as_float32(a) for a in low_precision_outputs()]
    return prepared


def _as_float32(array: Any) -> Any:
    """Low-precision outputs as float32 (the parent's numpy and ``.npz`` know no bfloat16)."""
    import numpy as np

    array = np.asarray(array)
    return (
        array
        if array.dtype in (np.float32, np.float64) or array.dtype.kind in "iub"
        else (array.astype(np.float32))
    )


# ----------------------------------------------------------------------------- entry point
def prepare_variant(loaded: Any, config: dict) -> Any:
    """Build the :class:`tfperf.worker.prepare.Prepared` for a non-default runtime or precision."""
    runtime = config.get("runtime") or "tf"
    precision = config.get("precision") or "fp32"
    if runtime not in RUNTIMES:
        raise ConversionError(f"unknown runtime {runtime!r}: use one of {', '.join(RUNTIMES)}.")
    if runtime != "tf" and precision != "fp32":
        raise ConversionError("precision applies to the TensorFlow runtime; use fp32 here.")
    if runtime in (KERAS_JAX, KERAS_TF):
        raise ConversionError(
            f"runtime={runtime} runs the training step of your own Keras model "
            "(tfperf bench|tune --train); inference is measured on TensorFlow's runtimes."
        )
    if runtime in LITERT_RUNTIMES:
        if loaded.format == "tflite":
            if runtime != "litert":
                raise ConversionError("a .tflite model is already converted; use runtime=litert.")

            return litert_prepared(
                loaded.model, loaded.inputs, config.get("runtime_threads"), notes=loaded.notes
            )
        return _litert_variant(loaded, config)
    if runtime in OPENVINO_RUNTIMES:
        return _openvino_variant(loaded, config)
    if runtime == XLA_AOT:
        return aot_prepared(loaded, config)
    return _precision_variant(loaded, config)
