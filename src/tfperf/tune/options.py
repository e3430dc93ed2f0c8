"""What a tune is asked to do: one frozen record of its options (the CLI's, with the same
defaults), checked once.

Contract: :class:`TuneOptions` holds every option of :func:`tfperf.tune.tune` that is a plain
value; :meth:`TuneOptions.check` raises :class:`~tfperf.core.errors.UserError` with one sentence
for a combination that cannot be tuned. :meth:`TuneOptions.record` is what a tune run stores as
its settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfperf.accuracy import DEFAULT_TOLERANCE, Tolerance
from tfperf.core.errors import UserError
from tfperf.core.stats import DEFAULT_THRESHOLD
from tfperf.tune.search import STRATEGIES


@dataclass(frozen=True)
class TuneOptions:
    """How to tune (see ``docs/tune.md``)."""

    strategy: str = "staged"
    max_trials: int | None = None
    budget_s: float | None = None
    """Stop starting candidates after this many seconds."""
    tolerance: Tolerance = DEFAULT_TOLERANCE
    runtimes: tuple[str, ...] | None = None
    """Restrict the runtimes tried (``None``: every one that applies)."""
    knobs: tuple[str, ...] | None = None
    """Tune only these knobs (``None``: all of them)."""
    store_path: str | None = None
    resume: int | str | None = None
    """A tune run whose finished candidates are replayed, not measured again."""
    profile_out: str | None = None
    artifacts_dir: str | None = None
    confirm_rounds: int = 21
    block_s: float = 0.1
    min_rounds: int = 6
    max_rounds: int = 16
    candidate_timeout_s: float = 300.0
    threshold: float = DEFAULT_THRESHOLD
    seed: int = 0
    """Seed of the Optuna strategy."""
    throughput: bool = False
    """Tune samples per second (adds the ``batch`` knob) instead of the time of one call."""
    batch_sizes: tuple[int, ...] | None = None
    command: str = "tfperf tune"

    def check(self) -> None:
        """Raise :class:`UserError` for options that cannot be tuned."""
        if self.strategy not in STRATEGIES:
            raise UserError(
                f"unknown strategy {self.strategy!r}: use one of {', '.join(STRATEGIES)}."
            )
        if self.max_trials is not None and self.max_trials < 1:
            raise UserError("--max-trials must be at least 1.")
        if self.budget_s is not None and self.budget_s <= 0:
            raise UserError("--budget must be a positive number of seconds.")
        if self.batch_sizes is not None and not self.throughput:
            raise UserError("--batch-sizes applies to a throughput tune: add --throughput.")
        if self.knobs and "batch" in self.knobs and not self.throughput:
            raise UserError("the batch knob is tuned for throughput only: add --throughput.")

    def record(self, objective: str, space_values: dict[str, Any], batches: tuple) -> dict:
        """The settings a tune run stores."""
        return {
            "objective": objective,
            "batch_sizes": list(batches),
            "strategy": self.strategy,
            "max_trials": self.max_trials,
            "budget_s": self.budget_s,
            "tolerance": self.tolerance.to_dict(),
            "threshold": self.threshold,
            "space": {k: list(v) for k, v in space_values.items()},
            "resumed_from": None if self.resume is None else str(self.resume),
        }
