"""Worker side: a workload and a config become the callables a worker times.

Contract (see ``docs/ARCHITECTURE.md``):

- :func:`prepare` loads the workload (:func:`tfperf.worker.loading.load_workload`, which
  raises :class:`~tfperf.core.errors.UserError` for anything the user can cause) and returns a
  :class:`Prepared`. Runtime ``"tf"`` with precision ``"fp32"`` (the default for every format
  but ``.tflite``) is handled here: the model called through a ``tf.function``
  (``jit_compile=True`` when ``config["xla"] == "jit"``), its outputs materialised so that a
  call has really finished; a training workload times a ``tf.function`` SGD step (sparse
  cross-entropy on the logits every built-in classifier returns). A
  ``.tflite`` model runs on LiteRT with ``config["litert_threads"]`` threads
  (:func:`litert_prepared`; ``None``: LiteRT's default). ``intra_threads`` and
  ``inter_threads`` size TensorFlow's thread pools and are *not* read for LiteRT: the CLI
  exposes the interpreter's count as its own knob (``--set litert_threads=N``), as tune's
  space does, so a measured LiteRT config always says which count it ran with. A TensorFlow
  knob set for a LiteRT run (xla, threads, oneDNN) is named in ``Prepared.notes`` as ignored
  (:func:`ignored_by_litert`).
  Any other runtime or precision goes to ``tfperf.worker.convert.prepare_variant(loaded, config)``.
- :func:`prepare` does not call the model: the worker times the first call itself.
- :class:`Loaded`, :class:`Prepared`, :func:`load_workload` and :func:`litert_prepared` are
  re-exported here from :mod:`tfperf.core.workloads`, where they live.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfperf.core.errors import UserError
from tfperf.worker.litert import litert_prepared
from tfperf.worker.loading import load_keras_file, load_workload
from tfperf.worker.workload import FORMATS, Loaded, Prepared, is_keras_model, named

__all__ = [
    "FORMATS",
    "Loaded",
    "Prepared",
    "ignored_by_litert",
    "litert_prepared",
    "load_keras_file",
    "load_workload",
    "prepare",
    "prepare_loaded",
    "tf_prepared",
]


def prepare(workload: dict[str, Any], config: dict[str, Any]) -> Prepared:
    """Load ``workload`` and return what to time under ``config`` (see the module docstring)."""
    loaded = load_workload(workload)
    prepared = prepare_loaded(loaded, config)
    prepared.fingerprint = loaded.fingerprint
    return prepared


def prepare_loaded(loaded: Loaded, config: dict[str, Any]) -> Prepared:
    """:func:`prepare` for an already loaded workload."""
    runtime = config.get("runtime") or "tf"
    precision = config.get("precision") or "fp32"
    if loaded.format == "tflite" and runtime in ("tf", "litert") and precision == "fp32":
        # TensorFlow cannot run a .tflite file: its default (and only fp32) runtime is LiteRT
        return litert_prepared(
            loaded.model,
            loaded.inputs,
            config.get("litert_threads"),
            notes=[*loaded.notes, *ignored_by_litert(config)],
        )
    if precision == "fp32" and runtime == "tf":
        return tf_prepared(loaded, config)
    try:
        from tfperf.worker.convert import prepare_variant
    except ImportError:
        raise UserError(
            f"Runtime {runtime!r} with precision {precision!r} is not available in this "
            "tfperf: use runtime tf with precision fp32."
        ) from None
    return prepare_variant(loaded, config)


_TF_ONLY_KNOBS = {
    "xla": "off",
    "intra_threads": None,
    "inter_threads": None,
    "onednn": None,
}
"""TensorFlow's knobs (and their defaults), which do nothing to a LiteRT interpreter."""


def ignored_by_litert(config: dict[str, Any]) -> list[str]:
    """One note per TensorFlow knob ``config`` sets that a LiteRT interpreter ignores."""
    notes = []
    for knob, default in _TF_ONLY_KNOBS.items():
        if config.get(knob, default) != default:
            hint = ": LiteRT's thread count is litert_threads" if "threads" in knob else ""
            notes.append(f"{knob} does not apply to LiteRT{hint}")
    return notes


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
    args = [tensors[n] for n in names]

    def call() -> None:
        _materialise(fn(*args))

    return Prepared(
        call=call,
        outputs=lambda: _to_numpy(fn(*args)),
        batch=loaded.batch,
        flops_per_call=loaded.flops_per_call,
        flops_source=loaded.flops_source,
        extra=_extras(loaded, tensors),
        notes=notes,
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
