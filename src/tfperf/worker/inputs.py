"""Sample inputs for a model: read from a ``.npz`` file or generated from its input signature.

Contract: an input signature is a list of :class:`InputSpec` (name, shape with ``None`` for an
unknown dimension, numpy dtype name, and for integer inputs the ``[low, high)`` range the model
accepts when known). :func:`generate` makes seeded random inputs for it; :func:`load_npz` reads
the user's arrays and checks them against it. Both return a ``dict`` from input name to
``numpy.ndarray`` in signature order and raise :class:`~tfperf.core.errors.UserError` with one
sentence for anything the user must fix.

A workload at another batch (tune's ``batch`` knob) repeats its own sample rows by
:func:`tfperf.core.protocol.repeat_rows`, so its outputs can be checked against the reference
outputs repeated the same way.

Integer inputs feeding an ``Embedding`` layer are drawn within that layer's vocabulary
(:func:`keras_input_specs` finds them); an integer input with no known range gets
``[0, SMALL_INT_RANGE)``.

Worker side: only the ``*_input_specs`` helpers touch TensorFlow or Keras objects.
"""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tfperf.core.errors import UserError

SMALL_INT_RANGE = 2
"""Integer inputs with no known range are drawn from ``[0, SMALL_INT_RANGE)``."""


@dataclass(frozen=True)
class InputSpec:
    """One model input: ``shape[0]`` is the batch dimension (``None`` when free)."""

    name: str
    shape: tuple[int | None, ...]
    dtype: str
    int_range: tuple[int, int] | None = None


def generate(input_specs: Sequence[InputSpec], batch: int, seed: int) -> dict[str, Any]:
    """Seeded random inputs for ``input_specs`` with ``batch`` samples.

    Floats are standard normal, integers uniform in their ``int_range`` (or
    ``[0, SMALL_INT_RANGE)``), booleans fair coins. A free dimension other than the batch
    dimension, or a string input, raises :class:`UserError` (pass ``--inputs`` instead).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    for spec in input_specs:
        shape = _concrete_shape(spec, batch)
        dtype = np.dtype(spec.dtype)
        if dtype.kind == "f":
            out[spec.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind in "iu":
            low, high = spec.int_range or (0, SMALL_INT_RANGE)
            out[spec.name] = rng.integers(low, high, size=shape).astype(dtype)
        elif dtype.kind == "b":
            out[spec.name] = rng.integers(0, 2, size=shape).astype(bool)
        else:
            raise UserError(
                f"Cannot generate sample values for input {spec.name!r} of type {spec.dtype}: "
                "pass --inputs file.npz."
            )
    return out


def _concrete_shape(spec: InputSpec, batch: int) -> tuple[int, ...]:
    if not spec.shape:
        return ()
    first = batch if spec.shape[0] is None else spec.shape[0]
    rest = spec.shape[1:]
    if any(d is None for d in rest):
        raise UserError(
            f"Input {spec.name!r} has a dimension of unknown size {_fmt(spec.shape)}: pass "
            "--inputs file.npz with sample values."
        )
    return (int(first), *(int(d) for d in rest))


def _fmt(shape: Sequence[int | None]) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


def load_npz(path: str, input_specs: Sequence[InputSpec]) -> dict[str, Any]:
    """The arrays of ``.npz`` file ``path``, checked against ``input_specs``.

    Arrays are matched by input name; a model with a single input also accepts a file with a
    single array of any name. Shapes must match wherever the signature fixes a dimension, all
    inputs must share the batch dimension, and dtypes must be of the same kind (a float array
    for a float input, ...); within a kind the array is cast to the input's dtype.
    """
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise UserError(f"Cannot read inputs file {path!r} as .npz ({exc}).") from None
    names = [s.name for s in input_specs]
    if len(input_specs) == 1 and len(arrays) == 1 and names[0] not in arrays:
        arrays = {names[0]: next(iter(arrays.values()))}
    missing = [n for n in names if n not in arrays]
    if missing:
        raise UserError(
            f"Inputs file {path!r} lacks input(s) {', '.join(missing)}: the model expects "
            f"{', '.join(names)} but the file holds {', '.join(arrays) or 'nothing'}."
        )
    out = {}
    for spec in input_specs:
        out[spec.name] = _checked(path, spec, arrays[spec.name])
    batches = {a.shape[0] for a in out.values() if a.ndim}
    if len(batches) > 1:
        raise UserError(
            f"Inputs in {path!r} disagree on the batch size ({sorted(batches)}): give every "
            "input the same first dimension."
        )
    return out


def _checked(path: str, spec: InputSpec, array: Any) -> Any:
    import numpy as np

    want = np.dtype(spec.dtype)
    if array.dtype.kind != want.kind and not (array.dtype.kind in "iu" and want.kind in "iu"):
        raise UserError(
            f"Input {spec.name!r} in {path!r} has dtype {array.dtype} but the model expects "
            f"{want}: save it with .astype('{want}')."
        )
    ok = len(array.shape) == len(spec.shape) and all(
        w is None or w == g
        for w, g in zip(spec.shape[1:], array.shape[1:])  # noqa: B905 (Python 3.9)
    )
    if not ok:
        raise UserError(
            f"Input {spec.name!r} in {path!r} has shape {tuple(array.shape)} but the model "
            f"expects {_fmt(spec.shape)}."
        )
    if spec.int_range is not None and array.size:
        low, high = spec.int_range
        if array.min() < low or array.max() >= high:
            raise UserError(
                f"Input {spec.name!r} in {path!r} has values outside [{low}, {high}), the "
                "range its Embedding layer accepts."
            )
    return np.ascontiguousarray(array.astype(want, copy=False))


def batch_of(inputs: dict[str, Any], default: int) -> int:
    """The batch dimension shared by ``inputs`` (``default`` when they are all scalars)."""
    for array in inputs.values():
        if getattr(array, "ndim", 0):
            return int(array.shape[0])
    return default


# --- input signatures of loaded models (worker side) -----------------------------------------


def _dtype_name(dtype: Any) -> str:
    """A numpy dtype name for a Keras/TensorFlow/numpy dtype."""
    import numpy as np

    name = getattr(dtype, "name", None)
    if not isinstance(name, str):
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = str(dtype)
    return {"string": "object"}.get(name, name)


def keras_input_specs(model: Any) -> list[InputSpec]:
    """The input signature of a built Keras model (Keras 3 or Keras 2).

    Each integer input that reaches ``Embedding`` layers through layers with a single input
    gets ``int_range = (0, smallest input_dim)``. When some Embedding's input cannot be traced
    (inside a subclassed layer), every other integer input gets the smallest ``input_dim`` of
    those untraced layers, which is safe whichever input feeds them.
    """
    tensors = list(getattr(model, "inputs", None) or [])
    if not tensors:
        raise UserError(
            "The Keras model has no defined inputs (a subclassed model that was never called): "
            "build it on sample inputs or return it from a module:function factory with inputs."
        )
    embeddings = [layer for layer in _all_layers(model) if type(layer).__name__ == "Embedding"]
    ranges, fallback = _embedding_ranges(embeddings)
    specs = []
    for i, tensor in enumerate(tensors):
        name = _input_name(tensor, i)
        dtype = _dtype_name(tensor.dtype)
        int_range = None
        if dtype.startswith(("int", "uint")):
            vocab = ranges.get(name, fallback)
            int_range = (0, vocab) if vocab else None
        specs.append(InputSpec(name, tuple(tensor.shape), dtype, int_range))
    return specs


def _input_name(tensor: Any, index: int) -> str:
    history = getattr(tensor, "_keras_history", None)
    layer = history[0] if history else None
    name = getattr(layer, "name", None) or getattr(tensor, "name", None) or f"input_{index}"
    return str(name).split(":")[0]


def _all_layers(model: Any) -> list[Any]:
    flatten = getattr(model, "_flatten_layers", None)
    if callable(flatten):
        return list(flatten(include_self=False, recursive=True))
    return list(getattr(model, "layers", []))


def _embedding_ranges(embeddings: list[Any]) -> tuple[dict[str, int], int | None]:
    """Input layer name -> smallest vocabulary of the Embedding layers it feeds, and the
    smallest vocabulary among Embedding layers whose input could not be traced (or ``None``)."""
    ranges: dict[str, int] = {}
    untraced: list[int] = []
    for layer in embeddings:
        vocab = int(layer.input_dim)
        try:
            source = _trace_to_input(layer.input)
        except (AttributeError, ValueError, IndexError, TypeError):
            source = None
        if source is None:
            untraced.append(vocab)
        else:
            ranges[source] = min(vocab, ranges.get(source, vocab))
    return ranges, min(untraced, default=None)


def _trace_to_input(tensor: Any, depth: int = 0) -> str | None:
    """Name of the model input ``tensor`` derives from through single-input layers."""
    history = getattr(tensor, "_keras_history", None)
    if history is None or depth > 50:
        return None
    layer, node_index = history[0], history[1]
    if type(layer).__name__ == "InputLayer":
        return str(layer.name)
    nodes = getattr(layer, "_inbound_nodes", None) or []
    if node_index >= len(nodes):
        return None
    parents = list(getattr(nodes[node_index], "input_tensors", None) or [])
    if len(parents) != 1:
        return None
    return _trace_to_input(parents[0], depth + 1)


def signature_input_specs(concrete: Any) -> list[InputSpec]:
    """The input signature of a SavedModel signature (a ``ConcreteFunction`` called by keyword).

    The caller keeps the object ``tf.saved_model.load`` returned alive: it owns the variables.

    An integer input used as the indices of a gather (an embedding lookup) gets
    ``int_range = (0, rows of the table)``.
    """
    _args, kwargs = concrete.structured_input_signature
    specs = []
    for name, spec in kwargs.items():
        shape = tuple(spec.shape.as_list()) if spec.shape.rank is not None else ()
        specs.append(InputSpec(str(name), shape, _dtype_name(spec.dtype.as_numpy_dtype)))
    if any(s.dtype.startswith(("int", "uint")) for s in specs):
        placeholders = {
            str(getattr(spec, "name", None) or name): str(name) for name, spec in kwargs.items()
        }
        ranges = _graph_gather_ranges(concrete, placeholders)
        specs = [
            InputSpec(s.name, s.shape, s.dtype, (0, ranges[s.name])) if s.name in ranges else s
            for s in specs
        ]
    return specs


def _propagate(
    sources: dict[Any, Any],
    edges: list[tuple[list[Any], list[Any]]],
    gathers: list[tuple[Any, int]],
) -> dict[Any, int]:
    """Input name -> rows of the smallest table it indexes.

    ``edges`` are integer-valued ops ``(inputs, outputs)`` through which an index flows (casts,
    the wrap-around of negative indices); ``gathers`` are ``(indices tensor, table rows)``.
    """
    origin = dict(sources)
    changed = True
    while changed:
        changed = False
        for ins, outs in edges:
            src = next((origin[i] for i in ins if i in origin), None)
            for out in outs:
                if src is not None and out not in origin:
                    origin[out] = src
                    changed = True
    ranges: dict[Any, int] = {}
    for indices, rows in gathers:
        if indices in origin and rows > 0:
            name = origin[indices]
            ranges[name] = min(rows, ranges.get(name, rows))
    return ranges


_GATHER_OPS = frozenset({"GatherV2", "ResourceGather", "Gather"})
_INT_DTYPES = frozenset({3, 4, 5, 6, 9, 17, 22, 23})  # DataType enum: int32 uint8 int16 ...


def _graph_gather_ranges(concrete: Any, placeholders: dict[str, str]) -> dict[str, int]:
    """Gather ranges of a ``ConcreteFunction``, read from its graph with variables frozen."""
    try:
        from tensorflow.python.framework.convert_to_constants import (
            convert_variables_to_constants_v2,
        )

        graph_def = convert_variables_to_constants_v2(concrete).graph.as_graph_def()
    except Exception:  # freezing is best effort; the fallback is a small range
        return {}
    nodes = {n.name: n for n in graph_def.node}

    def ref(name: str) -> str:
        return name.split(":")[0]

    def rows(name: str) -> int:
        node = nodes.get(ref(name))
        while node is not None and node.op == "Identity" and node.input:
            node = nodes.get(ref(node.input[0]))
        if node is None or node.op != "Const":
            return 0
        dims = node.attr["value"].tensor.tensor_shape.dim
        return int(dims[0].size) if dims else 0

    edges, gathers = [], []
    for node in graph_def.node:
        data = [ref(i) for i in node.input if not i.startswith("^")]
        if node.op in _GATHER_OPS and len(data) >= 2:
            gathers.append((data[1], rows(data[0])))
        elif any(node.attr[k].type in _INT_DTYPES for k in ("T", "DstT") if k in node.attr):
            edges.append((data, [node.name]))
    sources = {name: arg for name, arg in placeholders.items() if name in nodes}
    return _propagate(sources, edges, gathers)


def tflite_input_specs(interpreter: Any) -> list[InputSpec]:
    """The input signature of a LiteRT interpreter.

    Inputs are named by the model's single signature when it has one (``ids``, not
    ``serving_default_ids:0``). ``shape_signature`` marks free dimensions with -1; an integer
    input used as the indices of a GATHER op gets ``int_range = (0, rows of the table)``.
    """
    import numpy as np

    ranges = _tflite_gather_ranges(interpreter)
    names = {index: name for name, index in tflite_signature_inputs(interpreter).items()}
    specs = []
    for detail in interpreter.get_input_details():
        sig = detail.get("shape_signature")
        dims = list(sig if sig is not None and len(sig) else detail["shape"])
        shape = tuple(None if int(d) < 0 else int(d) for d in dims)
        dtype = np.dtype(detail["dtype"]).name
        int_range = None
        if dtype.startswith(("int", "uint")) and detail["index"] in ranges:
            int_range = (0, ranges[detail["index"]])
        name = names.get(detail["index"], str(detail["name"]))
        specs.append(InputSpec(name, shape, dtype, int_range))
    return specs


def tflite_signature_inputs(interpreter: Any) -> dict[str, int]:
    """Input name -> tensor index from the model's signature, when it has exactly one."""
    try:
        signatures = interpreter._get_full_signature_list()
        if len(signatures) == 1:
            return {str(k): int(v) for k, v in next(iter(signatures.values()))["inputs"].items()}
    except (AttributeError, KeyError, TypeError, ValueError):
        pass
    return {}


def _tflite_gather_ranges(interpreter: Any) -> dict[int, int]:
    """Input tensor index -> rows of the smallest table a GATHER op indexes with it."""
    import numpy as np

    try:
        ops = interpreter._get_ops_details()
        tensors = {t["index"]: t for t in interpreter.get_tensor_details()}
    except (AttributeError, ValueError, RuntimeError):
        return {}
    edges, gathers = [], []
    for op in ops:
        ins = [int(i) for i in op.get("inputs", []) if int(i) >= 0]
        outs = [int(i) for i in op.get("outputs", [])]
        if op.get("op_name") == "GATHER" and len(ins) >= 2:
            shape = tensors.get(ins[0], {}).get("shape", [])
            gathers.append((ins[1], int(shape[0]) if len(shape) else 0))
        elif any(np.dtype(tensors[o]["dtype"]).kind in "iu" for o in outs if o in tensors):
            edges.append((ins, outs))
    sources = {int(d["index"]): int(d["index"]) for d in interpreter.get_input_details()}
    return _propagate(sources, edges, gathers)
