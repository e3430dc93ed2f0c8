"""Worker side: a custom training loop (a step written without ``fit``), timed and guarded.

Contract: a training factory that returns ``(step, dataset)`` or ``(step, dataset, variables)``
(:func:`is_loop`) is a custom loop: ``step`` takes one element of ``dataset`` (a tuple unpacked
as arguments where it takes them) and returns its loss, a scalar or a dict of them; it may be a
``tf.function`` or plain Python. :func:`loop_prepared` ``(source, workload, config) ->
TrainPrepared`` (the worker calls the factory inside :func:`tfperf.worker.loopvars.capture`,
under the policy ``precision`` asks, with every generator seeded):

- **Discovery.** The step runs once on the guard's first batch with ``tf.function`` run
  eagerly, under the capture and a gradient tape: variables it creates at its first call get
  their initial values, the variables it trains are known (those read under the tape, or
  changed), and none of them may be one tfperf did not see created (then the factory returns
  them as the third element; one sentence says so). A step that raises, returns no loss, or
  whose loss is NaN at that step is a :class:`UserError` (its raise names the user's frame).
- **The same model everywhere.** Every variable goes back to its initial value; the
  default's worker writes those values (``workload["weights_out"]``) and every candidate's
  takes them (``workload["state_in"]``), so an unseeded factory is the same model in every
  worker; the fingerprint's ``weights`` are the initial values of the trained variables,
  its ``inputs`` the first batches as the user gave them.
- **Knobs.** ``graph``, ``xla`` and ``steps_per_execution`` are the step's form
  (:class:`tfperf.worker.loopstep.Form`); ``precision`` set the Keras policy before the factory
  ran, and a step whose Keras layers did not take it (or that has none) is "not tried" with
  why; ``input_pipeline`` and a throughput tune's ``tile_to`` act on the dataset as for
  ``fit`` (:func:`tfperf.worker.traindata.data_of`); ``runtime=keras-jax`` is "not tried".
- **Timing.** ``call`` runs the timed function once on an iterator of the repeated dataset
  (``steps_per_execution`` steps); its first call (tracing, XLA compilation) is made and timed
  here; ``train["input_wait_share"]`` as for ``fit``.
- **Guard.** ``outputs()`` restores the initial values, seeds TensorFlow again and runs the
  guard's steps in the same form, new functions (so that random ops draw from the seed
  again), on the cached batches, each step's own losses recorded
  (:func:`tfperf.worker.loopstep.recording_function`); the result has the layout of the
  Keras guard's (:mod:`tfperf.worker.training`), without validation metrics.
- **Strategies.** A dataset of ``strategy.experimental_distribute_dataset`` is read through
  its own dataset and distributed again by its strategy; the strategy (one the step reaches,
  or the dataset's) is named in ``train["baseline"]``. ``MultiWorkerMirroredStrategy``,
  ``ParameterServerStrategy`` and ``TPUStrategy`` are one sentence: tfperf runs one process.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tfperf.core.errors import UserError
from tfperf.core.knobs import KERAS_JAX
from tfperf.core.protocol import MIN_GUARD_STEPS
from tfperf.core.workloads import SEED
from tfperf.worker.fingerprint import describe_arrays
from tfperf.worker.loopstep import (
    Form,
    UserStep,
    losses,
    recording_function,
    step_error,
    timed_function,
)
from tfperf.worker.loopvars import Created, LoopState, capture, strategy_of
from tfperf.worker.loopwhere import (
    as_dataset,
    one_process_only,
    reachable_layers,
    reachable_strategy,
    refuse_xla_across,
    strategy_name,
    strategy_notes,
)
from tfperf.worker.traindata import (
    DEFAULT_GUARD_SECONDS,
    POLICIES,
    TrainData,
    TrainPrepared,
    batch_rows,
    data_of,
    flat,
    input_wait_share,
)
from tfperf.worker.trainstate import Baseline


def is_loop(result: Any) -> bool:
    """Whether a factory returned a custom loop: ``(step, dataset[, variables])`` whose
    ``step`` is a function, not a Keras model."""
    return (isinstance(result, tuple) and len(result) in (2, 3) and callable(result[0])
            and not hasattr(result[0], "make_train_function"))


@dataclass
class LoopSource:
    """What the factory returned, and the variables created while it ran."""

    step: Any
    dataset: Any
    variables: tuple[Any, ...]
    created: Created
    ref: str
    notes: list[str] = field(default_factory=list)


def loop_source(result: tuple, ref: str, created: Created) -> LoopSource:
    """The loop a factory returned (:func:`is_loop`), its data a ``tf.data.Dataset``."""
    step, data = result[0], result[1]
    variables = tuple(result[2]) if len(result) == 3 else ()
    dataset, notes = as_dataset(data, ref)
    return LoopSource(step, dataset, variables, created, ref, notes)


@dataclass(frozen=True)
class _Run:
    """The loop as this worker runs it: the step, its form, its data and its state."""

    step: UserStep
    form: Form
    data: TrainData
    state: LoopState
    strategy: Any
    keys: tuple[str, ...]

    def iterator(self, dataset: Any) -> Any:
        """An iterator of ``dataset``'s batches, distributed as the user's were."""
        if self.strategy is None:
            return iter(dataset)
        return iter(self.strategy.experimental_distribute_dataset(dataset))


def loop_prepared(source: LoopSource, workload: dict[str, Any], config: dict[str, Any]
                  ) -> TrainPrepared:
    """The custom loop, ready to time (module docstring)."""
    _refuse_options(workload, config)
    run, baseline, notes = _discovered(source, workload, config)
    fn = timed_function(run.step, run.form)
    timing = run.iterator(run.data.dataset)
    first_s = _first_call(fn, timing, run)
    spe = run.form.steps

    def call() -> None:
        _wait(fn(timing), run.keys)

    share = None
    if workload.get("input_probe", True):
        cached = run.iterator(run.data.dataset.take(spe).cache().repeat())
        share = input_wait_share(lambda it: _wait(fn(it), run.keys), timing, cached)
    batch = batch_rows(run.data.batches[0])
    guard = _Guard(run, workload)
    return TrainPrepared(
        call=call, outputs=guard.run, batch=batch * spe, flops_per_call=None,
        flops_source="unknown", notes=[*source.notes, *run.data.notes, *notes],
        fingerprint={"inputs": describe_arrays(flat(run.data.own_batches)),
                     "weights": describe_arrays(run.state.trained_values())},
        extra={},
        train={"steps_per_call": spe, "batch": batch, "first_steps_s": first_s,
               "input_wait_share": share, "policy": baseline.policy,
               "baseline": baseline.to_dict(), "loss_keys": list(run.keys),
               "steps_counter": None, "backend": "tensorflow", "sparse_rows": None},
    )


def _refuse_options(workload: Mapping[str, Any], config: Mapping[str, Any]) -> None:
    """What a custom loop cannot take, each in one sentence."""
    if config.get("runtime") == KERAS_JAX:
        raise UserError("not tried: Keras on JAX runs Keras' own train step, and your custom "
                        "loop's step runs as you wrote it, on TensorFlow.")
    if workload.get("validation"):
        raise UserError("--validation checks the metrics a compiled Keras model evaluates, and "
                        "your custom loop has none: leave it out (the guard compares the "
                        "losses your step returns).")
    if workload.get("steps_counter"):
        raise UserError("--steps-counter names a Keras model's step counter, and tfperf counts "
                        "your custom loop's steps itself: leave it out.")


def _discovered(source: LoopSource, workload: dict[str, Any], config: dict[str, Any]
                ) -> tuple[_Run, Baseline, list[str]]:
    """The loop after its discovery step, its state back at its initial values (handed
    over where the workload says), its baseline and the notes saying what runs."""
    dataset, strategy = _undistributed(source.dataset)
    strategy = strategy or reachable_strategy(source.step)
    one_process_only(strategy)
    data = data_of(dataset, workload, config)
    first = _first_element(data, strategy)
    step = UserStep.of(source.step, first)
    form = Form.of(step, config)
    if form.jit and not step.jit_compile:
        refuse_xla_across(strategy)
    policy = _policy(config)
    state, logs = _discover(source, step, first, policy)
    strategy = strategy or strategy_of(state.variables)
    _handoff(state, workload, config)
    keys = _guarded(logs, tuple(workload.get("loss_keys") or ()))
    baseline = _baseline(source.step, step, policy, strategy)
    notes = [*_form_notes(step, form), *strategy_notes(strategy)]
    if policy or config.get("precision") == "float32":
        notes.append(_policy_reached(source.step, policy or "float32"))
    return _Run(step, form, data, state, strategy, keys), baseline, notes


def _policy(config: Mapping[str, Any]) -> str | None:
    return POLICIES.get(config.get("precision") or "fp32")


def _undistributed(dataset: Any) -> tuple[Any, Any]:
    """``(the tf.data dataset, its strategy)`` of a distributed dataset; ``(dataset, None)``
    of any other."""
    original = getattr(dataset, "_original_dataset", None)
    if original is None:
        return dataset, None
    return original, getattr(dataset, "_strategy", None)


def _first_element(data: TrainData, strategy: Any) -> Any:
    """The guard's first batch, as the step takes it (distributed under a strategy)."""
    if strategy is None:
        return data.batches[0]
    return next(iter(strategy.experimental_distribute_dataset(data.guard_data.take(1))))


def _discover(source: LoopSource, step: UserStep, first: Any, policy: str | None
              ) -> tuple[LoopState, dict[str, float]]:
    """Run the step once eagerly (module docstring): its state, at its initial values again,
    and its losses as floats."""
    import tensorflow as tf

    tf.config.run_functions_eagerly(True)
    try:
        with capture() as created, tf.GradientTape(watch_accessed_variables=True) as tape:
            out = step.call(step.function, first)
        found = losses(out)
    except UserError:
        raise
    except Exception as exc:  # the user's step raised
        raise UserError(step_error(exc, policy)) from None
    finally:
        tf.config.run_functions_eagerly(False)
    state = LoopState([*source.created.variables, *created.variables, *source.variables],
                      {**source.created.values, **created.values})
    unseen = state.mark_trained(tape.watched_variables())
    del tape
    _check_trained(state, unseen, source.ref)
    state.restore()
    logs = {k: _scalar(v) for k, v in found.items()}
    bad = {k: v for k, v in logs.items() if not math.isfinite(v)}
    if bad:
        key, value = next(iter(bad.items()))
        raise UserError(f"Your step's {key} is {value} at the first training step: check the "
                        "labels, the loss and the learning rate before tuning.")
    return state, logs


def _check_trained(state: LoopState, unseen: list[str], ref: str) -> None:
    """One sentence where the step trains variables tfperf did not see created, or none."""
    how = (f"return them as the third element of what {ref} returns: step, dataset, "
           "model.trainable_variables + optimizer.variables")
    if unseen:
        raise UserError(f"Your step trains variables tfperf did not see created "
                        f"({', '.join(unseen[:3])}): create them in the factory, or {how}.")
    if not state.trained:
        raise UserError(f"Your step changed no variable tfperf saw created: create the model "
                        f"and its optimizer in the factory, or {how}.")


def _scalar(value: Any) -> float:
    import numpy as np

    return float(np.asarray(value.numpy() if hasattr(value, "numpy") else value).reshape(()))


def _handoff(state: LoopState, workload: Mapping[str, Any], config: Mapping[str, Any]) -> None:
    """The default's initial values written, or taken by a candidate; the testing hook's
    learning rate after them."""
    if workload.get("weights_out"):
        state.write(str(workload["weights_out"]))
    if workload.get("state_in"):
        state.read(str(workload["state_in"]))
    scale = config.get("train_lr_scale")
    if scale:
        for i, var in enumerate(state.variables):
            if var.name.split("/")[-1].startswith("learning_rate"):
                state.initial[i] = state.initial[i] * float(scale)
        state.restore()


def _guarded(logs: Mapping[str, float], asked: tuple[str, ...]) -> tuple[str, ...]:
    """The values the guard compares: ``asked`` (``--loss-key``); else, as for ``fit``'s
    logs, those whose name says ``loss`` (an ``accuracy`` or ``alignment`` beside them is
    not a loss that must fall), or every one where none does; ``loss`` first."""
    if asked:
        missing = [k for k in asked if k not in logs]
        if missing:
            raise UserError(f"--loss-key {missing[0]} is not among the values your step "
                            f"returns ({', '.join(logs)}): name one of them.")
        return asked
    named = [k for k in logs if "loss" in k.lower()] or list(logs)
    return tuple(sorted(named, key=lambda k: k != "loss"))


def _first_call(fn: Any, timing: Any, run: _Run) -> float:
    """Time the timed function's first call (tracing, compilation); its errors as one
    sentence, "not tried" where the form is not the user's."""
    t0 = time.perf_counter()
    try:
        _wait(fn(timing), run.keys)
    except UserError:
        raise
    except Exception as exc:
        sentence = step_error(exc)
        if run.form.changes(run.step):
            what = "under XLA" if run.form.jit else "as a graph (tf.function)"
            sentence = f"not tried: your step cannot run {what}; {sentence[0].lower()}" \
                       f"{sentence[1:]}"
        raise UserError(sentence) from None
    return time.perf_counter() - t0


def _wait(out: Any, keys: tuple[str, ...]) -> float:
    """The first guarded loss of a step's output as a float: the step has finished."""
    return _scalar(losses(out)[keys[0]])


def _form_notes(step: UserStep, form: Form) -> list[str]:
    """What runs, in words."""
    how = "as a tf.function" if step.graph else "eagerly (a plain Python function)"
    notes = [f"your step as written runs {how}" + (" with jit_compile=True" if step.jit_compile
                                                   else "")]
    if form.changes(step):
        what = "eagerly" if not form.graph else (
            "under tf.function(jit_compile=True)" if form.jit else "under tf.function")
        notes.append(f"here it runs {what}" + (
            f", {form.steps} steps per call (train_steps over an iterator)"
            if form.steps > 1 else ""))
    return notes


def _baseline(user_step: Any, step: UserStep, policy: str | None, strategy: Any) -> Baseline:
    """The loop as the user wrote it (``train.baseline``)."""
    layers = reachable_layers(user_step)
    names = {getattr(getattr(layer, "dtype_policy", None), "name", None) for layer in layers}
    names.discard(None)
    own = sorted(names)[0] if len(names) == 1 else ("float32" if not names else
                                                      "/".join(sorted(names)))
    source = "none" if not names else ("tfperf" if names == {policy or "float32"} else
                                        "factory")
    return Baseline(
        jit_compile=step.jit_compile, steps_per_execution=1, policy=own,
        policy_source=source, data="dataset", step="loop", graph=step.graph,
        strategy=_strategy_name(strategy), unpacks=step.unpack,
    )


def _strategy_name(strategy: Any) -> str | None:
    """``"MirroredStrategy (2 replicas)"``, or ``None`` outside a strategy."""
    if strategy is None:
        return None
    replicas = getattr(strategy, "num_replicas_in_sync", 1)
    return f"{strategy_name(strategy)} ({replicas} replica{'s' if replicas != 1 else ''})"


def _policy_reached(user_step: Any, policy: str) -> str:
    """The note of a precision the step's layers took; "not tried" where they did not."""
    layers = reachable_layers(user_step)
    if not layers:
        raise UserError(f"not tried: tfperf finds no Keras layer in your step, where "
                        f"set_global_policy({policy!r}) would act: a model of your own tf."
                        "Variables keeps their dtype.")
    kept = [layer.name for layer in layers
            if getattr(getattr(layer, "dtype_policy", None), "name", policy) != policy]
    if kept:
        raise UserError(f"not tried: your model's layers ({', '.join(kept[:3])}) keep their "
                        f"own policy, which set_global_policy({policy!r}) before the factory "
                        "cannot reach (a model built before it, at import or loaded from a "
                        "file): build the model in the factory to try it.")
    if policy == "float32":
        return "precision: float32, the policy your factory sets held at float32"
    return f"precision: Keras' {policy} policy set before the factory built the model"


class _Guard:
    """The guard's steps in this worker's form (module docstring)."""

    def __init__(self, run: _Run, workload: Mapping[str, Any]) -> None:
        self.run_, self.seconds = run, float(workload.get("guard_seconds")
                                              or DEFAULT_GUARD_SECONDS)

    def run(self) -> list[Any]:
        """``[per-step values (steps x keys), no metrics, no names, the keys, [seconds,
        1 if the time cap stopped it, the cap]]``."""
        import numpy as np
        import tensorflow as tf

        run = self.run_
        run.state.restore()
        tf.random.set_seed(SEED)
        record = recording_function(run.step, run.form, run.keys)
        it = run.iterator(run.data.guard_data)
        rows: list[list[float]] = []
        t0 = time.perf_counter()
        while len(rows) < run.data.guard_steps:
            if len(rows) >= MIN_GUARD_STEPS and time.perf_counter() - t0 > self.seconds:
                break
            n = min(run.form.steps, run.data.guard_steps - len(rows))
            got = record(it, tf.constant(n))
            rows.extend(np.stack([got[k].numpy() for k in run.keys], axis=1).tolist())
        took = time.perf_counter() - t0
        capped = len(rows) < run.data.guard_steps
        keys = len(run.keys)
        return [np.asarray(rows, dtype=np.float64).reshape(-1, keys), np.asarray([]),
                np.asarray([], dtype=str), np.asarray(list(run.keys), dtype=str),
                np.asarray([took, float(capped), self.seconds], dtype=np.float64)]
