"""The knob table: every knob tfperf can turn, its values, default, runtimes and adoption.

Contract: :data:`KNOBS` is the one table. Each :class:`Knob` says how its ``--set`` text is
parsed, its default (TensorFlow's own behaviour), the runtimes it acts on, how it is applied
(``"env"`` before the process starts, ``"call"`` before the first op, ``"model"`` a
transformation of the model, ``"inputs"`` how many samples one call takes) and what adopting it
takes (``"env"`` environment only, ``"code"`` one line of code, ``"model"`` a converted model
file). The order of the table is the order of every label and of tune's coordinate search: the
batch first (in a throughput tune it holds the largest gain, and every other knob is best
judged at the batch that will be served; a training step's ``steps_per_execution``, the steps
one call runs, follows it for the same reason), then TensorFlow's own knobs (the default outward:
environment and one-line changes), then the runtime (a converted model must beat the tuned
TensorFlow), then the knobs of the runtime chosen.

A config here is a plain mapping of knob values; :func:`label` names one (``"default"``, or
``"xla=jit,onednn=off"`` in table order), :func:`normalize` keeps only the knobs that differ
from their default and act on its runtime, :func:`adoption` says what adopting it takes (the
runtimes ``keras-jax`` and ``keras-tf`` are adopted by the environment of
:data:`RUNTIME_ENV`). A knob that was renamed keeps being read under its former name
(:data:`RENAMED`): every config that enters tfperf -- a ``--set``, a profile, a stored run's
config -- passes through :func:`current_names` (in :func:`changed` and ``Config.from_dict``),
so labels, comparisons and workers only ever see today's names.
:class:`tfperf.core.config.Config` is the typed config a worker runs. Both sides of the process
boundary read this table: the worker builds exactly the runtimes and precisions listed here.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

LITERT_RUNTIMES = ("litert", "litert-dynint8", "litert-fp16", "litert-int8")
OPENVINO_RUNTIMES = ("openvino-f32", "openvino-bf16")
XLA_AOT = "xla-aot"
"""The model compiled ahead of time by XLA (``saved_model_cli aot_compile_cpu``) into a shared
library called without TensorFlow's runtime; ``runtime_threads`` > 1 compiles it with XLA's
multithreading and runs it on an Eigen pool of that many threads."""
KERAS_JAX = "keras-jax"
"""The user's own Keras 3 model on the JAX backend (``KERAS_BACKEND=jax`` before the worker
imports keras): a training runtime, the train function ``fit`` runs on JAX. JAX has no thread
setting of its own: its ``runtime_threads`` N pins the process to N CPUs
(:meth:`tfperf.core.config.Config.pinned_cpus`), and XLA's CPU pool sizes itself from that
(``--xla_cpu_multi_thread_eigen=false`` left a 1024x1024 matmul as fast as before on this
XLA, so the flag is not the knob); adopting it is one line before ``import keras``."""
KERAS_TF = "keras-tf"
"""The user's own Keras 3 model on the TensorFlow backend (``KERAS_BACKEND=tensorflow``): the
training runtime a user whose Keras runs on JAX is offered (``tf``, the knob's default, is the
user's own backend, whichever it is)."""
RUNTIMES = ("tf", *LITERT_RUNTIMES, *OPENVINO_RUNTIMES, XLA_AOT, KERAS_JAX, KERAS_TF)
PRECISIONS = ("fp32", "bf16", "mixed_float16", "float32")
"""``fp32`` is the model as it is (for a training factory, what it sets itself); ``float32``
is Keras' float32 policy held over a training factory that sets a mixed one."""
ALLOCATORS = ("system", "tcmalloc", "jemalloc")
XLA_MODES = ("off", "jit", "auto")

TF_ONLY = ("tf", KERAS_TF)
"""TensorFlow's own runtime: its knobs (XLA, oneDNN, its thread pools) act on it."""
TRAIN_RUNTIMES = ("tf", KERAS_JAX, KERAS_TF)
"""The runtimes a training step runs on: the model-level training knobs act on each."""
RUNTIME_ENV = {KERAS_JAX: {"KERAS_BACKEND": "jax"}, KERAS_TF: {"KERAS_BACKEND": "tensorflow"}}
"""What a runtime sets in the environment before the process starts (and what adopting it
takes there)."""
INTERPRETERS = (*LITERT_RUNTIMES, *OPENVINO_RUNTIMES, XLA_AOT)
PRELOADABLE = ("tf", *LITERT_RUNTIMES, XLA_AOT, KERAS_JAX, KERAS_TF)
"""The runtimes that run under a preloaded allocator (a JAX process like any other: XLA's
CPU client allocates its buffers with malloc): OpenVINO's CPU plugin aborts there
(``free(): invalid pointer``: glibc's ``free()`` meets the allocator's pointers)."""

ADOPTION_ORDER = ("env", "code", "model")
ADOPTION_TEXT = {"env": "env only", "code": "one line of code", "model": "converted model file"}

_ON = {"on", "true", "1", "yes"}
_OFF = {"off", "false", "0", "no"}
_DEFAULT = {"default", "none", "null", ""}


def parse_bool(value: str) -> bool | None:
    """``on``/``off``/``default`` (and their synonyms) as True/False/None."""
    low = value.strip().lower()
    if low in _ON:
        return True
    if low in _OFF:
        return False
    if low in _DEFAULT:
        return None
    raise ValueError("on, off or default")


def parse_threads(value: str) -> int | None:
    """A whole number >= 1, or ``default`` (None)."""
    low = value.strip().lower()
    if low in _DEFAULT:
        return None
    if low.isdigit() and int(low) >= 1:
        return int(low)
    raise ValueError("a whole number of threads >= 1, or default")


def parse_steps(value: str) -> int | None:
    """A whole number of steps >= 1, or ``default`` (None: Keras' 1)."""
    low = value.strip().lower()
    if low in _DEFAULT:
        return None
    if low.isdigit() and int(low) >= 1:
        return int(low)
    raise ValueError("a whole number of steps >= 1, or default")


def parse_xla(value: str) -> str | None:
    """``off``, ``jit``, ``auto`` or ``default`` (None: as the model or its runtime has it)."""
    low = value.strip().lower()
    if low in _DEFAULT:
        return None
    if low in XLA_MODES:
        return low
    raise ValueError(", ".join(XLA_MODES) + " or default")


def choice(*choices: str) -> Callable[[str], str]:
    """A parser accepting exactly ``choices`` (case-insensitive)."""

    def parse(value: str) -> str:
        low = value.strip().lower()
        if low in choices:
            return low
        raise ValueError(", ".join(choices))

    return parse


@dataclass(frozen=True)
class Knob:
    """One dimension of the configuration space."""

    name: str
    default: Any
    parse: Callable[[str], Any]
    """Turns ``--set`` text into the value; raises ``ValueError("the valid values")``."""
    runtimes: tuple[str, ...]
    """The runtimes it acts on."""
    applied: str
    """``"env"``, ``"call"``, ``"model"`` or ``"inputs"``."""
    adoption: str
    """``"env"``, ``"code"`` or ``"model"``."""
    help: str
    in_config: bool = True
    """Whether a worker's :class:`~tfperf.core.config.Config` carries it (``batch`` does not:
    a tune builds the workload at that batch)."""
    amortizes: bool = False
    """Whether what it gains is a fixed cost per call or per step hidden (the dispatch of one
    train function call, the wait for the next batch): its gain grows as the step gets
    shorter, so a comparison made before another knob shortened the step understates it."""


KNOBS: dict[str, Knob] = {
    k.name: k
    for k in (
        Knob(
            "batch", None, parse_threads, RUNTIMES, "inputs", "code",
            "samples per call (throughput tunes only; default: the workload's batch)",
            in_config=False,
        ),
        Knob(
            "steps_per_execution", None, parse_steps, TRAIN_RUNTIMES, "model", "code",
            "training steps per call of the train function (model.compile("
            "steps_per_execution=N)); training workloads only",
            amortizes=True,
        ),
        Knob(
            "precision", "fp32", choice(*PRECISIONS), TRAIN_RUNTIMES, "model", "code",
            "bf16 compute (Keras policy or oneDNN graph rewrite) where the CPU has it; "
            "float32: the float32 policy held over a training factory that sets a mixed one",
        ),
        Knob(
            "graph", None, parse_bool, TF_ONLY, "model", "code",
            "a training step as a graph (tf.function) or eagerly; default: as you wrote it "
            "(a custom loop's step, or compile(run_eagerly=...)); xla=jit and "
            "steps_per_execution > 1 run a graph; training workloads only",
        ),
        Knob(
            "xla", None, parse_xla, (*TF_ONLY, KERAS_JAX), "model", "code",
            "XLA: jit_compile on the serving function (code) or auto-clustering (env); "
            "default: as the model has it (off for inference, your compile for training; on "
            "Keras on JAX, jit_compile=False runs the train step eagerly)",
        ),
        Knob(
            "input_pipeline", None, choice("tuned"), TRAIN_RUNTIMES, "model", "code",
            "the training dataset as given, or tuned: its maps and interleaves made parallel "
            "(element order kept) and prefetch(AUTOTUNE) added; training workloads only",
            amortizes=True,
        ),
        Knob(
            "onednn", None, parse_bool, TF_ONLY, "env", "env",
            "oneDNN kernels (TF_ENABLE_ONEDNN_OPTS)",
        ),
        Knob(
            "intra_threads", None, parse_threads, TF_ONLY, "call", "env",
            "threads inside one op (TF_NUM_INTRAOP_THREADS)",
        ),
        Knob(
            "inter_threads", None, parse_threads, TF_ONLY, "call", "env",
            "ops run side by side (TF_NUM_INTEROP_THREADS)",
        ),
        Knob(
            "runtime", "tf", choice(*RUNTIMES), RUNTIMES, "model", "model",
            "TensorFlow, or the model converted to LiteRT (fp32, int8, fp16) or OpenVINO, or "
            "compiled ahead of time by XLA (xla-aot); a training step on Keras' JAX backend "
            "(keras-jax, KERAS_BACKEND=jax) or, for a user on JAX, on TensorFlow's (keras-tf)",
        ),
        Knob(
            "runtime_threads", None, parse_threads, (*INTERPRETERS, KERAS_JAX), "model", "model",
            "threads of the runtime other than TensorFlow (LiteRT's interpreter, OpenVINO's "
            "INFERENCE_NUM_THREADS, xla-aot's multithreaded Eigen pool when > 1; on keras-jax "
            "the CPUs the process runs on, whose count XLA's CPU pool follows)",
        ),
        Knob(
            "allocator", "system", choice(*ALLOCATORS), PRELOADABLE, "env", "env",
            "malloc implementation via LD_PRELOAD (not under OpenVINO, which aborts there)",
        ),
    )
}
"""Every knob, in label and search order (see the module docstring)."""

CONFIG_KNOBS = tuple(name for name, knob in KNOBS.items() if knob.in_config)
"""The knobs of a worker's config, in table order."""

RENAMED: dict[str, str] = {"litert_threads": "runtime_threads"}
"""Former knob names -> today's. Profiles, stored runs and scripts written with a former name
keep working: :func:`current_name` and :func:`current_names` read them, nothing writes them."""


def current_name(name: str) -> str:
    """Today's name of knob ``name`` (``litert_threads`` -> ``runtime_threads``)."""
    return RENAMED.get(name, name)


def current_names(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with every former knob name replaced by today's; where a config holds both,
    today's wins unless it is unset (``None``)."""
    out = dict(config)
    for old, new in RENAMED.items():
        if old in out:
            value = out.pop(old)
            if out.get(new) is None:
                out[new] = value
    return out


def show_value(value: Any) -> str:
    """A knob's value as written in ``--set`` and in labels (``True`` -> ``on``)."""
    if value is True:
        return "on"
    if value is False:
        return "off"
    return str(value)


def current_label(text: str) -> str:
    """A label written with former knob names, in today's
    (``runtime=litert,litert_threads=1`` -> ``runtime=litert,runtime_threads=1``)."""
    parts = (part.partition("=") for part in text.split(","))
    return ",".join(current_name(key) + sep + value for key, sep, value in parts)


def changed(config: Mapping[str, Any]) -> dict[str, Any]:
    """The table's knobs of ``config`` that differ from their default, in table order (a knob
    under a former name counts under today's)."""
    config = current_names(config)
    return {
        name: config[name]
        for name, knob in KNOBS.items()
        if name in config and config[name] != knob.default
    }


def normalize(config: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`changed`, without the knobs that do not act on the config's runtime, nor
    ``graph=on`` where another knob already runs a graph (:func:`runs_graph`)."""
    runtime = config.get("runtime", "tf")
    out = {k: v for k, v in changed(config).items() if runtime in KNOBS[k].runtimes}
    if out.get("graph") is True and runs_graph(out):
        del out["graph"]
    return out


def runs_graph(config: Mapping[str, Any]) -> bool:
    """Whether ``config`` runs a training step as a graph whatever ``graph`` says: XLA
    compiles a graph, and N steps a call are one ``tf.function``."""
    return config.get("xla") == "jit" or int(config.get("steps_per_execution") or 1) > 1


def label(config: Mapping[str, Any], env: Mapping[str, str] | None = None) -> str:
    """A short stable name: ``"default"``, or every changed knob in table order
    (``"xla=jit,onednn=off"``), then ``env:NAME=VALUE`` for each variable of ``env``."""
    parts = [f"{k}={show_value(v)}" for k, v in changed(config).items()]
    parts += [f"env:{k}={v}" for k, v in sorted((env or {}).items())]
    return ",".join(parts) if parts else "default"


def adoption(config: Mapping[str, Any]) -> str:
    """What adopting ``config`` takes: ``"env"``, ``"code"`` or ``"model"`` (the hardest part)."""
    return max(["env", *_knob_adoptions(config)], key=ADOPTION_ORDER.index)


def adoption_text(config: Mapping[str, Any]) -> str:
    """:func:`adoption` in words, and "and its environment" where some knob of ``config`` is
    set there beside a harder part (an allocator beside steps per call needs ``LD_PRELOAD``
    as well as the compile line, and the answer without it is slower)."""
    hardest = adoption(config)
    extra = hardest != "env" and "env" in _knob_adoptions(config)
    return ADOPTION_TEXT[hardest] + (" and its environment" if extra else "")


def _knob_adoptions(config: Mapping[str, Any]) -> list[str]:
    """What adopting each knob of ``config`` takes."""
    needs = []
    for name, value in normalize(config).items():
        by_env = (name, value) in (("xla", "auto"), ("runtime", KERAS_JAX), ("runtime", KERAS_TF))
        pinned = name == "runtime_threads" and config.get("runtime") == KERAS_JAX
        needs.append("env" if by_env else "code" if pinned else KNOBS[name].adoption)
    return needs


def jax_available() -> bool:
    """Whether the ``jax`` package can be imported here (checked without importing it)."""
    return importlib.util.find_spec("jax") is not None


def openvino_available() -> bool:
    """Whether the ``openvino`` package can be imported here (checked without importing it)."""
    return importlib.util.find_spec("openvino") is not None
