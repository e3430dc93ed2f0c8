"""Profiles: a tuned configuration saved so that it can be applied, and the ways to apply it.

Contract
--------

A profile is one JSON file::

    {"format": "tfperf-profile", "version": 1, "created_at": ISO time,
     "workload": {...}, "label": str, "config": {...config dict...},
     "objective": "latency" | "throughput" | "server",
     "batch": int,                # samples per call it was tuned at
     "serving": {...ServingLayout dict..., "max_qps_at_slo", "slo_ms"} | None,
     "speedup": {"median", "ci95"} | None, "max_abs_error", "adoption",
     "env": {NAME: VALUE},        # the env-level knobs (LD_PRELOAD, TF_*, thread counts,
                                  # KERAS_BACKEND=jax for runtime keras-jax)
     "code": [str, ...],          # lines of code the config needs beyond the environment
     "artifact": path | None,     # a converted model file, with run_model.py beside it
     "machine": {"fingerprint", "cpu", "cores"}, "install": {"tf_version", ...}}

- :func:`save_profile` writes it atomically to ``path`` or, by default, to
  ``<user data dir>/profiles/<workload>-<fingerprint>.json``; :func:`load_profile` reads one
  (a path, or a name under that folder) and raises :class:`~tfperf.core.errors.UserError` for a
  missing, unreadable or foreign file. A profile written before a knob was renamed reads back
  with today's names in its ``config`` and ``label`` (``litert_threads`` -> ``runtime_threads``).
- :func:`profile_env` is the environment a profile implies on *this* machine: the config's
  env knobs through :meth:`tfperf.core.config.Config.worker_env` (so ``LD_PRELOAD`` points at this
  machine's allocator; a missing allocator raises UserError naming the package), falling back
  to the stored ``env``.
- :func:`render` formats a profile as ``env`` (``KEY=VALUE`` lines, for ``--env-file``), ``sh``
  (``export`` lines), ``python`` (a snippet to put before TensorFlow is imported) or
  ``tf-serving`` (TensorFlow Serving's batching parameters file, with the flags that start each
  instance of the profile's serving layout in its comments).
- :func:`serving_layout` is the profile's :class:`~tfperf.core.serving.ServingLayout` (a tune
  for ``--objective server`` saves one), ``None`` when it has none.
- :func:`mismatch_warnings` compares the profile's machine and install with this one's.
- :func:`run_with_profile` runs a command with the profile's environment and returns its exit
  code, pinned to the CPUs of Keras on JAX's ``runtime_threads`` where the config has them.
  With a serving layout it runs one copy per instance (:func:`instance_copies`), each
  pinned to its core set, with its thread counts and ``TFPERF_INSTANCE`` (0..K-1),
  ``TFPERF_INSTANCES`` (K), ``TFPERF_THREADS`` and ``TFPERF_CORES`` in its environment, so that
  a server can pick its port; it returns when all have ended (see
  :mod:`tfperf.runner.copies`).

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tfperf.benchmark import machine_summary
from tfperf.core.config import Config
from tfperf.core.errors import UserError
from tfperf.core.knobs import (
    KERAS_JAX,
    KERAS_TF,
    XLA_AOT,
    current_label,
    current_names,
    runs_graph,
)
from tfperf.core.loopcode import is_diff, loop_code_lines
from tfperf.core.protocol import JIT_ON_JAX_NOTE
from tfperf.core.serving import ServingLayout
from tfperf.machine.facts import collect_machine
from tfperf.runner.copies import Copy, run_copies
from tfperf.runner.launcher import Child, LaunchError

FORMAT = "tfperf-profile"
VERSION = 1
FORMATS = ("env", "sh", "python", "tf-serving")


def profiles_dir() -> Path:
    """Where profiles go by default (``<user data dir>/profiles``)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("tfperf", appauthor=False)) / "profiles"


def tf_distribution_version() -> str | None:
    """The installed TensorFlow's version, read from package metadata (no import)."""
    from importlib import metadata

    for dist in ("tensorflow", "tensorflow-cpu", "tf-nightly", "tensorflow-intel"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def code_lines(
    config: Mapping[str, Any], model_format: str = "keras", artifact: str | None = None
) -> list[str]:
    """The lines of code a config needs beyond the environment."""
    lines: list[str] = []
    runtime = config.get("runtime") or "tf"
    batch = config.get("batch")
    if batch:
        made_for = (
            f"; the converted model was made for {batch} rows"
            if runtime != "tf" and artifact
            else ""
        )
        lines.append(
            f"BATCH_SIZE = {batch}  # call the model on {batch} samples at a time: batch "
            f"requests into arrays of {batch} rows (tuned for throughput{made_for})"
        )
    if config.get("xla") == "jit":
        lines.append("serve = tf.function(model, jit_compile=True)  # XLA on the serving call")
    if config.get("precision") == "bf16":
        if model_format == "savedmodel":
            lines.append(
                "tf.config.optimizer.set_experimental_options("
                '{"auto_mixed_precision_onednn_bfloat16": True})  # before the first call'
            )
        else:
            lines.append(
                'keras.config.set_dtype_policy("mixed_bfloat16")  # before building the model'
            )
    if config.get("precision") == "mixed_float16":
        lines.append('keras.config.set_dtype_policy("mixed_float16")  # before building the model')
    threads = config.get("runtime_threads")
    if runtime.startswith("litert"):
        lines.append(
            f"interpreter = ai_edge_litert.interpreter.Interpreter(model_path={artifact!r}, "
            f"num_threads={threads})  # {runtime}; run_model.py beside the model shows a call"
        )
    elif runtime.startswith("openvino"):
        lines.append(
            f"compiled = openvino.Core().compile_model({artifact!r}, 'CPU')  # {runtime}; "
            "run_model.py beside the model shows the properties"
        )
    elif runtime == XLA_AOT:
        folder = os.path.dirname(artifact) if artifact else "MODEL_FOLDER"
        loader = os.path.join(folder, "run_model.py")
        lines.append(
            f'model = runpy.run_path({loader!r})["AotModel"]({folder!r}, threads={threads})'
            "  # xla-aot, no TensorFlow needed: outputs = model(*numpy_arrays)"
        )
    return lines


def train_code_lines(
    config: Mapping[str, Any], baseline: Mapping[str, Any] | None = None, *,
    own_backend: str = "tensorflow", notes: Sequence[str] = (),
) -> list[str]:
    """The lines a training script needs for a training tune's model-level knobs (threads,
    oneDNN and the allocator are set from outside by ``tfperf run``): none for the Keras
    backend the user already runs (``own_backend``), and the ``jit_compile`` that tfperf set
    over the user's on JAX where its worker says so (``notes``); for a custom loop
    (``baseline["step"] == "loop"``) a diff against a step written the usual way
    (:func:`tfperf.core.loopcode.loop_code_lines`)."""
    baseline = baseline or {}
    if baseline.get("step") == "loop":
        return loop_code_lines(config, baseline)
    lines = [] if config.get("runtime") == KERAS_JAX and own_backend == "jax" else (
        keras_backend_lines(config))
    if any(note.startswith(JIT_ON_JAX_NOTE) for note in notes):
        lines.append("model.compile(..., jit_compile=True)  # on JAX your jit_compile=False "
                     "runs the step eagerly; the answer was measured compiled")
    threads = config.get("runtime_threads")
    if config.get("runtime") == KERAS_JAX and threads:
        lines.append(
            f"os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:{threads}])  # before "
            f"import keras: XLA's CPU pool follows the process's CPUs (tfperf run --profile "
            "pins them)"
        )
    if config.get("precision") == "bf16":
        lines.append(
            'keras.mixed_precision.set_global_policy("mixed_bfloat16")  # before building the '
            "model"
        )
    if config.get("precision") == "mixed_float16":
        lines.append('keras.mixed_precision.set_global_policy("mixed_float16")  # before building')
    if config.get("precision") == "float32":
        lines.append('keras.mixed_precision.set_global_policy("float32")  # in place of the '
                     "mixed policy your factory sets, before building the model")
    compile_args = []
    if not baseline.get("graph", True) and (config.get("graph") or runs_graph(config)):
        compile_args.append("run_eagerly=False")
    if config.get("xla") in ("jit", "off"):  # only where it differs from the user's compile
        compile_args.append(f"jit_compile={config['xla'] == 'jit'}")
    if config.get("steps_per_execution"):
        compile_args.append(f"steps_per_execution={config['steps_per_execution']}")
    if compile_args:
        lines.append(f"model.compile(..., {', '.join(compile_args)})  # your optimizer and loss")
    if config.get("batch"):
        lines.append(
            f"dataset = dataset.rebatch({config['batch']})  # or model.fit(x, y, "
            f"batch_size={config['batch']}); the learning rate may need tuning for it"
        )
    if config.get("input_pipeline") == "tuned":
        lines.append(
            "dataset = dataset.prefetch(tf.data.AUTOTUNE)  # and num_parallel_calls="
            "tf.data.AUTOTUNE on each map and interleave"
        )
    return lines


DIFF_HEADING = "# change your training loop (a diff against a step written the usual way):"
"""What precedes a custom loop's code lines where they are printed."""
INSTALL = "pip install"
"""The start of a code line that installs a package rather than changes the script."""
RUN_SETS_IT = "(tfperf run --profile sets it)"
"""The end of a code line that says what ``tfperf run`` does itself (:func:`to_do_by_hand`)."""


def keras_backend_lines(config: Mapping[str, Any]) -> list[str]:
    """What adopting another Keras backend takes: the variable ``tfperf run`` sets, and for
    JAX its install."""
    if config.get("runtime") == KERAS_TF:
        return [f"# KERAS_BACKEND=tensorflow before `import keras` {RUN_SETS_IT}"]
    if config.get("runtime") != KERAS_JAX:
        return []
    return [f"# KERAS_BACKEND=jax before `import keras` {RUN_SETS_IT}",
            f'{INSTALL} "jax[cpu]"  # Keras on JAX']


def to_do_by_hand(code: Sequence[str]) -> list[str]:
    """The lines of a profile's ``code`` that ``tfperf run`` does not do itself."""
    return [line for line in code if not line.endswith(RUN_SETS_IT)]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "model"


def _workload_name(workload: Mapping[str, Any], objective: str = "latency") -> str:
    """The workload part of a profile's file name (a throughput or server tune's ends in
    ``-throughput`` or ``-server``, so that it does not replace the latency profile)."""
    suffix = "" if objective == "latency" else f"-{objective}"
    name = workload.get("name") if workload.get("kind") == "builtin" else workload.get("builtin")
    if name:  # a training built-in too
        return f"{name}-{workload.get('size', 'standard')}-b{workload.get('batch', 1)}" + suffix
    return Path(str(workload.get("path", "model"))).name + suffix


def profile_from_tune(doc: Mapping[str, Any], machine: Mapping[str, Any]) -> dict:
    """The profile of a finished tune's recommendation."""

    rec = doc["recommendation"]
    config = dict(rec["config"])
    try:
        env = Config.from_dict(config).worker_env({})
    except UserError:
        env = {}
    speedup = rec.get("speedup") or {}
    fmt = (doc.get("workload") or {}).get("format", "keras")
    return {
        "format": FORMAT,
        "version": VERSION,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "workload": dict(doc.get("workload") or {}),
        "label": rec["label"],
        "keep_default": rec.get("keep_default", False),
        "config": config,
        "objective": doc.get("objective", "latency"),
        "batch": rec.get("batch") or (doc.get("workload") or {}).get("batch", 1),
        "serving": _serving_record(rec.get("serving"), doc.get("slo_ms")),
        "speedup": {"median": speedup.get("median"), "ci95": speedup.get("ci95")}
        if not rec.get("keep_default")
        else None,
        "max_abs_error": rec.get("max_abs_error"),
        "adoption": rec.get("adoption"),
        "env": env,
        "code": (rec.get("code")
                 or train_code_lines(config, (doc.get("train") or {}).get("baseline")))
        if (doc.get("workload") or {}).get("kind") == "train"
        else code_lines(config, fmt, rec.get("artifact")),
        "artifact": rec.get("artifact"),
        "machine": machine_summary(machine) | {"isa": list(machine.get("isa", []))},
        "install": {
            "tf_version": (doc.get("install") or {}).get("tf_version"),
            "tf_distribution": tf_distribution_version(),
        },
    }


def _serving_record(serving: Mapping[str, Any] | None, slo_ms: float | None) -> dict | None:
    """The profile's ``serving``: the layout (every field of it) and the rate it held."""
    if not serving:
        return None
    return ServingLayout.from_dict(serving).to_dict() | {
        "max_qps_at_slo": serving.get("max_qps_at_slo"),
        "slo_ms": serving.get("slo_ms", slo_ms),
    }


def serving_layout(profile: Mapping[str, Any]) -> ServingLayout | None:
    """The profile's serving layout, ``None`` when it has none."""
    data = profile.get("serving")
    if not data:
        return None
    try:
        return ServingLayout.from_dict(data)
    except (TypeError, ValueError, AttributeError, UserError):
        raise UserError(
            "the profile's serving layout is damaged; run `tfperf tune --objective server` again."
        ) from None


def default_profile_path(profile: Mapping[str, Any]) -> Path:
    """``<profiles dir>/<workload>-<machine fingerprint>.json``."""
    fingerprint = (profile.get("machine") or {}).get("fingerprint") or "machine"
    name = _workload_name(profile.get("workload") or {}, profile.get("objective", "latency"))
    return profiles_dir() / f"{_slug(name)}-{fingerprint}.json"


def save_profile(profile: Mapping[str, Any], path: str | Path | None = None) -> Path:
    """Write ``profile`` (atomically) and return where it went."""
    target = Path(path).expanduser() if path else default_profile_path(profile)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(json.dumps(profile, indent=2, sort_keys=False) + "\n")
        os.replace(tmp, target)
    except OSError as exc:
        raise UserError(
            f"cannot write the profile to {target} ({exc.strerror or exc}); "
            "pass a writable --profile-out."
        ) from None
    return target


def load_profile(ref: str | Path) -> dict:
    """Read a profile from a path, or by file name from the default profiles folder."""
    path = Path(ref).expanduser()
    if not path.exists():
        named = profiles_dir() / (path.name if path.suffix else f"{path.name}.json")
        if named.exists():
            path = named
    if not path.is_file():
        raise UserError(f"no profile at {ref}; pass the path `tfperf tune` printed.")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(
            f"{path} is not a readable profile ({exc}); run `tfperf tune` again."
        ) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UserError(f"{path} is not a tfperf profile; pass a file written by `tfperf tune`.")
    if data.get("version") != VERSION:
        raise UserError(
            f"{path} is a version {data.get('version')} profile and this tfperf reads version "
            f"{VERSION}; run `tfperf tune` again with this tfperf."
        )
    shapes = {
        "config": dict, "env": dict, "code": list, "machine": dict, "install": dict,
        "serving": dict,
    }
    broken = [
        key
        for key, kind in shapes.items()
        if data.get(key) is not None and not isinstance(data[key], kind)
    ]
    if broken:
        raise UserError(
            f"{path} is a damaged profile (bad {', '.join(broken)}); run `tfperf tune` again."
        )
    if isinstance(data.get("config"), dict):  # written before a knob was renamed
        data["config"] = current_names(data["config"])
    if isinstance(data.get("label"), str):
        data["label"] = current_label(data["label"])
    return data


def profile_env(profile: Mapping[str, Any]) -> dict[str, str]:
    """The env-level knobs of ``profile`` on this machine (see the module docstring)."""

    config = profile.get("config")
    if isinstance(config, Mapping):
        return Config.from_dict(config).worker_env({})
    return {str(k): str(v) for k, v in (profile.get("env") or {}).items()}


def mismatch_warnings(
    profile: Mapping[str, Any], machine: Mapping[str, Any] | None = None
) -> list[str]:
    """Sentences saying how this machine or TensorFlow install differs from the profile's."""
    if machine is None:

        machine = collect_machine()
    warnings = []
    then = profile.get("machine")
    then = then if isinstance(then, Mapping) else {}
    if then.get("fingerprint") and then.get("fingerprint") != machine.get("fingerprint"):
        cpu = _cpu_model(then.get("cpu")) or "another machine"
        now = _cpu_model(machine.get("cpu")) or "this machine"
        warnings.append(
            f"this profile was tuned on {cpu} and this machine is {now} "
            f"(fingerprint {then['fingerprint']} vs {machine.get('fingerprint')}): "
            "tune again here for figures that hold"
        )
    install = profile.get("install")
    tuned = install.get("tf_distribution") if isinstance(install, Mapping) else None
    current = tf_distribution_version()
    if tuned and current != tuned:
        warnings.append(
            f"this profile was tuned with TensorFlow {tuned} and this install has "
            f"{current or 'no TensorFlow'}: tune again after an upgrade"
        )
    return warnings


def _cpu_model(cpu: Any) -> str | None:
    """The CPU model of a machine record (a dict with ``model``) or of a profile (a string)."""
    if isinstance(cpu, Mapping):
        cpu = cpu.get("model")
    return str(cpu) if cpu else None


def render(profile: Mapping[str, Any], fmt: str) -> str:
    """The profile as ``env`` lines, ``sh`` exports or a ``python`` snippet."""
    if fmt not in FORMATS:
        raise UserError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}.")
    header = f"tfperf profile {profile.get('label', '?')} ({_speed_text(profile)})"
    if fmt == "tf-serving":
        return _tf_serving(profile, header)
    env = profile_env(profile)
    code = list(profile.get("code") or [])
    artifact = profile.get("artifact")
    if fmt == "env":
        return "".join(f"{k}={v}\n" for k, v in env.items())
    if fmt == "sh":
        lines = [f"# {header}"]
        lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
        lines += [f"# in code: {line}" for line in code]
        if artifact:
            lines.append(f"# converted model: {artifact}")
        return "\n".join(lines) + "\n"
    lines = [f"# {header}"]
    if is_diff(code):  # a custom loop's change: a diff, not lines to paste
        code = [DIFF_HEADING, *(f"# {line}" for line in code)]
    code = [f"# {line}" if line.startswith(INSTALL) else line for line in code]  # not Python
    preload = env.pop("LD_PRELOAD", None)
    if preload:
        lines.append(
            "# LD_PRELOAD must be set before the process starts: "
            f"launch with `tfperf run --profile ...` or export LD_PRELOAD={preload}"
        )
    early = [line for line in code if line.startswith("os.")]  # before any import starts a thread
    if env or early:
        lines += ["import os", ""]
        lines += [f"os.environ[{k!r}] = {v!r}" for k, v in env.items()]
        lines += [*early, ""]
    code = [line for line in code if line not in early]
    lines += _imports(code)
    lines += code
    if artifact:
        lines.append(f"# converted model: {artifact}")
    return "\n".join(lines) + "\n"


MAX_ENQUEUED_FLOOR = 2
"""The fewest batches a TensorFlow Serving instance may queue (one running, one filling)."""


def _tf_serving(profile: Mapping[str, Any], header: str) -> str:
    """TensorFlow Serving's batching parameters file for the profile's layout; the flags that
    start each instance are its comments (``#`` starts a comment in the text format), so the
    whole output can be saved as the file."""
    config = Config.from_dict(profile.get("config") or {})
    if config.runtime != "tf" or config.precision != "fp32":
        raise UserError(
            f"this profile runs {config.runtime} at {config.precision}, which TensorFlow "
            "Serving cannot run; serve it with `tfperf run --profile P -- CMD`, or tune with "
            "--runtimes tf."
        )
    layout = serving_layout(profile) or ServingLayout()
    lines = [f"# {header}", "# TensorFlow Serving with the same layout."]
    start = f"start {_instances(layout)}:"
    if layout.batching:
        lines.append(f"# Save this as batching_parameters.txt, then {start}")
    else:
        lines.append(f"# No dynamic batching (leave --enable_batching off); {start}")
    lines += _tf_serving_commands(profile, layout, config)
    env = {k: v for k, v in profile_env(profile).items() if not k.startswith("TF_NUM_")}
    if env:
        lines.append("# with this environment: " + " ".join(f"{k}={v}" for k, v in env.items()))
    if layout.instances > 1:
        lines.append("# and spread the requests over their ports (a load balancer in front).")
    if layout.batching:
        lines += _batching_parameters(profile, layout, config)
    return "\n".join(lines) + "\n"


def _batching_parameters(
    profile: Mapping[str, Any], layout: ServingLayout, config: Config
) -> list[str]:
    """The ``BatchingParameters`` fields of the batching the layout was measured with.

    TensorFlow Serving counts a batch in rows of the batch dimension, where the layout counts
    requests: each request carries the profile's ``batch`` rows. The measured instance ran a
    lone request at its own rows and padded any larger batch to ``max_batch`` requests' rows,
    which is what ``allowed_batch_sizes`` makes TensorFlow Serving do; it ran as many batches at
    once as the harness gave it executors; it never split a request across batches.
    """
    from tfperf.serving.harness import EXECUTORS

    rows = max(1, int(profile.get("batch") or 1))
    largest = layout.max_batch * rows
    fields = [
        f"# sizes in rows of the batch dimension: {layout.max_batch} requests of {rows} "
        f"row{'s' if rows > 1 else ''}",
        f"max_batch_size {{ value: {largest} }}",
        f"batch_timeout_micros {{ value: {round(layout.max_delay_ms * 1000)} }}",
        f"num_batch_threads {{ value: {EXECUTORS} }}",
        f"max_enqueued_batches {{ value: {_max_enqueued(profile, layout)} }}",
        "enable_large_batch_splitting { value: false }",
        f"allowed_batch_sizes: {rows}" if rows < largest else "",
        f"allowed_batch_sizes: {largest}",
        "pad_variable_length_inputs: false",
    ]
    return [field for field in fields if field]


def _instances(layout: ServingLayout) -> str:
    pinned = ", each pinned to its cores" if layout.pinned else ""
    return "one instance" if layout.instances == 1 else f"{layout.instances} instances{pinned}"


def _tf_serving_commands(
    profile: Mapping[str, Any], layout: ServingLayout, config: Config
) -> list[str]:
    """One ``tensorflow_model_server`` command line (as comments) per instance."""
    workload = profile.get("workload") or {}
    path = workload.get("path") if workload.get("format") == "savedmodel" else None
    flags = [f"--model_name=model --model_base_path={path or '/models/model'}"]
    intra = layout.threads or config.intra_threads
    threads = [f"--tensorflow_intra_op_parallelism={intra}"] if intra else []
    if config.inter_threads:
        threads.append(f"--tensorflow_inter_op_parallelism={config.inter_threads}")
    if threads:
        flags.append(" ".join(threads))
    if layout.batching:
        flags.append("--enable_batching=true --batching_parameters_file=batching_parameters.txt")
    lines = []
    for index in range(layout.instances):
        pin = f"taskset -c {_cpu_list(layout.cores[index])} " if layout.pinned else ""
        port = 8500 + 2 * index
        lines.append(
            f"#   {pin}tensorflow_model_server --port={port} --rest_api_port={port + 1} \\"
        )
        lines += [f"#     {flag} \\" for flag in flags[:-1]] + [f"#     {flags[-1]}"]
    return lines


def _max_enqueued(profile: Mapping[str, Any], layout: ServingLayout) -> int:
    """Batches an instance may queue: those that can still finish within the SLO at the rate
    the layout held (more only wait to miss it; TensorFlow Serving fails them fast instead)."""
    serving = profile.get("serving") or {}
    qps, slo_ms = serving.get("max_qps_at_slo"), serving.get("slo_ms")
    if not qps or not slo_ms:
        return MAX_ENQUEUED_FLOOR * 4
    per_window = qps / layout.instances * slo_ms / 1000.0
    return max(MAX_ENQUEUED_FLOOR, math.ceil(per_window / layout.max_batch))


def _imports(code: Sequence[str]) -> list[str]:
    """The imports the code lines use (TensorFlow after the environment is set)."""
    text = "\n".join(code)
    modules = ("keras", "ai_edge_litert.interpreter", "openvino", "runpy")
    others = [m for m in modules if f"{m}." in text]
    lines = []
    if "tf." in text or not others:
        lines.append("import tensorflow as tf  # after the environment is set")
    lines += [f"import {module}" for module in others]
    return lines


def _speed_text(profile: Mapping[str, Any]) -> str:
    speedup = profile.get("speedup") or {}
    if not speedup.get("median"):
        return "keep the default"
    low, high = speedup.get("ci95") or [None, None]
    ci = f", 95% CI {low:.2f}-{high:.2f}" if low and high else ""
    serving = profile.get("serving") or {}
    if profile.get("objective") == "server" and serving.get("max_qps_at_slo"):
        return (
            f"{speedup['median']:.2f}x the default's requests per second within p99 "
            f"{serving.get('slo_ms'):g} ms{ci}: {serving['max_qps_at_slo']:.4g} per s"
        )
    if profile.get("objective") == "throughput":
        return f"{speedup['median']:.2f}x the samples per second{ci}, batch {profile.get('batch')}"
    return f"{speedup['median']:.2f}x faster{ci}"


def run_with_profile(
    profile: Mapping[str, Any],
    command: Sequence[str],
    environ: Mapping[str, str] | None = None,
    on_failure: Callable[[str], None] | None = None,
) -> int:
    """Run ``command`` with the profile's env knobs over ``environ``; its exit code.

    ``LD_PRELOAD`` entries the caller already had are kept after the profile's allocator.
    With a serving layout, one copy per instance (see the module docstring); ``on_failure``
    hears of each copy that fails. A missing program raises :class:`UserError`.
    """
    if not command:
        raise UserError(
            "give the command to run after --, e.g. tfperf run --profile P -- python serve.py."
        )
    env = dict(os.environ if environ is None else environ)
    layout = serving_layout(profile)
    try:
        if layout is not None:
            copies = instance_copies(profile, layout, env)
            return run_copies(command, copies, on_failure=on_failure)
        cpus = _pinned_cpus(profile)
        return _run_one(command, _with_knobs(profile, env, Config.from_dict({})), cpus)
    except LaunchError as exc:
        why = "permission denied" if isinstance(exc.__cause__, PermissionError) else (
            "no such program; check the command"
        )
        raise UserError(f"cannot run {command[0]!r}: {why}.") from None


def _with_knobs(profile: Mapping[str, Any], env: Mapping[str, str], threads: Config) -> dict:
    """``env`` with the profile's env knobs, the thread counts of ``threads`` over its own."""
    knobs = profile_env(profile)
    config = profile.get("config")
    if isinstance(config, Mapping) and (
        threads.intra_threads or ("LD_PRELOAD" in knobs and env.get("LD_PRELOAD"))
    ):
        chosen = Config.from_dict(config)
        if threads.intra_threads:
            chosen = replace(chosen, intra_threads=threads.intra_threads)
        base = {"LD_PRELOAD": env["LD_PRELOAD"]} if env.get("LD_PRELOAD") else {}
        knobs = chosen.worker_env(base)
    return {**env, **knobs}


def instance_copies(
    profile: Mapping[str, Any], layout: ServingLayout, environ: Mapping[str, str]
) -> list[Copy]:
    """One :class:`Copy` per instance of ``layout``: its environment and its core set.

    Raises :class:`UserError` when a core set names CPUs this process may not use (a layout
    tuned on a bigger machine).
    """
    usable = os.sched_getaffinity(0)
    for cores in layout.cores:
        if not set(cores) <= usable:
            raise UserError(
                f"the profile pins an instance to CPUs {_cpu_list(cores)}, and this process may "
                f"use only {_cpu_list(sorted(usable))}; tune again on this machine."
            )
    threads = Config(intra_threads=layout.threads)
    copies = []
    for index in range(layout.instances):
        cores = layout.cores[index] if layout.pinned else None
        env = _with_knobs(profile, environ, threads) | {
            "TFPERF_INSTANCE": str(index),
            "TFPERF_INSTANCES": str(layout.instances),
        }
        if layout.threads:
            env["TFPERF_THREADS"] = str(layout.threads)
        if cores:
            env["TFPERF_CORES"] = _cpu_list(cores)
        name = f"instance {index} of {layout.instances}"
        copies.append(Copy(env=env, cpus=cores, name=name))
    return copies


def _cpu_list(cpus: Sequence[int]) -> str:
    return ",".join(str(c) for c in cpus)


def _pinned_cpus(profile: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The CPUs the profile's config runs on (Keras on JAX's ``runtime_threads``), if any."""
    config = profile.get("config")
    if not isinstance(config, Mapping):
        return None
    return Config.from_dict(config).pinned_cpus(os.sched_getaffinity(0))


def _run_one(
    command: Sequence[str], env: Mapping[str, str], cpus: Sequence[int] | None = None
) -> int:
    """The command once, in tfperf's process group: the terminal's Ctrl-C reaches it as it
    would without tfperf, and leaving (Ctrl-C included) stops it if it still runs; pinned to
    ``cpus`` where given."""
    child = Child(list(command), env=env, own_group=False, log=False, cpus=cpus)
    child.start()
    with child:
        ended = child.wait()
    return ended.returncode if ended.returncode is not None else 1
