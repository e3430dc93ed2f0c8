"""What the functions of a ``tf.data`` stage run (worker side).

Contract: :func:`functions_ops` -- the op types a stage's own functions run (its map, filter,
interleave or flat_map function, nested functions included); :func:`runs_python` -- whether
any of them calls back into Python (``tf.py_function``, ``tf.numpy_function``,
``Dataset.from_generator``); :func:`draws_random` -- whether one draws from a stateful random
generator; :func:`parallel_safe` -- whether tf.data may call the function from several threads
without changing what it computes: no Python (tfperf cannot know whether Python code is safe to
call from several threads, and parallel calls take turns on the GIL anyway), and no state but
random number generators (parallel calls change which element gets which draw, not the
distribution); :func:`python_name` -- the name of the Python function a stage calls back into,
for labels.

Reading a stage's functions uses the dataset classes' private attributes (a
``StructuredFunctionWrapper`` in ``_map_func``, ``_predicate``...): tf.data has no public way to
take a built pipeline apart.
"""

from __future__ import annotations

import re
from typing import Any

PYTHON_OPS = frozenset({"EagerPyFunc", "PyFunc", "PyFuncStateless"})
"""Ops that call back into the Python interpreter (and so hold the GIL while they run)."""

RANDOM_OPS = frozenset({"TruncatedNormal", "Multinomial", "ParameterizedTruncatedNormal"})
"""Stateful random ops whose names do not contain ``Random``."""

HARMLESS_STATEFUL = frozenset({"Assert", "Print", "PrintV2"})
_DATASET_OP = re.compile(r"Dataset(V\d+)?$")


def stage_functions(ds: Any) -> list[Any]:
    """The ``StructuredFunctionWrapper`` objects a stage holds (its map, predicate...)."""
    return [v for v in vars(ds).values() if type(v).__name__ == "StructuredFunctionWrapper"]


def functions_ops(ds: Any) -> set[str]:
    """Op types run by the stage's own functions, nested functions included."""
    ops: set[str] = set()
    for wrapper in stage_functions(ds):
        try:
            graph = wrapper.function.graph.as_graph_def()
        except Exception:
            continue
        ops.update(n.op for n in graph.node)
        for fn in graph.library.function:
            ops.update(n.op for n in fn.node_def)
    return ops


def runs_python(ds: Any) -> bool:
    """Whether the stage's function calls back into Python."""
    return bool(functions_ops(ds) & PYTHON_OPS)


def _stateful(op: str) -> bool:
    from tensorflow.python.framework import op_def_registry

    op_def = op_def_registry.get(op)
    return op_def is None or bool(op_def.is_stateful)


def is_random(op: str) -> bool:
    """Whether ``op`` draws from a stateful random number generator."""
    return ("Random" in op and "Stateless" not in op) or op in RANDOM_OPS


def draws_random(ds: Any) -> bool:
    """Whether the stage's function draws random numbers from a stateful generator."""
    return any(is_random(op) for op in functions_ops(ds))


def stateful_ops(ds: Any) -> list[str]:
    """The stateful ops of the stage's functions that make parallel calls unsafe: all but
    random generators, assertions and ops that make a dataset (an ``interleave`` function
    builds a new dataset on every call, e.g. ``TFRecordDataset``)."""
    return sorted(
        op
        for op in functions_ops(ds)
        if _stateful(op)
        and not is_random(op)
        and op not in HARMLESS_STATEFUL
        and not _DATASET_OP.search(op)
    )


def parallel_safe(ds: Any) -> bool:
    """Whether tf.data may run the stage's function on several threads at once (see the
    module docstring)."""
    if not stage_functions(ds) or functions_ops(ds) & PYTHON_OPS:
        return False
    return not stateful_ops(ds)


def python_name(ds: Any) -> str | None:
    """The name of the Python function the stage calls back into (``tf.py_function(augment,
    ...)`` gives ``"augment"``), or of the generator of ``Dataset.from_generator``."""
    for wrapper in stage_functions(ds):
        found = _generator_name(getattr(wrapper, "_func", None))
        if found:
            return found
        try:
            graph = wrapper.function.graph.as_graph_def()
        except Exception:
            continue
        for node in graph.node:
            if node.op in PYTHON_OPS:
                found = _py_func_name(node.attr["token"].s.decode())
                if found:
                    return found
    return None


def _py_func_name(token: str) -> str | None:
    from tensorflow.python.ops import script_ops

    try:
        func = script_ops._py_funcs.get(token)
    except Exception:
        return None
    name = getattr(getattr(func, "_func", func), "__name__", None)
    return name if name and name != "<lambda>" else None


def _generator_name(func: Any) -> str | None:
    """The user's generator inside the closures of ``from_generator``'s ``flat_map_fn``."""
    if not getattr(func, "__qualname__", "").startswith("_from_generator."):
        return None
    cells = [c.cell_contents for c in func.__closure__ or () if c.cell_contents is not None]
    for inner in cells:
        for cell in getattr(inner, "__closure__", None) or ():
            state = cell.cell_contents
            gen = getattr(state, "_generator", None)
            if gen is not None:
                return getattr(gen, "__name__", None) or type(gen).__name__
    return "generator"


def is_generator(ds: Any) -> bool:
    """Whether the stage is the ``flat_map`` that ``Dataset.from_generator`` builds."""
    func = getattr(getattr(ds, "_map_func", None), "_func", None)
    return getattr(func, "__qualname__", "").startswith("_from_generator.")
