"""``-q/--quiet`` and ``-v/--verbose``: one pair of options that every command takes.

Contract: :func:`add_options` gives a command (and, for a group, every command under it) the
two options; the CLI applies it to the whole tree once every command is registered, so a new
command gets them without asking. :func:`level` is the level the command line asked for:
:data:`QUIET` (only the results: no progress, no notes; warnings and errors still print),
:data:`NORMAL` or :data:`VERBOSE` (more detail: each measured block, a failed worker's last
lines, where settings came from). Both at once is a :class:`~tfperf.core.errors.UserError`
(exit 2). Neither changes what ``--json`` prints on stdout: the extra lines go to stderr.
"""

from __future__ import annotations

from typing import Any

import click

from tfperf.core.errors import UserError
from tfperf.progress import LEVEL_KEY as _KEY
from tfperf.progress import NORMAL, QUIET, VERBOSE, detail, level, note

__all__ = ["NORMAL", "QUIET", "VERBOSE", "add_options", "detail", "level", "note"]


def _setter(wanted: int) -> Any:
    def callback(ctx: click.Context, param: click.Parameter, value: bool) -> None:
        if not value:
            return
        if ctx.meta.get(_KEY, NORMAL) not in (NORMAL, wanted):
            raise UserError("-q/--quiet and -v/--verbose contradict each other: give one of them.")
        ctx.meta[_KEY] = wanted

    return callback


def _options() -> list[click.Option]:
    return [
        click.Option(
            ["-q", "--quiet"],
            is_flag=True,
            expose_value=False,
            callback=_setter(QUIET),
            help="Print only the results: no progress, no notes (errors still print).",
        ),
        click.Option(
            ["-v", "--verbose"],
            is_flag=True,
            expose_value=False,
            callback=_setter(VERBOSE),
            help="Print more detail on stderr (measured blocks, worker logs, settings' sources).",
        ),
    ]


def add_options(command: click.Command) -> None:
    """Give ``command`` (and every command under a group) ``-q`` and ``-v``."""
    command.params.extend(_options())
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_options(sub)
