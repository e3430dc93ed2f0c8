"""FLOPs per call: analytic counts checked by hand, the profiler refused where it undercounts."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest

from tfperf.worker import flops

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")


def test_mlp_count_matches_a_hand_computation():
    # 256 -> 512 -> 512 -> 10: every Dense is 2*in*out multiply-adds plus one add per bias
    layer1 = 2 * 256 * 512 + 512
    layer2 = 2 * 512 * 512 + 512
    layer3 = 2 * 512 * 10 + 10
    assert flops.mlp_flops(1, [256, 512, 512, 10]) == layer1 + layer2 + layer3 == 797_706
    assert flops.mlp_flops(8, [256, 512, 512, 10]) == 8 * 797_706
    assert flops.dense_flops(2, 3, 4, bias=False) == 2 * (2 * 3 * 4)


def test_lstm_and_encoder_formulas_by_hand():
    # LSTM(4) over 3 steps of 2 features: per step x@W (2x16), h@U (4x16), bias 16
    per_step = 2 * 2 * 16 + 2 * 4 * 16 + 16
    assert flops.lstm_flops(1, 3, 2, 4) == 3 * per_step
    # one encoder layer, seq 2, d 4, ffn 8, batch 1
    proj = 4 * (2 * 2 * 4 * 4 + 2 * 4)  # q, k, v, out projections with biases
    attention = 2 * (2 * 2 * 2 * 4)  # scores and weighted values over all heads
    ffn = (2 * 2 * 4 * 8 + 2 * 8) + (2 * 2 * 8 * 4 + 2 * 4)
    assert flops.encoder_flops(1, 1, 2, 4, 8) == proj + attention + ffn


def test_builtin_flops_are_analytic_and_scale_with_batch():
    from tfperf.core.workloads import get_builtin

    params = get_builtin("mlp").tiny
    one, source = flops.builtin_flops("mlp", params, 1)
    assert source == "analytic"
    assert flops.builtin_flops("mlp", params, 4)[0] == 4 * one
    assert flops.builtin_flops("resnet50", get_builtin("resnet50").tiny, 1) == flops.UNKNOWN


def _mlp_model():
    keras.utils.set_random_seed(0)
    inp = keras.Input((256,), name="x")
    x = keras.layers.Dense(512, activation="relu")(inp)
    x = keras.layers.Dense(512, activation="relu")(x)
    return keras.Model(inp, keras.layers.Dense(10)(x))


def test_layer_walk_and_profiler_agree_with_the_hand_count_on_an_mlp():
    model = _mlp_model()
    assert flops.keras_layer_flops(model, batch=2) == (2 * 797_706, "analytic")
    x = tf.zeros((2, 256))
    assert flops.function_flops(lambda t: model(t), [x]) == (2 * 797_706, "profiler")


def test_layer_walk_counts_a_convolution_by_hand():
    inp = keras.Input((8, 8, 3))
    conv = keras.layers.Conv2D(4, 3, padding="same")(inp)
    depth = keras.layers.DepthwiseConv2D(3, padding="valid", use_bias=False)(conv)
    model = keras.Model(inp, depth)
    conv_flops = 2 * 3 * 3 * 3 * (8 * 8 * 4) + 8 * 8 * 4
    depth_flops = 2 * 3 * 3 * (6 * 6 * 4)
    assert flops.keras_layer_flops(model, batch=1) == (conv_flops + depth_flops, "analytic")


def test_mobilenetv2_count_matches_the_published_figure():
    from tfperf.worker.models import build

    built = build("mobilenetv2", "standard", 1)
    # MobileNetV2 1.0/224: ~300M multiply-adds (Sandler et al. 2018), i.e. ~0.6 GFLOPs
    assert built.flops_source == "analytic"
    assert 0.55e9 < built.flops_per_call < 0.65e9


def test_lstm_through_the_profiler_is_unknown():
    inp = keras.Input((50, 64))
    model = keras.Model(inp, keras.layers.LSTM(128)(inp))
    x = tf.zeros((1, 50, 64))
    concrete = tf.function(lambda t: model(t)).get_concrete_function(tf.TensorSpec(x.shape))
    assert flops.graph_has_loop(concrete.graph.as_graph_def())
    assert flops.profiler_flops(concrete) == flops.UNKNOWN
    assert flops.function_flops(lambda t: model(t), [x]) == (None, "unknown")
    # a layer walk cannot count it either; only the built-in's closed form can
    assert flops.keras_layer_flops(model, batch=1) == flops.UNKNOWN


def test_profiler_refuses_a_graph_with_an_uncounted_einsum():
    w = tf.constant(1.0, shape=(16, 8))

    def fn(t):
        return tf.einsum("bi,ij->bj", t, w)

    assert flops.function_flops(fn, [tf.zeros((2, 16))]) == flops.UNKNOWN
    # the same product written as a MatMul is counted: 2*2*16*8
    assert flops.function_flops(lambda t: tf.matmul(t, w), [tf.zeros((2, 16))]) == (
        512,
        "profiler",
    )


def test_layer_walk_refuses_what_it_cannot_count():
    class Scale(keras.layers.Layer):
        def call(self, t):
            return t @ keras.ops.ones((4, 4))  # a matmul the walk cannot see

    inp = keras.Input((4,))
    custom = keras.Model(inp, keras.layers.Dense(2)(Scale()(inp)))
    assert flops.keras_layer_flops(custom, batch=1) == flops.UNKNOWN
    shared = keras.layers.Dense(4)
    twice = keras.Model(inp, shared(shared(inp)))
    assert flops.keras_layer_flops(twice, batch=1) == flops.UNKNOWN
    nested = keras.Model(inp, keras.Model(inp, keras.layers.Dense(3)(inp))(inp))
    assert flops.keras_layer_flops(nested, batch=1) == (2 * 4 * 3 + 3, "analytic")
