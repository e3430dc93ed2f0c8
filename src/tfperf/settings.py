"""Defaults from a configuration file: ``tfperf.toml``, or ``[tool.tfperf]`` in ``pyproject.toml``.

Contract
--------

- :func:`find_config` looks in a folder and then each of its parents for ``tfperf.toml`` or a
  ``pyproject.toml`` that has a ``[tool.tfperf]`` table; the first folder holding one wins
  (a ``pyproject.toml`` without that table is passed by, as ruff and pytest do), and in a folder
  with both, ``tfperf.toml`` wins.
- The keys are option names (:data:`SETTINGS`: ``store``, ``tolerance``, ``budget``,
  ``max_trials``, ``processes``, ``runtimes``, ``max_memory_mb``, ``price_per_hour``, and for
  load levels ``level_requests``, ``level_seconds``, ``request_timeout``; ``max-trials`` is
  the same key). A key at the top applies to every command that has that option; a table
  named after a command (``[tool.tfperf.tune]``, ``[tune]`` in ``tfperf.toml``) overrides it
  for that command (and a group's, ``[builds]``, for its subcommands). A relative ``store``
  is relative to the file's folder.
- :func:`load` reads and checks the file: an unknown key, a value of the wrong type or an
  unreadable file is a :class:`~tfperf.core.errors.UserError` naming the key and the file.
- :func:`for_command` is what one command takes from the file: its table over the top, less the
  settings whose environment variable is set. The command line (``tfperf.cli.settings``, as
  click's ``default_map``) and the library (``tfperf.api``) both read it, so the precedence is
  the same for both: a flag or keyword argument > the environment (``TFPERF_STORE``) > the file
  > the built-in default.
- :func:`describe` says, for ``tfperf doctor -v``, each setting's value and where it came from.

Nothing here imports TensorFlow, numpy or anything heavier than the standard library.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfperf.core.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CONFIG_NAME = "tfperf.toml"
PYPROJECT = "pyproject.toml"


@dataclass(frozen=True)
class Setting:
    """One key of the file: how its value is checked and what applies without it."""

    name: str
    check: Callable[[Any, Path], Any]
    """The value a command's option gets; raises ``ValueError(what it must be)``."""
    default: str | Callable[[], str]
    """The built-in default, as ``tfperf doctor -v`` shows it (or a function that says it)."""
    env: str | None = None
    """An environment variable that beats the file."""


@dataclass(frozen=True)
class ConfigFile:
    """A checked configuration file (``path`` is ``None`` when none was found)."""

    path: Path | None = None
    top: dict[str, Any] = field(default_factory=dict)
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)

    def where(self, section: str | None = None) -> str:
        """How a message names the file (and the table) a value came from."""
        if self.path is None:
            return "no file"
        table = "tool.tfperf" if self.path.name == PYPROJECT else ""
        name = ".".join(p for p in (table, section) if p)
        return f"{self.path} [{name}]" if name else str(self.path)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _store(value: Any, folder: Path) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a path (a string)")
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else folder / path)


def _tolerance(value: Any, folder: Path) -> str:
    from tfperf.accuracy import parse_tolerance

    what = 'a tolerance: a relative error (0.02) or a string like "rel=0.05,abs=1e-3,top1=0.99"'
    if not (_number(value) or isinstance(value, str)):
        raise ValueError(what)
    try:
        parse_tolerance(str(value))
    except UserError:
        raise ValueError(what) from None
    return str(value)


def _seconds(value: Any, folder: Path) -> float:
    if not _number(value) or value <= 0:
        raise ValueError("a positive number of seconds")
    return float(value)


def _count(value: Any, folder: Path) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError("a whole number >= 1")
    return value


def _positive(value: Any, folder: Path) -> float:
    if not _number(value) or value <= 0:
        raise ValueError("a positive number")
    return float(value)


def _runtimes(value: Any, folder: Path) -> str:
    from tfperf.core.knobs import RUNTIMES

    names = value.split(",") if isinstance(value, str) else value
    what = f'a list of runtimes like ["tf", "litert"] (from {", ".join(RUNTIMES)})'
    if not isinstance(names, list) or not names:
        raise ValueError(what)
    if not all(isinstance(n, str) and n.strip() in RUNTIMES for n in names):
        raise ValueError(what)
    return ",".join(n.strip() for n in names)


def _default_store() -> str:
    from tfperf.core.paths import default_store_path

    return str(default_store_path())


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        Setting("store", _store, _default_store, env="TFPERF_STORE"),
        Setting("tolerance", _tolerance, "rel=0.02, top1=0.99 (tune)"),
        Setting("budget", _seconds, "30 s (bench, compare, builds compare); none (tune)"),
        Setting("max_trials", _count, "none: tune runs until its search converges"),
        Setting("processes", _count, "3 for a --budget of 15 s or more, else 1 (bench, compare)"),
        Setting("runtimes", _runtimes, "every runtime that applies (tune)"),
        Setting("level_requests", _count, "300 requests per load level at least (bench)"),
        Setting("level_seconds", _seconds, "3 s per load level at least (bench)"),
        Setting("request_timeout", _seconds, "10 s before a request under load times out (bench)"),
        Setting("max_memory_mb", _positive, "none: no candidate is rejected for its memory (tune)"),
        Setting("price_per_hour", _positive, "none: no cost is computed (bench, tune)"),
    )
}
"""The keys a configuration file may hold, by option name."""


def find_config(start: Path) -> Path | None:
    """The configuration file for a command run in ``start`` (see the module docstring)."""
    for folder in (start, *start.parents):
        own = folder / CONFIG_NAME
        if own.is_file():
            return own
        project = folder / PYPROJECT
        if project.is_file():
            tool = _read(project).get("tool")
            if isinstance(tool, dict) and "tfperf" in tool:
                return project
    return None


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path} is not valid TOML ({exc}): fix it or move it away.") from None
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise UserError(f"cannot read {path} ({why}): fix its permissions or move it.") from None


def load(start: Path | None = None) -> ConfigFile:
    """The checked configuration file for ``start`` (the current folder by default)."""
    path = find_config(Path.cwd() if start is None else start)
    if path is None:
        return ConfigFile()
    data = _read(path)
    table = data["tool"]["tfperf"] if path.name == PYPROJECT else data
    if not isinstance(table, dict):
        raise UserError(f"tool.tfperf in {path} must be a table: write [tool.tfperf].")
    named = ConfigFile(path)  # names the file in messages
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            sections[key] = _checked(value, named, key)
        else:
            top.update(_checked({key: value}, named, None))
    return ConfigFile(path, top, sections)


def _checked(table: Mapping[str, Any], config: ConfigFile, section: str | None) -> dict:
    """``table``'s values checked, by setting name."""
    assert config.path is not None
    out = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        setting = SETTINGS.get(name)
        if setting is None or isinstance(value, dict):
            raise UserError(
                f"unknown setting {key!r} in {config.where(section)}: use "
                f"{', '.join(SETTINGS)}, or a table named after a command."
            )
        try:
            out[name] = setting.check(value, config.path.parent)
        except ValueError as exc:
            shown = json.dumps(value, default=str)
            raise UserError(
                f"{key} = {shown} in {config.where(section)} is not {exc}: correct it."
            ) from None
    return out


def _env_value(name: str, environ: Mapping[str, str]) -> str | None:
    env = SETTINGS[name].env
    value = environ.get(env, "").strip() if env else ""
    return value or None


def for_command(
    config: ConfigFile,
    section: str,
    names: Iterable[str],
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The file's values for the command ``section`` (or the group it belongs to), among its
    options ``names``: its table over the top, without the settings the environment sets."""
    environ = os.environ if environ is None else environ
    wanted = set(names)
    values = {**config.top, **config.sections.get(section, {})}
    return {
        k: v for k, v in values.items() if k in wanted and _env_value(k, environ) is None
    }


@dataclass(frozen=True)
class Row:
    """One line of ``tfperf doctor -v``'s settings table."""

    setting: str
    value: str
    source: str


def describe(config: ConfigFile, environ: Mapping[str, str] | None = None) -> list[Row]:
    """Each setting's value for a command given no flag, and where it comes from."""
    environ = os.environ if environ is None else environ
    rows = []
    for name, setting in SETTINGS.items():
        rows.append(_row(name, config.top.get(name), config.where(), setting, environ))
    for section, values in config.sections.items():
        for name, value in values.items():
            where = config.where(section)
            rows.append(_row(name, value, where, SETTINGS[name], environ, f" ({section})"))
    return rows


def _row(
    name: str,
    value: Any,
    where: str,
    setting: Setting,
    environ: Mapping[str, str],
    suffix: str = "",
) -> Row:
    env = _env_value(name, environ)
    if env is not None:
        return Row(name + suffix, env, f"environment {setting.env}")
    if value is not None:
        return Row(name + suffix, str(value), where)
    default = setting.default() if callable(setting.default) else setting.default
    return Row(name + suffix, default, "default")
