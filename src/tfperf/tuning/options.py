"""What a tune is asked to do: one frozen record of its options (the CLI's, with the same
defaults), checked once.

Contract: :class:`TuneOptions` holds every option of :func:`tfperf.tuning.tune` that is a plain
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
from tfperf.tuning.search import STRATEGIES
from tfperf.tuning.trainguard import TrainTolerance


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
    objective: str | None = None
    """``"latency"``, ``"throughput"`` or ``"server"`` (``None``: throughput when
    ``throughput`` is set, else latency)."""
    slo_ms: float | None = None
    """The server objective's latency bound: the p99 every measured rate must stay within."""
    level_requests: int = 300
    """The server objective's load levels: at least this many requests each..."""
    level_s: float = 3.0
    """...and at least this many seconds (:class:`tfperf.serving.LoadScenario`), then on until
    their p99 stands, never past ten times that."""
    level_tail: int = 10
    """Requests beyond p99 a server objective's level needs for it to answer the SLO
    (:mod:`tfperf.serving.tail`): the rule of every load run; a test of the search's workings
    lowers it to keep its levels short."""
    ops: bool = False
    """Profile the default and the answer op by op after the confirmation (``--ops``)."""
    max_memory_mb: float | None = None
    """``--max-memory-mb``: a candidate (or a served layout) whose peak exceeds it is rejected."""
    price_per_hour: float | None = None
    """``--price-per-hour``: the answer's and the default's cost of a million samples."""
    train_tolerance: TrainTolerance | None = None
    """A training tune's guard limits (``None``: :class:`TrainTolerance`'s defaults)."""
    quick_budget: bool = False
    """``budget_s`` is ``--quick``'s, not typed: a training tune may grow it to what the
    50-step guard of one candidate per knob needs (it says so)."""
    quick: bool = False
    """``--quick``: a training search tries one candidate of each knob and stops there."""
    quick_trials: bool = False
    """``max_trials`` is ``--quick``'s, not typed: a training tune sets it to one candidate
    of each knob, and two second looks (a typed one stays as typed)."""

    def __post_init__(self) -> None:
        if self.objective == "throughput":  # one flag for the code that reads `throughput`
            object.__setattr__(self, "throughput", True)

    @property
    def goal(self) -> str:
        """The objective asked for: ``objective``, else what ``throughput`` says."""
        return self.objective or ("throughput" if self.throughput else "latency")

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
        for flag, value in (("--max-memory-mb", self.max_memory_mb),
                            ("--price-per-hour", self.price_per_hour)):
            if value is not None and not value > 0:
                raise UserError(f"{flag} must be a positive number, not {value:g}.")
        self._check_objective()
        if self.batch_sizes is not None and not self.throughput:
            raise UserError("--batch-sizes applies to a throughput tune: add --throughput.")
        if self.knobs and "batch" in self.knobs and not self.throughput:
            raise UserError("the batch knob is tuned for throughput only: add --throughput.")

    def _check_objective(self) -> None:
        if self.objective is not None and self.objective not in OBJECTIVES:
            raise UserError(
                f"unknown objective {self.objective!r}: use one of {', '.join(OBJECTIVES)}."
            )
        if self.throughput and self.goal != "throughput":
            raise UserError(
                f"--throughput is --objective throughput: drop one of it and --objective "
                f"{self.objective}."
            )
        if self.goal == "server" and self.slo_ms is None:
            raise UserError(
                "--objective server needs the latency bound: add --slo-ms MS (the p99 in "
                "milliseconds each request must stay within)."
            )
        if self.slo_ms is not None and self.goal != "server":
            raise UserError("--slo-ms applies to --objective server: add it, or drop --slo-ms.")
        if self.slo_ms is not None and not self.slo_ms > 0:
            raise UserError(
                f"--slo-ms must be a positive number of milliseconds, not {self.slo_ms}."
            )
        if self.goal == "server" and self.strategy != "staged":
            raise UserError(
                "the server search is a staged one over layouts: drop --strategy "
                f"{self.strategy} with --objective server."
            )
        if self.goal == "server" and self.resume is not None:
            raise UserError(
                "a server tune cannot be resumed: run `tfperf tune --objective server` again."
            )

    def record(self, objective: str, space_values: dict[str, Any], batches: tuple) -> dict:
        """The settings a tune run stores."""
        return {
            "objective": objective,
            "slo_ms": self.slo_ms,
            "batch_sizes": list(batches),
            "strategy": self.strategy,
            "max_trials": self.max_trials,
            "budget_s": self.budget_s,
            "tolerance": self.tolerance.to_dict(),
            "threshold": self.threshold,
            "space": {k: list(v) for k, v in space_values.items()},
            "resumed_from": None if self.resume is None else str(self.resume),
        }


OBJECTIVES = ("latency", "throughput", "server")

QUICK = {"max_trials": 8, "budget_s": 120.0, "confirm_rounds": 10}
"""What ``--quick`` means (options given beside it win, as given)."""
DEFAULT_CONFIRM_ROUNDS = 21


def parse_runtimes(text: str | None) -> tuple[str, ...] | None:
    """``--runtimes tf,litert`` as a tuple of known runtime names (``None`` when not given)."""
    if not text:
        return None
    from tfperf.core.knobs import RUNTIMES

    names = tuple(r.strip() for r in text.split(",") if r.strip())
    bad = [r for r in names if r not in RUNTIMES]
    if bad:
        raise UserError(f"unknown runtime {bad[0]!r}: use some of {', '.join(RUNTIMES)}.")
    return names


def parse_batch_sizes(text: str | None) -> tuple[int, ...] | None:
    """``--batch-sizes 1,8,32`` as a tuple of whole numbers >= 1 (``None`` when not given)."""
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items or not all(t.isdigit() and int(t) >= 1 for t in items):
        raise UserError(
            f"--batch-sizes {text!r} is not a list of whole numbers >= 1: write it like 1,8,32."
        )
    return tuple(int(t) for t in items)


def options_from_args(
    *,
    quick: bool = False,
    max_trials: int | None = None,
    budget: float | None = None,
    tolerance: str | None = None,
    runtimes: str | None = None,
    knobs: str | None = None,
    store: str | None = None,
    out_dir: str | None = None,
    confirm_rounds: int | None = None,
    candidate_timeout: float = 300.0,
    batch_sizes: str | None = None,
    **plain: Any,
) -> TuneOptions:
    """The :class:`TuneOptions` of the command line's (and the library's) arguments: the text
    forms parsed, ``--quick`` applied where a limit was not given (one given beside it stays
    as given), the store resolved; ``plain`` are fields taken as they are (``strategy``,
    ``resume``, ``profile_out``, ``seed``, ``throughput``, ``command``)."""
    from tfperf.accuracy import parse_tolerance
    from tfperf.core.paths import resolve_store_path

    if confirm_rounds is not None and confirm_rounds < 6:
        raise UserError("--confirm-rounds must be at least 6 for a significant verdict.")
    quick_budget = quick and budget is None
    quick_trials = quick and max_trials is None
    if quick:
        max_trials = QUICK["max_trials"] if max_trials is None else max_trials
        budget = QUICK["budget_s"] if budget is None else budget
    if confirm_rounds is None:
        confirm_rounds = int(QUICK["confirm_rounds"]) if quick else DEFAULT_CONFIRM_ROUNDS
    return TuneOptions(
        max_trials=max_trials,
        budget_s=budget,
        tolerance=parse_tolerance(tolerance),
        runtimes=parse_runtimes(runtimes),
        knobs=tuple(k.strip() for k in knobs.split(",") if k.strip()) if knobs else None,
        store_path=str(resolve_store_path(store)),
        artifacts_dir=out_dir,
        confirm_rounds=confirm_rounds,
        candidate_timeout_s=candidate_timeout,
        batch_sizes=parse_batch_sizes(batch_sizes),
        quick_budget=quick_budget,
        quick=quick,
        quick_trials=quick_trials,
        **plain,
    )
