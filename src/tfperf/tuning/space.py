"""The pruned configuration space tune searches: which values of each knob are worth trying here.

Contract
--------

- The knobs themselves (values, defaults, the runtimes they act on, how they are applied and
  adopted) are the table of :mod:`tfperf.core.knobs`.
- :func:`build_space` ``(facts) -> Space`` picks the values worth trying on this machine for
  this workload from plain facts (:class:`SpaceFacts`): cores, bf16 support, the allocators
  found, whether OpenVINO is importable, whether this install can compile ahead of time with
  XLA (``xla-aot``), the model's format, training or inference (a training step, the user's
  own or a training built-in, gets TensorFlow or ``keras-jax`` as its runtime, the latter where
  jax is installed and the Keras backend is TensorFlow; XLA ``jit`` or ``off``, never
  ``auto``; ``steps_per_execution``; bf16 unless a ``.keras`` file fixes its policy), and the
  batch sizes of a throughput tune. What cannot be tried is listed in ``Space.unavailable`` with the
  reason (e.g. jemalloc missing and the package that installs it, OpenVINO not installed).
- The ``batch`` knob (samples per call) exists only in a throughput tune
  (``SpaceFacts.batches`` not empty): its default ``None`` is the workload's own batch, its
  other values the batch sizes to try. It is not a worker config knob: the tune builds the
  workload at that batch (:func:`split_batch`), and a config that leaves it out runs at the
  workload's batch, so a latency tune's configs never name it. A training step tries
  :func:`train_batches` (2x and 4x its batch) unless told others.
- Knobs that cannot act on a runtime are not crossed with it (:meth:`Space.applicable`): the
  TensorFlow knobs (threads, oneDNN, XLA, precision) only for ``runtime="tf"``; the runtime's
  own thread count (``runtime_threads``) only for LiteRT, OpenVINO, xla-aot and Keras on JAX
  (there the CPUs the process runs on); the allocator for TensorFlow and LiteRT
  (OpenVINO's CPU plugin aborts under a preloaded tcmalloc or jemalloc, so it keeps the system
  allocator).
- A config here is a plain dict holding only the knobs that differ from the default
  (``{}`` is the default); :func:`tfperf.core.knobs.label` names it.
- :meth:`Space.points` enumerates every config of the pruned space (for an exhaustive
  comparison); :meth:`Space.neighbours` gives the one-knob changes of a config (for the
  coordinate search).

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from tfperf.core.allocators import ALLOCATOR_PACKAGES
from tfperf.core.aot import xla_aot_facts
from tfperf.core.errors import UserError
from tfperf.core.isa import NEURAL_FEATURES, onednn_default_for
from tfperf.core.kerasbackend import configured_backend
from tfperf.core.knobs import (
    INTERPRETERS,
    KERAS_JAX,
    KERAS_TF,
    KNOBS,
    LITERT_RUNTIMES,
    OPENVINO_RUNTIMES,
    XLA_AOT,
    current_name,
    jax_available,
    label,
    normalize,
    openvino_available,
    show_value,
)
from tfperf.core.loopcode import describe_baseline

NO_BF16 = "the CPU has neither AVX512_BF16 nor AMX"
DEFAULT_BATCHES = (1, 4, 16, 64)
"""The batch sizes a throughput tune tries unless told others (``--batch-sizes``)."""


@dataclass(frozen=True)
class SpaceFacts:
    """Plain facts that decide which values are worth trying."""

    cores: int = 1
    """CPUs this process can use: its affinity, shrunk by a cgroup quota."""
    schedulable: int | None = None
    """CPUs in its affinity mask (what TensorFlow sizes its pools by); ``None``: ``cores``."""
    bf16: bool = False
    onednn_default: bool = True
    """Whether TensorFlow turns oneDNN on by itself here (x86 Linux builds: only on CPUs with
    AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX); the knob tries the other setting."""
    allocators: Mapping[str, str | None] = field(default_factory=dict)
    """Allocator name -> library path, or ``None`` when not installed."""
    allocator_packages: Mapping[str, str] = field(default_factory=dict)
    openvino: bool = False
    jax: bool = False
    """Whether ``jax`` is importable (the ``keras-jax`` runtime of a training step)."""
    keras_backend: str = "tensorflow"
    """The Keras backend the user runs (``KERAS_BACKEND``, else ``keras.json``), which the
    default worker inherits."""
    xla_aot_missing: tuple[str, ...] | None = None
    """What this install lacks to compile ahead of time (:func:`tfperf.core.aot.xla_aot_facts`):
    empty when ``xla-aot`` can be tried, ``None`` when not checked (not tried)."""
    model_format: str = "builtin"
    train: bool = False
    gpu: bool = False
    runtimes: tuple[str, ...] | None = None
    """Restrict the runtimes tried (``None`` = every runtime that applies)."""
    batch: int = 1
    """The workload's own batch (what a config without the ``batch`` knob runs at)."""
    batches: tuple[int, ...] = ()
    """The batch sizes a throughput tune tries; empty for a latency tune (no ``batch`` knob)."""


@dataclass(frozen=True)
class Conflict:
    """Two knob values a search never tries together, and why (listed as unavailable)."""

    first: tuple[str, Any]
    second: tuple[str, Any]
    reason: str

    def hits(self, config: Mapping[str, Any]) -> bool:
        """Whether ``config`` holds both values."""
        return all(config.get(knob) == value for knob, value in (self.first, self.second))


BF16_NEEDS_ONEDNN = Conflict(
    ("precision", "bf16"), ("onednn", False),
    "TensorFlow runs bf16 matmuls and convolutions fast through oneDNN only: without it they "
    "take Eigen's emulated path (a CNN's training step ran 8x slower than in fp32 here)",
)


@dataclass
class Space:
    """The values to try for each knob (the first value is the default)."""

    values: dict[str, tuple[Any, ...]]
    unavailable: list[dict] = field(default_factory=list)
    bare_runtime: str = "tf"
    """What a config that names no runtime runs on: ``"litert"`` for a ``.tflite`` model."""
    implied: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per runtime, knob values that runtime takes when the knob is left at its default
    (LiteRT's interpreter runs on 1 thread; TensorFlow's pools have one thread per CPU this
    process may run on): a config naming one of them is the default config."""
    conflicts: tuple[Conflict, ...] = ()
    """Pairs of values no config holds together (:meth:`allowed`)."""
    fixed: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per runtime, knobs that runtime always runs at one value, whatever a config says (a
    TensorFlow user's ``keras-jax`` candidate always compiles its step with XLA): a config
    never names them there, and they are not searched there."""

    def allowed(self, config: Mapping[str, Any]) -> bool:
        """Whether ``config`` holds no pair of :attr:`conflicts`."""
        return not any(c.hits(config) for c in self.conflicts)

    def default_runtime(self) -> str:
        """The runtime whose knobs a config that names none is crossed with: the space's first
        runtime (``"tf"``, or LiteRT for a ``.tflite`` model, which always runs there)."""
        return self.values.get("runtime", ("tf",))[0]

    def _with_runtime(self, config: Mapping[str, Any]) -> dict:
        """``config`` with its runtime spelled out (the space's default when it names none)."""
        return {"runtime": self.default_runtime(), **config}

    def canonical(self, config: Mapping[str, Any]) -> dict:
        """:func:`normalize`, leaving out :attr:`bare_runtime` where no knob needs it named:
        for a ``.tflite`` model ``{"runtime": "litert", "allocator": "tcmalloc"}`` is
        ``{"allocator": "tcmalloc"}`` (env only), and ``{"runtime": "litert"}`` is ``{}``."""
        full = normalize(self._without_implied(self._with_runtime(config)))
        if full.get("runtime") != self.bare_runtime:
            return full
        bare = normalize({k: v for k, v in full.items() if k != "runtime"})
        return bare if len(bare) == len(full) - 1 else full

    def _without_implied(self, config: Mapping[str, Any]) -> dict:
        """``config`` with each knob whose value its runtime takes anyway, or holds whatever
        it is told (:attr:`fixed`), set to the default."""
        runtime = config.get("runtime", "tf")
        implied, fixed = self.implied.get(runtime, {}), self.fixed.get(runtime, {})
        return {
            k: KNOBS[k].default if k in fixed or (k in implied and implied[k] == v) else v
            for k, v in config.items()
        }

    def applicable(self, knob: str, config: Mapping[str, Any]) -> bool:
        """Whether ``knob`` can act on ``config``'s runtime (and has values to try)."""
        runtime = self._with_runtime(config)["runtime"]
        return (runtime in KNOBS[knob].runtimes and knob not in self.fixed.get(runtime, {})
                and len(self.values.get(knob, ())) > 1)

    def knobs(self) -> list[str]:
        """The knobs with something to try, in search order."""
        return [k for k in KNOBS if len(self.values.get(k, ())) > 1]

    def most_knobs(self) -> int:
        """How many knobs one search can visit: those acting on one runtime, for the runtime
        with the most (TensorFlow's pools and JAX's CPU set are never both searched)."""
        runtimes = self.values.get("runtime") or (self.bare_runtime,)
        return max(
            sum(self.applicable(k, {"runtime": r}) for k in self.knobs()) for r in runtimes
        )

    def neighbours(self, config: Mapping[str, Any], knob: str) -> list[dict]:
        """Configs that differ from ``config`` in ``knob`` only (applicable values)."""
        if not self.applicable(knob, config):
            return []
        here = self.canonical(config)
        found = [self.canonical({**config, knob: v}) for v in self.values[knob]]
        unique = {label(c): c for c in found if c != here and self.allowed(c)}
        return list(unique.values())

    def runtime_step(self, config: Mapping[str, Any]) -> list[dict]:
        """The runtimes to try from ``config``, each at this machine's full parallelism:
        TensorFlow and OpenVINO take every usable core by themselves, LiteRT's interpreter
        one thread, so a LiteRT runtime left at its default would race the others with one
        core tied behind its back. Unless ``config`` names a thread count (then every runtime is
        tried with it), a LiteRT runtime is tried at the widest ``runtime_threads`` (the thread
        step that follows tries fewer). A 1-D conv
        model ran LiteRT at 6.4x the default on one thread and 8.4x on two, and DenseNet121
        lost to OpenVINO at one thread and beat it at two."""
        widest = max((v for v in self.values.get("runtime_threads", ()) if v), default=None)
        out = []
        for candidate in self.neighbours(config, "runtime"):
            implied = self.implied.get(candidate.get("runtime", self.bare_runtime), {})
            fewer = implied.get("runtime_threads")
            if widest and fewer and fewer < widest and "runtime_threads" not in config:
                candidate = self.canonical({**candidate, "runtime_threads": widest})
            out.append(candidate)
        return out

    def points(self) -> list[dict]:
        """Every config of the pruned space, the default first."""
        seen: dict[str, dict] = {}
        for runtime in self.values.get("runtime", ("tf",)):
            names = [
                k
                for k in self.knobs()
                if k != "runtime" and self.applicable(k, {"runtime": runtime})
            ]
            for combo in itertools.product(*(self.values[k] for k in names)):
                config = self.canonical(
                    {"runtime": runtime, **dict(zip(names, combo, strict=True))}
                )
                if self.allowed(config):
                    seen.setdefault(label(config), config)
        return list(seen.values())

    def restrict(self, knobs: tuple[str, ...]) -> Space:
        """This space with only ``knobs`` tuned (the others kept at their default)."""
        knobs = tuple(current_name(k) for k in knobs)
        unknown = [k for k in knobs if k not in KNOBS]
        if unknown:

            raise UserError(f"unknown knob {unknown[0]!r}: use some of {', '.join(KNOBS)}.")
        values = {k: (v if k in knobs else v[:1]) for k, v in self.values.items()}
        return replace(self, values=values, unavailable=list(self.unavailable))

    def size(self) -> int:
        """How many configs :meth:`points` holds."""
        return len(self.points())

    def drop(self, knob: str, values: tuple[Any, ...], reason: str) -> Space:
        """This space without ``values`` of ``knob`` (never its default), each listed as
        unavailable with ``reason``."""
        current = self.values.get(knob, ())
        gone = [v for v in current[1:] if v in values]
        kept = tuple(v for v in current if v not in gone)
        unavailable = [
            *self.unavailable,
            *({"knob": knob, "value": show_value(v), "reason": reason} for v in gone),
        ]
        return replace(self, values={**self.values, knob: kept}, unavailable=unavailable)


def to_config_dict(config: Mapping[str, Any]) -> dict:
    """The full config dict of ``docs/ARCHITECTURE.md`` (every knob, ``env`` empty); ``batch``
    only where the config sets it (left out, a config runs at the workload's batch)."""
    out = {name: knob.default for name, knob in KNOBS.items() if name != "batch"}
    out.update(normalize(config))
    out["env"] = {}
    return out


def split_batch(config: Mapping[str, Any]) -> tuple[int | None, dict]:
    """``(batch, the rest)``: the samples per call a config asks for (``None``: the workload's)
    and the config a worker applies (:func:`to_config_dict` without ``batch``)."""
    full = to_config_dict(config)
    return full.pop("batch", None), full


def thread_values(cores: int) -> tuple[int | None, ...]:
    """``None`` (the runtime's own choice), 1, every usable core, and on larger machines the
    quarter and the half between: the counts that can win. What ``None`` means differs by
    runtime (:attr:`Space.implied`), so a count may repeat a runtime's default; the space
    then keeps one of the two."""
    if cores <= 1:
        return (None,)  # one core: nothing to choose
    steps = {1, cores}
    if cores >= 4:
        steps.add(cores // 2)
    if cores >= 16:
        steps.add(cores // 4)
    return (None, *sorted(steps))


def implied_values(facts: SpaceFacts) -> dict[str, dict[str, Any]]:
    """:attr:`Space.implied` for this machine: LiteRT's interpreter defaults to one thread;
    TensorFlow's pools, and Keras on JAX's CPU set, to every CPU the process may run on (its
    affinity, which a cgroup quota does not shrink). OpenVINO picks its own count per model
    and hint, so none of its values is implied."""
    implied: dict[str, dict[str, Any]] = {r: {"runtime_threads": 1} for r in LITERT_RUNTIMES}
    implied[XLA_AOT] = {"runtime_threads": 1}
    implied["tf"] = {"intra_threads": facts.schedulable or facts.cores}
    implied[KERAS_TF] = dict(implied["tf"])
    implied[KERAS_JAX] = {"runtime_threads": facts.schedulable or facts.cores}
    return implied


def _missing(knob: str, value: str, reason: str) -> dict[str, str]:
    """One entry of :attr:`Space.unavailable`."""
    return {"knob": knob, "value": value, "reason": reason}


def _allocator_values(facts: SpaceFacts, unavailable: list[dict]) -> list[str]:
    allocators = ["system"]
    for name in ("tcmalloc", "jemalloc"):
        if facts.allocators.get(name):
            allocators.append(name)
        else:
            package = facts.allocator_packages.get(name, name)
            why = f"not installed (apt-get install {package})"
            unavailable.append(_missing("allocator", name, why))
    return allocators


def _runtime_values(facts: SpaceFacts, unavailable: list[dict]) -> list[str]:
    if facts.model_format == "tflite":
        return ["litert"]
    if facts.train:
        return _train_runtimes(facts, unavailable)
    runtimes = ["tf", *LITERT_RUNTIMES]
    if not facts.openvino:
        why = "not installed (pip install 'tfperf[openvino]')"
        unavailable.extend(_missing("runtime", r, why) for r in OPENVINO_RUNTIMES)
    else:
        runtimes += [r for r in OPENVINO_RUNTIMES if facts.bf16 or not r.endswith("bf16")]
    if facts.openvino and not facts.bf16:
        why = (f"{NO_BF16}: OpenVINO runs f32 under the bf16 hint there (the same as "
               "openvino-f32) or bf16 in software, far slower than f32")
        unavailable.append(_missing("runtime", "openvino-bf16", why))
    if facts.xla_aot_missing == ():
        runtimes.append(XLA_AOT)
    elif facts.xla_aot_missing:
        why = "this install cannot compile ahead of time: it needs " + "; ".join(
            facts.xla_aot_missing
        )
        unavailable.append(_missing("runtime", XLA_AOT, why))
    return runtimes


def _keras_jax(facts: SpaceFacts, unavailable: list[dict]) -> list[str]:
    """``keras-jax`` for the user's own Keras training step where jax is installed. On JAX the
    train step is always compiled by XLA and JAX has no thread pools of its own to set, so the
    ``xla`` knob and TensorFlow's thread knobs are not crossed with it (listed here); its
    threads are ``runtime_threads``, the CPUs the process runs on."""
    if not facts.jax:
        why = "jax is not installed (pip install 'tfperf[jax]')"
        unavailable.append(_missing("runtime", KERAS_JAX, why))
        return []
    _not_on_jax(KERAS_JAX, unavailable)
    return [KERAS_JAX]


def _not_on_jax(runtime: str, unavailable: list[dict], xla: bool = True) -> None:
    """The knobs not crossed with ``runtime``, which runs on JAX, each with why (``xla``:
    the XLA knob among them, where tfperf compiles that runtime's step itself)."""
    if xla:
        unavailable.append(_missing(
            "xla", f"jit/off with {runtime}",
            "tfperf runs Keras on JAX with its train step compiled by XLA (jit_compile=False "
            "there runs it eagerly): nothing to choose"))
    unavailable.append(_missing(
        "intra_threads/inter_threads/onednn", f"with {runtime}",
        "JAX has no thread pools of its own to size and no oneDNN switch: TensorFlow's "
        "settings do not act there; its threads are runtime_threads, the CPUs the process "
        "runs on (XLA's CPU pool follows them)"))


def _train_runtimes(facts: SpaceFacts, unavailable: list[dict]) -> list[str]:
    """A training step's runtimes, the user's own backend first: TensorFlow and Keras on JAX
    (:func:`_keras_jax`), or, where ``KERAS_BACKEND=jax`` is the user's, JAX (the default,
    :func:`build_space`'s bare runtime) and Keras on TensorFlow (``keras-tf``)."""
    why = "training steps run in TensorFlow or Keras on JAX only"
    unavailable.append(_missing("runtime", "litert/openvino", why))
    if facts.keras_backend == "jax":
        # the user's own JAX step runs as compiled: jit_compile=False there is eager, and
        # XLA is its knob
        _not_on_jax("the default (KERAS_BACKEND=jax is your backend)", unavailable, xla=False)
        return [KERAS_JAX, KERAS_TF]
    return ["tf", *_keras_jax(facts, unavailable)]


def _precision_values(facts: SpaceFacts, unavailable: list[dict]) -> list[str]:
    precisions = ["fp32"]
    if facts.model_format == "tflite":
        no_bf16 = "a .tflite model is already converted: its precision is fixed by the file"
    elif facts.train and facts.model_format == "keras":
        no_bf16 = (
            "not tried: a .keras file's layers keep the float32 policy they were saved with, "
            "which set_global_policy cannot reach; build the model in a factory to try it"
        )
    elif not facts.bf16:
        no_bf16 = NO_BF16
    else:
        no_bf16 = ""
        precisions.append("bf16")
    if no_bf16:
        unavailable.append(_missing("precision", "bf16", no_bf16))
    if facts.gpu and (not facts.train or facts.model_format == "factory"):
        precisions.append("mixed_float16")
    if facts.train and facts.model_format == "factory":
        precisions.append("float32")  # kept only where the factory sets a mixed policy
    return precisions


def _xla_values(facts: SpaceFacts, unavailable: list[dict]) -> tuple[str, ...]:
    if facts.model_format == "tflite":
        return (None,)
    if not facts.train:
        return (None, "jit", "auto")
    why = (
        "a training step takes XLA through jit_compile (model.compile(jit_compile=True)); "
        "auto-clustering is tuned for inference only"
    )
    unavailable.append(_missing("xla", "auto", why))
    # a training step (a training built-in is a factory too): the default is what it compiled;
    # "off" and "jit" are each a candidate where it differs (Space.implied names the compiled
    # value once it is known)
    return (None, "off", "jit")


def build_space(facts: SpaceFacts) -> Space:
    """The pruned space for one workload on one machine (see the module docstring)."""
    unavailable: list[dict] = []
    threads = thread_values(max(1, facts.cores))
    allocators = _allocator_values(facts, unavailable)
    runtimes = _runtime_values(facts, unavailable)
    bare = runtimes[0]  # what the default runs: the user's own runtime, before --runtimes
    if facts.runtimes is not None:
        runtimes = [r for r in runtimes if r in facts.runtimes] or runtimes[:1]
    if len(allocators) > 1 and set(runtimes) & set(OPENVINO_RUNTIMES):
        why = (
            "OpenVINO's CPU plugin aborts (free(): invalid pointer) under a preloaded "
            "allocator, so OpenVINO runs with the system allocator"
        )
        unavailable.append(_missing("allocator", "/".join(allocators[1:]) + " with OpenVINO", why))
    precisions = _precision_values(facts, unavailable)
    xla = _xla_values(facts, unavailable)
    if not facts.onednn_default:
        why = (
            "already TensorFlow's default on this CPU (x86 builds turn oneDNN on only with "
            f"{'/'.join(NEURAL_FEATURES)}): onednn=on is tried instead"
        )
        unavailable.append(_missing("onednn", "off", why))
    values: dict[str, tuple[Any, ...]] = {
        "runtime": tuple(runtimes),
        "precision": tuple(precisions),
        "xla": xla,
        "onednn": (None, False) if facts.onednn_default else (None, True),
        "intra_threads": threads,
        "inter_threads": (None, 1) if facts.cores > 1 else (None,),
        "runtime_threads": threads if set(runtimes) & {*INTERPRETERS, KERAS_JAX} else (None,),
        "allocator": tuple(allocators),
    }
    values["batch"] = _batch_values(facts, unavailable)
    values["steps_per_execution"] = TRAIN_STEPS_PER_EXECUTION if facts.train else (None,)
    values["graph"] = (None, True) if facts.train else (None,)
    factory = facts.train and facts.model_format == "factory"
    values["input_pipeline"] = (None, "tuned") if factory else (None,)
    conflicts = _conflicts(values, unavailable)
    # a TensorFlow user's JAX candidate is compiled by tfperf (tfperf.worker.jaxstep)
    fixed = {KERAS_JAX: {"xla": "jit"}} if bare != KERAS_JAX else {}
    return Space(values, unavailable, bare, implied_values(facts), conflicts, fixed)


def _conflicts(values: Mapping[str, tuple[Any, ...]], unavailable: list[dict]) -> tuple:
    """The pairs of ``values`` never tried together, each listed as unavailable."""
    found = tuple(
        c for c in (BF16_NEEDS_ONEDNN,)
        if all(v in values.get(k, ()) for k, v in (c.first, c.second))
    )
    for c in found:
        (knob, value), (other, other_value) = c.second, c.first
        unavailable.append(_missing(
            knob, f"{show_value(value)} with {other}={show_value(other_value)}", c.reason))
    return found


TRAIN_STEPS_PER_EXECUTION = (None, 4, 32)
"""Before the default has run (its step time unknown): the user's own setting, and several
steps in one call of the train function. :func:`fit_training_space` replaces them with
:func:`steps_ladder` once the step time is known."""
MAX_TRAIN_CALL_S = 0.5
"""``steps_per_execution`` candidates stop where one call would take longer than this: a
candidate after the step to more steps per call times whole calls in each of its rounds (a
transformer's 32-step calls of 0.64 s made each round 1.6 s, and its tune 5.5 minutes), while
the gain, Python's overhead per call spread over the steps, is mostly had at a few (8 steps
a call of 20 ms steps leave it under 1% of a step)..."""
QUICK_MAX_CALL_S = 0.3
"""...and under ``--quick`` this: every candidate after the step to more steps per call runs
whole calls, so its rounds cost at least two calls each (a CNN's 32-step calls of 0.9 s made
a quick tune's rounds take 1.5-2 s each), while the gain of more steps per call, Python's
overhead per call spread over them, is mostly had at a few steps."""
MAX_STEPS_PER_EXECUTION = 128
TRAIN_SEARCH_ORDER = (
    "graph", "steps_per_execution", "xla", "runtime", "intra_threads", "runtime_threads",
    "precision", "allocator", "onednn", "inter_threads", "input_pipeline", "batch",
)
"""The order a training tune visits its knobs (labels keep the table's order): what each
costs to try is the same (a worker, its guard), so the knobs that gave most on the models
measured come first: a graph where the step runs eagerly (a custom loop's plain Python step
ran 16x slower than under ``tf.function``; the knob has a candidate only there), steps per
call (1.3-2.3x) and XLA (up to 1.6x), then the runtime, so
that Keras on JAX (0.36-1.9x by hand) is measured against TensorFlow with its two largest
levers, not against plain TensorFlow. Tried first, JAX won on a transformer at 1.46x the
default, and XLA, which acts on TensorFlow only, was never tried: it gave 1.53x alone, and the
answer ended at 0.79 of it. Where JAX wins, the knobs of TensorFlow alone after it are not
tried (one intra-op thread, 1.15-1.5x; the allocator; oneDNN; the inter-op pool): a model JAX
runs faster than TensorFlow with its largest levers is not won back by them on the models
measured. Then JAX's CPU set, bf16 and the input pipeline, which act on both."""


@dataclass(frozen=True)
class TrainBaseline:
    """The user's own training setup as the default worker read it back
    (``ready["train"]["baseline"]``)."""

    jit_compile: bool = False
    steps_per_execution: int = 1
    policy: str = "float32"
    policy_source: str = "tfperf"
    data: str = "dataset"
    """``"arrays"`` where Keras' ``fit`` builds the pipeline from the user's arrays,
    ``"pydataset"`` where the user gave a ``keras.utils.PyDataset``."""
    notes: tuple[str, ...] = ()
    step: str = "fit"
    """``"loop"`` for a custom training loop's step (:mod:`tfperf.tuning.loopspace`)."""
    graph: bool = True
    strategy: str | None = None
    unpacks: bool = True

    @classmethod
    def from_ready(cls, ready: Mapping[str, Any]) -> TrainBaseline:
        found = dict((ready.get("train") or {}).get("baseline") or {})
        found["notes"] = tuple(found.get("notes") or ())
        return cls(**{k: v for k, v in found.items() if k in cls.__dataclass_fields__})

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "notes": list(self.notes)}

    def describe(self) -> str:
        """``jit_compile=True, steps_per_execution=8, float32`` (:func:`describe_baseline`)."""
        return describe_baseline(self.to_dict())


def steps_ladder(
    step_s: float, own: int = 1, max_call_s: float = MAX_TRAIN_CALL_S
) -> tuple[int, ...]:
    """The ``steps_per_execution`` values worth trying at ``step_s`` seconds a step: the
    largest power of two whose call stays under ``max_call_s`` (at most
    :data:`MAX_STEPS_PER_EXECUTION`), 4 and 32 below it, and Keras' 1 where the user runs
    more; never the user's own value (that is the default)."""
    cap = min(MAX_STEPS_PER_EXECUTION, int(max_call_s / max(step_s, 1e-6)))
    top = 1 << (max(cap, 1).bit_length() - 1)
    values = {v for v in (4, 32) if v < top} | ({top} if top > 1 else set())
    if own != 1:
        values.add(1)
    return tuple(sorted(values - {own}))


def fit_training_space(
    space: Space, baseline: TrainBaseline, step_s: float | None,
    max_call_s: float = MAX_TRAIN_CALL_S,
) -> Space:
    """A training space once the default ran: the user's jit_compile and steps per call are
    what a config that leaves them out runs (:attr:`Space.implied`, so a candidate is only
    ever the other value), the steps-per-call ladder follows the step time, precision is
    not tried where the factory sets its own policy, nor the input pipeline where the factory
    gives arrays (Keras' ``fit`` builds that pipeline, prefetch included)."""
    own = space.bare_runtime  # the user's backend: TensorFlow, or JAX where it is theirs
    implied = {
        **space.implied,
        own: {
            **space.implied.get(own, {}),
            "xla": "jit" if baseline.jit_compile else "off",
            "steps_per_execution": baseline.steps_per_execution,
            "graph": baseline.graph,
        },
    }
    values = dict(space.values)
    if baseline.graph and "graph" in values:  # a graph already: graph=on is a candidate only
        values["graph"] = (None,)  # where the step runs eagerly (tuning.loopspace says why)
    if len(values.get("steps_per_execution", ())) > 1 and step_s:
        ladder = steps_ladder(step_s, baseline.steps_per_execution, max_call_s)
        values["steps_per_execution"] = (None, *ladder)
    fitted = _own_policy(replace(space, values=values, implied=implied), baseline)
    if own == KERAS_JAX and baseline.jit_compile and "off" in values.get("xla", ()):
        fitted = fitted.drop("xla", ("off",), (
            "not tried: your step is compiled by XLA, and on JAX jit_compile=False runs it "
            "eagerly, op by op"))
    not_yours = NOT_YOUR_PIPELINE.get(baseline.data)
    if not_yours and len(values.get("input_pipeline", ())) > 1:
        fitted = fitted.drop("input_pipeline", values["input_pipeline"][1:], not_yours)
    return fitted


MIXED_POLICIES = ("mixed_bfloat16", "mixed_float16")


def _own_policy(space: Space, baseline: TrainBaseline) -> Space:
    """The precision knob once the default's policy is known. Where the factory sets a mixed
    policy itself, ``float32`` held over it is the candidate (on the suite's MLP bf16 ran 0.62x
    the default's speed: a user who set it may lose by it) and the other mixed values are the
    factory's own; any other policy of the factory's is its to choose, and nothing is tried.
    Where tfperf set the policy, ``float32`` is the default itself and goes."""
    values = space.values.get("precision", ())
    mixed = baseline.policy in MIXED_POLICIES
    if baseline.policy_source != "factory":
        return replace(space, values={**space.values, "precision": tuple(
            v for v in values if v != "float32")})
    if mixed and "float32" in values:
        others = tuple(v for v in values[1:] if v != "float32")
        return space.drop("precision", others, f"not tried: your factory sets the policy "
                          f"({baseline.policy}); float32 is tried in its place")
    return space.drop("precision", values[1:],
                      f"not tried: your factory sets the policy ({baseline.policy})")


NOT_YOUR_PIPELINE = {
    "arrays": "not tried: your factory gives arrays, and Keras' fit builds their pipeline "
              "(prefetch included)",
    "pydataset": "not tried: your factory gives a keras.utils.PyDataset, whose own settings "
                 "are its workers, use_multiprocessing and max_queue_size",
}
"""Why ``input_pipeline`` is not tried, by the kind of data the user gave."""


TRAIN_BATCH_FACTORS = (2, 4)
"""A throughput tune of the user's training step tries these multiples of its batch (unless
``--batch-sizes`` names others): a larger batch is what raises samples per second on a CPU."""


def train_batches(batch: int) -> tuple[int, ...]:
    """The batch sizes a throughput tune of a training step of ``batch`` rows tries."""
    return tuple(factor * batch for factor in TRAIN_BATCH_FACTORS)


def _batch_values(facts: SpaceFacts, unavailable: list[dict]) -> tuple[int | None, ...]:
    """``None`` (the workload's batch) and, in a throughput tune, the other batch sizes."""
    others = tuple(sorted({int(b) for b in facts.batches} - {facts.batch}))
    return (None, *others)


def machine_facts(
    machine: Mapping[str, Any],
    model_format: str = "builtin",
    train: bool = False,
    runtimes: tuple[str, ...] | None = None,
    batch: int = 1,
    batches: tuple[int, ...] = (),
) -> SpaceFacts:
    """:class:`SpaceFacts` from :func:`tfperf.machine.facts.collect_machine`'s dict."""

    isa = {name.upper() for name in machine.get("isa", [])}
    x86 = (machine.get("cpu") or {}).get("machine") in ("x86_64", "AMD64")
    return SpaceFacts(
        cores=int((machine.get("cores") or {}).get("usable") or 1),
        schedulable=(machine.get("cores") or {}).get("affinity"),
        bf16=bool(isa & {"AVX512_BF16", "AMX_BF16"}),
        onednn_default=onednn_default_for(isa) if x86 else True,
        allocators=dict(machine.get("allocators_available") or {}),
        allocator_packages=ALLOCATOR_PACKAGES,
        openvino=openvino_available(),
        jax=jax_available(),
        keras_backend=configured_backend()[0],
        xla_aot_missing=tuple(xla_aot_facts()["missing"]),
        model_format=model_format,
        train=train,
        gpu=bool(machine.get("gpus")),
        runtimes=runtimes,
        batch=batch,
        batches=tuple(batches),
    )
