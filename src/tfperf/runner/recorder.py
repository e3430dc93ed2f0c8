"""The one run recorder: a run in the store, written as it happens, always closed.

Contract:

- :class:`RunRecorder` opens a run in the store (kind, command, workload, machine, settings,
  and for a run measured on a node of a fleet its ``tags``: :data:`tfperf.store.RUN_TAGS`)
  and writes its trials, blocks, trial infos, comparisons and end as they happen, so a run
  killed at any moment keeps everything it measured (each write is committed at once).
- Used as a context manager it always closes the run: :meth:`finish` records ``ok``,
  ``partial`` or ``failed`` with a summary; leaving the block without it records ``failed``
  (with the error's sentence) for a :class:`~tfperf.core.errors.UserError`, ``interrupted``
  for Ctrl-C or any other exception, and ``interrupted`` when nothing was said.
- :class:`MeasureRecorder` is the :class:`~tfperf.runner.measure.Listener` that records a
  :func:`~tfperf.runner.measure.measure` run through a RunRecorder: a trial per config when
  its worker starts, its info once ready (``info(trial)``), a failed trial with its reason,
  every block; it hands each event on to ``inner`` (progress, a refusal rule).

bench, compare, builds compare, tune and pipeline record their runs here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tfperf.core.errors import UserError
from tfperf.runner.handle import WorkerFailed
from tfperf.runner.measure import Listener, Trial


class RunRecorder:
    """One run in the store (see the module docstring)."""

    def __init__(
        self,
        store: Any,
        kind: str,
        command: str,
        workload: Mapping[str, Any],
        machine: Mapping[str, Any],
        settings: Mapping[str, Any],
        tags: Mapping[str, Any] | None = None,
    ) -> None:
        self.store = store
        self.run_id: int = store.new_run(
            kind, command, dict(workload), dict(machine), settings, dict(tags or {})
        )
        self.status: str | None = None
        """How the run ended (``None`` while it runs)."""

    def trial(self, label: str, config: Mapping[str, Any], role: str) -> int:
        """A new trial of this run; its id."""
        return int(self.store.new_trial(self.run_id, label, dict(config), role))

    def trial_info(self, trial_id: int, info: Mapping[str, Any]) -> None:
        self.store.set_trial_info(trial_id, dict(info))

    def block(
        self, trial_id: int, samples: list[float], phase: str, info: Mapping[str, Any] | None = None
    ) -> None:
        self.store.add_block(trial_id, samples, phase, dict(info or {}))

    def finish_trial(
        self,
        trial_id: int,
        status: str,
        info: Mapping[str, Any],
        error: Mapping[str, Any] | None = None,
    ) -> None:
        detail = None if error is None else dict(error)
        self.store.finish_trial(trial_id, status, dict(info), detail)

    def comparison(self, baseline_id: int, candidate_id: int, speedup: Mapping[str, Any]) -> None:
        self.store.add_comparison(self.run_id, baseline_id, candidate_id, dict(speedup))

    def finish(self, status: str, summary: Mapping[str, Any]) -> None:
        """Close the run as ``status`` with ``summary`` (once; later calls do nothing)."""
        if self.status is not None:
            return
        self.status = status
        self.store.finish_run(self.run_id, status, dict(summary))

    def __enter__(self) -> RunRecorder:
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if isinstance(exc, UserError):
            self.finish("failed", {"error": str(exc)})
        else:
            self.finish("interrupted", {})


class MeasureRecorder(Listener):
    """Records a ``measure()`` run as it goes, then tells ``inner`` (module docstring)."""

    def __init__(
        self,
        run: RunRecorder,
        inner: Listener | None = None,
        info: Callable[[Trial], Mapping[str, Any]] | None = None,
    ) -> None:
        self.run = run
        self.inner = inner or Listener()
        self.info = info or (lambda trial: {})
        self.trial_ids: dict[int, int] = {}
        """Trial index in the measurement -> trial id in the store."""
        self.rounds = 0

    def trial(self, trial: Trial, event: str) -> None:
        if trial.index not in self.trial_ids:
            config = trial.config.to_dict()
            self.trial_ids[trial.index] = self.run.trial(trial.label, config, trial.role)
        trial_id = self.trial_ids[trial.index]
        if event == "ready":
            self.run.trial_info(trial_id, self.info(trial))
        elif event == "failed":
            self.run.finish_trial(trial_id, "failed", self.info(trial), trial.error)
        self.inner.trial(trial, event)

    def block(self, trial: Trial, samples_s: list[float], phase: str, info: dict) -> None:
        self.run.block(self.trial_ids[trial.index], samples_s, phase, info)
        self.inner.block(trial, samples_s, phase, info)

    def round(self, done: int, elapsed_s: float, budget_s: float) -> None:
        self.rounds = done
        self.inner.round(done, elapsed_s, budget_s)

    def refuse(self, trial: Trial, ready: dict[str, Any]) -> WorkerFailed | None:
        return self.inner.refuse(trial, ready)
