"""What a training tune tries, once the default ran, of an eager step, a custom loop, a strategy.

Contract: :func:`fit_step_space` ``(space, baseline) -> Space`` follows
:func:`tfperf.tuning.space.fit_training_space` (which fits the steps per call to the step time,
reads the user's XLA and precision, and makes the user's own ``graph`` what a config that
leaves it out runs, so that ``graph=on`` is a candidate only where the step runs eagerly: a
custom loop's plain Python step, a Keras model compiled ``run_eagerly=True``). For a custom
loop (``baseline.step == "loop"``) it lists what is not tried with why -- Keras on JAX (it
runs Keras' own train step), ``graph=on`` where the step is already a ``tf.function``,
precision where the step reaches no Keras layer -- and under a ``tf.distribute`` strategy of
several replicas, XLA (its compiled program runs on one device, and the replicas' variables
live on others), Keras on JAX, and a Keras model's steps per call (Keras' own ``fit`` fails
with them under ``MirroredStrategy``). Nothing here imports TensorFlow.
"""

from __future__ import annotations

from dataclasses import replace

from tfperf.core.knobs import KERAS_JAX
from tfperf.tuning.space import Space, TrainBaseline

NO_JAX_FOR_LOOPS = ("not tried: Keras on JAX runs Keras' own train step, and your custom loop's "
                    "step runs as you wrote it, on TensorFlow")
ALREADY_GRAPH = "not tried: your step is already a tf.function"
NO_LAYERS = ("not tried: tfperf finds no Keras layer in your step, where "
             "set_global_policy('mixed_bfloat16') would act")
XLA_UNDER_STRATEGY = ("not tried under {strategy}: XLA compiles the step for one device, and "
                      "the strategy's replicas keep their variables on several")
JAX_UNDER_STRATEGY = "not tried under {strategy}: a tf.distribute strategy runs on TensorFlow"
FIT_STEPS_UNDER_STRATEGY = (
    "not tried under {strategy}: Keras' own fit fails with steps_per_execution > 1 under it "
    "(its loop over the distributed batches leaves a placeholder unfed; Keras 3.15, "
    "TensorFlow 2.21); a custom loop's steps per call run")


def fit_step_space(space: Space, baseline: TrainBaseline) -> Space:
    """The training space for the default's step, after
    :func:`~tfperf.tuning.space.fit_training_space` (module docstring)."""
    fitted = space
    if baseline.graph and baseline.step == "loop":
        fitted = replace(fitted, unavailable=[
            *fitted.unavailable, {"knob": "graph", "value": "on", "reason": ALREADY_GRAPH}])
    if baseline.step == "loop":
        fitted = _without_jax(fitted, NO_JAX_FOR_LOOPS)
        if baseline.policy_source == "none":
            fitted = _drop(fitted, "precision", None, NO_LAYERS)
    if _replicas(baseline.strategy) > 1:
        name = str(baseline.strategy).split(" (")[0]
        fitted = _drop(fitted, "xla", "jit", XLA_UNDER_STRATEGY.format(strategy=name))
        fitted = _without_jax(fitted, JAX_UNDER_STRATEGY.format(strategy=name))
        if baseline.step == "fit":
            fitted = _drop(fitted, "steps_per_execution", None,
                           FIT_STEPS_UNDER_STRATEGY.format(strategy=name))
    return fitted


def _without_jax(space: Space, reason: str) -> Space:
    """``space`` without Keras on JAX, listed with ``reason``, and without the lines that say
    which knobs are not crossed with it (nothing is)."""
    dropped = _drop(space, "runtime", KERAS_JAX, reason)
    if dropped is space:
        return space
    moot = f"with {KERAS_JAX}"
    return replace(dropped, unavailable=[
        u for u in dropped.unavailable if not str(u.get("value", "")).endswith(moot)])


def _drop(space: Space, knob: str, value: object, reason: str) -> Space:
    """``space`` without ``value`` of ``knob`` (``None``: every value but the default)."""
    values = space.values.get(knob, ())[1:]
    gone = values if value is None else tuple(v for v in values if v == value)
    return space.drop(knob, gone, reason) if gone else space


def _replicas(strategy: str | None) -> int:
    """The replicas of ``"MirroredStrategy (2 replicas)"`` (1 outside a strategy)."""
    if not strategy or "(" not in strategy:
        return 1
    count = strategy.rsplit("(", 1)[1].split()[0]
    return int(count) if count.isdigit() else 1
