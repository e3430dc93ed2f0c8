"""The ``model`` argument of the library API, turned into the workload dict every command takes.

Contract: :func:`workload_for` accepts what the command line accepts (a ``.keras`` file, a
SavedModel directory, a ``.tflite`` file, ``module:function``, or ``workload="lstm"`` for a
built-in) and, in addition, a model object in the caller's memory: a Keras model (saved as a
``.keras`` file) or a ``tf.Module`` (saved as a SavedModel, with its single ``tf.function``
that has an input signature as the serving function). Sample inputs may be an ``.npz`` path or
arrays (one array, a list in the model's input order, or a dict by input name), written to an
``.npz`` beside the saved model. Whatever is saved lives in ``scratch`` (a folder the caller
removes after the command), because tfperf's workers load models from files, never from the
caller's memory.

The caller has TensorFlow already when it holds such an object, so the saving uses the
caller's own loaded module (``sys.modules``) and this parent-side package never imports it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tfperf.core.errors import UserError
from tfperf.modelref import SUPPORTED, workload_from_args


def workload_for(
    model: Any,
    *,
    workload: str | None,
    inputs: Any,
    unsafe: bool,
    batch: int,
    size: str,
    scratch: Path,
) -> dict[str, Any]:
    """The workload dict for ``model`` (or the built-in ``workload``); see the module doc."""
    if model is not None and not isinstance(model, (str, os.PathLike)):
        path = _save_model(model, scratch)
        inputs = _save_inputs(inputs, _input_names(model), scratch)
        return workload_from_args(None, path, inputs=inputs, unsafe=True, batch=batch, size=size)
    if inputs is not None and not isinstance(inputs, (str, os.PathLike)):
        inputs = _save_inputs(inputs, None, scratch)
    return workload_from_args(
        workload,
        None if model is None else os.fspath(model),
        inputs=None if inputs is None else os.fspath(inputs),
        unsafe=unsafe,
        batch=batch,
        size=size,
    )


def _is_keras(model: Any) -> bool:
    return any(
        c.__module__.split(".")[0] in ("keras", "tf_keras") and c.__name__ in ("Model", "Layer")
        for c in type(model).__mro__
    )


def _save_model(model: Any, scratch: Path) -> str:
    """Save the caller's model object under ``scratch``; return the path workers load."""
    if _is_keras(model):
        path = scratch / "model.keras"
        model.save(str(path))
        return str(path)
    tf = sys.modules.get("tensorflow")
    if tf is not None and isinstance(model, tf.Module):
        path = scratch / "saved_model"
        tf.saved_model.save(model, str(path))
        return str(path)
    raise UserError(
        f"cannot measure an object of type {type(model).__name__}: pass a Keras model, "
        f"a tf.Module, or {SUPPORTED}."
    )


def _input_names(model: Any) -> list[str] | None:
    """The input names of a Keras model in order (``None`` when it does not say)."""
    tensors = getattr(model, "inputs", None) if _is_keras(model) else None
    if not tensors:
        return None
    return [str(getattr(t, "name", "")).split(":")[0] for t in tensors]


def _save_inputs(inputs: Any, names: Sequence[str] | None, scratch: Path) -> str | None:
    """Arrays given by the caller as an ``.npz`` under ``scratch``; paths pass through."""
    if inputs is None or isinstance(inputs, (str, os.PathLike)):
        return None if inputs is None else os.fspath(inputs)
    import numpy as np

    if isinstance(inputs, Mapping):
        arrays = {str(k): np.asarray(v) for k, v in inputs.items()}
    elif isinstance(inputs, (list, tuple)):
        keys = list(names or []) if names and len(names) == len(inputs) else None
        keys = keys or [f"input_{i}" for i in range(len(inputs))]
        arrays = {k: np.asarray(v) for k, v in zip(keys, inputs, strict=True)}
    else:
        arrays = {(names or ["input_0"])[0]: np.asarray(inputs)}
    path = scratch / "inputs.npz"
    np.savez(path, **arrays)
    return str(path)


def inputs_file(inputs: Any, scratch: Path) -> str | None:
    """Sample inputs as an ``.npz`` path: arrays the caller gave are saved under ``scratch``."""
    return _save_inputs(inputs, None, scratch)


def _is_dataset(obj: Any) -> bool:
    return any(
        c.__module__.startswith("tensorflow") and "Dataset" in c.__name__
        for c in type(obj).__mro__
    )


def train_workload_for(
    model: Any, *, inputs: Any, labels: Any, unsafe: bool, batch: int | None,
    guard_steps: int | None, validation: Any, scratch: Path,
) -> dict[str, Any]:
    """The workload dict of ``train=True``: ``model`` is a training TARGET string (see
    :func:`tfperf.modelref.resolve_train_target`) or a compiled Keras model with ``inputs``
    and ``labels`` arrays (saved with its compile configuration under ``scratch``)."""
    from tfperf.modelref import resolve_train_target

    if any(_is_dataset(v) for v in (model, inputs, labels)):
        raise UserError(
            "A tf.data.Dataset cannot cross into tfperf's worker processes: return it with the "
            "model from a module:function factory and pass 'module:function'."
        )
    target = model
    if model is not None and not isinstance(model, (str, os.PathLike)):
        if not _is_keras(model):
            raise UserError("train=True takes a compiled Keras model or a TARGET string.")
        target = _save_model(model, scratch)
        unsafe = True
    if labels is not None and not isinstance(labels, (str, os.PathLike)):
        import numpy as np

        np.savez(scratch / "labels.npz", y=np.asarray(labels))
        labels = scratch / "labels.npz"
    inputs = _save_inputs(inputs, None, scratch)
    return resolve_train_target(
        os.fspath(target), inputs=inputs, labels=None if labels is None else os.fspath(labels),
        unsafe=unsafe, batch=batch, guard_steps=guard_steps,
        validation=None if validation is None else os.fspath(validation),
    )
