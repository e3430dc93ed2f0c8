"""Worker side: a workload dict becomes a :class:`~tfperf.worker.workload.Loaded`.

Contract: :func:`load_workload` builds a built-in or loads the user's model (``.keras`` in
Keras safe mode unless ``unsafe``, SavedModel serving signature, ``.tflite`` path, or a
``module:function`` factory) with sample inputs from ``--inputs`` or generated, and its FLOPs
per call. Anything the user can cause (corrupt file, unreadable SavedModel, a ``.keras`` file
that needs ``--unsafe``, a factory that raises or returns the wrong thing, inputs that do not
fit) raises :class:`~tfperf.core.errors.UserError` with one sentence.

A ``module:function`` factory takes no arguments and returns ``(model, inputs)``: ``model`` a
Keras model or any callable on TensorFlow tensors (a ``tf.Module``, a function); ``inputs``
one array, a list or tuple of arrays (one list for a Keras model, positional arguments for
any other callable) or a dict of arrays by input name (passed as one dict).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

from tfperf.core.errors import UserError
from tfperf.core.protocol import repeat_rows
from tfperf.core.workloads import SEED, check_batch
from tfperf.worker.fingerprint import fingerprint, seed_everything
from tfperf.worker.flops import UNKNOWN, function_flops, keras_layer_flops
from tfperf.worker.inputs import (
    InputSpec,
    batch_of,
    generate,
    keras_input_specs,
    load_npz,
    signature_input_specs,
    tflite_input_specs,
)
from tfperf.worker.litert import litert_interpreter
from tfperf.worker.models import build
from tfperf.worker.workload import Loaded, first_line, is_keras_model, named


def load_workload(workload: dict[str, Any]) -> Loaded:
    """Build or load ``workload`` (a workload dict) with its sample inputs.

    With ``workload["tile_to"] = N`` (tune's ``batch`` knob) the sample inputs are those of the
    workload's own batch with their rows repeated to ``N`` (:func:`tile_rows`).
    ``Loaded.fingerprint`` (:func:`tfperf.worker.fingerprint.fingerprint`) describes the
    workload at its own batch, before any tiling: every worker of a run reports the same one.
    """
    tile_to = workload.get("tile_to")
    if tile_to is not None:
        base = {k: v for k, v in workload.items() if k != "tile_to"}
        return tile_rows(load_workload(base), check_batch(tile_to))
    loaded = _load(workload)
    loaded.fingerprint = fingerprint(loaded)
    return loaded


def _load(workload: dict[str, Any]) -> Loaded:
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


def tile_rows(loaded: Loaded, rows: int) -> Loaded:
    """``loaded`` at batch ``rows``: its sample rows cycled to ``rows`` rows, the
    FLOPs per call scaled with the batch. The same rows at every batch let tune compare a
    candidate's outputs with the reference outputs repeated the same way."""
    base = loaded.batch
    if rows == base:
        return loaded
    loaded.inputs = {name: repeat_rows(array, rows) for name, array in loaded.inputs.items()}
    if loaded.flops_per_call is not None:
        loaded.flops_per_call = loaded.flops_per_call * rows / base
    loaded.batch = batch_of(loaded.inputs, rows)
    loaded.notes.append(f"batch {rows}: the {base} sample row(s) repeated")
    return loaded


def _load_builtin(workload: dict[str, Any], batch: int) -> Loaded:

    name, size = workload["name"], workload.get("size", "standard")
    built = build(name, size, batch)
    names = list(built.inputs)
    return Loaded(
        model=built.model,
        inputs=built.inputs,
        input_names=names,
        format="builtin",
        flops_per_call=built.flops_per_call,
        flops_source=built.flops_source,
        batch=batch,
        source=f"{name} ({size})",
        notes=list(built.notes),
        input_specs=keras_input_specs(built.model),
        call_style="single" if len(names) == 1 else "list",
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
    are all known to :func:`tfperf.worker.flops.keras_layer_flops` ("analytic"), else from
    TensorFlow's profiler ("unknown" where it cannot count them: loops, uncounted ops, a model
    that cannot be traced)."""

    names = loaded.input_names
    counted = keras_layer_flops(loaded.model, loaded.batch)
    if is_keras_model(loaded.model) and counted != UNKNOWN and counted[0]:
        loaded.flops_per_call, loaded.flops_source = counted
        return loaded
    loaded.flops_per_call, loaded.flops_source = function_flops(
        lambda *xs: loaded.call_model(named(names, xs)), [loaded.inputs[n] for n in names]
    )
    return loaded


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
        raise UserError(f"Cannot load {name} as a Keras model: {first_line(exc)}.") from None


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
        raise UserError(f"Cannot load SavedModel {name}: {first_line(exc)}.") from None
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


def _load_tflite(workload: dict[str, Any], batch: int) -> Loaded:
    path = workload["path"]
    interpreter = litert_interpreter(path)
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
    """:func:`seeded_factory_result`, checked to be ``(model, inputs)``."""
    result = seeded_factory_result(ref, search_path)
    if not (isinstance(result, tuple) and len(result) == 2 and callable(result[0])):
        raise UserError(
            f"Factory {ref} must return a tuple (model, inputs) with a callable model, "
            f"not {type(result).__name__}."
        )
    return result


def seeded_factory_result(ref: str, search_path: str | None) -> Any:
    """Import the factory's module and call it, with every global random generator seeded
    before each (:func:`seed_everything`): an unseeded factory builds the same model and the
    same inputs in every worker. Its module's or its own exception is a :class:`UserError`."""
    module_name, func_name = ref.split(":", 1)
    if search_path and search_path not in sys.path:
        sys.path.insert(0, search_path)
    seed_everything(SEED)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module failed to import
        raise UserError(f"Importing {module_name} failed: {first_line(exc)}.") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise UserError(f"{module_name} has no function {func_name!r}: check {ref}.")
    seed_everything(SEED)
    try:
        return func()
    except Exception as exc:  # the user's factory raised
        raise UserError(f"Factory {ref} raised {type(exc).__name__}: {first_line(exc)}.") from None


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
            style = "list" if is_keras_model(model) else "args"
            return named(names, arrays), names, style
        names = _model_input_names(model, 1)
        return {names[0]: _as_array(raw)}, names, "single"
    except (ValueError, TypeError) as exc:
        raise UserError(
            f"Factory {ref} returned inputs that are not numeric arrays ({exc}): return a "
            "numpy array, a list of arrays or a dict of arrays."
        ) from None


def _model_input_names(model: Any, count: int) -> list[str]:
    if is_keras_model(model):
        try:
            names = [s.name for s in keras_input_specs(model)]
        except (UserError, AttributeError, ValueError):
            names = []
        if len(names) == count:
            return names
    return [f"input_{i}" for i in range(count)]


def _factory_specs(model: Any, inputs: dict[str, Any], names: list[str]) -> list[InputSpec]:
    """Input specs of a factory's model: the Keras signature when it matches, else the arrays."""
    if is_keras_model(model):
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
