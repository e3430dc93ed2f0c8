"""Worker side: what a custom loop's step reaches, and its data as a ``tf.data`` dataset.

Contract:

- :func:`reachable` ``(step)`` walks what the user's step refers to -- its closure's cells, the
  module globals its code names, the object of a bound method, and the attributes, lists and
  dicts of those, a few levels deep -- as a user's ``train_step`` reaches its model, its
  optimizers and its strategy. :func:`reachable_layers` are the Keras layers found (each
  model's own layers with it), :func:`reachable_strategy` the first ``tf.distribute``
  strategy.
- :func:`one_process_only` raises one sentence for a strategy that spans processes
  (``MultiWorkerMirroredStrategy``, ``ParameterServerStrategy``, ``TPUStrategy``): tfperf
  measures one process, under ``MirroredStrategy`` over this machine's devices or
  ``OneDeviceStrategy``. :func:`strategy_notes` say what runs under one it measures.
- :func:`as_dataset` ``(data, ref) -> (dataset, notes)``: a ``tf.data.Dataset`` (or a
  distributed one) as it is, a ``keras.utils.PyDataset`` as ``fit`` reads it, a list or tuple
  of batches through ``Dataset.from_generator``; a generator (read once) or anything not
  iterable is a :class:`UserError` saying what to return.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Any

from tfperf.core.errors import UserError

DEPTH = 3
"""How many references deep :func:`reachable` looks from the step."""
ONE_PROCESS = ("MultiWorkerMirroredStrategy", "CollectiveAllReduceStrategy",
               "ParameterServerStrategy", "ParameterServerStrategyV2", "TPUStrategy",
               "CentralStorageStrategy")
"""Strategies tfperf does not run: they span processes or devices this machine lacks."""


def reachable(step: Any) -> Iterator[Any]:
    """Every object the step refers to, each once (module docstring)."""
    seen: set[int] = set()
    todo: list[tuple[Any, int]] = [(step, 0)]
    while todo:
        obj, depth = todo.pop()
        if id(obj) in seen or depth > DEPTH:
            continue
        seen.add(id(obj))
        yield obj
        todo.extend((child, depth + 1) for child in _children(obj))


def _children(obj: Any) -> list[Any]:
    """What ``obj`` refers to that a step's model, optimizer or strategy may be."""
    if isinstance(obj, (str, bytes, int, float, bool, type(None), types.ModuleType, type)):
        return []
    function = getattr(obj, "python_function", None)  # a tf.function
    if function is not None:
        return [function]
    if isinstance(obj, types.MethodType):
        return [obj.__func__, obj.__self__]
    if isinstance(obj, types.FunctionType):
        cells = [c.cell_contents for c in obj.__closure__ or () if _filled(c)]
        names = _names(obj.__code__)
        return cells + [obj.__globals__[n] for n in names if n in obj.__globals__]
    if isinstance(obj, dict):
        return list(obj.values())
    if isinstance(obj, (list, tuple, set)):
        return list(obj)
    if _is_layer(obj) or _is_strategy(obj):
        return []  # found: its own parts are walked where needed
    return list(vars(obj).values()) if hasattr(obj, "__dict__") else []


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 (an empty cell raises)
    except ValueError:
        return False
    return True


def _names(code: types.CodeType) -> set[str]:
    """The global names ``code`` and the functions defined in it use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _is_layer(obj: Any) -> bool:
    import keras

    return isinstance(obj, keras.layers.Layer)


def _is_strategy(obj: Any) -> bool:
    """Whether ``obj`` is a strategy the user chose (not TensorFlow's default one)."""
    import tensorflow as tf

    return isinstance(obj, tf.distribute.Strategy) and not is_default_strategy(obj)


def is_default_strategy(strategy: Any) -> bool:
    """Whether ``strategy`` is TensorFlow's default one (no strategy at all)."""
    return type(strategy).__name__.startswith("_Default")


def reachable_layers(step: Any) -> list[Any]:
    """The Keras layers the step reaches, each model's layers with it, each once."""
    found: dict[int, Any] = {}
    for obj in reachable(step):
        if _is_layer(obj):
            for layer in [obj, *obj._flatten_layers(include_self=False)]:
                found.setdefault(id(layer), layer)
    return list(found.values())


def reachable_strategy(step: Any) -> Any:
    """The first ``tf.distribute`` strategy the step reaches, or ``None``."""
    return next((obj for obj in reachable(step) if _is_strategy(obj)), None)


PUBLIC_NAMES = {"CollectiveAllReduceStrategy": "MultiWorkerMirroredStrategy",
                "ParameterServerStrategyV2": "ParameterServerStrategy"}
"""A strategy's class by the name users create it under."""


def strategy_name(strategy: Any) -> str:
    """The name a user creates ``strategy`` under (``MultiWorkerMirroredStrategy``)."""
    name = type(strategy).__name__
    return PUBLIC_NAMES.get(name, name)


def one_process_only(strategy: Any) -> None:
    """One sentence for a strategy tfperf cannot run in one process (module docstring)."""
    name = type(strategy).__name__ if strategy is not None else ""
    if name in ONE_PROCESS:
        raise UserError(
            f"Your step runs under {strategy_name(strategy)}, which spans processes (or "
            "devices) tfperf does not start: tfperf measures one process, so measure the same "
            "step under MirroredStrategy over this machine's devices, or OneDeviceStrategy."
        )


def strategy_devices(strategy: Any) -> list[str]:
    """``["CPU:0", "CPU:1"]``: the devices a strategy's replicas run on, short."""
    devices = getattr(strategy.extended, "worker_devices", ()) or ()
    return [d.split("device:")[-1] for d in devices]


def strategy_notes(strategy: Any) -> list[str]:
    """What runs under the strategy, in words (nothing outside one)."""
    if strategy is None:
        return []
    devices = ", ".join(strategy_devices(strategy)) or "its devices"
    return [f"under {strategy_name(strategy)} over {devices}, as you wrote it"]


def refuse_xla_across(strategy: Any) -> None:
    """XLA under a strategy of several replicas: one sentence (its program runs on one
    device, and the replicas' variables live on others)."""
    if strategy is not None and getattr(strategy, "num_replicas_in_sync", 1) > 1:
        devices = " and ".join(strategy_devices(strategy))
        raise UserError(f"not tried: XLA compiles your step for one device, and "
                        f"{strategy_name(strategy)} keeps its replicas' variables on {devices}.")


def as_dataset(data: Any, ref: str) -> tuple[Any, list[str]]:
    """The loop's data as a ``tf.data`` dataset, and a note where tfperf made it one."""
    import tensorflow as tf

    from tfperf.worker.traindata import PY_DATASET_NOTE, is_py_dataset, py_dataset

    if isinstance(data, tf.data.Dataset) or hasattr(data, "_original_dataset"):
        return data, []
    if is_py_dataset(data):
        return py_dataset(data), [PY_DATASET_NOTE]
    what = type(data).__name__
    if isinstance(data, (list, tuple)) and data:
        spec = tf.nest.map_structure(tf.type_spec_from_value, data[0])
        dataset = tf.data.Dataset.from_generator(lambda: iter(data), output_signature=spec)
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(len(data)))
        return dataset, [f"a {what} of {len(data)} batches, read through "
                         "tf.data.Dataset.from_generator"]
    if isinstance(data, Iterator):
        raise UserError(f"Factory {ref} returned data of type {what}, which can be read once, "
                        "and tfperf reads your batches again for the guard: return a "
                        "tf.data.Dataset (tf.data.Dataset.from_generator(make_batches, "
                        "output_signature=...) wraps a generator).")
    raise UserError(f"Factory {ref} returned data of type {what}, which is not a dataset of "
                    "batches: return (step, dataset) with a tf.data.Dataset whose elements "
                    "your step takes.")
