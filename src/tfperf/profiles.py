"""Profiles: a tuned configuration saved so that it can be applied, and the ways to apply it.

Contract
--------

A profile is one JSON file::

    {"format": "tfperf-profile", "version": 1, "created_at": ISO time,
     "workload": {...}, "label": str, "config": {...config dict...},
     "objective": "latency" | "throughput", "batch": int,   # samples per call it was tuned at
     "speedup": {"median", "ci95"} | None, "max_abs_error", "adoption",
     "env": {NAME: VALUE},        # the env-level knobs (LD_PRELOAD, TF_*, thread counts)
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
  (``export`` lines) or ``python`` (a snippet to put before TensorFlow is imported).
- :func:`mismatch_warnings` compares the profile's machine and install with this one's.
- :func:`run_with_profile` runs a command with the profile's environment and returns its exit
  code.

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tfperf.benchmark import machine_summary
from tfperf.core.config import Config
from tfperf.core.errors import UserError
from tfperf.core.knobs import XLA_AOT, current_label, current_names
from tfperf.machine.facts import collect_machine
from tfperf.runner.launcher import Child, LaunchError

FORMAT = "tfperf-profile"
VERSION = 1
FORMATS = ("env", "sh", "python")


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


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "model"


def _workload_name(workload: Mapping[str, Any], objective: str = "latency") -> str:
    """The workload part of a profile's file name (a throughput tune's ends in
    ``-throughput``, so that it does not replace the latency profile)."""
    suffix = "-throughput" if objective == "throughput" else ""
    if workload.get("kind") == "builtin":
        return (
            f"{workload.get('name')}-{workload.get('size', 'standard')}-b{workload.get('batch', 1)}"
            + suffix
        )
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
        "speedup": {"median": speedup.get("median"), "ci95": speedup.get("ci95")}
        if not rec.get("keep_default")
        else None,
        "max_abs_error": rec.get("max_abs_error"),
        "adoption": rec.get("adoption"),
        "env": env,
        "code": code_lines(config, fmt, rec.get("artifact")),
        "artifact": rec.get("artifact"),
        "machine": machine_summary(machine) | {"isa": list(machine.get("isa", []))},
        "install": {
            "tf_version": (doc.get("install") or {}).get("tf_version"),
            "tf_distribution": tf_distribution_version(),
        },
    }


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
    shapes = {"config": dict, "env": dict, "code": list, "machine": dict, "install": dict}
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
    env = profile_env(profile)
    header = f"tfperf profile {profile.get('label', '?')} ({_speed_text(profile)})"
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
    preload = env.pop("LD_PRELOAD", None)
    if preload:
        lines.append(
            "# LD_PRELOAD must be set before the process starts: "
            f"launch with `tfperf run --profile ...` or export LD_PRELOAD={preload}"
        )
    if env:
        lines += ["import os", ""]
        lines += [f"os.environ[{k!r}] = {v!r}" for k, v in env.items()]
        lines.append("")
    lines += _imports(code)
    lines += code
    if artifact:
        lines.append(f"# converted model: {artifact}")
    return "\n".join(lines) + "\n"


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
    if profile.get("objective") == "throughput":
        return f"{speedup['median']:.2f}x the samples per second{ci}, batch {profile.get('batch')}"
    return f"{speedup['median']:.2f}x faster{ci}"


def run_with_profile(
    profile: Mapping[str, Any], command: Sequence[str], environ: Mapping[str, str] | None = None
) -> int:
    """Run ``command`` with the profile's env knobs over ``environ``; its exit code.

    ``LD_PRELOAD`` entries the caller already had are kept after the profile's allocator.
    A missing program raises :class:`UserError`.
    """
    if not command:
        raise UserError(
            "give the command to run after --, e.g. tfperf run --profile P -- python serve.py."
        )
    env = dict(os.environ if environ is None else environ)
    knobs = profile_env(profile)
    if "LD_PRELOAD" in knobs and env.get("LD_PRELOAD"):

        knobs = Config.from_dict(profile["config"]).worker_env({"LD_PRELOAD": env["LD_PRELOAD"]})
    env.update(knobs)
    # In tfperf's own process group: the terminal's Ctrl-C reaches the command as it would
    # without tfperf, and leaving (Ctrl-C included) stops it if it still runs.
    child = Child(list(command), env=env, own_group=False, log=False)
    try:
        child.start()
    except LaunchError as exc:
        why = "permission denied" if isinstance(exc.__cause__, PermissionError) else (
            "no such program; check the command"
        )
        raise UserError(f"cannot run {command[0]!r}: {why}.") from None
    with child:
        ended = child.wait()
    return ended.returncode if ended.returncode is not None else 1
