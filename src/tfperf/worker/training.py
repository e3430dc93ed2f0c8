"""Worker side: the user's own training step, timed the way ``fit`` runs it.

Contract: :func:`train_prepared` ``(workload, config) -> TrainPrepared`` for a workload of kind
``"train"`` (``{"kind": "train", "path", "format": "factory"|"keras", "inputs", "labels",
"batch", "search_path", "unsafe", "guard_steps", "guard_seconds", "validation"}``):

- **Loading.** A ``module:function`` returns ``(model, dataset)`` (a ``tf.data.Dataset`` of
  ``(x, y)`` or ``(x, y, sample_weight)`` batches, or a ``keras.utils.PyDataset``, made the
  ``tf.data`` form ``fit`` makes of it on TensorFlow), ``(model, x, y)`` (arrays, batched at
  ``batch`` in order) or what ``tfperf pipeline`` accepts (a dict with ``"dataset"`` and
  ``"model"``); a ``.keras`` file is loaded with its compile configuration and trained on
  ``inputs``/``labels`` (``.npz``/``.npy``). Every global generator is seeded before the module
  is imported and before the factory runs (:func:`tfperf.worker.fingerprint.seed_everything`),
  so an unseeded factory builds the same model and data in every worker; the fingerprint
  (``inputs``: the guard's first batches, ``weights``: the initial weights) proves it.
- **Knobs.** ``precision == "bf16"`` sets Keras' ``mixed_bfloat16`` policy before the factory
  runs (``mixed_float16`` likewise); a model whose layers did not take it (a ``.keras`` file
  keeps its saved float32 policy) is a :class:`UserError` saying so. ``precision ==
  "float32"`` (the candidate of a factory that sets a mixed policy itself) holds the float32
  policy while the factory runs, its own call noted and not applied
  (:func:`tfperf.worker.trainstate.float32_held`). ``xla == "jit"`` sets
  ``model.jit_compile``; ``steps_per_execution`` sets the model's. The train function is then
  Keras' own (``model.make_train_function(force=True)``), so a custom ``train_step`` counts.
- **Timing.** ``call`` runs the train function once on an iterator of the user's dataset (a
  finite one repeated, which a note says): ``steps_per_execution`` steps, so ``batch`` is the
  samples of one call. The first call (tracing, XLA compilation) is made here and reported
  apart (``train["first_steps_s"]``); the optimizer's ``iterations`` must advance by exactly
  the steps run (checked after the first call and before each guard).
  ``train["input_wait_share"]`` is the share of a step spent waiting for input: the same
  train function on one cached batch against the user's dataset, as ``tfperf pipeline`` does;
  ``None`` where the workload says ``input_probe: false`` (a tune's candidates: only the
  default's is shown, and on a 32-step call the probe's eight calls cost seconds).
- **Guard.** ``outputs()`` restores the initial weights and optimizer state, runs the guard's
  steps (``guard_steps``, at most ``guard_seconds`` but never fewer than
  :data:`MIN_GUARD_STEPS`) on the same cached batches in the same order and returns
  ``[per-step loss, validation metrics, their names]``: the loss of each batch alone (Keras'
  metrics are reset before each step, so it is not the running mean). ``steps_per_execution``
  changes how many steps one call runs, not a step's arithmetic, and Keras reports one loss per
  call: the guard runs the candidate's steps one per call (the same policy and XLA setting) so
  that each step's own loss is seen; the timed steps are checked against the optimizer's count.
  ``validation`` (an ``.npz`` with ``x`` and ``y``) adds the compiled metrics on it after the
  guard's steps.
- **Batch.** ``workload["tile_to"]`` (a throughput tune's ``batch`` knob) re-cuts the user's
  batches to that many rows, the same samples in the same order (``Dataset.rebatch`` after
  the repeat, so no epoch's last partial batch shifts them); the guard
  then runs over the same samples as the default's: ``guard_steps`` x the user's rows / the
  new rows steps. The fingerprint is of the batches as the user gave them, under
  ``input_pipeline == "tuned"`` too: a map that draws random numbers draws them in another
  order once it runs in parallel, and a note says so where the tuned batches differ.
- **Keras on JAX.** Where keras runs on JAX (``KERAS_BACKEND=jax``: the runtime ``keras-jax``,
  or the user's own backend), the train function, the batches it is fed, the step count, the
  guard's recorder and the restore are the JAX forms of :mod:`tfperf.worker.jaxstep` (the state
  ``fit`` threads, synced back before anything reads the variables). The workload's
  ``weights_out`` / ``weights_in`` hand the default's initial weights to a worker on another
  backend before the fingerprint is taken. A ``keras-jax`` candidate whose model cannot build
  or step on JAX is a :class:`UserError` starting "not tried:" that names the user's frame.
  ``train["backend"]`` says which backend ran; ``train["sparse_rows"]`` names the optimizer
  that updates an ``Embedding`` otherwise on TensorFlow than on JAX
  (:func:`tfperf.worker.trainstate.sparse_rows_optimizer`), ``None`` where none does.
- **fit.** The ``"fit"`` extra runs ``model.fit`` for the steps the parent names and returns
  the seconds from the call to fit's ``on_train_end``: the steps and what fit does around
  them. fit returns later, once its data iterator is deleted, and that waits for tf.data's
  autotune thread to wake (its period starts at 10 ms and doubles up to 60 s, so a short
  ``fit`` returns on a ladder of 0.63, 1.27, 2.55, 5.1 ... s whatever its steps cost): the
  extra's call time, less this figure, is that wait.

Testing hook: ``config["train_lr_scale"]`` (a knob only tests register) multiplies the
optimizer's learning rate, so that a test can plant a candidate that breaks training.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tfperf.core.errors import UserError
from tfperf.core.knobs import KERAS_JAX
from tfperf.core.protocol import EAGER_ON_JAX_NOTE, MIN_GUARD_STEPS
from tfperf.core.workloads import SEED
from tfperf.worker import jaxstep
from tfperf.worker.customloop import LoopSource, is_loop, loop_prepared, loop_source
from tfperf.worker.fingerprint import describe_arrays, seed_everything
from tfperf.worker.loading import seeded_factory_result
from tfperf.worker.loopvars import capture
from tfperf.worker.pipeline.target import TargetError, split_spec, unpack
from tfperf.worker.traindata import (
    DEFAULT_GUARD_SECONDS,
    POLICIES,
    PY_DATASET_NOTE,
    TrainPrepared,
    batch_rows,
    data_of,
    flat,
    input_wait_share,
    is_py_dataset,
    py_dataset,
)
from tfperf.worker.trainstate import (
    Baseline,
    LossRecorder,
    StepCounter,
    apply_knobs,
    check_float32,
    counter_hint,
    float32_held,
    guarded_keys,
    model_policy,
    read_baseline,
    sparse_rows_optimizer,
    state_variables,
    strategy_scope,
)
from tfperf.worker.workload import call_error_sentence, first_line

FIT_STEPS = 64
"""Steps of one timed ``fit`` (the ``"fit"`` extra) when the parent names none."""


@dataclass
class _Source:
    """The model and its data as the user gave them."""

    model: Any
    dataset: Any
    notes: list[str]
    data: str = "dataset"
    """:attr:`tfperf.worker.trainstate.Baseline.data`."""
    loop: LoopSource | None = None
    """A custom training loop (:mod:`tfperf.worker.customloop`) instead of a model."""
    held: list[str] = field(default_factory=list)
    """The policies the factory set that ``precision=float32`` held at float32."""


def train_prepared(workload: dict[str, Any], config: dict[str, Any]) -> TrainPrepared:
    """The user's train function, ready to time (see the module docstring)."""
    try:
        return _train_prepared(workload, config)
    except UserError as exc:
        # the default built and stepped this model: on JAX, what raised is the backend
        if config.get("runtime") != KERAS_JAX or exc.__context__ is None:
            raise
        raise UserError(jaxstep.step_error("the model", exc.__context__)) from None


def _train_prepared(workload: dict[str, Any], config: dict[str, Any]) -> TrainPrepared:
    source = _load_under_policy(workload, config)
    if source.loop is not None:
        return loop_prepared(source.loop, workload, config)
    with strategy_scope(source.model):  # what tfperf builds, as fit builds it, in its scope
        return _model_prepared(source, workload, config)


def _model_prepared(source: _Source, workload: dict[str, Any], config: dict[str, Any]
                    ) -> TrainPrepared:
    baseline, knob_notes = _model_as_configured(source, workload, config)
    model = source.model
    spe = int(model.steps_per_execution or 1)
    data = data_of(source.dataset, workload, config)
    _build(model, data.batches[0])
    knob_notes += jaxstep.handoff_weights(model, workload)
    if config.get("train_lr_scale"):
        lr = model.optimizer.learning_rate
        model.optimizer.learning_rate = float(lr) * float(config["train_lr_scale"])
    counter = StepCounter(model, workload.get("steps_counter"))
    fingerprint = {"inputs": describe_arrays(flat(data.own_batches)), "weights": _weights(model)}
    initial = _snapshot(model)
    timing = _batches(model, data.dataset)
    first = _first_call(model, timing, counter, spe, xla_fallback=config.get("xla") is None)
    if first.fallback:
        baseline = baseline.with_note(first.fallback, jit_compile=False)
        knob_notes = [n for n in knob_notes if not n.startswith("XLA")] + [first.fallback]
    keys = guarded_keys(first.logs, tuple(workload.get("loss_keys") or ()))
    fn, timed = first.fn, _Timed(counter, spe)
    guard = _Guard(model, initial, keys, workload, data.guard_steps, data.guard_data)

    def call() -> None:
        jaxstep.value(fn(timing)[keys[0]])
        timed.steps += spe

    share = None
    if workload.get("input_probe", True):
        cached = _batches(model, data.dataset.take(spe).cache().repeat())
        share = input_wait_share(lambda it: jaxstep.value(fn(it)[keys[0]]), timing, cached)
    timed.reset()
    batch = batch_rows(data.batches[0])
    return TrainPrepared(
        call=call,
        outputs=lambda: timed.around(guard.scoped_run),
        batch=batch * spe,
        flops_per_call=None,
        flops_source="unknown",
        notes=[*source.notes, *data.notes, *knob_notes],
        fingerprint=fingerprint,
        extra={"fit": _fit_of(model, data.dataset, timed)},
        train={
            "steps_per_call": spe, "batch": batch, "first_steps_s": first.seconds,
            "input_wait_share": share, "policy": model_policy(model),
            "baseline": baseline.to_dict(), "loss_keys": list(keys),
            "steps_counter": counter.path, "backend": jaxstep.backend_name(),
            "sparse_rows": sparse_rows_optimizer(model),
        },
    )


def _load_under_policy(workload: dict[str, Any], config: dict[str, Any]) -> _Source:
    """The user's model (or custom loop) and data, loaded under the policy the config's
    precision asks."""
    import keras

    require_keras3(keras.__version__)
    precision = config.get("precision") or "fp32"
    policy = POLICIES.get(precision)
    keras.mixed_precision.set_global_policy(policy or "float32")
    with float32_held() if precision == "float32" else contextlib.nullcontext([]) as asked:
        source = _load_source(workload)
    source.held = list(asked)
    return source


def _model_as_configured(
    source: _Source, workload: dict[str, Any], config: dict[str, Any]
) -> tuple[Baseline, list[str]]:
    """The model's baseline read back before the config's knobs apply, and the notes saying
    what runs."""
    precision = config.get("precision") or "fp32"
    policy = POLICIES.get(precision)
    _check_compiled(source.model)
    baseline = read_baseline(source.model, policy or "float32", source.data)
    if policy:
        _check_policy_reached(source.model, policy)
    notes = apply_knobs(source.model, config, baseline)
    if precision == "float32":
        check_float32(source.model)
        notes.append(f"precision: float32 (your factory's {', '.join(source.held) or 'policy'} "
                     "held at float32)")
    own = workload.get("keras_backend") == "jax"
    if own and jaxstep.on_jax() and not baseline.jit_compile:
        baseline = baseline.with_note(EAGER_ON_JAX_NOTE)
    return baseline, jaxstep.prepare_model(source.model, config.get("runtime"), notes, own)


def _fit_of(model: Any, dataset: Any, timed: _Timed) -> Callable[..., float]:
    """The ``"fit"`` extra: what the user runs, Keras' fit over the same (repeated) dataset,
    its callbacks and epoch iterator included; the guard restores the state it changes.
    Each call returns its seconds up to fit's ``on_train_end`` (the module's "fit")."""
    end = _train_end_callback()

    def fit(steps: int = FIT_STEPS) -> float:
        jaxstep.sync(model)  # on JAX, fit takes its state from the variables
        started = time.perf_counter()
        model.fit(dataset, steps_per_epoch=int(steps), epochs=1, verbose=0, callbacks=[end])
        timed.steps += int(steps)
        return end.at - started

    return fit


def _train_end_callback() -> Any:
    """A Keras callback that notes when training ended; it has no batch hooks, so fit keeps
    dispatching its batch callbacks asynchronously, as it does for a user's plain ``fit``."""
    import keras

    class TrainEnd(keras.callbacks.Callback):
        at = 0.0

        def on_train_end(self, logs: Any = None) -> None:
            self.at = time.perf_counter()

    return TrainEnd()



def require_keras3(version: str) -> None:
    """``--train`` times Keras 3's train function (its ``steps_per_execution``, its state):
    a TensorFlow whose Keras is 2.x gets one sentence."""
    major = version.split(".", 1)[0]
    if not major.isdigit() or int(major) < 3:
        raise UserError(
            f"--train needs Keras 3; this TensorFlow's Keras is {version}: install "
            "TensorFlow 2.16 or newer (or pip install 'keras>=3')."
        )


# ---------------------------------------------------------------------------- loading


def _load_source(workload: dict[str, Any]) -> _Source:
    if workload.get("format") == "keras":
        return _load_keras(workload)
    return _load_factory(workload)


def _load_factory(workload: dict[str, Any]) -> _Source:
    ref = str(workload["path"])
    split_spec(ref)  # a TARGET that is not module:function says so first
    with capture() as created:  # a custom loop's variables, its model's made at import too
        result = seeded_factory_result(ref, workload.get("search_path"))
    if is_loop(result):
        _refuse_batch(workload, ref, "a training loop's dataset")
        return _Source(None, None, [], loop=loop_source(result, ref, created))
    return _unpack(result, ref, workload)


def _refuse_batch(workload: dict[str, Any], ref: str, what: str) -> None:
    """``--batch`` re-cuts arrays only: typed for a factory whose data are batched already,
    one sentence rather than a figure at a batch the user did not ask for."""
    if workload.get("batch_given"):
        batch = workload.get("batch")
        raise UserError(
            f"--batch {batch} re-cuts the arrays a factory returns; {ref} returns {what}, "
            f"whose batches are its own: batch it in your factory (dataset.rebatch({batch})) "
            "or leave --batch out."
        )


def _unpack(result: Any, ref: str, workload: dict[str, Any]) -> _Source:
    """``(model, dataset)``, ``(model, x, y)`` or a form ``tfperf pipeline`` takes."""
    import tensorflow as tf

    shape = (
        "must return (model, dataset) with a compiled Keras model and a tf.data.Dataset of "
        "(x, y) batches (or a keras.utils.PyDataset), or (model, x, y) with arrays"
    )
    if isinstance(result, tuple) and len(result) == 3 and _is_model(result[0]):
        model, x, y = result
        batch = int(workload.get("batch") or 32)
        try:
            data = _array_dataset(x, y, batch)
        except Exception as exc:  # arrays of different lengths, ragged lists...
            raise UserError(
                f"Factory {ref} returned x and y that do not pair: {first_line(exc)}."
            ) from None
        return _Source(model, data, [f"arrays batched at {batch} in order (no shuffling), "
                                     "prefetched as Keras' fit does"], "arrays")
    if isinstance(result, tuple) and len(result) == 2 and _is_model(result[0]):
        model, data = result
        _refuse_batch(workload, ref, "a dataset")
        if isinstance(data, tf.data.Dataset):
            return _Source(model, data, [])
        if is_py_dataset(data):
            return _Source(model, py_dataset(data), [PY_DATASET_NOTE], "pydataset")
        raise UserError(f"Factory {ref} returned {type(data).__name__} as its data: it {shape}.")
    if not isinstance(result, (dict, tuple, list)):
        raise UserError(f"Factory {ref} returned {type(result).__name__}: it {shape}.")
    try:
        data, model = unpack(result, ref)
    except TargetError as exc:
        raise UserError(f"Factory {ref} {shape} ({exc}).") from None
    if model is None:
        raise UserError(f"Factory {ref} returned no model: it {shape}.")
    _refuse_batch(workload, ref, "a dataset")
    return _Source(model, data, [])


def _is_model(obj: Any) -> bool:
    return hasattr(obj, "make_train_function") and hasattr(obj, "train_step")


def _load_keras(workload: dict[str, Any]) -> _Source:
    import keras

    from tfperf.worker.loading import load_keras_file

    path = workload["path"]
    if not workload.get("inputs") or not workload.get("labels"):
        raise UserError("Training a .keras file needs --inputs X.npz and --labels Y.npz.")
    seed_everything(SEED)
    try:
        model = keras.models.load_model(path, safe_mode=not workload.get("unsafe"))
    except Exception:  # the same sentences as inference's loading
        model = load_keras_file(path, bool(workload.get("unsafe")))
    x, y = _array(workload["inputs"]), _array(workload["labels"])
    batch = int(workload.get("batch") or 32)
    try:
        data = _array_dataset(x, y, batch)
    except Exception as exc:  # different row counts
        raise UserError(
            f"--inputs and --labels do not pair row by row: {first_line(exc)}."
        ) from None
    return _Source(model, data, [f"--inputs/--labels batched at {batch} in order"], "arrays")


def _array_dataset(x: Any, y: Any, batch: int) -> Any:
    """Arrays as ``fit(x, y)`` feeds them (in order: the guard compares the same batches):
    batched, and prefetched as Keras' array adapter does, so a config runs on the pipeline
    the user's ``fit`` builds."""
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch).prefetch(tf.data.AUTOTUNE)


def _array(path: str) -> Any:
    """The one array of an ``.npy`` file, or of an ``.npz`` file (its ``x``/``y`` or its only
    array); several inputs are a list in file order."""
    import numpy as np

    with np.load(path) as found:
        if not hasattr(found, "files"):
            return np.asarray(found)
        arrays = [found[k] for k in found.files]
    return arrays[0] if len(arrays) == 1 else arrays


def _check_compiled(model: Any) -> None:
    name = type(model).__name__
    if getattr(model, "optimizer", None) is None:
        raise UserError(
            f"The {name} has no optimizer: call model.compile(optimizer=..., loss=...) before "
            "returning it (a .keras file keeps them when saved after compile)."
        )
    custom = type(model).train_step is not _keras_train_step()
    if getattr(model, "loss", None) is None and not custom:
        raise UserError(
            f"The {name} has no loss: call model.compile(optimizer=..., loss=...) before "
            "returning it."
        )


def _keras_train_step() -> Any:
    import keras

    return keras.Model.train_step


def _check_policy_reached(model: Any, policy: str) -> None:
    names = {getattr(getattr(layer, "dtype_policy", None), "name", None) for layer in
             model.layers}
    if policy not in names:
        raise UserError(
            f"not tried: the model's layers keep their float32 policy, which "
            f"set_global_policy({policy!r}) cannot reach (a saved model keeps the policy it "
            "was saved with): build the model under the policy in a factory to try it."
        )


# ---------------------------------------------------------------------------- steps


def _weights(model: Any) -> dict[str, Any]:
    return describe_arrays([w.numpy() for w in model.weights])


def _snapshot(model: Any) -> list[Any]:
    return [v.numpy() for v in state_variables(model)]


def _restore(model: Any, values: list[Any]) -> None:
    jaxstep.sync(model)  # on JAX, the timed steps' state back in the variables first
    for var, value in zip(state_variables(model), values):  # noqa: B905 (same model)
        var.assign(value)


def _batches(model: Any, dataset: Any) -> Any:
    """The iterator the train function takes, as ``fit`` makes it: under a ``tf.distribute``
    strategy, the dataset distributed by it (each replica its share of a batch)."""
    strategy = getattr(model, "distribute_strategy", None)
    if strategy is None or type(strategy).__name__.startswith("_Default"):
        return jaxstep.batches(dataset)
    return iter(strategy.experimental_distribute_dataset(dataset))


def _build(model: Any, batch: Any) -> None:
    """Build the model, its loss, metrics and optimizer on one batch, as ``fit`` does first:
    labels that do not fit the model's outputs fail here."""
    try:
        model._symbolic_build(data_batch=batch)
    except Exception as exc:
        raise UserError(_first_step_error(model, exc)) from None


@dataclass(frozen=True)
class _FirstCall:
    """The first call of the train function: the function, its logs, its time, and the
    sentence saying why the user's XLA was turned off (``""`` when it was not)."""

    fn: Any
    logs: dict[str, float]
    seconds: float
    fallback: str = ""


def _first_call(
    model: Any, it: Any, counter: StepCounter, spe: int, xla_fallback: bool
) -> _FirstCall:
    """Make the train function, run and time its first call (tracing, compilation); its
    errors as one sentence. With ``xla_fallback`` (the user's own jit_compile, not a
    candidate's), an XLA compilation that fails at the first call is retried without XLA."""
    before = counter.read()
    fn = _train_function(model)
    t0 = time.perf_counter()
    fallback = ""
    try:
        logs = _numpy_logs(fn(it))
    except Exception as exc:
        if not (xla_fallback and model.jit_compile):
            raise UserError(_first_step_error(model, exc)) from None
        fallback = (f"XLA: your jit_compile=True failed at the first step here "
                    f"({first_line(exc)[:160]}): the baseline runs without XLA")
        model.jit_compile = False
        fn = _train_function(model)
        t0 = time.perf_counter()
        try:
            logs = _numpy_logs(fn(it))
        except Exception as again:
            raise UserError(_first_step_error(model, again)) from None
    elapsed = time.perf_counter() - t0
    bad = {k: v for k, v in logs.items() if "loss" in k.lower() and not math.isfinite(v)}
    if bad:
        key, value = next(iter(bad.items()))
        raise UserError(
            f"The {key} is {value} at the first training step: check the labels, the loss and "
            "the learning rate before tuning."
        )
    counted = counter.read() - before
    if counted != spe:
        raise UserError(
            f"{counter.path} counted {counted} of the {spe} training step(s) run: name the "
            "iterations of the optimizer your train_step applies with --steps-counter "
            f"(e.g. {counter_hint(model, counter.path)})."
        )
    return _FirstCall(fn, logs, elapsed, fallback)


def _train_function(model: Any) -> Any:
    if jaxstep.on_jax():
        return jaxstep.JaxTrainFunction(model)
    model.train_function = None
    return model.make_train_function(force=True) or model.train_function


def _numpy_logs(logs: Any) -> dict[str, float]:
    """A train function's logs as floats (scalars only: a metric of several values is
    left out)."""
    import numpy as np

    out = {}
    for key, value in dict(logs).items():
        array = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
        if array.size == 1:
            out[key] = float(array.reshape(()))
    return out


def _first_step_error(model: Any, exc: BaseException) -> str:
    name = type(model).__name__
    if "is not a valid root scope name" in str(exc):
        return (
            f"Keras refuses the name scope of the class {name} at the first training step "
            f"(its name starts with '_'): rename the class, e.g. to {name.lstrip('_') or 'Net'}."
        )
    return (
        f"The first training step raised {call_error_sentence(exc)}: give labels (and inputs) "
        "that fit the model's outputs and loss."
    )


def _check_iterations(counter: StepCounter, expected: int) -> None:
    got = counter.read()
    if got != expected:
        raise RuntimeError(
            f"the optimizer ran {got} steps where {expected} were timed: the train function "
            "does not run the steps it is asked to"
        )


class _Timed:
    """The steps timed since the last reset, checked against the step counter."""

    def __init__(self, counter: StepCounter, spe: int) -> None:
        self.counter = counter
        self.steps = 0
        self.start = 0

    def reset(self) -> None:
        self.steps = 0
        self.start = self.counter.read()

    def around(self, run: Callable[[], Any]) -> Any:
        """Check the steps timed so far, ``run()`` (which resets the optimizer), count anew."""
        _check_iterations(self.counter, self.start + self.steps)
        result = run()
        self.reset()
        return result


class _Guard:
    """K steps from the initial state on the cached batches, run by a train function of the
    steps per call that is timed, with the same XLA setting, each step's own value of every
    guarded key recorded (:class:`~tfperf.worker.trainstate.LossRecorder`)."""

    def __init__(
        self, model: Any, initial: list[Any], keys: tuple[str, ...], workload: dict,
        steps: int, data: Any,
    ) -> None:
        self.model, self.initial, self.keys, self.steps, self.data = (
            model, initial, keys, steps, data)
        self.seconds = float(workload.get("guard_seconds") or DEFAULT_GUARD_SECONDS)
        self.validation = workload.get("validation")
        self.recorder: LossRecorder | None = None

    def scoped_run(self) -> list[Any]:
        """:meth:`run` in the model's strategy's scope, where its recorder's variables are
        made (:func:`tfperf.worker.trainstate.strategy_scope`)."""
        with strategy_scope(self.model):
            return self.run()

    def run(self) -> list[Any]:
        """``[per-step values (steps x keys), validation metrics, their names, the keys,
        [seconds taken, 1 if the time cap stopped it, the cap]]``."""
        import numpy as np

        if self.recorder is None:
            spe = int(self.model.steps_per_execution or 1)
            self.recorder = (jaxstep.JaxLossRecorder(self.model, self.keys) if jaxstep.on_jax()
                             else LossRecorder(self.model, self.keys, spe))
        _restore(self.model, self.initial)
        t0 = time.perf_counter()
        rows = self._steps(self.recorder, _batches(self.model, self.data))
        took = time.perf_counter() - t0
        capped = len(rows) < self.steps and took > self.seconds
        metrics = self._evaluate() if self.validation else {}
        return [
            np.asarray(rows[: self.steps], dtype=np.float64).reshape(-1, len(self.keys)),
            np.asarray(list(metrics.values()), dtype=np.float64),
            np.asarray(list(metrics), dtype=str),
            np.asarray(list(self.keys), dtype=str),
            np.asarray([took, float(capped), self.seconds], dtype=np.float64),
        ]

    def _steps(self, recorder: LossRecorder, it: Any) -> list[list[float]]:
        import tensorflow as tf

        rows: list[list[float]] = []
        t0 = time.perf_counter()
        recorder.take()
        while len(rows) < self.steps:
            if len(rows) >= MIN_GUARD_STEPS and time.perf_counter() - t0 > self.seconds:
                break
            try:
                recorder.function(it)
            except (StopIteration, tf.errors.OutOfRangeError):
                break
            got = recorder.take()
            if not got:
                break
            rows.extend(got)
        return rows

    def _evaluate(self) -> dict[str, float]:
        import numpy as np

        with np.load(self.validation) as found:
            x, y = found["x"], found["y"]
        result = self.model.evaluate(x, y, verbose=0, return_dict=True)
        return {k: float(v) for k, v in sorted(result.items())}
