"""The two records a worker-side workload passes through: :class:`Loaded` and :class:`Prepared`.

Contract (``docs/ARCHITECTURE.md``): :func:`tfperf.workloads.loading.load_workload` returns a
:class:`Loaded`; :func:`tfperf.prepare.prepare` (and ``tfperf.convert`` for other runtimes)
turns it into a :class:`Prepared`, the callables a worker times. Both are re-exported by
:mod:`tfperf.prepare`. Field order is part of the contract (callers build them positionally).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tfperf.inputs import InputSpec

FORMATS = ("builtin", "keras", "savedmodel", "tflite", "factory")
"""Values of :attr:`Loaded.format`."""


@dataclass
class Prepared:
    """What a worker times: one steady-state call, and the outputs of a call for comparisons."""

    call: Callable[[], None]
    """One steady-state call; returns when the outputs are ready."""
    outputs: Callable[[], list[Any]]
    """The outputs of one call as numpy arrays (for a training step: see :func:`tf_prepared`)."""
    batch: int
    flops_per_call: float | None
    flops_source: str
    """"analytic", "profiler" or "unknown" (see :mod:`tfperf.flops`)."""
    extra: dict[str, Callable[[], None]] = field(default_factory=dict)
    """Other ways of calling the same model, for information: "eager", "predict"."""
    notes: list[str] = field(default_factory=list)


@dataclass
class Loaded:
    """A workload loaded in the worker, before any runtime transformation.

    ``model`` is a ``keras.Model`` (built-ins, ``.keras`` files, and factories returning one),
    the serving signature of a SavedModel (a ``ConcreteFunction`` called with keyword
    arguments), any other callable a factory returned, or the path of a ``.tflite`` file.
    ``inputs`` maps each input name to a numpy array in ``input_names`` order; ``call_style``
    says how the model takes them: ``"single"`` (one positional tensor), ``"list"`` (one list,
    how a multi-input Keras model takes them), ``"args"`` (positional arguments: a factory's
    plain callable with a list or tuple of inputs), ``"dict"`` (one dict by name),
    ``"kwargs"`` (keyword arguments), ``"none"`` (a path, for LiteRT). A training workload
    (``train``) also has integer ``labels``.
    """

    model: Any
    inputs: dict[str, Any]
    input_names: list[str]
    format: str
    train: bool
    flops_per_call: float | None
    flops_source: str
    batch: int
    source: str
    notes: list[str] = field(default_factory=list)
    input_specs: list[InputSpec] = field(default_factory=list)
    call_style: str = "single"
    labels: Any | None = None
    keepalive: Any | None = None
    """The object a SavedModel signature belongs to (it owns the variables)."""

    def call_model(self, tensors: dict[str, Any], *, training: bool = False) -> Any:
        """Call :attr:`model` on ``tensors`` (name -> tensor) the way it takes its inputs."""
        model = self.model
        ordered = [tensors[n] for n in self.input_names]
        kwargs = {"training": training} if is_keras_model(model) else {}
        if self.call_style == "kwargs":
            return model(**tensors)
        if self.call_style == "dict":
            return model(dict(tensors), **kwargs)
        if self.call_style == "list":
            return model(ordered, **kwargs)
        if self.call_style == "args":
            return model(*ordered)
        return model(ordered[0], **kwargs)


def named(names: list[str], values: Any) -> dict[str, Any]:
    """``dict(zip(names, values))`` checking equal lengths (``zip(strict=)`` needs Python 3.10)."""
    values = list(values)
    if len(values) != len(names):
        raise ValueError(f"expected {len(names)} inputs, got {len(values)}")
    return dict(zip(names, values))  # noqa: B905 (lengths checked above)


def is_keras_model(obj: Any) -> bool:
    return any(cls.__name__ in ("Model", "Functional", "Sequential") for cls in type(obj).__mro__)


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (at most 300 characters, no final period)."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300].rstrip(". ")
