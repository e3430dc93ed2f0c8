"""What a training tune tries of a step left eager, a custom loop and a strategy (no TensorFlow)."""

from __future__ import annotations

from tfperf.core.knobs import normalize
from tfperf.tuning.loopspace import (
    ALREADY_GRAPH,
    FIT_STEPS_UNDER_STRATEGY,
    NO_JAX_FOR_LOOPS,
    NO_LAYERS,
    fit_step_space,
)
from tfperf.tuning.space import SpaceFacts, TrainBaseline, build_space, fit_training_space

FACTS = SpaceFacts(cores=2, bf16=True, jax=True, model_format="factory", train=True,
                   allocators={"tcmalloc": "/lib/libtcmalloc.so.4"})


def fitted(baseline: TrainBaseline):
    space = fit_training_space(build_space(FACTS), baseline, 0.002)
    return fit_step_space(space, baseline)


def why(space) -> dict[tuple[str, str], str]:
    return {(u["knob"], u["value"]): u["reason"] for u in space.unavailable}


def test_a_plain_python_step_is_tried_as_a_graph_first_and_jax_is_not_tried():
    space = fitted(TrainBaseline(step="loop", graph=False))
    assert space.neighbours({}, "graph") == [{"graph": True}]
    assert "keras-jax" not in space.values["runtime"]
    assert why(space)[("runtime", "keras-jax")] == NO_JAX_FOR_LOOPS
    # nothing is crossed with JAX: no line says which knobs would not be
    assert not [key for key in why(space) if key[1].endswith("with keras-jax")]
    # XLA and N steps a call run a graph: graph=on beside them is the same configuration
    assert space.canonical({"graph": True, "steps_per_execution": 32}) == {
        "steps_per_execution": 32}
    assert space.canonical({"graph": True, "xla": "jit"}) == {"xla": "jit"}
    assert {"steps_per_execution": 32, "xla": "jit"} in space.neighbours(
        {"graph": True, "steps_per_execution": 32}, "xla")


def test_a_tf_function_step_has_no_graph_candidate_and_says_why():
    space = fitted(TrainBaseline(step="loop", graph=True))
    assert space.neighbours({}, "graph") == []
    assert why(space)[("graph", "on")] == ALREADY_GRAPH


def test_a_keras_model_gets_the_graph_knob_only_where_it_runs_eagerly():
    compiled = fitted(TrainBaseline())
    assert compiled.neighbours({}, "graph") == []
    assert ("graph", "on") not in why(compiled)  # nothing to say about fit's own graph
    assert "keras-jax" in compiled.values["runtime"]
    eager = fitted(TrainBaseline(graph=False))
    assert eager.neighbours({}, "graph") == [{"graph": True}]


def test_a_loop_that_reaches_no_keras_layer_is_not_tried_in_bf16():
    space = fitted(TrainBaseline(step="loop", policy_source="none"))
    assert space.values["precision"] == ("fp32",)
    assert why(space)[("precision", "bf16")] == NO_LAYERS


def test_under_mirrored_strategy_xla_and_jax_are_not_tried_and_fit_keeps_one_step_a_call():
    strategy = "MirroredStrategy (2 replicas)"
    model = fitted(TrainBaseline(strategy=strategy))
    reasons = why(model)
    assert model.neighbours({}, "xla") == []
    assert "several" in reasons[("xla", "jit")] and "keras-jax" not in model.values["runtime"]
    assert model.values["steps_per_execution"] == (None,)
    assert reasons[("steps_per_execution", "4")] == FIT_STEPS_UNDER_STRATEGY.format(
        strategy="MirroredStrategy")
    loop = fitted(TrainBaseline(step="loop", strategy=strategy))
    assert len(loop.values["steps_per_execution"]) > 1  # a loop's N steps run under it
    one = fitted(TrainBaseline(step="loop", strategy="OneDeviceStrategy (1 replica)"))
    assert one.neighbours({}, "xla") == [{"xla": "jit"}]


def test_graph_on_is_left_out_of_a_config_whose_other_knobs_run_a_graph():
    assert normalize({"graph": True, "steps_per_execution": 8}) == {"steps_per_execution": 8}
    assert normalize({"graph": True, "xla": "jit"}) == {"xla": "jit"}
    assert normalize({"graph": True, "steps_per_execution": 1}) == {"graph": True,
                                                                    "steps_per_execution": 1}
    assert normalize({"graph": False, "xla": "jit"}) == {"graph": False, "xla": "jit"}
