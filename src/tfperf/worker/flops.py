"""FLOPs per call: analytic counts for the built-ins, TensorFlow's profiler for loop-free graphs.

Contract: every count returns ``(flops_per_call, source)`` with ``source`` one of
:data:`SOURCES`; ``flops_per_call`` is ``None`` exactly when the source is ``"unknown"``.

Counting convention (the analytic counts): a multiply-accumulate in a matrix product or a
convolution is 2 FLOPs, a bias add is 1 FLOP per output element; activations, normalisation,
softmax, residual adds and embedding lookups are not counted (they are a few percent of a
matmul-bound model).

TensorFlow's profiler counts each op of a graph once, so the body of a ``While`` loop (an RNN
step) is counted once instead of once per step: an LSTM over 50 steps is undercounted ~50-140x.
:func:`profiler_flops` therefore refuses graphs with a loop and reports ``"unknown"``.

The analytic functions import nothing heavy; :func:`keras_layer_flops` walks a built Keras
model's layers (duck-typed, no import); :func:`profiler_flops` imports TensorFlow.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

SOURCES = ("analytic", "profiler", "unknown")
"""Where a FLOPs figure comes from."""

UNKNOWN: tuple[None, str] = (None, "unknown")

LOOP_OPS = frozenset({"While", "StatelessWhile", "Enter", "Exit", "NextIteration", "LoopCond"})
"""Graph ops that mean a loop: the profiler would count its body once."""


HEAVY_OPS = frozenset(
    {
        "MatMul",
        "BatchMatMul",
        "BatchMatMulV2",
        "BatchMatMulV3",
        "Einsum",
        "Conv2D",
        "Conv3D",
        "DepthwiseConv2dNative",
        "Conv2DBackpropInput",
    }
)
"""Ops that carry a model's FLOPs: a profiler count that misses one of them is refused."""


def dense_flops(batch: int, n_in: int, n_out: int, bias: bool = True) -> int:
    """One Dense layer: ``batch * (2 * n_in * n_out + n_out)`` (the bias term only with a bias)."""
    return batch * (2 * n_in * n_out + (n_out if bias else 0))


def mlp_flops(batch: int, widths: Sequence[int]) -> int:
    """A stack of Dense layers with ``widths = [n_in, h1, ..., n_out]``.

    ``sum_i batch * (2 * widths[i] * widths[i+1] + widths[i+1])``; e.g. 256 -> 512 -> 512 -> 10
    at batch 1 is ``(2*256*512 + 512) + (2*512*512 + 512) + (2*512*10 + 10) = 797_706``.
    """
    return sum(dense_flops(batch, a, b) for a, b in zip(widths[:-1], widths[1:]))  # noqa: B905, RUF007 (Python 3.9)


def lstm_flops(batch: int, steps: int, features: int, units: int) -> int:
    """An LSTM layer over ``steps`` steps: ``batch * steps * (8 * U * (F + U) + 4 * U)``.

    Each step multiplies the input (F) by the 4-gate kernel (F x 4U) and the state (U) by the
    recurrent kernel (U x 4U), then adds the 4U bias; the gate nonlinearities and the cell update
    are elementwise and not counted.
    """
    return batch * steps * (8 * units * (features + units) + 4 * units)


def encoder_flops(batch: int, layers: int, seq: int, d_model: int, ffn: int) -> int:
    """A post-norm transformer encoder: ``L * B * (8*S*d^2 + 4*S^2*d + 4*S*d*f + 5*S*d + S*f)``.

    Per layer and sample: Q, K, V and output projections (4 x ``2*S*d*d``, biases ``4*S*d``),
    attention scores and the weighted sum of values (2 x ``2*S*S*d`` over all heads), and the
    feed-forward block (``2*S*d*f + S*f`` and ``2*S*f*d + S*d``).
    """
    s, d, f = seq, d_model, ffn
    return layers * batch * (8 * s * d * d + 4 * s * s * d + 4 * s * d * f + 5 * s * d + s * f)


def wide_deep_flops(
    batch: int, categorical: int, embed_dim: int, dense: int, hidden: Sequence[int]
) -> int:
    """Wide & deep: ``dense_flops(B, D, 1) + mlp_flops(B, [C*E + D, *hidden, 1])``.

    The wide part is one linear unit over the D dense features; the deep part an MLP over the C
    concatenated E-wide embeddings and the dense features. Lookups cost no FLOPs.
    """
    return dense_flops(batch, dense, 1) + mlp_flops(
        batch, [categorical * embed_dim + dense, *hidden, 1]
    )


def builtin_flops(name: str, params: dict[str, Any], batch: int) -> tuple[int | None, str]:
    """Analytic FLOPs per call of built-in ``name`` with size ``params`` when a closed form exists.

    The image models (``mobilenetv2``, ``resnet50``) are counted from their
    built layers with :func:`keras_layer_flops` instead; they return ``UNKNOWN`` here.
    """
    p = params
    if name == "lstm":
        return lstm_flops(batch, p["steps"], p["features"], p["units"]), "analytic"
    if name == "encoder":
        return encoder_flops(batch, p["layers"], p["seq"], p["d_model"], p["ffn"]), "analytic"
    if name == "mlp":
        return mlp_flops(batch, [p["features"], *p["hidden"], p["classes"]]), "analytic"
    if name == "wide-deep":
        flops = wide_deep_flops(batch, p["categorical"], p["embed_dim"], p["dense"], p["hidden"])
        return flops, "analytic"
    return UNKNOWN


def _shape(tensor: Any) -> tuple[int, ...] | None:
    shape = getattr(tensor, "shape", None)
    if shape is None:
        return None
    dims = tuple(shape)
    return None if any(d is None for d in dims[1:]) else tuple(int(d or 1) for d in dims)


def _elements_per_sample(shape: tuple[int, ...]) -> int:
    return math.prod(shape[1:])


FREE_LAYERS = frozenset(
    {
        "InputLayer",
        "Activation",
        "ReLU",
        "LeakyReLU",
        "PReLU",
        "ELU",
        "Softmax",
        "BatchNormalization",
        "LayerNormalization",
        "Dropout",
        "SpatialDropout1D",
        "SpatialDropout2D",
        "GaussianNoise",
        "Add",
        "Subtract",
        "Multiply",
        "Average",
        "Maximum",
        "Minimum",
        "Concatenate",
        "Flatten",
        "Reshape",
        "Permute",
        "RepeatVector",
        "Cropping1D",
        "Cropping2D",
        "ZeroPadding1D",
        "ZeroPadding2D",
        "UpSampling1D",
        "UpSampling2D",
        "MaxPooling1D",
        "MaxPooling2D",
        "AveragePooling1D",
        "AveragePooling2D",
        "GlobalAveragePooling1D",
        "GlobalAveragePooling2D",
        "GlobalMaxPooling1D",
        "GlobalMaxPooling2D",
        "Embedding",
        "Rescaling",
        "Normalization",
    }
)
"""Layers the counting convention leaves out (no matmul or convolution inside)."""

_COUNTED = ("Conv1D", "Conv2D", "Conv3D", "DepthwiseConv2D", "Dense")


def layer_flops(layer: Any) -> int | None:
    """Forward FLOPs per sample of one layer: matmuls and convolutions counted, the layers of
    :data:`FREE_LAYERS` 0, nested models summed; ``None`` for any other layer (a recurrent or
    attention layer, a custom layer) and for a layer called more than once."""
    kind = type(layer).__name__
    if len(getattr(layer, "_inbound_nodes", None) or []) > 1:
        return None  # a shared layer: its cost depends on every call
    if kind in FREE_LAYERS:
        return 0
    if kind not in _COUNTED:
        nested = getattr(layer, "layers", None)
        return keras_layer_flops(layer, batch=1)[0] if nested is not None else None
    if getattr(layer, "data_format", "channels_last") != "channels_last":
        return None
    try:
        out = _shape(layer.output)
        inp = _shape(layer.input)
    except (AttributeError, ValueError):
        return None
    if out is None or inp is None:
        return None
    bias = _elements_per_sample(out) if getattr(layer, "use_bias", False) else 0
    if kind == "Dense":
        return 2 * _elements_per_sample(inp) * out[-1] + bias
    kernel = math.prod(layer.kernel_size)
    if kind == "DepthwiseConv2D":
        return 2 * kernel * _elements_per_sample(out) + bias
    groups = getattr(layer, "groups", 1) or 1
    return 2 * kernel * (inp[-1] // groups) * _elements_per_sample(out) + bias


def keras_layer_flops(model: Any, batch: int) -> tuple[int | None, str]:
    """Forward FLOPs of a built functional/Sequential Keras model, summed over its layers.

    Conv: ``2 * kh * kw * (C_in / groups) * H_out * W_out * C_out`` (+ ``H_out*W_out*C_out``
    with a bias); depthwise conv: ``2 * kh * kw * H_out * W_out * C_out`` (+ bias); Dense:
    ``2 * n_in * n_out`` per input row (+ bias). The layers of :data:`FREE_LAYERS` (pooling,
    normalisation, activations, adds, reshapes, lookups) are not counted. A layer whose cost
    this walk does not know (recurrent, attention, custom, shared) makes the whole count
    ``UNKNOWN``.
    """
    total = 0
    for layer in getattr(model, "layers", []):
        flops = layer_flops(layer)
        if flops is None:
            return UNKNOWN
        total += flops
    return batch * total, "analytic"


def graph_has_loop(graph_def: Any) -> bool:
    """Whether a ``GraphDef`` (or any function in its library) contains a loop op."""
    if any(node.op in LOOP_OPS for node in graph_def.node):
        return True
    return any(node.op in LOOP_OPS for fn in graph_def.library.function for node in fn.node_def)


def profiler_flops(concrete: Any) -> tuple[int | None, str]:
    """FLOPs per call of a TensorFlow ``ConcreteFunction`` with static input shapes.

    Uses TensorFlow's profiler (``float_operation``) on the function with its variables frozen
    to constants. Returns ``UNKNOWN`` when the graph holds a loop (the profiler would count its
    body once), when it leaves a matmul or convolution uncounted (``Einsum`` has no FLOPs
    statistic; a matmul after a dynamic reshape has no static shape), when it counts nothing,
    or when it fails.
    """
    import tensorflow as tf

    try:
        from tensorflow.python.framework.convert_to_constants import (
            convert_variables_to_constants_v2,
        )

        if graph_has_loop(concrete.graph.as_graph_def()):
            return UNKNOWN
        frozen = convert_variables_to_constants_v2(concrete)
        graph_def = frozen.graph.as_graph_def()
        if graph_has_loop(graph_def):
            return UNKNOWN
        from tensorflow.python.util import deprecation

        with deprecation.silence():
            opts = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
            opts["output"] = "none"
            result = tf.compat.v1.profiler.profile(graph=frozen.graph, cmd="scope", options=opts)
    except Exception:  # the profiler is best effort: any failure means "unknown"
        return UNKNOWN
    counted = {node.name for node in _walk(result) if node.total_float_ops > 0}
    if any(n.op in HEAVY_OPS and n.name not in counted for n in graph_def.node):
        return UNKNOWN  # a matmul or convolution the profiler could not count (Einsum, ...)
    total = int(getattr(result, "total_float_ops", 0) or 0)
    return (total, "profiler") if total > 0 else UNKNOWN


def _walk(node: Any) -> Iterable[Any]:
    """Every node of a profiler result tree."""
    for child in node.children:
        yield child
        yield from _walk(child)


def function_flops(fn: Callable[..., Any], args: Sequence[Any]) -> tuple[int | None, str]:
    """:func:`profiler_flops` of ``tf.function(fn)`` traced for the shapes of ``args``."""
    import tensorflow as tf

    try:
        specs = [tf.TensorSpec(a.shape, tf.as_dtype(a.dtype)) for a in args]
        concrete = tf.function(fn).get_concrete_function(*specs)
    except Exception:  # tracing can fail for exotic models: report "unknown"
        return UNKNOWN
    return profiler_flops(concrete)
