"""Worker side: a workload and a config become the callables a worker times.

Contract (see ``docs/ARCHITECTURE.md``):

- :func:`load_workload` builds a built-in or loads the user's model and its sample inputs into
  a :class:`Loaded`; anything the user can cause (corrupt file, unreadable SavedModel, a
  ``.keras`` file that needs ``--unsafe``, a factory that raises or returns the wrong thing,
  inputs that do not fit) raises :class:`~tfperf.errors.UserError` with one sentence.
- :func:`prepare` returns a :class:`Prepared`. Runtime ``"tf"`` with precision ``"fp32"`` (the
  default for every format but ``.tflite``) is handled here: the model called through a
  ``tf.function`` (``jit_compile=True`` when ``config["xla"] == "jit"``), its outputs
  materialised so that a call has really finished; a training workload times a ``tf.function``
  SGD step. A ``.tflite`` model defaults to runtime ``"litert"`` (:func:`litert_prepared`).
  Any other runtime or precision goes to ``tfperf.convert.prepare_variant(loaded, config)``.
- :func:`prepare` does not call the model: the worker times the first call itself.

A ``module:function`` factory takes no arguments and returns ``(model, inputs)``: ``model`` a
Keras model or any callable on TensorFlow tensors (a ``tf.Module``, a function); ``inputs``
one array, a list or tuple of arrays (one list for a Keras model, positional arguments for
any other callable) or a dict of arrays by input name (passed as one dict).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfperf.errors import UserError
from tfperf.inputs import (
    InputSpec,
    batch_of,
    generate,
    keras_input_specs,
    load_npz,
    signature_input_specs,
    tflite_input_specs,
    tflite_signature_inputs,
)
from tfperf.workloads import SEED, check_batch

FORMATS = ("builtin", "keras", "savedmodel", "tflite", "factory")
"""Values of :attr:`Loaded.format`."""


@dataclass
class Prepared:
    """What a worker times: one steady-state call, and the outputs of a call for comparisons."""

    call: Callable[[], None]
    """One steady-state call; returns when the outputs are ready."""
    outputs: Callable[[], list[Any]]
    """The outputs of one call as numpy arrays (for a training step: see :func:`tf_prepared`)."""
    batch: int
    flops_per_call: float | None
    flops_source: str
    """"analytic", "profiler" or "unknown" (see :mod:`tfperf.flops`)."""
    extra: dict[str, Callable[[], None]] = field(default_factory=dict)
    """Other ways of calling the same model, for information: "eager", "predict"."""
    notes: list[str] = field(default_factory=list)


@dataclass
class Loaded:
    """A workload loaded in the worker, before any runtime transformation.

    ``model`` is a ``keras.Model`` (built-ins, ``.keras`` files, and factories returning one),
    the serving signature of a SavedModel (a ``ConcreteFunction`` called with keyword
    arguments), any other callable a factory returned, or the path of a ``.tflite`` file.
    ``inputs`` maps each input name to a numpy array in ``input_names`` order; ``call_style``
    says how the model takes them: ``"single"`` (one positional tensor), ``"list"`` (one list,
    how a multi-input Keras model takes them), ``"args"`` (positional arguments: a factory's
    plain callable with a list or tuple of inputs), ``"dict"`` (one dict by name),
    ``"kwargs"`` (keyword arguments), ``"none"`` (a path, for LiteRT). A training workload
    (``train``) also has integer ``labels``.
    """

    model: Any
    inputs: dict[str, Any]
    input_names: list[str]
    format: str
    train: bool
    flops_per_call: float | None
    flops_source: str
    batch: int
    source: str
    notes: list[str] = field(default_factory=list)
    input_specs: list[InputSpec] = field(default_factory=list)
    call_style: str = "single"
    labels: Any | None = None
    keepalive: Any | None = None
    """The object a SavedModel signature belongs to (it owns the variables)."""

    def call_model(self, tensors: dict[str, Any], *, training: bool = False) -> Any:
        """Call :attr:`model` on ``tensors`` (name -> tensor) the way it takes its inputs."""
        model = self.model
        ordered = [tensors[n] for n in self.input_names]
        kwargs = {"training": training} if _is_keras_model(model) else {}
        if self.call_style == "kwargs":
            return model(**tensors)
        if self.call_style == "dict":
            return model(dict(tensors), **kwargs)
        if self.call_style == "list":
            return model(ordered, **kwargs)
        if self.call_style == "args":
            return model(*ordered)
        return model(ordered[0], **kwargs)


def _named(names: list[str], values: Any) -> dict[str, Any]:
    """``dict(zip(names, values))`` checking equal lengths (``zip(strict=)`` needs Python 3.10)."""
    values = list(values)
    if len(values) != len(names):
        raise ValueError(f"expected {len(names)} inputs, got {len(values)}")
    return dict(zip(names, values))  # noqa: B905 (lengths checked above)


def _is_keras_model(obj: Any) -> bool:
    return any(cls.__name__ in ("Model", "Functional", "Sequential") for cls in type(obj).__mro__)


# --- loading ----------------------------------------------------------------------------------


def load_workload(workload: dict[str, Any]) -> Loaded:
    """Build or load ``workload`` (a workload dict) with its sample inputs."""
    kind = workload.get("kind")
    batch = check_batch(workload.get("batch", 1))
    if kind == "builtin":
        return _load_builtin(workload, batch)
    if kind != "model":
        raise UserError(f"Unknown workload kind {kind!r}: use 'builtin' or 'model'.")
    fmt = workload.get("format")
    loaders = {
        "keras": _load_keras,
        "savedmodel": _load_savedmodel,
        "tflite": _load_tflite,
        "factory": _load_factory,
    }
    if fmt not in loaders:
        raise UserError(f"Unknown model format {fmt!r}: use one of {', '.join(loaders)}.")
    return loaders[fmt](workload, batch)


def _load_builtin(workload: dict[str, Any], batch: int) -> Loaded:
    from tfperf.workloads.models import build

    name, size = workload["name"], workload.get("size", "standard")
    built = build(name, size, batch)
    names = list(built.inputs)
    return Loaded(
        model=built.model,
        inputs=built.inputs,
        input_names=names,
        format="builtin",
        train=built.train,
        flops_per_call=built.flops_per_call,
        flops_source=built.flops_source,
        batch=batch,
        source=f"{name} ({size})",
        notes=list(built.notes),
        input_specs=keras_input_specs(built.model),
        call_style="single" if len(names) == 1 else "list",
        labels=built.labels,
    )


def _sample_inputs(
    workload: dict[str, Any], specs: list[InputSpec], batch: int, notes: list[str]
) -> tuple[dict[str, Any], int]:
    """Inputs from ``workload["inputs"]`` (.npz) or generated; returns them and their batch."""
    path = workload.get("inputs")
    if path:
        inputs = load_npz(path, specs)
        got = batch_of(inputs, batch)
        if got != batch:
            notes.append(f"batch {got} taken from the inputs file {Path(path).name}")
        return inputs, got
    inputs = generate(specs, batch, SEED)
    for spec in specs:
        if spec.dtype.startswith(("int", "uint")) and spec.int_range is None:
            notes.append(
                f"integer input {spec.name!r} has no known range: drawn from [0, 2); "
                "pass --inputs for realistic values"
            )
    return inputs, batch_of(inputs, batch)


def _model_loaded(
    workload: dict[str, Any],
    model: Any,
    specs: list[InputSpec],
    fmt: str,
    call_style: str,
    notes: list[str],
    keepalive: Any = None,
) -> Loaded:
    """A :class:`Loaded` for a user model with inputs from ``--inputs`` or generated."""
    batch = check_batch(workload.get("batch", 1))
    inputs, batch = _sample_inputs(workload, specs, batch, notes)
    loaded = Loaded(
        model=model,
        inputs=inputs,
        input_names=[s.name for s in specs],
        format=fmt,
        train=False,
        flops_per_call=None,
        flops_source="unknown",
        batch=batch,
        source=str(workload["path"]),
        notes=notes,
        input_specs=specs,
        call_style=call_style,
        keepalive=keepalive,
    )
    return loaded if fmt == "tflite" else _with_flops(loaded)


def _with_flops(loaded: Loaded) -> Loaded:
    """``loaded`` with FLOPs per call: counted from the layers of a Keras model whose layers
    are all known to :func:`tfperf.flops.keras_layer_flops` ("analytic"), else from
    TensorFlow's profiler ("unknown" where it cannot count them: loops, uncounted ops, a model
    that cannot be traced)."""
    from tfperf.flops import UNKNOWN, function_flops, keras_layer_flops

    names = loaded.input_names
    counted = keras_layer_flops(loaded.model, loaded.batch)
    if _is_keras_model(loaded.model) and counted != UNKNOWN and counted[0]:
        loaded.flops_per_call, loaded.flops_source = counted
        return loaded
    loaded.flops_per_call, loaded.flops_source = function_flops(
        lambda *xs: loaded.call_model(_named(names, xs)), [loaded.inputs[n] for n in names]
    )
    return loaded


def _first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (at most 300 characters, no final period)."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300].rstrip(". ")


def load_keras_file(path: str, unsafe: bool) -> Any:
    """``keras.models.load_model(path)`` in safe mode unless ``unsafe``; errors as UserError."""
    import keras

    name = Path(path).name
    try:
        try:
            return keras.models.load_model(path, compile=False, safe_mode=not unsafe)
        except TypeError as exc:  # a Keras without safe_mode (older than 2.13)
            if "safe_mode" not in str(exc):
                raise
            return keras.models.load_model(path, compile=False)
    except Exception as exc:  # any load failure is a property of the user's file
        text = str(exc)
        if not unsafe and ("safe_mode" in text or "Lambda" in text):
            raise UserError(
                f"{name} contains a Lambda layer or other Python code, which safe mode refuses "
                "to run: pass --unsafe if you trust this file."
            ) from None
        raise UserError(f"Cannot load {name} as a Keras model: {_first_line(exc)}.") from None


def _load_keras(workload: dict[str, Any], batch: int) -> Loaded:
    model = load_keras_file(workload["path"], bool(workload.get("unsafe")))
    specs = keras_input_specs(model)
    style = "single" if len(specs) == 1 else "list"
    return _model_loaded(workload, model, specs, "keras", style, [])


def _load_savedmodel(workload: dict[str, Any], batch: int) -> Loaded:
    import tensorflow as tf

    path = workload["path"]
    name = Path(path).name
    try:
        obj = tf.saved_model.load(path)
    except Exception as exc:  # corrupt or incompatible SavedModel
        raise UserError(f"Cannot load SavedModel {name}: {_first_line(exc)}.") from None
    signatures = dict(getattr(obj, "signatures", {}) or {})
    if not signatures:
        raise UserError(
            f"SavedModel {name} has no serving signature: export it with model.export(path) "
            "or tf.saved_model.save(obj, path, signatures=...)."
        )
    key = "serving_default" if "serving_default" in signatures else sorted(signatures)[0]
    signature = signatures[key]
    notes = [] if key == "serving_default" else [f"using signature {key!r}"]
    specs = signature_input_specs(signature)
    return _model_loaded(workload, signature, specs, "savedmodel", "kwargs", notes, obj)


def _litert_interpreter(model: str | bytes, threads: int | None = None) -> Any:
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
        raise UserError(f"LiteRT cannot load {label}: {_first_line(exc)}.") from None


def _load_tflite(workload: dict[str, Any], batch: int) -> Loaded:
    path = workload["path"]
    interpreter = _litert_interpreter(path)
    specs = [
        InputSpec(s.name, (None, *s.shape[1:]) if s.shape else s.shape, s.dtype, s.int_range)
        for s in tflite_input_specs(interpreter)
    ]
    return _model_loaded(workload, path, specs, "tflite", "none", [])


def _load_factory(workload: dict[str, Any], batch: int) -> Loaded:
    ref = str(workload["path"])
    model, raw_inputs = _call_factory(ref, workload.get("search_path"))
    notes: list[str] = []
    inputs, names, style = _factory_inputs(ref, model, raw_inputs)
    specs = _factory_specs(model, inputs, names)
    if workload.get("inputs"):
        inputs = load_npz(workload["inputs"], specs)
    got = batch_of(inputs, batch)
    if got != batch:
        notes.append(f"batch {got} taken from the inputs of {ref}")
    loaded = Loaded(
        model=model,
        inputs=inputs,
        input_names=names,
        format="factory",
        train=False,
        flops_per_call=None,
        flops_source="unknown",
        batch=got,
        source=ref,
        notes=notes,
        input_specs=specs,
        call_style=style,
    )
    return _with_flops(loaded)


def _call_factory(ref: str, search_path: str | None) -> tuple[Any, Any]:
    module_name, func_name = ref.split(":", 1)
    if search_path and search_path not in sys.path:
        sys.path.insert(0, search_path)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module failed to import
        raise UserError(f"Importing {module_name} failed: {_first_line(exc)}.") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise UserError(f"{module_name} has no function {func_name!r}: check {ref}.")
    try:
        result = func()
    except Exception as exc:  # the user's factory raised
        raise UserError(f"Factory {ref} raised {type(exc).__name__}: {_first_line(exc)}.") from None
    if not (isinstance(result, tuple) and len(result) == 2 and callable(result[0])):
        raise UserError(
            f"Factory {ref} must return a tuple (model, inputs) with a callable model, "
            f"not {type(result).__name__}."
        )
    return result


def _as_array(value: Any) -> Any:
    import numpy as np

    to_numpy = getattr(value, "numpy", None)
    array = to_numpy() if callable(to_numpy) else np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise ValueError(f"dtype {array.dtype} is not numeric")
    return array


def _factory_inputs(ref: str, model: Any, raw: Any) -> tuple[dict[str, Any], list[str], str]:
    """``(inputs by name, names in order, call style)`` for the inputs a factory returned."""
    try:
        if isinstance(raw, dict):
            inputs = {str(k): _as_array(v) for k, v in raw.items()}
            return inputs, list(inputs), "dict"
        if isinstance(raw, (list, tuple)):
            arrays = [_as_array(v) for v in raw]
            names = _model_input_names(model, len(arrays))
            style = "list" if _is_keras_model(model) else "args"
            return _named(names, arrays), names, style
        names = _model_input_names(model, 1)
        return {names[0]: _as_array(raw)}, names, "single"
    except (ValueError, TypeError) as exc:
        raise UserError(
            f"Factory {ref} returned inputs that are not numeric arrays ({exc}): return a "
            "numpy array, a list of arrays or a dict of arrays."
        ) from None


def _model_input_names(model: Any, count: int) -> list[str]:
    if _is_keras_model(model):
        try:
            names = [s.name for s in keras_input_specs(model)]
        except (UserError, AttributeError, ValueError):
            names = []
        if len(names) == count:
            return names
    return [f"input_{i}" for i in range(count)]


def _factory_specs(model: Any, inputs: dict[str, Any], names: list[str]) -> list[InputSpec]:
    """Input specs of a factory's model: the Keras signature when it matches, else the arrays."""
    if _is_keras_model(model):
        try:
            specs = keras_input_specs(model)
        except (UserError, AttributeError, ValueError):
            specs = []
        if [s.name for s in specs] == names:
            return specs
    return [
        InputSpec(n, (None, *inputs[n].shape[1:]) if inputs[n].ndim else (), inputs[n].dtype.name)
        for n in names
    ]


# --- preparing --------------------------------------------------------------------------------


def prepare(workload: dict[str, Any], config: dict[str, Any]) -> Prepared:
    """Load ``workload`` and return what to time under ``config`` (see the module docstring)."""
    loaded = load_workload(workload)
    return prepare_loaded(loaded, config)


def prepare_loaded(loaded: Loaded, config: dict[str, Any]) -> Prepared:
    """:func:`prepare` for an already loaded workload."""
    runtime = config.get("runtime") or "tf"
    precision = config.get("precision") or "fp32"
    if loaded.format == "tflite" and runtime in ("tf", "litert") and precision == "fp32":
        # TensorFlow cannot run a .tflite file: its default (and only fp32) runtime is LiteRT
        ignored = [] if config.get("xla") in (None, "off") else ["xla does not apply to LiteRT"]
        return litert_prepared(
            loaded.model,
            loaded.inputs,
            config.get("litert_threads"),
            notes=[*loaded.notes, *ignored],
        )
    if precision == "fp32" and runtime == "tf":
        return tf_prepared(loaded, config)
    try:
        from tfperf.convert import prepare_variant
    except ImportError:
        raise UserError(
            f"Runtime {runtime!r} with precision {precision!r} is not available in this "
            "tfperf: use runtime tf with precision fp32."
        ) from None
    return prepare_variant(loaded, config)


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
        return loaded.call_model(_named(names, xs))

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
    if not _is_keras_model(model):
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
    loss_fn = keras.losses.SparseCategoricalCrossentropy()

    def forward_loss(*xs: Any) -> tuple[Any, Any]:
        pred = loaded.call_model(_named(names, xs), training=True)
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


# --- LiteRT -----------------------------------------------------------------------------------


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
    they differ, and cast to the model's dtypes. A call sets every input, invokes the
    interpreter and reads every output, as a serving loop does. ``threads`` is LiteRT's
    ``num_threads`` (``None``: its default).
    """
    import numpy as np

    interpreter = _litert_interpreter(model_path_or_bytes, threads)
    pairs = _match_inputs(interpreter, inputs)
    dtypes = {d["index"]: np.dtype(d["dtype"]) for d in interpreter.get_input_details()}
    shapes = {d["index"]: tuple(d["shape"]) for d in interpreter.get_input_details()}
    feeds = []
    for index, array in pairs:
        array = np.ascontiguousarray(np.asarray(array).astype(dtypes[index], copy=False))
        if shapes[index] != array.shape:
            interpreter.resize_tensor_input(index, list(array.shape))
        feeds.append((index, array))
    try:
        interpreter.allocate_tensors()
    except (ValueError, RuntimeError) as exc:
        raise UserError(
            f"LiteRT cannot run this model at these input shapes ({_first_line(exc)}): "
            "use --batch 1 or inputs of the model's own shape."
        ) from None
    out_indices = [d["index"] for d in interpreter.get_output_details()]

    def call() -> None:
        for index, array in feeds:
            interpreter.set_tensor(index, array)
        interpreter.invoke()
        for index in out_indices:
            interpreter.get_tensor(index)

    def outputs() -> list[Any]:
        call()
        return [np.array(interpreter.get_tensor(i)) for i in out_indices]

    threads_note = f"LiteRT, {threads} thread(s)" if threads else "LiteRT, default threads"
    return Prepared(
        call=call,
        outputs=outputs,
        batch=batch_of(inputs, 1),
        flops_per_call=flops_per_call,
        flops_source=flops_source if flops_per_call is not None else "unknown",
        extra={},
        notes=[*(notes or []), threads_note],
    )
