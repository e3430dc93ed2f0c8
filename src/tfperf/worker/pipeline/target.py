"""Load the user's ``module:function`` and make sense of what it returns (worker side).

Contract: :func:`load` imports the module (the current directory first on ``sys.path``, as
users expect), calls the function and returns a :class:`Target`. The function may return a
``tf.data.Dataset``; a dict with ``"dataset"`` and optionally ``"model"``, ``"loss"``,
``"optimizer"``; a tuple ``(dataset, model[, loss[, optimizer]])``; or what ``tune --train``
takes: ``(model, dataset)``, or a custom loop's ``(step, dataset[, variables])``, whose
dataset is analyzed without a model. A function that takes
keyword flags named in :data:`STRUCTURAL_FLAGS` can be rebuilt with them (``Target.rebuild``),
which lets tfperf measure structural fixes (parallel map, interleave, cache, batch before map).
Every mistake the user can make raises :class:`TargetError` whose message is one sentence.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

STRUCTURAL_FLAGS = ("parallel_map", "interleave", "cache_decoded", "batch_before_map")
"""Keyword flags a pipeline function may accept so that tfperf can rebuild it."""


class TargetError(Exception):
    """A problem with the user's pipeline function; ``str()`` is one sentence for the user."""


@dataclass
class Target:
    """The user's pipeline: its dataset, an optional model, and how to rebuild it."""

    spec: str
    dataset: Any
    model: Any = None
    rebuild: Callable[..., Any] | None = None
    flags: tuple[str, ...] = ()
    changes: dict[str, str] = field(default_factory=dict)


def split_spec(spec: str) -> tuple[str, str]:
    """``"pkg.mod:func"`` -> ``("pkg.mod", "func")``; :class:`TargetError` on other shapes."""
    module, sep, func = spec.partition(":")
    if not sep or not module or not func or not func.replace(".", "_").isidentifier():
        raise TargetError(f"'{spec}' is not module:function; pass e.g. my_data:make_dataset")
    return module, func


def _import(spec: str) -> Callable[..., Any]:
    module_name, func_name = split_spec(spec)
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise TargetError(
            f"importing {module_name} failed with {type(exc).__name__}: {first_line(exc)}"
        ) from exc
    obj: Any = module
    for part in func_name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise TargetError(f"{module_name} has no attribute {func_name}; check the name")
    if not callable(obj):
        raise TargetError(f"{spec} is not callable; point at a function that builds the dataset")
    return obj


_TF_DECORATIONS = re.compile(
    r"\{\{[^}]*\}\}|\[Op:[^\]]*\].*"
    r"|Error in user-defined function passed to \S+ transformation with iterator: \S+: "
)
"""TensorFlow's decorations of an error: ``{{function_node ...}}``, ``[Op:...]`` and the
prefix naming tf.data's internal iterator path."""


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an error message, without TensorFlow's decorations
    (:data:`_TF_DECORATIONS`), at most ``limit`` characters."""
    text = _TF_DECORATIONS.sub("", str(exc)).strip().splitlines()
    line = text[0].strip() if text else type(exc).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _call(func: Callable[..., Any], spec: str, **flags: bool) -> Any:
    try:
        return func(**flags)
    except TargetError:
        raise
    except Exception as exc:
        raise TargetError(
            f"{spec} raised {type(exc).__name__}: {first_line(exc)}; fix the function"
        ) from exc


def unpack(result: Any, spec: str) -> tuple[Any, Any]:
    """``(dataset, model)`` from what the function returned; the model is compiled if needed."""
    import tensorflow as tf

    model = loss = optimizer = None
    if isinstance(result, dict):
        if "dataset" not in result:
            keys = ", ".join(repr(k) for k in list(result)[:6]) or "none"
            raise TargetError(
                f"{spec} returned a dict without a 'dataset' key (its keys: {keys}); return "
                "{'dataset': ds, 'model': model} or the dataset itself"
            )
        dataset = result.get("dataset")
        model, loss, optimizer = result.get("model"), result.get("loss"), result.get("optimizer")
    elif isinstance(result, (tuple, list)) and result and isinstance(result[0], tf.data.Dataset):
        dataset, *rest = result
        rest = [*rest, None, None, None]
        model, loss, optimizer = rest[0], rest[1], rest[2]
    elif isinstance(result, (tuple, list)) and len(result) > 1 and hasattr(
        result[0], "train_on_batch"
    ):  # (model, dataset) or (model, x, y), as `tune --train` takes them
        model, dataset = result[0], result[1]
        if len(result) > 2:
            raise TargetError(
                f"{spec} returned a model and arrays: Keras' fit builds their pipeline itself, "
                "so there is no tf.data pipeline of yours to analyze; return (model, dataset)"
            )
        if not isinstance(dataset, tf.data.Dataset):
            raise TargetError(
                f"{spec} returned a model and a {type(dataset).__name__}: tfperf pipeline "
                "analyzes tf.data pipelines; return (model, dataset) with a tf.data.Dataset"
            )
    elif (isinstance(result, tuple) and len(result) in (2, 3) and callable(result[0])
          and not hasattr(result[0], "train_on_batch")):
        # a custom training loop's (step, dataset[, variables]), as `tune --train` takes it:
        # its dataset is analyzed alone (a distributed one through its own tf.data dataset)
        dataset = getattr(result[1], "_original_dataset", result[1])
    else:
        dataset = result
    if not isinstance(dataset, tf.data.Dataset):
        raise TargetError(
            f"{spec} returned {type(dataset).__name__}, not a tf.data.Dataset; return the dataset "
            "(or a dict with 'dataset' and 'model', or (model, dataset))"
        )
    if model is not None:
        if not hasattr(model, "train_on_batch"):
            raise TargetError(
                f"{spec} returned a {type(model).__name__} as its model; return a Keras model"
            )
        if not getattr(model, "compiled", False) or loss is not None:
            if loss is None:
                raise TargetError(
                    f"{spec} returned a model that is not compiled and no loss; compile the "
                    "model or return a 'loss'"
                )
            model.compile(optimizer=optimizer or "sgd", loss=loss)
    return dataset, model


def load(spec: str) -> Target:
    """Import ``spec``, call it, and return the :class:`Target` it describes."""
    func = _import(spec)
    dataset, model = unpack(_call(func, spec), spec)
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        params = {}
    flags = tuple(f for f in STRUCTURAL_FLAGS if f in params)

    def rebuild(**chosen: bool) -> Any:
        return unpack(_call(func, spec, **chosen), spec)[0]

    return Target(
        spec=spec,
        dataset=dataset,
        model=model,
        rebuild=rebuild if flags else None,
        flags=flags,
        changes=dict(getattr(func, "tfperf_changes", {}) or {}),
    )
