"""Worker side: a loaded model run by TensorFlow itself, the way a worker times it.

Contract: :func:`tf_prepared` ``(loaded, config) -> Prepared`` calls the model through a
``tf.function`` in fp32 (``jit_compile=True`` when ``config["xla"] == "jit"``) as a
:class:`~tfperf.worker.workload.TimedCall`: the host arrays become tensors in the call and every
output comes back as a host array; a training workload times a ``tf.function``
SGD step (sparse cross-entropy on the logits every built-in classifier returns). Used by
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


def _to_numpy(result: Any) -> list[Any]:
    import numpy as np
    import tensorflow as tf

    return [np.array(t) for t in tf.nest.flatten(result)]


def tf_prepared(loaded: Loaded, config: dict[str, Any]) -> Prepared:
    """The model (or its SGD training step) through a ``tf.function``, fp32, on TensorFlow.

    ``config["xla"] == "jit"`` compiles the function with XLA (``jit_compile=True``). For an
    inference workload ``outputs()`` returns the model's outputs; for a training step it
    returns the predictions and the loss of one step at the initial weights (the weights are
    restored afterwards), so that two variants can be compared although every timed call
    updates the weights.
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
    if loaded.train:
        return _train_prepared(loaded, tensors, jit, notes)

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


def _train_prepared(
    loaded: Loaded, tensors: dict[str, Any], jit: bool, notes: list[str]
) -> Prepared:
    import keras
    import tensorflow as tf

    model = loaded.model
    names = loaded.input_names
    labels = tf.convert_to_tensor(loaded.labels)
    optimizer = keras.optimizers.SGD(learning_rate=0.01)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def forward_loss(*xs: Any) -> tuple[Any, Any]:
        pred = loaded.call_model(named(names, xs), training=True)
        return pred, loss_fn(labels, pred)

    def step(*xs: Any) -> Any:
        with tf.GradientTape() as tape:
            _pred, loss = forward_loss(*xs)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))  # noqa: B905 (Python 3.9)
        return loss

    fn = tf.function(step, jit_compile=jit)
    forward_fn = tf.function(forward_loss, jit_compile=jit)
    args = [tensors[n] for n in names]
    initial = [v.numpy() for v in model.variables]

    def outputs() -> list[Any]:
        current = [v.numpy() for v in model.variables]
        _assign(model.variables, initial)
        try:
            return _to_numpy(forward_fn(*args))
        finally:
            _assign(model.variables, current)

    return Prepared(
        call=lambda: _materialise(fn(*args)),
        outputs=outputs,
        batch=loaded.batch,
        flops_per_call=loaded.flops_per_call,
        flops_source=loaded.flops_source,
        extra={"eager": lambda: _materialise(step(*args))},
        notes=[*notes, "one SGD training step (learning rate 0.01) per call"],
    )


def _assign(variables: list[Any], values: list[Any]) -> None:
    for var, value in zip(variables, values):  # noqa: B905 (Python 3.9)
        var.assign(value)
