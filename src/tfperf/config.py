"""Config: one value per knob, the ``--set``/``--env`` syntax, and the worker env it implies.

Contract:

- :class:`Config` is frozen. ``to_dict()`` gives the JSON-able config dict of
  ``docs/ARCHITECTURE.md`` (every known knob, ``None`` = TensorFlow's default) plus any
  unknown-but-valid key it was built from; ``Config.from_dict(c.to_dict()) == c``.
- :meth:`Config.parse` reads ``--set KEY=VALUE`` and ``--env KEY=VALUE`` strings; a bad key or
  value raises :class:`~tfperf.errors.UserError` listing the valid ones.
- :meth:`Config.label` is a short human name: ``"default"``, ``"onednn=off"``,
  ``"xla=jit,intra_threads=2"``, ``"env:OMP_NUM_THREADS=1"``.
- :meth:`Config.worker_env` applies the knobs that act through the environment (oneDNN, the
  allocator's ``LD_PRELOAD``, ``xla=auto``, thread counts, ``env``) to a base environment.
  Call-level knobs (thread pools) and model transformations (``xla=jit``, precision, runtime)
  are applied inside the worker.
- :func:`register_knob` lets another module add a knob (a name and a value parser) without
  editing this one.
- ``runtime`` and ``precision`` accept exactly what the worker can build:
  :data:`tfperf.convert.RUNTIMES` and :data:`tfperf.convert.PRECISIONS` (that module imports
  TensorFlow only inside functions, so the parent may import its constants).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tfperf.convert import PRECISIONS, RUNTIMES
from tfperf.errors import UserError

_ON = {"on", "true", "1", "yes"}
_OFF = {"off", "false", "0", "no"}
_DEFAULT = {"default", "none", "null", ""}


def _parse_bool(value: str) -> bool | None:
    low = value.strip().lower()
    if low in _ON:
        return True
    if low in _OFF:
        return False
    if low in _DEFAULT:
        return None
    raise ValueError("on, off or default")


def _parse_threads(value: str) -> int | None:
    low = value.strip().lower()
    if low in _DEFAULT:
        return None
    if low.isdigit() and int(low) >= 1:
        return int(low)
    raise ValueError("a whole number of threads >= 1, or default")


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        low = value.strip().lower()
        if low in choices:
            return low
        raise ValueError(", ".join(choices))

    parse.choices = choices  # type: ignore[attr-defined]
    return parse


KNOBS: dict[str, Callable[[str], Any]] = {
    "onednn": _parse_bool,
    "intra_threads": _parse_threads,
    "inter_threads": _parse_threads,
    "allocator": _choice("system", "tcmalloc", "jemalloc"),
    "xla": _choice("off", "jit", "auto"),
    "runtime": _choice(*RUNTIMES),
    "precision": _choice(*PRECISIONS),
    "litert_threads": _parse_threads,
}
"""``--set`` keys and their value parsers (a parser raises ``ValueError("the valid values")``)."""

DEFAULTS: dict[str, Any] = {
    "intra_threads": None,
    "inter_threads": None,
    "onednn": None,
    "allocator": "system",
    "xla": "off",
    "runtime": "tf",
    "precision": "fp32",
    "litert_threads": None,
}
"""The value of each built-in knob when nobody sets it (TensorFlow's own behaviour)."""

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
XLA_AUTO_FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"


def register_knob(name: str, parser: Callable[[str], Any], default: Any = None) -> None:
    """Add (or replace) a ``--set`` knob: ``parser`` turns the text into a JSON-able value."""
    KNOBS[name] = parser
    DEFAULTS[name] = default


def _freeze(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@dataclass(frozen=True)
class Config:
    """A value for each knob; ``None`` means "TensorFlow's default"."""

    intra_threads: int | None = None
    inter_threads: int | None = None
    onednn: bool | None = None
    allocator: str = "system"
    xla: str = "off"
    runtime: str = "tf"
    precision: str = "fp32"
    litert_threads: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Knobs this module does not know (added by :func:`register_knob` or by a newer tfperf)."""

    def __hash__(self) -> int:
        return hash(_freeze(self.to_dict()))

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Config:
        """Build from a config dict; missing keys take their defaults, unknown keys are kept."""
        data = dict(data or {})
        env = data.pop("env", None) or {}
        if not isinstance(env, Mapping):
            raise UserError("the config's 'env' must be a mapping of variable names to values.")
        known = {k: data.pop(k) for k in list(data) if k in _FIELDS}
        known = {
            k: (DEFAULTS[k] if v is None and DEFAULTS[k] is not None else v)
            for k, v in known.items()
        }
        return cls(**known, env={str(k): str(v) for k, v in env.items()}, extra=data)

    @classmethod
    def parse(cls, sets: Iterable[str] = (), envs: Iterable[str] = ()) -> Config:
        """Read ``--set KEY=VALUE`` and ``--env KEY=VALUE`` options into a Config."""
        values: dict[str, Any] = {}
        for item in sets:
            key, value = _split(item, "--set")
            key = key.strip().lower().replace("-", "_")
            parser = KNOBS.get(key)
            if parser is None:
                valid = ", ".join(sorted(KNOBS))
                raise UserError(f"unknown knob {key!r} in --set {item!r}: use one of {valid}.")
            try:
                values[key] = parser(value)
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
        """The knobs that differ from the default config (``env`` entries as ``env:NAME``)."""
        out: dict[str, Any] = {}
        for name, value in self.to_dict().items():
            if name == "env":
                out.update({f"env:{k}": v for k, v in sorted(value.items())})
            elif value != DEFAULTS.get(name):
                out[name] = value
        return out

    def label(self) -> str:
        """A short human name: ``"default"`` or the changed knobs, comma separated."""
        parts = [f"{k}={show_value(v)}" for k, v in self.changes().items()]
        return ",".join(parts) if parts else "default"

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
        if self.onednn is not None:
            env["TF_ENABLE_ONEDNN_OPTS"] = "1" if self.onednn else "0"
        if self.allocator != "system":
            from tfperf.allocators import preload_env

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


_FIELDS = (
    "intra_threads",
    "inter_threads",
    "onednn",
    "allocator",
    "xla",
    "runtime",
    "precision",
    "litert_threads",
)


def _split(item: str, option: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise UserError(f"{option} {item!r} is not KEY=VALUE: write it like {option} onednn=off.")
    return key.strip(), value


def show_value(value: Any) -> str:
    """A knob's value as written in ``--set`` and in labels (``True`` -> ``on``)."""
    if value is True:
        return "on"
    if value is False:
        return "off"
    return str(value)
