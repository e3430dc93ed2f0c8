"""Worker side of ``bench --ops``: where one call's time goes, op by op, in each runtime.

Contract (``docs/ops.md``): a :class:`~tfperf.worker.workload.Prepared` whose runtime has a
profiler carries ``profile``, a function ``(calls) -> RawProfile`` that runs ``calls`` of the
timed call under that runtime's own profiler and returns each op's total self time:

- TensorFlow (``tf_profiler``): ``tf.profiler`` writes its trace, which the ``xprof`` package
  reads (its ``framework_op_stats`` tool: each TensorFlow op's occurrences and self time); under
  ``xla=jit`` the one XLA cluster hides the ops, so the trace's XLA thunk events (``hlo_op``)
  are read instead.
- OpenVINO (``openvino_profiler``): a second compiled model of the same OpenVINO model with
  ``PERF_COUNT`` on; ``get_profiling_info`` after each call.
- XLA AOT has no profiler: its ``profile`` is XLA JIT's profile of the same graph, marked as a
  stand-in (``stand_in`` names it). LiteRT's Python interpreter has none and no stand-in.
  A stand-in times its own unprofiled calls (``RawProfile.plain_s``): its ``call_ms`` and
  ``profiler_overhead`` are XLA JIT's, profiled against unprofiled, never XLA JIT's profiled
  call against the AOT code's plain one.

:func:`profile_record` (the worker's ``profile`` request) first times ``calls`` plain calls, then
the profiled ones, and turns the raw totals into the record of ``docs/results-schema.md``
(``ops``, ``op_types``, each with an ``overhead`` entry, shares summing to 1 over the profiled
call). The profiler is on only inside this request: the timed blocks never run under it.
"""

from __future__ import annotations

import glob
import json
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tfperf.worker.flops import FREE_LAYERS, layer_flops

TOP_SHARE = 0.9
"""The named ops cover at least this share of the call; the rest are summed in one entry."""

NO_PROFILER = {
    "litert": "LiteRT's Python interpreter (ai-edge-litert) exposes no per-op profiler",
    "xla-aot": "XLA AOT code has no profiler",
}

HEAVY_TYPE = re.compile(r"MatMul|Conv|Einsum|FullyConnected|convolution|dot|gemm", re.I)
"""Op types that carry a layer's FLOPs (a fused op included: ``_MklNativeFusedConv2D``)."""


@dataclass(frozen=True)
class OpTotal:
    """One op's totals over the profiled calls."""

    name: str
    type: str
    count: int
    self_s: float
    kernel: str | None = None
    flops: float | None = None
    """FLOPs per call from the runtime's own graph (OpenVINO), where no Keras layer gives them."""
    bytes: float | None = None


@dataclass(frozen=True)
class RawProfile:
    """What a runtime's profiler measured over ``len(wall_s)`` calls."""

    source: str
    ops: list[OpTotal]
    wall_s: list[float]
    layers: dict[str, dict[str, Any]] = field(default_factory=dict)
    stand_in: str | None = None
    notes: list[str] = field(default_factory=list)
    plain_s: list[float] | None = None
    """A stand-in's own unprofiled calls (another runtime's than the timed call's)."""


def timed_calls(call: Callable[[], Any], calls: int) -> list[float]:
    """Seconds of each of ``calls`` calls, one after the other."""
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        call()
        out.append(time.perf_counter() - t0)
    return out


# ----------------------------------------------------------------------------- Keras layers
def layer_table(model: Any, batch: int) -> dict[str, dict[str, Any]]:
    """Each Keras layer (nested models' included) by name: its class, its forward FLOPs per
    call (``None`` where :mod:`tfperf.worker.flops` does not count it), the bytes it must
    move at least (fp32 inputs, outputs and weights) and the layer feeding it."""
    table: dict[str, dict[str, Any]] = {}
    for layer in getattr(model, "layers", None) or []:
        table.update(layer_table(layer, batch))
        try:
            flops = layer_flops(layer)
        except Exception:  # a layer this walk cannot read: FLOPs unknown
            flops = None
        table[layer.name] = {
            "class": type(layer).__name__,
            "flops": None if flops is None else flops * batch,
            "bytes": _layer_bytes(layer, batch),
            "after": _producer(layer),
        }
    return table


def _elements(tensor: Any, skip: int = 0) -> int:
    dims = [int(d or 1) for d in getattr(tensor, "shape", ()) or ()][skip:]
    out = 1
    for d in dims:
        out *= d
    return out if dims else 0


def _layer_bytes(layer: Any, batch: int) -> int | None:
    try:  # activations per sample times the batch (a model's batch dimension is None)
        moved = batch * (_elements(layer.input, 1) + _elements(layer.output, 1))
        moved += sum(_elements(w) for w in layer.weights)
    except Exception:  # no single input/output (a multi-input layer): unknown
        return None
    return 4 * moved


def _producer(layer: Any) -> str | None:
    """The layer whose output is ``layer``'s one input, if any."""
    try:
        history = layer.input._keras_history
    except Exception:  # several inputs, or no history: no single producer
        return None
    operation = history[0] if isinstance(history, tuple) else getattr(history, "operation", None)
    return getattr(operation, "name", None)


def layer_of(op_name: str, layers: dict[str, Any]) -> str | None:
    """The Keras layer an op name belongs to: the deepest path segment that is a layer's name,
    once Keras's call suffixes (``_1``, ``_2``) are dropped."""
    found = None
    for segment in op_name.split("/"):
        candidate = segment
        while True:
            if candidate in layers:
                found = candidate
                break
            stripped = re.sub(r"_\d+$", "", candidate)
            if stripped == candidate:
                break
            candidate = stripped
    return found


def _counted_layer(name: str, layers: dict[str, dict[str, Any]], claimed: set[str]) -> str | None:
    """The layer whose FLOPs an op of layer ``name`` carries: ``name`` itself, or, for a layer
    of no FLOPs (a fused Conv+BN+ReLU op is named after its last layer), the counted layer
    feeding it through such layers, unless another op already claims that one."""
    for _ in range(8):
        if name not in layers or layers[name]["class"] not in FREE_LAYERS:
            return name if name in layers else None
        name = layers[name]["after"]
        if name is None or name in claimed:
            return None
    return None


def _flops_by_op(ops: Sequence[OpTotal], layers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each heavy op's FLOPs, bytes and the layer it carries (the slowest op of a layer gets
    them once)."""
    owner = {op.name: layer_of(op.name, layers) for op in ops}
    heavy = sorted((op for op in ops if HEAVY_TYPE.search(op.type) and owner[op.name]),
                   key=lambda op: -op.self_s)
    claimed = {owner[op.name] for op in heavy}
    result: dict[str, Any] = {}
    given: set[str] = set()
    for op in heavy:
        layer = _counted_layer(owner[op.name], layers, claimed - {owner[op.name]})
        if layer is None or layer in given:
            continue
        given.add(layer)
        result[op.name] = (layers[layer]["flops"], layers[layer]["bytes"], layer)
    return result


# ----------------------------------------------------------------------------- the record
def _entry(name: str, kind: str, count: float, self_s: float, denom_s: float) -> dict[str, Any]:
    return {
        "name": name,
        "type": kind,
        "count": count,
        "self_ms": 1e3 * self_s,
        "self_share": self_s / denom_s if denom_s > 0 else 0.0,
        "flops": None,
        "gflops_per_s": None,
    }


def _op_entries(raw: RawProfile, calls: int, denom_s: float) -> list[dict[str, Any]]:
    flops = _flops_by_op(raw.ops, raw.layers)
    entries = []
    for op in sorted(raw.ops, key=lambda o: -o.self_s):
        per_call = op.self_s / calls
        entry = _entry(op.name, op.type, op.count / calls, per_call, denom_s)
        entry["layer"] = layer_of(op.name, raw.layers)
        if op.kernel:
            entry["kernel"] = op.kernel
        op_flops, moved, carried = flops.get(op.name, (op.flops, op.bytes, None))
        if carried:  # a fused op is named after its last layer: name the one it computes
            entry["layer"] = carried
        if op_flops and per_call > 0:
            entry["flops"] = op_flops
            entry["gflops_per_s"] = op_flops / per_call / 1e9
            entry["bytes"] = moved
        entries.append(entry)
    return entries


def _top(entries: list[dict[str, Any]], denom_s: float) -> list[dict[str, Any]]:
    """The ops covering :data:`TOP_SHARE` of the call, then one entry summing the rest."""
    kept, share = [], 0.0
    for entry in entries:
        if share >= TOP_SHARE:
            break
        kept.append(entry)
        share += entry["self_share"]
    rest = entries[len(kept):]
    if rest:
        self_s = sum(e["self_ms"] for e in rest) / 1e3
        summed = _entry(f"{len(rest)} other ops", "rest", sum(e["count"] for e in rest), self_s,
                        denom_s)
        kept.append(summed)
    return kept


def _types(entries: list[dict[str, Any]], denom_s: float) -> list[dict[str, Any]]:
    by_type: dict[str, dict[str, Any]] = {}
    for e in entries:
        t = by_type.setdefault(e["type"], {"type": e["type"], "count": 0.0, "self_ms": 0.0,
                                           "flops": 0.0, "known": True, "bytes": 0.0})
        t["count"] += e["count"]
        t["self_ms"] += e["self_ms"]
        t["flops"] += e["flops"] or 0.0
        t["bytes"] += e.get("bytes") or 0.0
    out = []
    for t in sorted(by_type.values(), key=lambda t: -t["self_ms"]):
        flops, moved = t.pop("flops"), t.pop("bytes")
        t.pop("known")
        t["self_share"] = t["self_ms"] / 1e3 / denom_s if denom_s > 0 else 0.0
        t["flops"] = flops or None
        t["bytes"] = moved or None
        t["gflops_per_s"] = flops / (t["self_ms"] / 1e3) / 1e9 if flops and t["self_ms"] else None
        out.append(t)
    return out


def summarise(raw: RawProfile, plain_s: Sequence[float]) -> dict[str, Any]:
    """The ``profile`` record of ``raw``: shares of the profiled call, overhead included."""
    calls = max(len(raw.wall_s), 1)
    wall_s = sum(raw.wall_s) / calls
    ops_s = sum(op.self_s for op in raw.ops) / calls
    notes = list(raw.notes)
    if ops_s > wall_s:
        notes.append("ops ran on several threads at once: shares are of the ops' summed time")
    missed = _missed_ops_note(raw.ops, calls)
    if missed:
        notes.append(missed)
    denom_s = max(wall_s, ops_s)
    entries = _op_entries(raw, calls, denom_s)
    overhead = _entry("overhead", "overhead", 1, denom_s - ops_s, denom_s)
    if raw.plain_s is not None:  # a stand-in: its plain calls, not the timed runtime's
        plain_s = raw.plain_s
    plain = statistics.median(plain_s) if plain_s else None
    profiled = statistics.median(raw.wall_s) if raw.wall_s else None
    return {
        "available": True,
        "source": raw.source,
        "stand_in": raw.stand_in,
        "calls": len(raw.wall_s),
        "call_ms": None if plain is None else 1e3 * plain,
        "profiled_call_ms": None if profiled is None else 1e3 * profiled,
        "profiler_overhead": (profiled / plain - 1) if plain and profiled else None,
        "ops": [*_top(entries, denom_s), overhead],
        "op_types": [*_types(entries, denom_s), {k: v for k, v in overhead.items() if k != "name"}],
        "unknown_flops": sorted({e["type"] for e in entries
                                 if e["flops"] is None and HEAVY_TYPE.search(e["type"])}),
        "notes": notes,
    }


def _missed_ops_note(ops: Sequence[OpTotal], calls: int) -> str | None:
    """A note where the profiler recorded no op in some of the calls: an op of a graph runs
    at least once a call, so its time there was counted as overhead. TensorFlow's tracer
    misses ops it runs inline (a tiny model's matmuls, 0.2 ms a call: recorded in 0 to 100% of
    the calls from one run to the next, where a larger model's were in every call)."""
    most = max((op.count for op in ops), default=0)
    if most >= calls:
        return None
    seen = "no op" if not ops else f"ops in at most {most} of the {calls} calls"
    return (f"the profiler recorded {seen}: the time of the ops it missed is in overhead "
            "(TensorFlow does not trace ops it runs inline, as a tiny model's are)")


def unavailable(reason: str) -> dict[str, Any]:
    """The record of a runtime without a profiler (and without a stand-in)."""
    return {"available": False, "reason": reason, "ops": [], "op_types": []}


def profile_record(prepared: Any, runtime: str, seconds: float) -> dict[str, Any]:
    """Answer the worker's ``profile`` request: ``seconds`` of plain calls, then as many
    under the runtime's profiler (see the module docstring)."""
    profile = getattr(prepared, "profile", None)
    if profile is None:
        return unavailable(NO_PROFILER.get(runtime, f"{runtime} has no per-op profiler"))
    first = timed_calls(prepared.call, 1)[0]
    calls = int(min(500, max(3, seconds / max(first, 1e-6))))
    plain = timed_calls(prepared.call, calls)
    try:
        raw = profile(calls)
    except ProfilerMissing as exc:
        return unavailable(str(exc))
    return summarise(raw, plain)


class ProfilerMissing(RuntimeError):
    """The profiler's reader is not installed: one sentence that says how to install it."""


# ----------------------------------------------------------------------------- TensorFlow
def tf_profiler(call: Callable[[], Any], layers: Callable[[], dict], xla_jit: bool,
                stand_in: str | None = None) -> Callable[[int], RawProfile]:
    """TensorFlow's profiler around ``calls`` of ``call``, its trace read by ``xprof``."""

    def run(calls: int) -> RawProfile:
        try:
            from xprof.convert import raw_to_tool_data
        except ImportError:
            raise ProfilerMissing(
                "TensorFlow's op profile is read with the xprof package: "
                "pip install 'tfperf[ops]'"
            ) from None
        import tensorflow as tf

        options = tf.profiler.experimental.ProfilerOptions(
            host_tracer_level=3 if xla_jit else 2, python_tracer_level=0, device_tracer_level=0)
        with tempfile.TemporaryDirectory() as folder:
            tf.profiler.experimental.start(folder, options=options)
            try:
                wall = timed_calls(call, calls)
            finally:
                tf.profiler.experimental.stop()
            paths = glob.glob(f"{folder}/**/*.xplane.pb", recursive=True)
            tool = "trace_viewer" if xla_jit else "framework_op_stats"
            data, _ = raw_to_tool_data.xspace_to_tool_data(paths, tool, {})
        ops = _hlo_ops(data) if xla_jit else _framework_ops(data)
        source = "xla-jit-profiler" if xla_jit else "tensorflow-profiler"
        return RawProfile(f"{source} (xprof {_xprof_version()})", ops, wall, layers(),
                          stand_in)

    return run


def _xprof_version() -> str:
    try:
        from xprof.version import __version__
    except ImportError:
        return "?"
    return str(__version__)


def _framework_ops(data: Any) -> list[OpTotal]:
    """xprof's ``framework_op_stats`` table: one row per TensorFlow op."""
    table = json.loads(data)[0]
    ids = [c["id"] for c in table["cols"]]
    ops = []
    for row in table["rows"]:
        cell = dict(zip(ids, (c.get("v") for c in row["c"])))  # noqa: B905 (Python 3.9)
        if cell["type"] == "IDLE":
            continue
        ops.append(OpTotal(str(cell["operation"]), str(cell["type"]),
                           int(cell["occurrences"]), float(cell["total_self_time"]) / 1e6))
    return ops


def _hlo_ops(data: Any) -> list[OpTotal]:
    """XLA thunk events of the trace (each names its ``hlo_op``), summed by op."""
    totals: dict[str, list[float]] = {}
    for event in json.loads(data).get("traceEvents", []):
        hlo = (event.get("args") or {}).get("hlo_op")
        if event.get("ph") == "X" and hlo:
            total = totals.setdefault(hlo, [0, 0.0])
            total[0] += 1
            total[1] += float(event.get("dur", 0.0)) / 1e6
    return [OpTotal(name, hlo_type(name), int(n), s) for name, (n, s) in totals.items()]


def hlo_type(name: str) -> str:
    """An HLO op's kind from its name: ``convolution.12`` -> ``convolution``,
    ``broadcast_add_fusion.3`` -> ``fusion``."""
    base = re.sub(r"(\.\d+)+$", "", name)
    return "fusion" if base.endswith("fusion") else base


# ----------------------------------------------------------------------------- OpenVINO
def openvino_profiler(compile_profiled: Callable[[], Any], feed: dict[int, Any],
                      layers: Callable[[], dict]) -> Callable[[int], RawProfile]:
    """OpenVINO's performance counters: the same model compiled again with ``PERF_COUNT`` on
    (the timed model is compiled without it), read after each call."""

    def run(calls: int) -> RawProfile:
        compiled = compile_profiled()
        request = compiled.create_infer_request()
        ports, arrays = list(feed), list(feed.values())
        batch = int(arrays[0].shape[0]) if arrays and getattr(arrays[0], "ndim", 0) else 1
        native = _openvino_flops(compiled, batch)
        for _ in range(3):  # this compiled model's own warm-up
            request.infer(dict(zip(ports, arrays)))  # noqa: B905 (Python 3.9)
        totals: dict[str, list[Any]] = {}
        wall = []
        for _ in range(calls):
            t0 = time.perf_counter()
            request.infer(dict(zip(ports, arrays)))  # noqa: B905 (Python 3.9)
            wall.append(time.perf_counter() - t0)
            for info in request.get_profiling_info():
                if "EXECUTED" not in str(info.status):
                    continue
                total = totals.setdefault(info.node_name, [info.node_type, info.exec_type, 0, 0.0])
                total[2] += 1
                total[3] += info.real_time.total_seconds()
        import openvino

        ops = [OpTotal(n, t, c, s, k, *native.get(n, (None, None)))
               for n, (t, k, c, s) in totals.items()]
        return RawProfile(f"openvino-perf-counters (openvino {openvino.__version__})", ops,
                          wall, layers())

    return run


def _openvino_flops(compiled: Any, batch: int) -> dict[str, tuple[float, float]]:
    """FLOPs and bytes per call of each convolution and fully connected node of OpenVINO's
    runtime graph, from its own shapes (NCHW; weights ``[O, I, kh, kw]``, grouped ``[G, O/G,
    I/G, kh, kw]``, fully connected ``[O, I]`` over rows): ``2 * weights * output positions`` -- the
    multiply-adds of :mod:`tfperf.worker.flops` without the bias. Any node whose shapes are not
    static is left out."""
    out: dict[str, tuple[float, float]] = {}
    try:
        nodes = compiled.get_runtime_model().get_ordered_ops()
    except Exception:  # a plugin without a runtime graph: FLOPs unknown
        return out
    for node in nodes:
        try:
            kind = node.get_rt_info()["layerType"].astype(str)
            if kind not in ("Convolution", "GroupConvolution", "FullyConnected"):
                continue
            source, weights = (_static(i.get_partial_shape()) for i in list(node.inputs())[:2])
            result = _static(node.outputs()[0].get_partial_shape())
        except Exception:  # an unexpected node: leave it unknown
            continue
        if None in (source, weights, result) or len(result) < 2:
            continue
        # output positions: a convolution's spatial ones (NCHW), a fully connected's rows
        spatial = result[1:-1] if kind == "FullyConnected" else result[2:]
        positions = _product(spatial) * batch
        flops = 2.0 * _product(weights) * positions
        moved = 4.0 * (batch * (_product(source[1:]) + _product(result[1:])) + _product(weights))
        out[node.get_friendly_name()] = (flops, moved)
    return out


def _static(shape: Any) -> list[int] | None:
    """The dimensions of an OpenVINO partial shape, the batch (dynamic) as 1; ``None`` when
    another dimension is dynamic."""
    dims = []
    for i, dim in enumerate(shape):
        if dim.is_dynamic:
            if i:
                return None
            dims.append(1)
        else:
            dims.append(int(dim.get_length()))
    return dims


def _product(dims: Sequence[int]) -> int:
    out = 1
    for d in dims:
        out *= d
    return out
