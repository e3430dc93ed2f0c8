"""The two records a worker-side workload passes through: :class:`Loaded` and :class:`Prepared`.

Contract (``docs/ARCHITECTURE.md``): :func:`tfperf.worker.loading.load_workload` returns a
:class:`Loaded`; :func:`tfperf.worker.prepare.prepare` (and ``tfperf.worker.convert`` for other
runtimes) turns it into a :class:`Prepared`, the callables a worker times. Both are re-exported by
:mod:`tfperf.worker.prepare`. Field order is part of the contract (callers build them positionally).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tfperf.worker.inputs import InputSpec

FORMATS = ("builtin", "keras", "savedmodel", "tflite", "factory")
"""Values of :attr:`Loaded.format`."""


@dataclass(frozen=True)
class TimedCall:
    """The one contract of every runtime's timed call (``docs/timed-call.md``): ``run`` takes
    the inputs as host (NumPy) arrays, runs the model, and hands back every output as a host
    array; ``inputs`` are the arrays a worker times it on. Calling the record is one timed call.

    Every runtime (TensorFlow, LiteRT, OpenVINO, XLA AOT) builds its call this way, so that a
    comparison across runtimes times the same work: a runtime that copied its inputs once when
    prepared, or left its outputs unread, would time less than a serving loop does.
    """

    run: Callable[[list[Any]], list[Any]]
    inputs: list[Any]

    def __call__(self) -> list[Any]:
        return self.run(self.inputs)


@dataclass
class Prepared:
    """What a worker times: one steady-state call, and the outputs of a call for comparisons."""

    call: Callable[[], Any]
    """One steady-state call; returns when the outputs are ready. For inference, a
    :class:`TimedCall` (host arrays in, host arrays out); for a training step, one step."""
    outputs: Callable[[], list[Any]]
    """The outputs of one call as numpy arrays (for a training step: see :func:`tf_prepared`)."""
    batch: int
    flops_per_call: float | None
    flops_source: str
    """"analytic", "profiler" or "unknown" (see :mod:`tfperf.worker.flops`)."""
    extra: dict[str, Callable[[], None]] = field(default_factory=dict)
    """Other ways of calling the same model, for information: "eager", "predict"."""
    notes: list[str] = field(default_factory=list)
    fingerprint: dict[str, Any] | None = None
    """The loaded workload's :attr:`Loaded.fingerprint`, which the worker reports."""
    async_queue: Callable[[], tuple[Any, Any]] | None = None
    """Where the runtime serves asynchronously (OpenVINO): ``() -> (queue, inputs)``, an
    ``AsyncInferQueue`` of as many requests as the compiled model asks for and the inputs each
    request takes (:class:`tfperf.worker.requests.AsyncServer`); ``None`` elsewhere."""
    profile: Callable[[int], Any] | None = None
    """``calls -> RawProfile``: that many calls under the runtime's own op profiler
    (:mod:`tfperf.worker.opprofile`); ``None`` where the runtime has none."""


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
    ``"kwargs"`` (keyword arguments), ``"none"`` (a path, for LiteRT).
    """

    model: Any
    inputs: dict[str, Any]
    input_names: list[str]
    format: str
    flops_per_call: float | None
    flops_source: str
    batch: int
    source: str
    notes: list[str] = field(default_factory=list)
    input_specs: list[InputSpec] = field(default_factory=list)
    call_style: str = "single"
    keepalive: Any | None = None
    """The object a SavedModel signature belongs to (it owns the variables)."""
    fingerprint: dict[str, Any] | None = None
    """Digests and summaries of the inputs and weights (:mod:`tfperf.worker.fingerprint`)."""

    def call_model(self, tensors: dict[str, Any]) -> Any:
        """Call :attr:`model` on ``tensors`` (name -> tensor) the way it takes its inputs, a
        Keras model in inference mode."""
        model = self.model
        ordered = [tensors[n] for n in self.input_names]
        kwargs = {"training": False} if is_keras_model(model) else {}
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


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NOISE = (
    "in user code:",
    "Exception encountered when calling",
    "Arguments received by",
    "Traceback",
    "File ",
    "\u2022",
    "Call arguments received by",
)


def call_error_sentence(exc: BaseException) -> str:
    """The sentence that says why calling a model raised ``exc``: TensorFlow and Keras wrap the
    real reason ("expected axis -1 of input shape to have value 4, but received input with
    shape (1, 7)") in lines of context ("in user code:", file lines, "Exception encountered
    when calling ...", the arguments received); this finds it. Keras marks it in bold; else it
    is the last line of TensorFlow's own message that is not context."""
    text = str(exc)
    bold = re.findall(r"\x1b\[1m(.*?)\x1b\[0m", text, flags=re.S)
    if bold:
        found = " ".join(bold[-1].split())
    else:
        lines = [_ANSI.sub("", line).strip() for line in text.splitlines()]
        kept = [line for line in lines if line and not line.startswith(_NOISE)]
        found = kept[-1] if kept else ""
    found = re.sub(r"^(\w+(Error|Exception)):\s*", "", found)
    name = type(exc).__name__
    return f"{name}: {found[:400].rstrip('. ')}" if found else name


WHERE_LINE = re.compile(r"^(Exception from|Check '.*' failed at) \S+:\d+:?$")
"""OpenVINO opens its messages with where in its sources it failed; the reason follows."""


def told_lines(text: str) -> list[str]:
    """The non-blank lines of an error message, without OpenVINO's source locations."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return [ln for ln in lines if not WHERE_LINE.match(ln)] or lines


def first_line(exc: BaseException) -> str:
    """The first telling line of ``exc``'s message (at most 300 characters, no final
    period)."""
    text = told_lines(str(exc))
    return (text[0] if text else type(exc).__name__)[:300].rstrip(". ")
