"""Config: one value per knob, the ``--set``/``--env`` syntax, and the worker env it implies.

Contract:

- :class:`Config` is frozen. ``to_dict()`` gives the JSON-able config dict of
  ``docs/ARCHITECTURE.md`` (every known knob, ``None`` = TensorFlow's default) plus any
  unknown-but-valid key it was built from; ``Config.from_dict(c.to_dict()) == c``.
- :meth:`Config.parse` reads ``--set KEY=VALUE`` and ``--env KEY=VALUE`` strings; a bad key or
  value raises :class:`~tfperf.core.errors.UserError` listing the valid ones.
- :meth:`Config.label` is :func:`tfperf.core.knobs.label`: ``"default"``, ``"onednn=off"``,
  ``"xla=jit,intra_threads=2"`` (knobs in table order), ``"env:OMP_NUM_THREADS=1"``.
- :meth:`Config.worker_env` applies the knobs that act through the environment (oneDNN, the
  allocator's ``LD_PRELOAD``, ``xla=auto``, thread counts, ``KERAS_BACKEND=jax`` for the
  runtime ``keras-jax``, ``env``) to a base environment.
  :meth:`Config.pinned_cpus` is the CPU set a process of the config runs on (Keras on JAX's
  ``runtime_threads``), which the worker sets before anything starts a thread.
  Call-level knobs (thread pools) and model transformations (``xla=jit``, precision, runtime)
  are applied inside the worker.
- The knobs, their parsers and defaults are those of :data:`tfperf.core.knobs.KNOBS`; a knob's
  former name (``--set litert_threads=2``, an old profile's or stored run's config) is read as
  today's (:data:`tfperf.core.knobs.RENAMED`); a key this tfperf does not know (from a newer
  one) is kept in ``extra``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tfperf.core.allocators import preload_env
from tfperf.core.errors import UserError
from tfperf.core.knobs import (
    CONFIG_KNOBS,
    KERAS_JAX,
    KNOBS,
    RUNTIME_ENV,
    current_name,
    current_names,
    label,
    show_value,
)

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
XLA_AUTO_FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"


def _freeze(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@dataclass(frozen=True)
class Config:
    """A value for each knob; ``None`` means "TensorFlow's default"."""

    intra_threads: int | None = None
    inter_threads: int | None = None
    onednn: bool | None = None
    allocator: str = "system"
    xla: str | None = None
    """``None``: as the model has it (no XLA for inference; the user's compile for training)."""
    runtime: str = "tf"
    precision: str = "fp32"
    runtime_threads: int | None = None
    steps_per_execution: int | None = None
    graph: bool | None = None
    """``None``: a training step as the user wrote it (eager or a graph)."""
    input_pipeline: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Knobs this module does not know (added by :func:`register_knob` or by a newer tfperf)."""

    def __hash__(self) -> int:
        return hash(_freeze(self.to_dict()))

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Config:
        """Build from a config dict; missing keys take their defaults, unknown keys are kept."""
        data = current_names(data or {})
        env = data.pop("env", None) or {}
        if not isinstance(env, Mapping):
            raise UserError("the config's 'env' must be a mapping of variable names to values.")
        known = {k: data.pop(k) for k in list(data) if k in CONFIG_KNOBS}
        known = {
            k: (KNOBS[k].default if v is None and KNOBS[k].default is not None else v)
            for k, v in known.items()
        }
        return cls(**known, env={str(k): str(v) for k, v in env.items()}, extra=data)

    @classmethod
    def parse(cls, sets: Iterable[str] = (), envs: Iterable[str] = ()) -> Config:
        """Read ``--set KEY=VALUE`` and ``--env KEY=VALUE`` options into a Config."""
        values: dict[str, Any] = {}
        for item in sets:
            key, value = _split(item, "--set")
            key = current_name(key.strip().lower().replace("-", "_"))
            if key not in CONFIG_KNOBS:
                valid = ", ".join(sorted(CONFIG_KNOBS))
                raise UserError(f"unknown knob {key!r} in --set {item!r}: use one of {valid}.")
            try:
                values[key] = KNOBS[key].parse(value)
            except ValueError as exc:
                raise UserError(
                    f"bad value {value!r} for {key} in --set {item!r}: use {exc}."
                ) from None
        env: dict[str, str] = {}
        for item in envs:
            key, value = _split(item, "--env")
            if not _ENV_NAME.match(key):
                raise UserError(
                    f"{key!r} in --env {item!r} is not an environment variable name: "
                    "use letters, digits and underscores."
                )
            env[key] = value
        values["env"] = env
        return cls.from_dict(values)

    # -- views --------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able config dict (every known knob, then unknown keys, then ``env``)."""
        out: dict[str, Any] = {name: getattr(self, name) for name in _FIELDS}
        out.update(self.extra)
        out["env"] = dict(self.env)
        return out

    def changes(self) -> dict[str, Any]:
        """The knobs that differ from the default config, in table order (unknown keys
        after them, ``env`` entries as ``env:NAME``)."""
        out: dict[str, Any] = {
            name: value
            for name in KNOBS
            if name in CONFIG_KNOBS and (value := getattr(self, name)) != KNOBS[name].default
        }
        out.update(self.extra)
        out.update({f"env:{k}": v for k, v in sorted(self.env.items())})
        return out

    def label(self) -> str:
        """:func:`tfperf.core.knobs.label` of this config: ``"default"`` or the changed knobs
        in table order, then unknown keys and ``env:NAME=VALUE`` entries."""
        known = label(self.to_dict(), self.env)
        extra = [f"{k}={show_value(v)}" for k, v in self.extra.items()]
        if not extra:
            return known
        return ",".join(([] if known == "default" else [known]) + extra)

    def with_changes(self, **changes: Any) -> Config:
        """A copy with some knobs changed (unknown names go to ``extra``)."""
        data = self.to_dict()
        data.update(changes)
        return Config.from_dict(data)

    # -- environment --------------------------------------------------------------------------

    def worker_env(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` with this config's environment knobs applied (``env`` entries last).

        Raises :class:`UserError` when the allocator is not installed.
        """
        env = dict(base)
        env.update(RUNTIME_ENV.get(self.runtime, {}))
        if self.onednn is not None:
            env["TF_ENABLE_ONEDNN_OPTS"] = "1" if self.onednn else "0"
        if self.allocator != "system":

            env["LD_PRELOAD"] = preload_env(self.allocator, env.get("LD_PRELOAD"))
        if self.xla == "auto":
            flags = env.get("TF_XLA_FLAGS", "").strip()
            env["TF_XLA_FLAGS"] = f"{flags} {XLA_AUTO_FLAGS}".strip()
        if self.intra_threads is not None:
            env["TF_NUM_INTRAOP_THREADS"] = str(self.intra_threads)
        if self.inter_threads is not None:
            env["TF_NUM_INTEROP_THREADS"] = str(self.inter_threads)
        env.update(self.env)
        return env


    def pinned_cpus(self, usable: Iterable[int]) -> tuple[int, ...] | None:
        """The CPUs a process of this config runs on, of ``usable`` (the affinity it starts
        with), or ``None`` where it is not pinned: Keras on JAX with ``runtime_threads`` N
        runs on the first N (JAX has no thread setting; XLA's CPU pool follows the affinity).

        Raises :class:`UserError` where N is more than ``usable`` holds.
        """
        if self.runtime != KERAS_JAX or not self.runtime_threads:
            return None
        cpus = tuple(sorted(int(c) for c in usable))
        if self.runtime_threads > len(cpus):
            raise UserError(
                f"runtime_threads={self.runtime_threads} on {KERAS_JAX} pins the process to "
                f"{self.runtime_threads} CPUs, and it may use only {len(cpus)}: set at most "
                f"{len(cpus)}."
            )
        return cpus[: self.runtime_threads]


_FIELDS = CONFIG_KNOBS
TRAINING_KNOBS = ("steps_per_execution", "graph", "input_pipeline")
"""The knobs that act on a training step only (``None`` at their default)."""
"""The order of :meth:`Config.to_dict`."""


def _split(item: str, option: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise UserError(f"{option} {item!r} is not KEY=VALUE: write it like {option} onednn=off.")
    return key.strip(), value
