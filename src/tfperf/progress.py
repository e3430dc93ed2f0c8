"""Progress of the long commands on stderr: a rich bar in a terminal or a notebook, plain lines
elsewhere; shared by the command line and the library API.

Contract: :func:`tune_progress` is the :class:`tfperf.tune.Progress` of ``tfperf tune`` and
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
import time
from collections.abc import Iterator
from typing import Any

import click

from tfperf.report.console import err_console
from tfperf.runner.measure import Listener
from tfperf.tune import Progress as TuneProgress

QUIET, NORMAL, VERBOSE = -1, 0, 1
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
_STYLE = {"rejected": "yellow", "failed": "red"}


def say(text: str, style: str | None = None) -> None:
    """One plain line on stderr (above a live display), unless ``-q``."""
    note(text, markup=False, style=style)


def tail(error: dict | None) -> None:
    """``-v``: the last lines of a failed worker's log."""
    lines = ((error or {}).get("stderr_tail") or "").strip().splitlines()[-TAIL_LINES:]
    for line in lines:
        detail(f"    | {line}")


class _Display:
    """A context that runs a rich live display, when there is one."""

    bar: Any = None

    def __enter__(self) -> Any:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def _live() -> bool:
    """Whether a live display applies: stderr is a terminal (or a notebook) and ``-q`` was not
    given."""
    stderr = err_console()
    return (stderr.is_terminal or stderr.is_jupyter) and level() > QUIET


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds + 0.5), 60)
    if minutes >= 60:
        return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def trial_line(number: str, outcome: Any) -> str:
    """One finished tune trial: ``trial 3/12  LABEL  1.92 ms  4.10x  ok``."""
    ms = "-" if outcome.time_ms is None else f"{outcome.time_ms:.3g} ms"
    median = (outcome.speedup or {}).get("median")
    speedup = "-" if median is None else f"{median:.2f}x"
    reason = " ".join(str(outcome.reason).split())
    status = "ok" if outcome.status == "measured" else f"{outcome.status}: {reason}"
    return f"trial {number}  {outcome.label}  {ms}  {speedup}  {status}"


class _TuneState(_Display, TuneProgress):
    """A tune's progress (the module docstring); the bar, when live, reads it."""

    def __init__(self) -> None:
        self.total: int | None = None
        self.budget_s: float | None = None
        self.count = 0
        self.resumed = 0
        self.best: float | None = None
        self.started: float | None = None
        self.searching = False
        self.bar, self.task = _tune_bar(self) if _live() else (None, None)

    def number(self, n: int) -> str:
        return f"{n}/{self.total}" if self.total else str(n)

    def start(self, total: int | None, budget_s: float | None = None, resumed: int = 0) -> None:
        self.total, self.budget_s, self.count, self.resumed = total, budget_s, resumed, resumed
        self.started, self.searching = time.monotonic(), True
        self._update(total=total or budget_s, completed=resumed if total else 0)

    def candidate(self, name: str) -> None:
        self._update(description=f"trial {self.number(self.count + 1)} {name}")

    def done(self, outcome: Any) -> None:
        self.count += 1
        median = (outcome.speedup or {}).get("median")
        if outcome.status == "measured" and median and (self.best is None or median > self.best):
            self.best = median
        say(trial_line(self.number(self.count), outcome), _STYLE.get(outcome.status))
        tail((outcome.info or {}).get("error"))
        best = "" if self.best is None else f"best {self.best:.2f}x"
        self._update(completed=self.count if self.total else None, info=best)

    def phase(self, text: str) -> None:
        self.searching = False  # the default starts before the search, the confirmation after
        detail(text)
        self._update(description=text)

    def eta(self) -> float | None:
        """Seconds until the search stops at its trial or time limit (``None``: unknown)."""
        if not self.searching or self.started is None:
            return None
        elapsed = time.monotonic() - self.started
        left = [max(0.0, self.budget_s - elapsed)] if self.budget_s else []
        new = self.count - self.resumed
        if self.total and new > 0:
            left.append(elapsed / new * max(0, self.total - self.count))
        return min(left) if left else None

    def tick(self) -> None:
        """Move a clock-driven bar (a time limit, no trial limit) to the time spent."""
        if self.searching and self.budget_s and not self.total and self.started is not None:
            elapsed = time.monotonic() - self.started
            self._update(completed=min(elapsed, self.budget_s))

    def _update(self, **fields: Any) -> None:
        if self.bar is not None:
            self.bar.update(self.task, **{k: v for k, v in fields.items() if v is not None})


def _tune_bar(state: _TuneState) -> tuple[Any, Any]:
    """A rich progress display over ``state`` and its one task."""
    from rich.progress import (
        BarColumn,
        Progress,
        ProgressColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    class Eta(ProgressColumn):
        def render(self, task: Any) -> Text:
            left = state.eta()
            return Text("" if left is None else f"ETA {_clock(left)}", style="progress.remaining")

    class Clocked(Progress):
        def get_renderables(self) -> Iterator[Any]:
            state.tick()
            yield from super().get_renderables()

    bar = Clocked(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        Eta(),
        console=err_console(),
        transient=True,
    )
    return bar, bar.add_task("starting", total=None, info="")


def tune_progress() -> TuneProgress:
    """The progress display of ``tfperf tune`` (a context)."""
    return _TuneState()


class _BenchListener(_Display, Listener):
    """bench's and compare's progress (the module docstring)."""

    def __init__(self) -> None:
        bar = None
        if _live():
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            bar = Progress(
                TextColumn("{task.description}", markup=False),
                BarColumn(),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                console=err_console(),
                transient=True,
            )
            self.task = bar.add_task("starting workers", total=None, info="")
        self.bar = bar

    def trial(self, trial: Any, event: str) -> None:
        if event == "starting" and self.bar is not None:
            self.bar.update(self.task, description=f"starting {trial.label}", info="")
        elif event == "ready":
            cold = "" if trial.cold_start_s is None else f", cold start {trial.cold_start_s:.2f} s"
            detail(f"{trial.label}: ready{cold}")
        elif event == "failed" and not trial.ended_by_bad_input:  # the CLI says it once
            reason = (trial.error or {}).get("reason", "failed")
            say(f"{trial.label}: failed: {reason}", "red")
            tail(trial.error)

    def block(self, trial: Any, samples_s: list[float], phase: str, info: dict) -> None:
        if not samples_s:
            return
        median_ms = sorted(samples_s)[len(samples_s) // 2] * 1e3
        where = f" round {info['round']}" if "round" in info else ""
        where += f" process {info['process']}" if info.get("process") else ""
        calls = len(samples_s)
        detail(f"{trial.label}: {phase} block{where}: {calls} calls, median {median_ms:.3g} ms")

    def round(self, done: int, elapsed_s: float, budget_s: float) -> None:
        if self.bar is not None:
            self.bar.update(
                self.task,
                description="measuring",
                total=budget_s,
                completed=min(elapsed_s, budget_s),
                info=f"round {done}",
            )


def bench_progress() -> Listener:
    """The progress display of ``tfperf bench`` and ``tfperf compare`` (a context)."""
    return _BenchListener()


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
    if not _live():
        yield _Status()
        return
    with err_console().status(text) as spinner:
        yield _Status(spinner)
