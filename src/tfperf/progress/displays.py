"""The live displays of ``tune`` (a :class:`tfperf.tuning.Progress`) and of ``bench`` and
``compare`` (a :class:`tfperf.runner.measure.Listener`); see :mod:`tfperf.progress` for what
they show at each level. Kept apart from the levels because they import the tuning and runner
packages, which the command line must not load to print ``--help``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from tfperf.progress import OUTCOME_STYLE, Display, clock, detail, live, say, tail
from tfperf.report.console import err_console
from tfperf.runner.measure import Listener
from tfperf.tuning import Progress as TuneProgress


def trial_line(number: str, outcome: Any) -> str:
    """One finished tune trial: ``trial 3/12  LABEL  1.92 ms  4.10x  ok``."""
    ms = "-" if outcome.time_ms is None else f"{outcome.time_ms:.3g} ms"
    step_ms = (getattr(outcome, "info", None) or {}).get("step_ms")
    if step_ms:  # a training candidate speaks per step, whatever steps one call runs
        ms = f"{step_ms:.3g} ms/step"
    if hasattr(outcome, "max_qps_at_slo"):  # a server candidate: its rate within the SLO
        qps = outcome.max_qps_at_slo
        ms = "- req/s" if not qps else f"{qps:.4g} req/s"
    median = (outcome.speedup or {}).get("median")
    speedup = "-" if median is None else f"{median:.2f}x"
    reason = " ".join(str(outcome.reason).split())
    status = "ok" if outcome.status == "measured" else f"{outcome.status}: {reason}"
    return f"trial {number}  {outcome.label}  {ms}  {speedup}  {status}"


class _TuneState(Display, TuneProgress):
    """A tune's progress (the module docstring); the bar, when live, reads it."""

    def __init__(self) -> None:
        self.total: int | None = None
        self.budget_s: float | None = None
        self.count = 0
        self.resumed = 0
        self.best: float | None = None
        self.started: float | None = None
        self.searching = False
        self.bar, self.task = _tune_bar(self) if live() else (None, None)

    def number(self, n: int) -> str:
        # past the search's limit: the trials after it (pruning the answer) count on alone
        return f"{n}/{self.total}" if self.total and n <= self.total else str(n)

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
        say(trial_line(self.number(self.count), outcome), OUTCOME_STYLE.get(outcome.status))
        tail((outcome.info or {}).get("error"))
        best = "" if self.best is None else f"best {self.best:.2f}x"
        self._update(completed=self.count if self.total else None, info=best)

    def phase(self, text: str) -> None:
        self.searching = False  # the default starts before the search, the confirmation after
        detail(text)
        self._update(description=text)

    def notice(self, text: str) -> None:
        """One plain line, kept above the bar, whatever the verbosity short of ``-q``."""
        self.searching = False
        say(text)
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
            return Text("" if left is None else f"ETA {clock(left)}", style="progress.remaining")

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


class _BenchListener(Display, Listener):
    """bench's and compare's progress (the module docstring)."""

    def __init__(self) -> None:
        bar = None
        if live():
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
