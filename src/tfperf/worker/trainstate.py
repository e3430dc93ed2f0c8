"""Worker side: what the user's model already does, and the state a training guard resets.

Contract:

- :func:`read_baseline` ``(model, set_policy) -> Baseline``: the model as the user compiled it,
  read back from Keras before tfperf changes anything: ``jit_compile`` as Keras resolved it
  (``"auto"`` resolved on this machine; a ``jit_compile=True`` that Keras refused reads
  ``False``), ``steps_per_execution`` and the dtype policy of its layers. ``policy_source`` is
  ``"factory"`` when the model's policy is not the one tfperf set before the factory ran (the
  factory, or a ``.keras`` file, sets its own: precision cannot be tried from outside).
- :func:`apply_knobs` ``(model, config, baseline) -> list[str]``: a knob left at its default
  (``xla`` / ``steps_per_execution`` of ``None``) keeps the user's value; any other value is
  set. Returns the notes that say what runs.
- :func:`float32_held` holds Keras' global dtype policy at ``float32`` while the user's
  module is imported and its factory runs (the ``float32`` precision: the candidate of a
  factory that sets ``mixed_bfloat16`` itself), and says what the factory asked for;
  :func:`check_float32` refuses a model some of whose layers still compute in another policy
  (one given as a layer's ``dtype``, which no global policy reaches).
- :func:`optimizers` finds every optimizer the model holds (a GAN's ``d_optimizer`` and
  ``g_optimizer`` beside ``model.optimizer``) and builds the unbuilt ones, so that
  :func:`state_variables` (weights, batch-norm statistics, seed generators and every
  optimizer's iterations and slots) is complete before the initial state is snapshot.
- :class:`StepCounter` reads the training steps run from an attribute path on the model
  (``--steps-counter``, default ``optimizer.iterations``); a path that does not resolve to a
  counter is a :class:`UserError` naming the attributes that would.
- :class:`LossRecorder` wraps the model's ``train_step`` so that a train function of
  ``steps_per_execution`` N steps writes each step's own value of every guarded key into a
  buffer variable (Keras' logs are means since the last metric reset: the recorder resets the
  metrics before each step, inside the function, so each step's value is its own batch's).
- :func:`sparse_rows_optimizer` names the user's optimizer where Keras on TensorFlow updates
  an ``Embedding`` otherwise than Keras on JAX: TensorFlow hands a lookup's gradient over as
  one slice per looked-up row, and an optimizer that squares its gradient (Adam, RMSprop,
  Adagrad, Ftrl...) squares each slice apart, so a row looked up twice in a batch gets another
  second moment than the dense gradient JAX applies. Found by applying both forms of one
  gradient to a copy of the optimizer, not by its name (SGD and Lion agree).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from tfperf.core.errors import UserError

DEFAULT_COUNTER = "optimizer.iterations"
GRAPH_OFF_CLASH = ("graph=off runs your step eagerly, and xla=jit and steps_per_execution > 1 "
                   "run it as a graph: leave graph out.")


@dataclass(frozen=True)
class Baseline:
    """The model as the user compiled it (see the module docstring)."""

    jit_compile: bool
    steps_per_execution: int
    policy: str
    policy_source: str
    """``"tfperf"`` (the policy tfperf set before the factory ran) or ``"factory"``."""
    data: str = "dataset"
    """``"dataset"`` (the user's own ``tf.data`` pipeline), ``"arrays"`` (Keras' ``fit``
    builds the pipeline: there is none of the user's to tune) or ``"pydataset"`` (a
    ``keras.utils.PyDataset``, whose own settings are its workers and queue)."""
    notes: tuple[str, ...] = ()
    step: str = "fit"
    """``"fit"`` (Keras' train function) or ``"loop"`` (a custom training loop's step,
    :mod:`tfperf.worker.customloop`)."""
    graph: bool = True
    """Whether the step runs as a graph: a ``tf.function``, not ``run_eagerly``."""
    strategy: str | None = None
    """The ``tf.distribute`` strategy the model or step runs under (``"MirroredStrategy (2
    replicas)"``), ``None`` outside one."""
    unpacks: bool = True
    """A custom loop's step takes a batch's parts as arguments (``train_step(x, y)``), not the
    batch whole."""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["notes"] = list(self.notes)
        return out

    def with_note(self, note: str, **changes: Any) -> Baseline:
        values = {**asdict(self), **changes, "notes": (*self.notes, note)}
        return Baseline(**values)


def model_policy(model: Any) -> str:
    """The dtype policy of the model (its own, else its first layer's)."""
    policy = getattr(model, "dtype_policy", None)
    name = getattr(policy, "name", None)
    if name:
        return str(name)
    for layer in getattr(model, "layers", []):
        name = getattr(getattr(layer, "dtype_policy", None), "name", None)
        if name:
            return str(name)
    return "float32"


def read_baseline(model: Any, set_policy: str, data: str = "dataset") -> Baseline:
    """What the user compiled (module docstring); ``set_policy`` is what tfperf set; ``data``
    how the user's data reaches ``fit`` (:attr:`Baseline.data`)."""
    policy = model_policy(model)
    layer_policies = {
        getattr(getattr(layer, "dtype_policy", None), "name", None) for layer in model.layers
    } - {None}
    source = "tfperf" if policy == set_policy and layer_policies <= {set_policy} else "factory"
    return Baseline(
        jit_compile=bool(model.jit_compile),
        steps_per_execution=int(model.steps_per_execution or 1),
        policy=policy,
        policy_source=source,
        data=data,
        graph=not model.run_eagerly,
        strategy=model_strategy(model),
    )


def strategy_scope(model: Any) -> Any:
    """The scope of the ``tf.distribute`` strategy ``model`` was built under (a context that
    does nothing outside one): ``fit`` builds, steps and makes its variables there, and so do
    tfperf's additions (the loss recorder's variables)."""
    strategy = getattr(model, "distribute_strategy", None)
    if strategy is None or type(strategy).__name__.startswith("_Default"):
        return contextlib.nullcontext()
    return strategy.scope()


def model_strategy(model: Any) -> str | None:
    """The ``tf.distribute`` strategy a Keras model was built under, named with its replicas
    (``"MirroredStrategy (2 replicas)"``); ``None`` for TensorFlow's default (no) strategy."""
    strategy = getattr(model, "distribute_strategy", None)
    name = type(strategy).__name__ if strategy is not None else ""
    if not name or name.startswith("_Default"):
        return None
    replicas = getattr(strategy, "num_replicas_in_sync", 1)
    return f"{name} ({replicas} replica{'s' if replicas != 1 else ''})"


@contextlib.contextmanager
def float32_held() -> Iterator[list[str]]:
    """Keras' global dtype policy held at ``float32`` while the block runs: a call that sets
    another (``keras.mixed_precision.set_global_policy``, ``keras.config.set_dtype_policy``,
    ``tf.keras``'s, however imported) is noted in the list yielded and not applied. Held where
    every one of them stores the policy (Keras' global state), so that a name bound by
    ``from keras.mixed_precision import set_global_policy`` before the block is held too."""
    import keras

    keras.mixed_precision.set_global_policy("float32")
    state = importlib.import_module("keras.src.backend.common.global_state")
    original = state.set_global_attribute
    asked: list[str] = []

    def held(name: str, value: Any) -> None:
        if name == "dtype_policy" and getattr(value, "name", value) != "float32":
            asked.append(str(getattr(value, "name", value)))
            return
        original(name, value)

    state.set_global_attribute = held
    try:
        yield asked
    finally:
        state.set_global_attribute = original


def check_float32(model: Any) -> None:
    """A :class:`UserError` where some layer of ``model`` computes in a policy other than
    ``float32`` under :func:`float32_held` (its own ``dtype=`` argument)."""
    others = sorted({
        str(getattr(getattr(layer, "dtype_policy", None), "name", "float32"))
        for layer in model.layers} - {"float32"})
    if others:
        raise UserError(
            f"not tried: some of your layers set their own dtype policy ({', '.join(others)}) "
            "in their dtype= argument, which a global float32 policy cannot reach: pass "
            "dtype=None to those layers in your factory to try float32.")


def apply_knobs(model: Any, config: Mapping[str, Any], baseline: Baseline) -> list[str]:
    """Set the knobs the config names; keep the user's values for the others."""
    notes = []
    xla = config.get("xla")
    replicas = getattr(getattr(model, "distribute_strategy", None), "num_replicas_in_sync", 1)
    if xla == "jit" and replicas > 1 and not baseline.jit_compile:
        raise UserError(f"not tried: XLA compiles the train function for one device, and your "
                        f"model's {baseline.strategy} keeps its replicas' variables on several.")
    if xla in ("jit", "off"):
        model.jit_compile = xla == "jit"
        if xla == "jit" and not model.jit_compile:
            notes.append("XLA: Keras refused jit_compile=True for this model (a layer does "
                         "not support it): the train function runs without XLA")
    spe = config.get("steps_per_execution")
    if spe:
        model.steps_per_execution = int(spe)
    graph = config.get("graph")
    implied = xla == "jit" or int(spe or 1) > 1  # XLA compiles a graph; N steps a call are one
    if graph is False and implied:
        raise UserError(GRAPH_OFF_CLASH)
    if graph is not None or implied:
        model.run_eagerly = not (True if graph is None else graph)
    if model.run_eagerly:
        notes.append("eager: model.run_eagerly = True, the train function runs step by step "
                     "in Python" + (" (as you compiled it)" if graph is None else ""))
    if model.jit_compile:
        own = " (as you compiled it)" if baseline.jit_compile and xla is None else ""
        notes.append(f"XLA: model.jit_compile = True{own} (the train function compiled by XLA)")
    steps = int(model.steps_per_execution or 1)
    if steps > 1:
        notes.append(f"steps_per_execution {steps}: one timed call runs {steps} training steps")
    return notes


def optimizers(model: Any) -> list[Any]:
    """Every optimizer the model holds, ``model.optimizer`` first, each built."""
    import keras

    found: dict[int, Any] = {}
    main = getattr(model, "optimizer", None)
    if isinstance(main, keras.optimizers.Optimizer):
        found[id(main)] = main
    for value in list(vars(model).values()):
        if isinstance(value, keras.optimizers.Optimizer):
            found.setdefault(id(value), value)
    for opt in found.values():
        if not opt.built:
            # a GAN's own optimizers build at their first apply: built now, their state exists
            # before the initial snapshot, and restoring it starts them afresh
            opt.build(model.trainable_variables)
    return list(found.values())


def state_variables(model: Any) -> list[Any]:
    """The model's variables and every optimizer's (its ``iterations`` and slots)."""
    seen: dict[int, Any] = {}
    for var in list(model.variables) + [v for o in optimizers(model) for v in o.variables]:
        seen.setdefault(id(var), var)
    return list(seen.values())


def sparse_rows_optimizer(model: Any) -> str | None:
    """The class name of the model's first optimizer whose update of a row looked up twice
    differs between the sliced and the dense gradient, where the model has an ``Embedding``
    and runs on TensorFlow; ``None`` otherwise (see the module docstring)."""
    import keras

    if keras.backend.backend() != "tensorflow" or not any(
        isinstance(layer, keras.layers.Embedding) for layer in model._flatten_layers()
    ):
        return None
    for opt in optimizers(model):
        if _slices_update_apart(opt):
            return type(opt).__name__
    return None


def _slices_update_apart(optimizer: Any) -> bool:
    """Whether a fresh copy of ``optimizer`` moves a variable otherwise under a gradient of
    two slices of one row than under the same gradient summed (two steps, so that the
    moments the first step left take part)."""
    import keras
    import numpy as np
    import tensorflow as tf

    sliced, dense = (keras.Variable(np.ones((3, 2), "float32")) for _ in range(2))
    rows = tf.IndexedSlices(tf.constant([[1.0, 2.0], [3.0, -1.0]]), tf.constant([1, 1]),
                            tf.constant([3, 2]))
    try:
        copy = type(optimizer).from_config(optimizer.get_config())
        for _ in range(2):
            copy.apply_gradients([(rows, sliced), (tf.convert_to_tensor(rows), dense)])
    except Exception:  # a copy that cannot be made or stepped: nothing to say
        return False
    return not np.allclose(sliced.numpy(), dense.numpy(), rtol=1e-5, atol=1e-7)


class StepCounter:
    """The training steps run, read from an attribute path on the model."""

    def __init__(self, model: Any, path: str | None) -> None:
        self.path = path or DEFAULT_COUNTER
        value: Any = model
        for part in self.path.split("."):
            value = getattr(value, part, None)
        if value is None or not hasattr(value, "numpy"):
            raise UserError(
                f"--steps-counter {self.path} is not a counter of the model: name the "
                f"iterations of the optimizer your train_step applies, e.g. "
                f"{counter_hint(model, self.path)}."
            )
        self.variable = value
        self.model = model

    def read(self) -> int:
        # on JAX the steps' state lives outside the variables until it is synced back
        getattr(self.model, "jax_state_sync", lambda: None)()
        return int(self.variable.numpy())


def counter_hint(model: Any, tried: str = DEFAULT_COUNTER) -> str:
    """The counters a ``--steps-counter`` could name, other than ``tried``."""
    import keras

    names = [
        f"{name}.iterations"
        for name, value in vars(model).items()
        if isinstance(value, keras.optimizers.Optimizer) and not name.startswith("_")
        and f"{name}.iterations" != tried
    ]
    return " or ".join(names) or DEFAULT_COUNTER


def guarded_keys(logs: Mapping[str, Any], asked: tuple[str, ...]) -> tuple[str, ...]:
    """The keys of a train step's logs the guard compares: ``asked`` (``--loss-key``), else
    every key whose name contains ``loss``, ``loss`` itself first."""
    if asked:
        missing = [k for k in asked if k not in logs]
        if missing:
            raise UserError(
                f"--loss-key {missing[0]} is not among the keys your train_step returns "
                f"({', '.join(sorted(logs)) or 'none'}): name one of them."
            )
        return tuple(asked)
    # "loss" leads (its figures are the guard's headline) whatever order the backend gives
    keys = tuple(sorted((k for k in logs if "loss" in k.lower()), key=lambda k: k != "loss"))
    if not keys:
        raise UserError(
            f"Your train_step returns no key with 'loss' in its name "
            f"({', '.join(sorted(logs)) or 'none'}): name the one to guard with --loss-key."
        )
    return keys


class LossRecorder:
    """A train function that records each step's own value of ``keys`` (module docstring)."""

    def __init__(self, model: Any, keys: tuple[str, ...], steps: int) -> None:
        import tensorflow as tf

        self.model, self.keys = model, keys
        # each replica of a strategy writes its own copy; the first replica's is read back
        local = {"trainable": False, "synchronization": tf.VariableSynchronization.ON_READ,
                 "aggregation": tf.VariableAggregation.ONLY_FIRST_REPLICA}
        self.buffer = tf.Variable(tf.zeros([max(1, steps), len(keys)]), **local)
        self.filled = tf.Variable(0, **local)
        own_step = model.train_step

        def recording_step(data: Any) -> Any:
            model.reset_metrics()
            logs = own_step(data)
            row = tf.stack([tf.cast(tf.reshape(logs[k], []), tf.float32) for k in keys])
            # assign, not scatter_nd_update: a replica's own copy takes assign only
            self.buffer.assign(tf.tensor_scatter_nd_update(self.buffer, [[self.filled]], [row]))
            self.filled.assign_add(1)
            return logs

        self.function = model._make_function(recording_step)

    def take(self) -> list[list[float]]:
        """The rows written since the last take (one per step), and start again."""
        n = int(self.filled.numpy())
        rows = self.buffer.numpy()[:n].tolist()
        self.filled.assign(0)
        return rows
