"""Worker side: a loaded model run by TensorFlow itself, the way a worker times it.

Contract: :func:`tf_prepared` ``(loaded, config) -> Prepared`` calls the model through a
``tf.function`` in fp32 (``jit_compile=True`` when ``config["xla"] == "jit"``) as a
:class:`~tfperf.worker.workload.TimedCall`: the host arrays become tensors in the call and every
output comes back as a host array. Used by
:mod:`tfperf.worker.prepare` for the default runtime and by :mod:`tfperf.worker.convert` for
the bf16 graph rewrite.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfperf.core.errors import UserError
from tfperf.worker.opprofile import layer_table, tf_profiler
from tfperf.worker.workload import Loaded, Prepared, TimedCall, is_keras_model, named


def _materialise(result: Any) -> None:
    """Wait for every tensor of ``result`` (a structure of tensors) to be computed."""
    import tensorflow as tf

    for tensor in tf.nest.flatten(result):
        tensor.numpy()


def tf_prepared(loaded: Loaded, config: dict[str, Any]) -> Prepared:
    """The model through a ``tf.function``, fp32, on TensorFlow.

    ``config["xla"] == "jit"`` compiles the function with XLA (``jit_compile=True``);
    ``outputs()`` returns the model's outputs.
    """
    if loaded.format == "tflite":
        raise UserError("A .tflite model runs through LiteRT, not TensorFlow.")
    import numpy as np
    import tensorflow as tf

    jit = config.get("xla") == "jit"
    names = loaded.input_names
    tensors = {n: tf.convert_to_tensor(loaded.inputs[n]) for n in names}
    notes = list(loaded.notes)
    if jit:
        notes.append("XLA: tf.function(jit_compile=True)")

    def forward(*xs: Any) -> Any:
        return loaded.call_model(named(names, xs))

    fn = tf.function(forward, jit_compile=jit)

    def run(arrays: list[Any]) -> list[Any]:
        # the host arrays become tensors in every call, as a server's request does
        result = fn(*[tf.convert_to_tensor(a) for a in arrays])
        return [t.numpy() for t in tf.nest.flatten(result)]

    call = TimedCall(run, [loaded.inputs[n] for n in names])
    return Prepared(
        call=call,
        outputs=lambda: [np.array(a) for a in call()],
        batch=loaded.batch,
        flops_per_call=loaded.flops_per_call,
        flops_source=loaded.flops_source,
        extra=_extras(loaded, tensors),
        notes=notes,
        profile=tf_profiler(call, lambda: layer_table(loaded.model, loaded.batch), jit),
    )


def _extras(loaded: Loaded, tensors: dict[str, Any]) -> dict[str, Callable[[], None]]:
    """Eager and ``predict`` calls of a Keras model (information only)."""
    model = loaded.model
    if not is_keras_model(model):
        return {}
    ordered = [tensors[n] for n in loaded.input_names]
    data = ordered[0] if len(ordered) == 1 else ordered
    if loaded.call_style == "dict":
        data = dict(tensors)
    return {
        "eager": lambda: _materialise(loaded.call_model(tensors)),
        "predict": lambda: model.predict(data, batch_size=loaded.batch, verbose=0),
    }
