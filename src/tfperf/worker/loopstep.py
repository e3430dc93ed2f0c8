"""Worker side: a custom training loop's step as the user wrote it, and in each form a knob asks.

Contract:

- :class:`UserStep` is the user's step: its Python function (``python_function`` of a
  ``tf.function``), whether it was a ``tf.function`` (``graph``) and with ``jit_compile``, and
  how it takes one element of the dataset (:meth:`UserStep.call`): a tuple unpacked as
  arguments where the function takes that many, else the element whole.
- :class:`Form` is what a config asks of it: a graph or not, XLA or not, steps per call. A
  config's ``xla == "jit"`` and ``steps_per_execution`` > 1 are graphs whatever ``graph`` says
  (XLA compiles a graph; N steps in one call are one ``tf.function``); a knob left at its
  default keeps the user's way (:meth:`Form.of`).
- :func:`timed_function` ``(step, form) -> fn(iterator) -> losses`` runs ``form.steps`` steps
  on the next batches of an iterator and returns the last step's losses: the step under a new
  ``tf.function`` (``jit_compile`` as the form says) or eagerly, and for N steps the loop the
  answer prints (:data:`tfperf.core.loopcode.STEPS_LOOP`), a ``tf.function`` over ``for _ in
  tf.range(N - 1)`` whose inner step keeps its own ``jit_compile`` (XLA cannot compile reading
  an iterator).
  :func:`recording_function` ``(step, form, keys)`` is the guard's: the same form, each
  step's own losses stacked (``fn(iterator, n) -> {key: [n]}``). Each call of either builds
  new functions, so that random ops start from the global seed again.
- :func:`losses` turns what a step returned into ``{key: scalar}`` (a scalar is ``"loss"``,
  a dict keeps its keys, a tuple is ``loss_0, loss_1...``); no loss, a loss that is not a
  scalar, or a per-replica value is a :class:`UserError` saying what to return.
- :func:`step_error` is the sentence for a step that raised, with the user's own frame (the
  deepest frame of their code in the traceback, else the last of their files in TensorFlow's
  "defined at" lines of a graph error); under ``mixed_bfloat16``, a dtype clash says which
  cast fixes it.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tfperf.core.errors import UserError
from tfperf.worker.jaxstep import user_frame
from tfperf.worker.trainstate import GRAPH_OFF_CLASH
from tfperf.worker.workload import call_error_sentence

_OP_SUFFIX = re.compile(r"\s*\[Op:[\w]+\]( name:\s*\S*)?")
"""TensorFlow's ``[Op:Sub] name:`` after an eager op's message."""
_DEFINED_AT = re.compile(r'File "([^"]+)", line (\d+)')
_LIBRARIES = ("site-packages", "dist-packages", "/tfperf/", "<frozen", "/lib/python3")


@dataclass(frozen=True)
class UserStep:
    """The user's step (module docstring)."""

    function: Callable[..., Any]
    graph: bool
    jit_compile: bool
    unpack: bool = True
    """Whether a tuple element is passed as arguments (:meth:`call`)."""

    @classmethod
    def of(cls, step: Any, element: Any) -> UserStep:
        """The step as given, and how it takes ``element`` (one batch of the dataset)."""
        function = getattr(step, "python_function", None)
        graph = function is not None
        function = function or step
        return cls(function, graph, bool(getattr(step, "_jit_compile", False) and graph),
                   _takes_unpacked(function, element))

    def call(self, fn: Callable[..., Any], element: Any) -> Any:
        """``fn`` (this step in some form) on one element of the dataset."""
        return fn(*element) if self.unpack else fn(element)


def _takes_unpacked(function: Callable[..., Any], element: Any) -> bool:
    """Whether ``function`` takes a tuple ``element`` as that many arguments; a step that
    takes one argument only gets the element whole; one that takes neither is a
    :class:`UserError` naming both."""
    if not isinstance(element, tuple):
        return False
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin or a C function: unpack as most steps take
        return True
    for unpack, args in ((True, element), (False, (element,))):
        try:
            signature.bind(*args)
            return unpack
        except TypeError:
            continue
    raise UserError(
        f"Your step takes {signature} and the dataset's elements are tuples of "
        f"{len(element)}: make the step take the element's parts as arguments "
        f"(step(x, y)) or the element whole (step(batch))."
    )


@dataclass(frozen=True)
class Form:
    """How a config runs the step (module docstring)."""

    graph: bool
    jit: bool
    steps: int = 1

    @classmethod
    def of(cls, step: UserStep, config: Mapping[str, Any]) -> Form:
        """The form ``config`` asks of ``step``; its knobs at their default keep the user's."""
        xla, steps = config.get("xla"), int(config.get("steps_per_execution") or 1)
        jit = step.jit_compile if xla is None else xla == "jit"
        graph = step.graph if config.get("graph") is None else bool(config["graph"])
        if config.get("graph") is False and (jit or steps > 1):
            raise UserError(GRAPH_OFF_CLASH)
        return cls(graph or jit or steps > 1, jit, steps)

    def changes(self, step: UserStep) -> bool:
        """Whether this form is other than the step as written."""
        return (self.graph, self.jit, self.steps) != (step.graph, step.jit_compile, 1)


def _inner(step: UserStep, form: Form) -> Callable[..., Any]:
    """One step in ``form``: a new ``tf.function`` of the user's function, or the function."""
    import tensorflow as tf

    if not form.graph:
        return step.function
    return tf.function(step.function, jit_compile=form.jit or None)


def timed_function(step: UserStep, form: Form) -> Callable[[Any], Any]:
    """``fn(iterator) -> losses`` of ``form.steps`` steps (module docstring)."""
    import tensorflow as tf

    inner = _inner(step, form)
    if form.steps == 1:
        return lambda iterator: step.call(inner, next(iterator))
    steps = form.steps

    def train_steps(iterator: Any) -> Any:  # loopcode.STEPS_LOOP, the user's call convention
        for _ in tf.range(steps - 1):
            step.call(inner, next(iterator))
        return step.call(inner, next(iterator))

    return tf.function(train_steps)


def recording_function(step: UserStep, form: Form, keys: tuple[str, ...]) -> Callable[..., Any]:
    """``fn(iterator, n) -> {key: n losses}``: ``n`` steps in ``form``, each one's losses."""
    import tensorflow as tf

    inner = _inner(step, form)

    def one(iterator: Any) -> dict[str, Any]:
        out = losses(step.call(inner, next(iterator)))
        return {k: tf.cast(tf.reshape(out[k], []), tf.float32) for k in keys}

    if form.steps == 1:
        return lambda iterator, n: {k: tf.reshape(v, [1]) for k, v in one(iterator).items()}

    def recorded(iterator: Any, n: Any) -> dict[str, Any]:
        arrays = {k: tf.TensorArray(tf.float32, size=n) for k in keys}
        for i in tf.range(n):
            got = one(iterator)
            arrays = {k: arrays[k].write(i, got[k]) for k in keys}
        return {k: arrays[k].stack() for k in keys}

    return tf.function(recorded)


def losses(out: Any) -> dict[str, Any]:
    """What a step returned as ``{key: scalar}`` (module docstring)."""
    import tensorflow as tf

    how = ("return its loss (a scalar tensor), or a dict of them such as "
           "{'d_loss': d_loss, 'g_loss': g_loss}: the guard compares them step by step")
    if out is None:
        raise UserError(f"Your step returned None: {how}.")
    if isinstance(out, tf.distribute.DistributedValues):
        raise UserError("Your step returned a per-replica value: reduce it with "
                        "strategy.reduce('MEAN', per_replica_loss, axis=None) and return that.")
    if isinstance(out, Mapping):
        found = {str(k): v for k, v in out.items()}
    elif isinstance(out, (tuple, list)):
        found = {f"loss_{i}": v for i, v in enumerate(out)}
    else:
        found = {"loss": out}
    for key, value in found.items():
        if isinstance(value, tf.distribute.DistributedValues) or _size(value) != 1:
            shape = tuple(getattr(value, "shape", ()) or ())
            raise UserError(f"Your step returned {key} of shape {shape}: {how} "
                            "(tf.reduce_mean of a loss per example).")
    if not found:
        raise UserError(f"Your step returned an empty {type(out).__name__}: {how}.")
    return found


def _size(value: Any) -> int:
    import numpy as np

    shape = getattr(value, "shape", None)
    if shape is None:
        try:
            return int(np.size(value))
        except Exception:  # not a number at all
            return 0
    return int(np.prod([d if d is not None else 2 for d in shape], dtype=np.int64))


def step_error(exc: BaseException, policy: str | None = None) -> str:
    """The sentence for the user's step raising ``exc`` (module docstring)."""
    where = user_frame(exc) or _defined_at(str(exc))
    place = f" at {where}" if where else ""
    reason = _OP_SUFFIX.sub("", call_error_sentence(exc))
    text = str(exc)
    if policy and "bfloat16" in text and ("float" in text.replace("bfloat16", "")):
        return (f"not tried: under {policy} your step raised{place} ({reason}): a layer's "
                "bfloat16 output meets a float32 tensor there; cast it first "
                "(tf.cast(model(x), tf.float32)) or give the last layer dtype='float32'.")
    return f"Your step raised{place}: {reason}."


def _defined_at(text: str) -> str | None:
    """``file.py:line`` of the last of the user's files TensorFlow names where a graph op was
    defined ("defined at (most recent call last): File ..."); ``None`` without one."""
    from pathlib import Path

    found = [(f, n) for f, n in _DEFINED_AT.findall(text)
             if not any(part in f for part in _LIBRARIES)]
    return f"{Path(found[-1][0]).name}:{found[-1][1]}" if found else None
