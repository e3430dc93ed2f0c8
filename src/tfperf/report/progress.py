"""Progress on stderr while a command measures, shared by the command line and the library.

Contract: :func:`bench_listener` and :func:`tune_progress` return context managers that show a
live rich display in a terminal or a notebook and print finished trials; with ``show=False``
they print nothing at all. Off a terminal the live display is off (a live display on a file or
pipe shows nothing and leaves a blank line).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

from tfperf.report.console import err_console


def _live(console: Console) -> bool:
    """Whether a live display shows on ``console`` (a terminal or a notebook)."""
    return console.is_terminal or console.is_jupyter


def bench_listener(show: bool = True) -> Any:
    """A :class:`tfperf.runner.measure.Listener` that shows rich progress on stderr (a
    context); off a terminal only the failed trials' lines; nothing when ``show`` is false."""
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from tfperf.runner.measure import Listener

    class ProgressListener(Listener):
        def __init__(self) -> None:
            stderr = err_console()
            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                console=stderr,
                transient=True,
                # A live display on a file or pipe shows nothing and leaves a blank line.
                disable=not (show and _live(stderr)),
            )
            self.task = self.progress.add_task("starting workers", total=None, info="")

        def trial(self, trial: Any, event: str) -> None:
            if event == "starting":
                self.progress.update(
                    self.task, description=f"starting {escape(trial.label)}", info=""
                )
            elif show and event == "failed" and not trial.ended_by_bad_input:
                # a bad input ends the command with its own sentence: not said twice
                reason = (trial.error or {}).get("reason", "failed")
                self.progress.console.print(
                    f"[red]{escape(trial.label)}[/]: {escape(reason)}", soft_wrap=True
                )

        def round(self, done: int, elapsed_s: float, budget_s: float) -> None:
            self.progress.update(
                self.task,
                description="measuring",
                total=budget_s,
                completed=min(elapsed_s, budget_s),
                info=f"round {done}",
            )

        def __enter__(self) -> ProgressListener:
            self.progress.start()
            return self

        def __exit__(self, *exc: object) -> None:
            self.progress.stop()

    return ProgressListener()


def tune_progress(show: bool = True) -> Any:
    """A :class:`tfperf.tune.Progress` that shows rich progress on stderr (a context); nothing
    when ``show`` is false."""
    from rich.markup import escape
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    class RichProgress:  # the methods of tfperf.tune.Progress (a layer above this one)
        def __init__(self) -> None:
            stderr = err_console()
            self.bar = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                console=stderr,
                transient=True,
                # A live display on a file or pipe shows nothing and leaves a blank line.
                disable=not (show and _live(stderr)),
            )
            self.task = self.bar.add_task("starting", total=None, info="")
            self.count = 0

        def start(self, total: int | None) -> None:
            self.bar.update(self.task, total=total)

        def phase(self, text: str) -> None:
            self.bar.update(self.task, description=text)

        def candidate(self, name: str) -> None:
            self.bar.update(self.task, description=f"trying {name}", info=f"{self.count} tried")

        def done(self, outcome: Any) -> None:
            self.count += 1
            if outcome.status == "measured":
                median = (outcome.speedup or {}).get("median")
                text = f"[green]{median:.2f}x[/]" if median else "measured"
            else:
                text = f"[yellow]{outcome.status}[/]: {escape(outcome.reason)}"
            if show:
                self.bar.console.print(f"  {escape(outcome.label)}: {text}", soft_wrap=True)

        def __enter__(self) -> RichProgress:
            self.bar.start()
            return self

        def __exit__(self, *exc: object) -> None:
            self.bar.stop()

    return RichProgress()
