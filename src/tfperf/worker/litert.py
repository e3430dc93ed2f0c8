"""Worker side: a ``.tflite`` model on LiteRT (``ai_edge_litert``), as a Prepared.

Contract: :func:`litert_prepared` is the one way tfperf runs a LiteRT model, for ``.tflite``
files and for models ``tfperf.worker.convert`` converted; :func:`litert_interpreter` loads one and
turns a corrupt file into :class:`~tfperf.core.errors.UserError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tfperf.core.errors import UserError
from tfperf.worker.inputs import batch_of, tflite_signature_inputs
from tfperf.worker.workload import Prepared, TimedCall, first_line


def litert_interpreter(model: str | bytes, threads: int | None = None) -> Any:
    """A LiteRT interpreter for a ``.tflite`` path or flatbuffer bytes; UserError if corrupt.

    Uses ``ai_edge_litert``, else the ``tf.lite.Interpreter`` of older TensorFlow installs.
    """
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        try:
            import tensorflow as tf

            Interpreter = tf.lite.Interpreter
        except (ImportError, AttributeError):
            raise UserError(
                "Running a .tflite model needs LiteRT: pip install ai-edge-litert."
            ) from None

    source = {"model_path": model} if isinstance(model, str) else {"model_content": model}
    try:
        return Interpreter(**source, num_threads=threads)
    except (ValueError, RuntimeError) as exc:
        label = Path(model).name if isinstance(model, str) else "the converted model"
        raise UserError(f"LiteRT cannot load {label}: {first_line(exc)}.") from None


def _tensor_key(name: str) -> str:
    """A LiteRT tensor name reduced to the model's input name (``serving_default_x:0`` -> x)."""
    base = name.split(":")[0]
    return base.removeprefix("serving_default_")


def _match_inputs(interpreter: Any, inputs: dict[str, Any]) -> list[tuple[int, Any]]:
    """``(tensor index, array)`` for each model input, matched by name, else by position."""
    details = interpreter.get_input_details()
    if len(details) != len(inputs):
        raise UserError(
            f"The LiteRT model takes {len(details)} input(s) but {len(inputs)} were given."
        )
    by_signature = tflite_signature_inputs(interpreter)
    if set(inputs) <= set(by_signature):
        return [(int(by_signature[n]), a) for n, a in inputs.items()]
    keys = {_tensor_key(d["name"]): d["index"] for d in details}
    if set(inputs) <= set(keys):
        return [(int(keys[n]), a) for n, a in inputs.items()]
    return [(int(d["index"]), a) for d, a in zip(details, inputs.values())]  # noqa: B905 (Python 3.9)


def litert_prepared(
    model_path_or_bytes: str | bytes,
    inputs: dict[str, Any],
    threads: int | None,
    *,
    flops_per_call: float | None = None,
    flops_source: str = "unknown",
    notes: list[str] | None = None,
) -> Prepared:
    """A LiteRT (``ai_edge_litert``) interpreter for a ``.tflite`` path or flatbuffer bytes.

    ``inputs`` (name -> array) are matched to the model's inputs by signature name, by tensor
    name (``serving_default_NAME:0``) or else by position, resized to the arrays' shapes when
    they differ. The call is a :class:`~tfperf.worker.workload.TimedCall`: it sets every input
    (cast to the model's dtype where it differs), invokes the interpreter and reads every
    output, as a serving loop does. ``threads`` is LiteRT's
    ``num_threads`` (``None``: its default).
    """
    import numpy as np

    interpreter = litert_interpreter(model_path_or_bytes, threads)
    pairs = _match_inputs(interpreter, inputs)
    dtypes = {d["index"]: np.dtype(d["dtype"]) for d in interpreter.get_input_details()}
    shapes = {d["index"]: tuple(d["shape"]) for d in interpreter.get_input_details()}
    for index, array in pairs:
        if shapes[index] != np.shape(array):
            interpreter.resize_tensor_input(index, list(np.shape(array)))
    try:
        interpreter.allocate_tensors()
    except (ValueError, RuntimeError) as exc:
        raise UserError(
            f"LiteRT cannot run this model at these input shapes ({first_line(exc)}): "
            "use --batch 1 or inputs of the model's own shape."
        ) from None
    indices = [index for index, _ in pairs]
    out_indices = [d["index"] for d in interpreter.get_output_details()]

    def run(arrays: list[Any]) -> list[Any]:
        for index, array in zip(indices, arrays):  # noqa: B905 (Python 3.9)
            interpreter.set_tensor(index, np.asarray(array, dtype=dtypes[index]))
        interpreter.invoke()
        return [interpreter.get_tensor(i) for i in out_indices]  # copies, as a server's reply

    call = TimedCall(run, [np.ascontiguousarray(array) for _, array in pairs])

    threads_note = f"LiteRT, {threads} thread(s)" if threads else "LiteRT, default threads"
    return Prepared(
        call=call,
        outputs=lambda: [np.array(a) for a in call()],
        batch=batch_of(inputs, 1),
        flops_per_call=flops_per_call,
        flops_source=flops_source if flops_per_call is not None else "unknown",
        extra={},
        notes=[*(notes or []), threads_note],
    )
