"""Worker side: the JAX forms of a training step's TensorFlow-only parts (Keras 3 on JAX).

Contract, for a worker whose keras runs on the JAX backend (``KERAS_BACKEND=jax``, the runtime
``keras-jax`` or the user's own setting):

- :func:`check_runs_on_jax` ``(model)``: Keras' JAX trainer calls ``train_step(state, data)``;
  a model whose own ``train_step`` takes ``(self, data)`` is written for TensorFlow and cannot
  step on JAX. That is a :class:`UserError` starting ``"not tried: "`` that names what it uses
  (``tf.GradientTape`` when its source says so) and where (``file:line`` of the override).
  Importing TensorFlow for ``tf.data`` is fine on JAX and is not a reason.
- :func:`step_error` ``(what, exc) -> str``: the sentence for building the model or its
  first step raising on JAX (a ``tf.*`` op inside a layer, say), naming the deepest frame of
  the user's own code in the innermost exception of the chain (Keras' traceback filtering is
  turned off first, so the frame is there to find).
- :class:`JaxTrainFunction` is Keras' JAX train function ``train_function(state, iterator) ->
  (logs, state)`` called the way ``fit`` calls it: the state (trainable, non-trainable,
  optimizer and metrics variables) is taken from the model's variables before the first call,
  which are then purged as ``fit`` purges them, threaded through every call and kept where
  ``fit`` keeps it, so that Keras' ``jax_state_sync`` (:func:`sync`) writes it back; after a
  sync the next call takes the state afresh, as ``fit`` does after a callback synced it (the
  jitted step donates its input buffers, so the variables cannot share them). So whatever
  reads or writes variables between calls (a step count, a restore of the initial state)
  syncs first and nothing else changes. An instance is called as TensorFlow's train function
  is, ``fn(iterator) -> logs``, on an iterator of :func:`jax_batches` (the dataset's batches
  as NumPy arrays, the adapter ``fit`` uses for a ``tf.data.Dataset``).
- :class:`JaxLossRecorder` is the guard's recorder on JAX (each step's own value of the
  guarded keys, one jitted ``train_step`` per step, metrics reset in its state).
- :func:`write_weights` / :func:`load_weights`: the model's weights (``model.weights``:
  seed-generator states are not weights) in an ``.npz`` keyed by ``variable.path``; loading
  matches by path and shape, never by list position, and a weight the file lacks, or holds
  with another shape, is an error naming it; loading waits for the file (the default's worker
  may be starting beside it). The default worker writes its initial weights,
  a candidate on another backend loads them, so both start from the same model (each backend
  draws its initializers its own way, whatever the seed). :func:`handoff_weights` does
  whichever the workload asks (``weights_out`` / ``weights_in``).
- What the training worker calls on any backend, a no-op or TensorFlow's form where keras does
  not run on JAX: :func:`prepare_model` (the checks above, a ``keras-jax`` step always jitted,
  the notes), :func:`batches` (the iterator a train function takes), :func:`sync`,
  :func:`value` (a log as a float, waiting for the step), :func:`backend_name`.
"""

from __future__ import annotations

import inspect
import re
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tfperf.core.errors import UserError
from tfperf.core.protocol import JIT_ON_JAX_NOTE

TF_IN_STEP = re.compile(r"\btf\.(GradientTape|function|Variable|py_function)\b|\btf\.[a-z_]+\.")
"""What in a ``train_step``'s source is TensorFlow that JAX cannot trace."""

WEIGHTS_WAIT_S = 600.0
"""How long a worker waits for the default's initial weights (the parent's start timeout ends
it sooner)."""

_LIBRARIES = ("site-packages", "dist-packages", "/tfperf/", "<frozen", "/lib/python3")


def check_runs_on_jax(model: Any) -> None:
    """A ``train_step(self, data)`` override is TensorFlow's form (module docstring)."""
    own = type(model).train_step
    if _defined_in_keras(own):
        return
    params = [p for p in inspect.signature(own).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(params) >= 3:  # (self, state, data): written for JAX
        return
    where, uses = _source_facts(own)
    what = f"{uses}, " if uses else ""
    raise UserError(
        f"not tried: the model's train_step uses TensorFlow ({what}{where}): Keras on JAX "
        "calls train_step(state, data), and a train_step(self, data) runs on TensorFlow only."
    )


def _defined_in_keras(method: Any) -> bool:
    return getattr(method, "__module__", "").startswith("keras.")


def _source_facts(method: Any) -> tuple[str, str]:
    """``("file.py:line", "tf.GradientTape")`` for a method: where it is, what TensorFlow it
    uses (the line of the first use when one is found)."""
    try:
        lines, first = inspect.getsourcelines(method)
        path = Path(inspect.getsourcefile(method) or "?").name
    except (OSError, TypeError):  # no source (built in a notebook cell, compiled)
        return type(method).__name__, ""
    for offset, line in enumerate(lines):
        found = TF_IN_STEP.search(line)
        if found:
            return f"{path}:{first + offset}", found.group(0).rstrip(".")
    return f"{path}:{first}", ""


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, outermost first."""
    found: list[BaseException] = []
    while exc is not None and exc not in found:
        found.append(exc)
        exc = exc.__cause__ or exc.__context__
    return found


def user_frame(exc: BaseException) -> str | None:
    """``file.py:line`` of the deepest frame of the user's own code, in the innermost
    exception of ``exc``'s chain that passed through it (Keras re-raises errors of its own)."""
    for inner in reversed(_chain(exc)):
        frames = [f for f in traceback.extract_tb(inner.__traceback__)
                  if not any(part in f.filename for part in _LIBRARIES)]
        if frames:
            return f"{Path(frames[-1].filename).name}:{frames[-1].lineno}"
    return None


def step_error(what: str, exc: BaseException) -> str:
    """The sentence for ``what`` (building the model, its first training step) raising on
    JAX: the innermost error of the chain, and where in the user's code it came from."""
    where = user_frame(exc)
    root = _chain(exc)[-1]
    text = str(root).strip().splitlines()[0] if str(root).strip() else ""
    place = f" at {where}" if where else ""
    if "data type 'string' not understood" in text:
        why = ("JAX has no string arrays: a lookup of strings (StringLookup, "
               "TextVectorization) runs on JAX in your tf.data pipeline, before the model")
    else:
        why = "a model that uses TensorFlow ops in its layers or train_step runs on TensorFlow only"
    return f"not tried: {what} raised on JAX{place} ({type(root).__name__}: {text[:300]}); {why}."


def disable_traceback_filtering() -> None:
    """Keras hides its callers' frames by default: the user's own frame must stay findable."""
    import keras

    keras.config.disable_traceback_filtering()


def batches(dataset: Any) -> Iterator[Any]:
    """The iterator a train function takes on this backend: the ``tf.data`` iterator on
    TensorFlow, :func:`jax_batches` on JAX."""
    return jax_batches(dataset) if on_jax() else iter(dataset)


def jax_batches(dataset: Any) -> Iterator[Any]:
    """The batches of a ``tf.data.Dataset`` as ``fit`` feeds them to JAX (NumPy arrays)."""
    from keras.src.trainers.data_adapters.tf_dataset_adapter import TFDatasetAdapter

    return iter(TFDatasetAdapter(dataset).get_jax_iterator())


def value(x: Any) -> float:
    """A scalar log as a Python float (waits for JAX's asynchronous dispatch to finish)."""
    import numpy as np

    return float(np.asarray(x).reshape(()))


class JaxTrainFunction:
    """Keras' JAX train function with the state ``fit`` threads (module docstring)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        model.make_train_function(force=True)
        self.function = model.train_function
        self.state: Any = None

    def __call__(self, iterator: Any) -> dict[str, Any]:
        # as fit: the state is taken afresh after anyone synced it back (a callback there; a
        # step count, the guard's restore here)
        if self.state is None or self.model._jax_state_synced:
            self.state = take_state(self.model)
            keep_state(self.model, self.state)  # a step that raises leaves it to sync back
        logs, self.state = self.function(self.state, iterator)
        keep_state(self.model, self.state)
        return logs


def take_state(model: Any, purge: bool = True) -> Any:
    """The state ``fit`` threads, taken from the model's variables (purged, as ``fit`` does,
    unless ``purge`` is false)."""
    model._jax_state_synced = False
    return model._get_jax_state(
        trainable_variables=True,
        non_trainable_variables=True,
        optimizer_variables=True,
        metrics_variables=True,
        purge_model_variables=purge,
    )


def keep_state(model: Any, state: Any) -> None:
    """Where ``fit`` keeps the state between calls, for ``jax_state_sync`` to write back."""
    trainable, non_trainable, optimizer, metrics = state
    model._jax_state = {
        "trainable_variables": trainable,
        "non_trainable_variables": non_trainable,
        "optimizer_variables": optimizer,
        "metrics_variables": metrics,
    }


def sync(model: Any) -> None:
    """Write a JAX model's state back into its variables (nothing on another backend)."""
    getattr(model, "jax_state_sync", lambda: None)()


class JaxLossRecorder:
    """The guard's steps on JAX, with the interface of
    :class:`tfperf.worker.trainstate.LossRecorder`: ``function(iterator)`` runs one jitted
    ``train_step`` with the metrics' variables reset in its state (so each log is its own
    batch's, not a mean) and records ``keys``; ``take()`` hands back the rows recorded since
    the last take. The variables are written back after every step (the guard is not timed),
    so a restore, a step count or ``evaluate`` may follow at any point."""

    def __init__(self, model: Any, keys: tuple[str, ...]) -> None:
        import jax

        self.model, self.keys = model, keys
        self.step = jax.jit(model.train_step)
        self.rows: list[list[float]] = []

    def function(self, iterator: Any) -> dict[str, Any]:
        import jax.numpy as jnp

        batch = next(iterator)
        sync(self.model)
        self.model.reset_metrics()
        state = take_state(self.model, purge=False)
        state = (*state[:3], [jnp.array(v) for v in state[3]])
        logs, state = self.step(state, batch)
        keep_state(self.model, state)
        self.model.jax_state_sync()
        self.rows.append([value(logs[k]) for k in self.keys])
        return logs

    def take(self) -> list[list[float]]:
        rows, self.rows = self.rows, []
        return rows


def write_weights(model: Any, path: str) -> None:
    """The model's weights by ``variable.path`` (module docstring), written atomically."""
    import numpy as np

    arrays = {w.path: np.asarray(w.numpy()) for w in model.weights}
    tmp = Path(path).with_suffix(".tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(path)


def load_weights(model: Any, path: str, wait_s: float = WEIGHTS_WAIT_S) -> int:
    """Assign the weights of ``path`` by ``variable.path`` and shape; how many were loaded.
    Waits up to ``wait_s`` for the file: the default's worker may start at the same time."""
    import numpy as np

    deadline = time.monotonic() + wait_s
    while not Path(path).exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the default's initial weights never arrived in {path}")
        time.sleep(0.1)
    with np.load(path) as saved:
        stored = {name: saved[name] for name in saved.files}
    extra = sorted(set(stored) - {w.path for w in model.weights})
    if extra:
        raise UserError(
            f"The default's model has the weight {extra[0]}, which the model built on "
            f"{_backend()} lacks: the factory builds another model on each backend, so they "
            "cannot be compared."
        )
    for weight in model.weights:
        array = stored.get(weight.path)
        if array is None or tuple(array.shape) != tuple(weight.shape):
            held = "not at all" if array is None else f"with shape {tuple(array.shape)}"
            raise UserError(
                f"The model built on {_backend()} has the weight {weight.path} of shape "
                f"{tuple(weight.shape)}, which the default's model holds {held}: the factory "
                "builds another model on each backend, so they cannot be compared."
            )
        weight.assign(array.astype(weight.dtype))
    return len(model.weights)


def backend_name() -> str:
    """The backend this process's keras runs on."""
    return _backend()


def _backend() -> str:
    import keras

    return str(keras.backend.backend())


def on_jax() -> bool:
    """Whether this worker's keras runs on the JAX backend."""
    return _backend() == "jax"


def prepare_model(model: Any, runtime: str | None, notes: list[str], own: bool) -> list[str]:
    """On JAX: check that the model can step there and set what the ``keras-jax`` runtime
    runs; ``notes`` (what the knobs set) with what runs on JAX instead of TensorFlow's XLA
    notes (``notes`` unchanged on another backend). Where JAX is the user's ``own`` backend,
    the step keeps the user's ``jit_compile`` (the ``xla`` knob sets it); a TensorFlow user's
    ``keras-jax`` candidate is compiled by XLA, and a note says where that overrides their
    compile's ``False``."""
    if not on_jax():
        return notes
    check_runs_on_jax(model)
    disable_traceback_filtering()
    forced = []
    if runtime == "keras-jax" and not own and not model.jit_compile:
        model.jit_compile = True  # jit_compile=False on JAX runs the step eagerly
        forced = [f"{JIT_ON_JAX_NOTE} (it runs the step eagerly there)"]
    how = ("compiled by XLA (jax.jit)" if model.jit_compile else
           "run eagerly (jit_compile=False, or a layer XLA does not support)")
    return [n for n in notes if not n.startswith("XLA:")] + forced + [
        f"Keras on JAX {_jax_version()}: the train function fit runs there, with the state it "
        f"threads and syncs back, its step {how}"]


def _jax_version() -> str:
    import jax

    return str(jax.__version__)


def handoff_weights(model: Any, workload: dict[str, Any]) -> list[str]:
    """Write the initial weights where the parent asks (``weights_out``: the default's
    worker) or load them (``weights_in``: a worker on another Keras backend); notes."""
    if workload.get("weights_in"):
        count = load_weights(model, str(workload["weights_in"]))
        return [f"initial weights: the default's {count}, matched by variable path (each "
                "Keras backend draws its own from the same seed)"]
    if workload.get("weights_out"):
        write_weights(model, str(workload["weights_out"]))
    return []
