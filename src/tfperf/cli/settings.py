"""The configuration file (:mod:`tfperf.settings`) as the command line's defaults.

Contract: :func:`default_map` turns the checked file into click's ``default_map`` for a command
tree, so a flag given on the command line always wins; a setting whose environment variable is
set is left out of the map (flag > environment > file > built-in default, the precedence the
library API shares through :func:`tfperf.settings.for_command`). A table that names no command,
or a key the command has no option for, is a :class:`~tfperf.core.errors.UserError`. The file's
own reading and checking (:func:`load`, :func:`describe`, :data:`SETTINGS`) live in
:mod:`tfperf.settings` and are re-exported here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import click

from tfperf.core.errors import UserError
from tfperf.settings import SETTINGS, ConfigFile, Row, describe, find_config, for_command, load

__all__ = [
    "SETTINGS", "ConfigFile", "Row", "default_map", "describe", "find_config", "load",
]


def default_map(
    config: ConfigFile, group: click.Group, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """click's ``default_map`` for ``group``'s commands (see the module docstring)."""
    environ = os.environ if environ is None else environ
    for section, values in config.sections.items():
        _check_section(config, group, section, values)
    return _map_for(group, config, environ, None)


def _map_for(
    command: click.Command, config: ConfigFile, environ: Mapping[str, str], section: str | None
) -> dict[str, Any]:
    if isinstance(command, click.Group):
        out = {}
        for name, sub in command.commands.items():
            part = _map_for(sub, config, environ, section or name)
            if part:
                out[name] = part
        return out
    names = [p.name for p in command.params if p.name]
    return for_command(config, section or "", names, environ)


def _leaf_params(command: click.Command) -> set[str | None]:
    if isinstance(command, click.Group):
        return set().union(*(_leaf_params(c) for c in command.commands.values()))
    return {p.name for p in command.params}


def _check_section(
    config: ConfigFile, group: click.Group, section: str, values: Mapping[str, Any]
) -> None:
    command = group.commands.get(section)
    if command is None:
        raise UserError(
            f"the table {config.where(section)} names no tfperf command: use one of "
            f"{', '.join(sorted(group.commands))}."
        )
    for key in values:
        if key not in _leaf_params(command):
            raise UserError(
                f"tfperf {section} has no --{key.replace('_', '-')}: remove {key} from "
                f"{config.where(section)}."
            )
