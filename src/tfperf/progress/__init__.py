"""Progress of the long commands on stderr: a rich bar in a terminal or a notebook, plain lines
elsewhere; shared by the command line and the library API. This module holds the levels and
the lines; the live displays are in :mod:`tfperf.progress.displays`.

Contract: :func:`tune_progress` is the :class:`tfperf.tuning.Progress` of ``tfperf tune`` and
:func:`bench_progress` the :class:`tfperf.runner.measure.Listener` of ``bench``/``compare``;
:func:`status` is the spinner of the one-step commands (doctor, pipeline). Each is a context.

- In a terminal (stderr is a tty), a live display: tune's bar counts trials when it has a trial
  limit (``--max-trials``, ``--quick``), else runs on the clock when it has a time limit
  (``--budget``), with an ETA, the trial being tried and the best speedup so far; bench's bar
  runs on its budget. Lines for finished things print above it.
- Off a terminal (CI logs, pipes, files) nothing is animated: the same lines alone, one per
  finished tune trial (``trial 3/12  runtime=litert-dynint8  1.92 ms  4.10x  ok``) and, for
  bench, one per trial that failed (the others finish together, in the results table).
- The level comes from the command line's ``-q``/``-v`` (:mod:`tfperf.cli.verbosity`) or, in a
  library call, from :func:`at_level` (``progress=False`` is :data:`QUIET`).
- ``-q``: none of it. ``-v``: also each phase of a tune, each bench worker ready and every
  block it measured, and the last lines of a failed worker's log.

Nothing here imports TensorFlow; rich is imported when a display is made.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import click

from tfperf.report.console import err_console

QUIET, NORMAL, VERBOSE = -1, 0, 1
NOT_TRIED = "not tried: "
"""How a worker's sentence for a candidate that does not apply to the model begins."""
LEVEL_KEY = "tfperf.verbosity"
"""Where the command line keeps the level it was asked for (``click.Context.meta``)."""
_forced: list[int] = []


def level() -> int:
    """The verbosity asked for: the library call's (:func:`at_level`), else the command
    line's ``-q``/``-v``, else :data:`NORMAL`."""
    if _forced:
        return _forced[-1]
    ctx = click.get_current_context(silent=True)
    return NORMAL if ctx is None else ctx.meta.get(LEVEL_KEY, NORMAL)


@contextlib.contextmanager
def at_level(wanted: int) -> Iterator[None]:
    """Show progress at ``wanted`` within the block (the library API's ``progress=``)."""
    _forced.append(wanted)
    try:
        yield
    finally:
        _forced.pop()


def note(text: str, *, markup: bool = True, style: str | None = None) -> None:
    """Print ``text`` (rich markup unless ``markup=False``) on stderr unless quiet."""
    if level() > QUIET:
        err_console().print(text, style=style, soft_wrap=True, markup=markup, highlight=False)


def detail(text: str) -> None:
    """Print plain ``text`` on stderr when verbose only."""
    if level() >= VERBOSE:
        note(text, markup=False, style="dim")


TAIL_LINES = 8
"""Lines of a failed worker's log that ``-v`` shows."""
OUTCOME_STYLE = {"rejected": "yellow", "failed": "red"}


def say(text: str, style: str | None = None) -> None:
    """One plain line on stderr (above a live display), unless ``-q``."""
    note(text, markup=False, style=style)


def tail(error: dict | None) -> None:
    """``-v``: the last lines of a failed worker's log; none where the worker said why the
    candidate is not tried (its sentence is the whole story, and the log holds only the
    traceback that carried it)."""
    if str((error or {}).get("message") or "").startswith(NOT_TRIED):
        return
    lines = ((error or {}).get("stderr_tail") or "").strip().splitlines()[-TAIL_LINES:]
    for line in lines:
        detail(f"    | {line}")


class Display:
    """A context that runs a rich live display, when there is one."""

    bar: Any = None

    def __enter__(self) -> Any:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def live() -> bool:
    """Whether a live display applies: stderr is a terminal (or a notebook) and ``-q`` was not
    given."""
    stderr = err_console()
    return (stderr.is_terminal or stderr.is_jupyter) and level() > QUIET


def clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds + 0.5), 60)
    if minutes >= 60:
        return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


class _Status:
    """What :func:`status` yields: ``update(text)`` moves the spinner and, with ``-v``, says it."""

    def __init__(self, spinner: Any = None) -> None:
        self.spinner = spinner

    def update(self, text: str) -> None:
        detail(text)
        if self.spinner is not None:
            self.spinner.update(text)


@contextlib.contextmanager
def status(text: str) -> Iterator[_Status]:
    """A spinner with ``text`` on stderr in a terminal; with ``-v`` every text is also a line
    of its own; with ``-q`` nothing."""
    detail(text)
    if not live():
        yield _Status()
        return
    with err_console().status(text) as spinner:
        yield _Status(spinner)
