"""``bench --ops`` in real workers (docs/ops.md): a model whose time is one large matmul shows
that matmul on top in every runtime that profiles, mapped to its Keras layer with its FLOPs;
shares sum to 1 over the call with an explicit overhead entry; a runtime without a profiler
says so; XLA AOT's profile is XLA JIT's, marked as a stand-in."""

from __future__ import annotations

import math
import statistics
import textwrap

import pytest

from helpers import require_package
from tfperf.core.config import Config
from tfperf.report.ops import (
    align_types,
    moved_text,
    ops_side_by_side,
    read_roofline,
    side_by_side_lines,
)
from tfperf.runner.handle import Worker

require_package("xprof", "pip install 'tfperf[ops]'")

BATCH, N_IN, N_OUT = 8, 1024, 4096
BIG_FLOPS = BATCH * (2 * N_IN * N_OUT + N_OUT)

FACTORY = textwrap.dedent(
    f"""
    import numpy as np
    import keras

    def build():
        model = keras.Sequential([
            keras.Input(({N_IN},)),
            keras.layers.Dense({N_OUT}, name="big"),
            keras.layers.Activation("relu", name="act"),
            keras.layers.Dense(8, name="head"),
        ])
        return model, np.random.rand({BATCH}, {N_IN}).astype("float32")
    """
)


def _profile(tmp_path_factory: pytest.TempPathFactory, sets: list[str]) -> dict:
    folder = tmp_path_factory.mktemp("ops")
    (folder / "bigmm.py").write_text(FACTORY)
    workload = {"kind": "model", "path": "bigmm:build", "format": "factory", "inputs": None,
                "unsafe": False, "batch": BATCH, "search_path": str(folder)}
    with Worker(workload, Config.parse(sets, []), timeout_s=300) as worker:
        worker.wait_ready()
        return worker.profile(0.3)


@pytest.fixture(scope="module", params=["tf", "openvino-f32"])
def profiled(request, tmp_path_factory):
    return request.param, _profile(tmp_path_factory, [f"runtime={request.param}"])


def _shares_sum_to_one(profile: dict) -> None:
    for key in ("ops", "op_types"):
        assert math.isclose(sum(e["self_share"] for e in profile[key]), 1.0, rel_tol=1e-9), key
        assert [e["type"] for e in profile[key]].count("overhead") == 1
    assert {"type": "overhead"}.items() <= profile["op_types"][-1].items()


def test_the_large_matmul_is_the_top_op_with_its_layer_and_flops(profiled):
    runtime, profile = profiled
    assert profile["available"], profile
    assert profile["stand_in"] is None
    top = next(o for o in profile["ops"] if o["type"] != "overhead")
    assert top["layer"] == "big", (runtime, top)
    assert top["flops"] == BIG_FLOPS
    assert top["gflops_per_s"] > 0
    assert top["bytes"] == 4 * (BATCH * N_IN + BATCH * N_OUT + N_IN * N_OUT + N_OUT)
    # the heaviest type names a matmul in each runtime's own words
    heavy = next(t for t in profile["op_types"] if t["type"] != "overhead")
    assert any(w in heavy["type"] for w in ("MatMul", "FullyConnected")), heavy


def test_shares_sum_to_the_call_with_an_overhead_entry(profiled):
    _runtime, profile = profiled
    _shares_sum_to_one(profile)
    assert profile["calls"] >= 3
    assert profile["call_ms"] > 0 and profile["profiled_call_ms"] > 0


def test_a_runtime_without_a_profiler_says_so(tmp_path_factory):
    profile = _profile(tmp_path_factory, ["runtime=litert"])
    assert profile["available"] is False
    assert "no per-op profiler" in profile["reason"]
    assert profile["ops"] == [] and profile["op_types"] == []


def test_xla_jit_profiles_the_xla_ops(tmp_path_factory):
    profile = _profile(tmp_path_factory, ["xla=jit"])
    assert profile["available"] and profile["source"].startswith("xla-jit-profiler")
    top = next(o for o in profile["ops"] if o["type"] != "overhead")
    assert top["type"] in ("MatMul", "dot", "fusion"), top
    _shares_sum_to_one(profile)


def test_xla_aot_shows_xla_jit_as_a_labelled_stand_in(tmp_path):
    """The profile an XLA AOT worker answers with (its ``Prepared.profile``), on the loaded
    model: compiling the AOT library itself takes minutes, and its profile never touches it.
    Its milliseconds are XLA JIT's: its profiler's overhead is XLA JIT's profiled call against
    XLA JIT's plain one, and set beside another runtime's profile it speaks in shares alone."""
    from tfperf.worker.aot import _jit_stand_in
    from tfperf.worker.loading import load_workload
    from tfperf.worker.opprofile import profile_record, summarise, timed_calls
    from tfperf.worker.tfrun import tf_prepared

    (tmp_path / "bigmm.py").write_text(FACTORY)
    loaded = load_workload({"kind": "model", "path": "bigmm:build", "format": "factory",
                            "inputs": None, "unsafe": False, "batch": BATCH,
                            "search_path": str(tmp_path)})
    raw = _jit_stand_in(loaded)(5)
    tensorflow = tf_prepared(loaded, {})
    # the worker passes its own timed call's plain samples: here TensorFlow's, not XLA JIT's
    profile = summarise(raw, timed_calls(tensorflow.call, 5))
    assert "stand-in" in profile["stand_in"] and "no profiler" in profile["stand_in"]
    assert profile["source"].startswith("xla-jit-profiler")
    top = next(o for o in profile["ops"] if o["type"] != "overhead")
    assert top["type"] in ("MatMul", "dot", "fusion"), top
    _shares_sum_to_one(profile)
    assert len(raw.plain_s) == 5
    assert profile["call_ms"] == pytest.approx(1e3 * statistics.median(raw.plain_s))
    jit_overhead = statistics.median(raw.wall_s) / statistics.median(raw.plain_s) - 1
    assert profile["profiler_overhead"] == pytest.approx(jit_overhead)
    beside = profile_record(tensorflow, "tf", 0.05)
    rows = align_types(beside, profile)
    assert rows and all(r["b_ms"] is None and r["delta_ms"] is None for r in rows)
    assert math.isclose(sum(r["b_share"] for r in rows), 1.0, rel_tol=1e-9)
    text = moved_text(beside, profile)
    assert "shares" in text and "%" in text and " ms" not in text, text
    compared = {"a": "default", "b": "runtime=xla-aot", **ops_side_by_side(beside, profile)}
    (line,) = side_by_side_lines(compared, "a", "b")
    assert " ms" not in line, line


def test_two_profiles_line_up_by_op_family_and_name_the_change(tmp_path_factory):
    tf_profile = _profile(tmp_path_factory, ["runtime=tf"])
    ov_profile = _profile(tmp_path_factory, ["runtime=openvino-f32"])
    rows = align_types(tf_profile, ov_profile)
    families = {r["family"] for r in rows}
    assert {"overhead", "matmul"} <= families
    # TensorFlow's fused MatMul and OpenVINO's FullyConnected are the same work, lined up
    matmul = next(r for r in rows if r["family"] == "matmul")
    assert matmul["a_ms"] > 0 and matmul["b_ms"] > 0
    assert "FullyConnected" in matmul["b_types"]
    assert any("MatMul" in t for t in matmul["a_types"])
    total = sum(r["delta_ms"] for r in rows)
    assert math.isclose(sum(r["share_of_change"] for r in rows), 1.0, rel_tol=1e-9) or total == 0
    text = moved_text(tf_profile, ov_profile)
    assert text is not None and ("gain" in text or "loss" in text)


def test_the_roofline_reading_names_the_bound_against_peak_and_bandwidth(profiled):
    _runtime, profile = profiled
    read = read_roofline(dict(profile, ops=[dict(o) for o in profile["ops"]]),
                         {"fp32_gflops": 100.0, "bandwidth_gbs": 10.0})
    top = next(o for o in read["ops"] if o["type"] != "overhead")
    assert read["roofline"]["ridge"] == 10.0
    assert math.isclose(top["intensity"], top["flops"] / top["bytes"])
    # 8 rows against a 16 MiB weight matrix: about 4 FLOPs per byte, under the ridge
    assert top["bound"] == "memory"
    assert math.isclose(top["share_of_peak"], top["gflops_per_s"] / 100.0)


def test_ops_that_overlap_on_threads_are_shares_of_their_summed_time():
    from tfperf.worker.opprofile import OpTotal, RawProfile, summarise

    ops = [OpTotal(f"m/l{i}/MatMul", "MatMul", 2, 0.004 / (i + 1)) for i in range(30)]
    raw = RawProfile("test", ops, wall_s=[0.004, 0.004])  # ops summed: 16 ms over 8 ms
    profile = summarise(raw, [0.003])
    _shares_sum_to_one(profile)
    assert profile["ops"][-1]["self_share"] == 0.0  # no time outside the ops
    assert any("several threads" in n for n in profile["notes"])
    named = [o for o in profile["ops"] if o["type"] not in ("rest", "overhead")]
    assert sum(o["self_share"] for o in named) >= 0.9
    assert profile["ops"][-2]["type"] == "rest" and profile["ops"][-2]["count"] > 0
    assert math.isclose(profile["profiler_overhead"], 0.004 / 0.003 - 1)


def test_op_names_map_to_the_deepest_keras_layer_they_name():
    from tfperf.worker.opprofile import layer_of

    layers = {"block_1_depthwise": {}, "Conv_1": {}, "mobilenetv2_1.00_224": {}}
    assert layer_of("mobilenetv2_1.00_224_1/block_1_depthwise_1/depthwise", layers) == \
        "block_1_depthwise"
    assert layer_of("mobilenetv2_1.00_224_1/Conv_1_2/convolution", layers) == "Conv_1"
    assert layer_of("Transpose_2855", layers) is None


def test_each_runtimes_op_types_fall_into_the_same_families():
    from tfperf.report.ops import family

    same = {
        "depthwise conv": ["_MklNativeFusedDepthwiseConv2dNative", "GroupConvolution",
                           "depthwise"],
        "conv": ["_MklNativeFusedConv2D", "Convolution", "convolution", "Conv2D"],
        "matmul": ["_MklNativeFusedMatMul", "FullyConnected", "dot", "BatchMatMulV2", "Einsum"],
        "elementwise": ["Mul", "AddV2", "Relu6", "fusion", "Multiply"],
        "overhead": ["overhead"],
    }
    for name, kinds in same.items():
        assert {family(k) for k in kinds} == {name}, name


CONV_FACTORY = textwrap.dedent(
    """
    import numpy as np
    import keras

    def build():
        inputs = keras.Input((32, 32, 8))
        x = keras.layers.Conv2D(64, 3, padding="same", use_bias=False, name="wide")(inputs)
        x = keras.layers.DepthwiseConv2D(3, padding="same", use_bias=False, name="dw")(x)
        outputs = keras.layers.GlobalAveragePooling2D()(x)
        return keras.Model(inputs, outputs), np.random.rand(2, 32, 32, 8).astype("float32")
    """
)


def test_openvino_counts_the_flops_of_convolutions_it_renamed(tmp_path):
    """OpenVINO names an NHWC model's convolutions after the layout transposes around them
    (no Keras layer): their FLOPs come from its own graph's shapes, as tfperf counts them."""
    (tmp_path / "convs.py").write_text(CONV_FACTORY)
    workload = {"kind": "model", "path": "convs:build", "format": "factory", "inputs": None,
                "unsafe": False, "batch": 2, "search_path": str(tmp_path)}
    with Worker(workload, Config.parse(["runtime=openvino-f32"], []), timeout_s=300) as worker:
        worker.wait_ready()
        profile = worker.profile(0.3)
    flops = sorted(o["flops"] for o in profile["ops"] if o.get("flops"))
    depthwise, wide = 2 * 2 * 9 * 32 * 32 * 64, 2 * 2 * 9 * 8 * 32 * 32 * 64
    assert flops == [depthwise, wide]
    _shares_sum_to_one(profile)


def test_a_profile_that_missed_ops_in_some_calls_says_their_time_is_in_overhead():
    from tfperf.worker.opprofile import OpTotal, RawProfile, summarise

    wall = [0.001] * 10
    partly = summarise(RawProfile("test", [OpTotal("m/d/MatMul", "MatMul", 8, 0.002)], wall),
                       wall)
    assert any("ops in at most 8 of the 10 calls" in n for n in partly["notes"])
    empty = summarise(RawProfile("test", [], wall), wall)
    assert empty["ops"][-1]["self_share"] == 1.0
    assert any("recorded no op" in n for n in empty["notes"])
    whole = summarise(RawProfile("test", [OpTotal("m/d/MatMul", "MatMul", 10, 0.002)], wall),
                      wall)
    assert not whole["notes"]
