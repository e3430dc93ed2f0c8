"""Search the configuration space from the default outward, one significance-tested step at a time.

Contract
--------

The search never measures anything itself. It asks an *evaluate* function
``evaluate(config, incumbent, timeout_s) -> Outcome`` to try one config (a dict of the knobs
that differ from the default, see :mod:`tfperf.tuning.space`) measured side by side with the default
and with the current incumbent. An :class:`Outcome` says whether the candidate was
``"measured"``, ``"rejected"`` (its outputs are beyond the accuracy tolerance) or ``"failed"``
(conversion failed, the worker crashed, the time budget ran out), and carries
``speedup`` (vs the default) and ``vs_incumbent`` — :func:`tfperf.core.stats.paired_speedup`
results.

A candidate becomes the new incumbent only when it is *measured* and its ``vs_incumbent``
verdict is ``"faster"`` (significant and above the size threshold). Among several such
candidates for one knob the one with the highest median leads; but each was measured against
the old incumbent in rounds of its own, so when a runner-up's 95% interval reaches the leader's
(up to :data:`CONTENDERS` of them, best median first) the two meet head to head: the
challenger is evaluated with the current champion as its incumbent, and takes its place when
that direct ratio's median is above 1. A head-to-head is an evaluation like any other (counted,
stored, cached for a resume); when the budget runs out before one, the leader by median is
taken. Strategies:

- ``"staged"`` (default): coordinate search — visit each knob in :data:`tfperf.core.knobs.KNOBS`
  order (TensorFlow's knobs, then the runtime, then the runtime's knobs), try every other
  value of it on top of the incumbent, take the best significant step; sweep again over the
  knobs not yet explored from the current incumbent, until every knob has been (at most
  ``sweeps`` sweeps). With ``reach_first`` and no sweeps (a quick training tune), a knob whose
  one candidate looked faster but was undecided is tried once more on top of the answer while
  ``look_again`` allows, and one whose gain the answer's shorter step may have grown while
  ``reach_again`` does (``look_again`` where none is given; :meth:`Search._look_again`).
  With ``runtime_first=True`` (what :func:`tfperf.tuning.tuner.tune` asks for under a trial
  or time budget) the runtime is visited first: the runtimes hold the largest gains, and a
  budget spent on TensorFlow's own knobs would never reach them.
  When the space leaves out the default's runtime (``--runtimes litert`` on a Keras model), its
  own starting point (:meth:`Search.start_point`: plain LiteRT, every knob at its default) is no
  one-knob change of the default, so it is tried before the first sweep.
- ``"optuna"``: Optuna's TPE sampler proposes configs (conditional on the runtime); every
  proposal is evaluated the same way and the same step rule moves the incumbent. Failed or
  rejected candidates are told to Optuna as failed trials. The space's starting point (as
  above) is its first proposal.

Budgets: ``max_trials`` counts evaluated candidates (resumed ones included); ``budget_s``
bounds the wall-clock time of this search: no new candidate starts after it, nor once the time
left is no more than ``reserve(incumbent)`` (what the caller needs after the search for that
answer plus one candidate's cost; none by default). A caller that gives ``reserve`` sized the
budget to reach every knob (``reach_first``): the reach phase is then not cut by the time,
only the sweeps after it are (a typed budget, given without ``reserve``, cuts both). A
candidate that started runs to its own timeout (``timeout_s`` is ``None``): a budget that ends
during a candidate does not make it *failed*. ``cache`` holds outcomes from an earlier,
interrupted search (keyed by :func:`cache_key`: candidate and incumbent labels); they are
reused instead of measured again, so a resumed search replays to the same point and continues.
``on_outcome`` is called with every new outcome (the tune stores it at once). A rejected or
failed candidate is not tried again against a later incumbent: accuracy and crashes do not
depend on what it is compared with.

:meth:`Search.run` returns a :class:`SearchResult`: the incumbent (``{}`` = keep the default),
every outcome in order, and why the search stopped. The final confirmation round belongs to the
caller (:mod:`tfperf.tuning.tuner`).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tfperf.core.knobs import KNOBS, label
from tfperf.tuning.space import Space

STRATEGIES = ("staged", "optuna")
MEASURED, REJECTED, FAILED = "measured", "rejected", "failed"
CONTENDERS = 2
"""Runners-up of one step that may challenge its leader head to head (see the docstring)."""
AHEAD = 2
"""Candidates after the one tried now whose workers the reach phase names ahead (the evaluator
starts two at a time: two starts share two cores)."""


@dataclass
class Outcome:
    """What trying one candidate produced."""

    config: dict
    status: str
    reason: str = ""
    speedup: dict | None = None
    """``paired_speedup`` of the candidate over the default."""
    vs_incumbent: dict | None = None
    """``paired_speedup`` of the candidate over the incumbent it was measured against."""
    incumbent: dict = field(default_factory=dict)
    accuracy: dict | None = None
    time_ms: float | None = None
    info: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The candidate's config label."""
        return label(self.config)

    def beats_incumbent(self) -> bool:
        """Measured and significantly faster than its incumbent."""
        return (
            self.status == MEASURED
            and bool(self.vs_incumbent)
            and (self.vs_incumbent.get("verdict") == "faster")
        )

    def to_dict(self) -> dict:
        """A JSON-able record (``label`` included)."""
        return {"label": self.label, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Outcome:
        """Rebuild from :meth:`to_dict` output."""
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})


Evaluate = Callable[[dict, dict, "float | None"], Outcome]


def _ci(outcome: Outcome) -> tuple[float, float]:
    """The 95% interval of ``outcome``'s speedup over its incumbent (its median where none)."""
    vs = outcome.vs_incumbent or {}
    low, high = (vs.get("ci95") or [None, None])[:2]
    median = vs.get("median") or 0.0
    return (median if low is None else low, median if high is None else high)


def cache_key(config: Mapping[str, Any], incumbent: Mapping[str, Any]) -> str:
    """The key of one evaluation: candidate label and the incumbent it was measured against."""
    return f"{label(config)}|vs|{label(incumbent)}"


@dataclass
class SearchResult:
    """The end of a search."""

    incumbent: dict
    outcomes: list[Outcome]
    stopped: str
    """``"converged"``, ``"max-sweeps"``, ``"max-trials"``, ``"budget"``, ``"exhausted"``, or
    ``"reached"`` (``reach_first`` with no sweeps: one candidate of every knob tried)."""
    unreached: tuple[str, ...] = ()
    """Knobs of the space no candidate of which was tried (the search stopped first)."""
    off_runtime: tuple[str, ...] = ()
    """Knobs no candidate of which was tried because the answer moved to a runtime they do
    not act on before the search reached them (TensorFlow's threads once Keras on JAX won)."""
    pruned: tuple[dict, ...] = ()
    """Knobs taken out of the answer after the search (:mod:`tfperf.tuning.prune`)."""
    kept: tuple[dict, ...] = ()
    """Knobs of the answer whose removal the pruning measured significantly slower (or could
    not take), each with that measurement (:mod:`tfperf.tuning.prune`)."""


class _Stop(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class Search:
    """One search over ``space`` (see the module docstring)."""

    def __init__(
        self,
        space: Space,
        evaluate: Evaluate,
        *,
        max_trials: int | None = None,
        budget_s: float | None = None,
        cache: Mapping[str, Outcome] | None = None,
        on_outcome: Callable[[Outcome], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sweeps: int = 3,
        seed: int = 0,
        runtime_first: bool = False,
        knob_order: tuple[str, ...] | None = None,
        reach_first: bool = False,
        reserve: Callable[[dict], float] | None = None,
        after: Callable[[dict, list[Outcome]], list[dict]] | None = None,
        look_again: Callable[[dict], bool] | None = None,
        reach_again: Callable[[dict], bool] | None = None,
        resize: Callable[[Space, Outcome], Space] | None = None,
    ) -> None:
        self.space = space
        self.evaluate = evaluate
        self.max_trials = max_trials
        self.budget_s = budget_s
        self.cache = dict(cache or {})
        self.on_outcome = on_outcome
        self.clock = clock
        self.sweeps = sweeps
        self.seed = seed
        self.runtime_first = runtime_first
        self.knob_order = knob_order
        self.reach_first = reach_first
        self.reserve = reserve
        self.after = after
        """What the caller measures from an answer after the search (a training tune's
        pruning: the answer with a knob removed), given the outcomes so far: where the reach
        is the search's last phase (``sweeps=0``), the last knobs' workers start beside
        those (:meth:`_then`)."""
        self.look_again = look_again
        self.reach_again = reach_again or look_again
        """Where the reach is the last phase: whether the time allows a second look at this
        candidate (:meth:`_look_again`; ``None``: none); the second for a knob measured on
        a step the answer has since shortened, whose gain there was never measured."""
        self.resize = resize
        """Called with the space and the new answer's outcome at each step: the space sized
        again for the answer (a training tune's steps-per-call ladder, from its step)."""
        self._reaching = False
        self._reach_outcomes: dict[str, Outcome] = {}
        """Each knob's reach candidate's outcome."""
        self.reached: set[str] = set()
        """Knobs at least one candidate of which was tried."""
        self._done: dict[str, Outcome] = {}
        """Measured outcomes of this search by :func:`cache_key`: a candidate is not measured
        twice against the same incumbent."""
        self.incumbent: dict = {}
        self.outcomes: list[Outcome] = []
        self._final: dict[str, Outcome] = {}
        """Rejected and failed candidates: their fate does not depend on the incumbent."""
        self._start = clock()

    # ------------------------------------------------------------------ one evaluation
    def time_left(self) -> float | None:
        """Seconds left in the budget (``None`` = no budget)."""
        if self.budget_s is None:
            return None
        return self.budget_s - (self.clock() - self._start)

    def _out_of_time(self) -> bool:
        """Whether no candidate may start now (see the module docstring's budgets)."""
        left = self.time_left()
        if left is None:
            return False
        if self.reserve is None:
            return left <= 0
        return not self._reaching and left <= self.reserve(dict(self.incumbent))

    def _try(self, config: dict, against: dict | None = None) -> Outcome:
        """Evaluate ``config`` against ``against`` (default: the incumbent), or replay it."""
        config = self.space.canonical(config)
        incumbent = self.incumbent if against is None else self.space.canonical(against)
        key = cache_key(config, incumbent)
        known = self._final.get(label(config)) or self._done.get(key)
        if known is not None:
            return known
        if key in self.cache:
            outcome = self.cache.pop(key)
        else:
            if self.max_trials is not None and len(self.outcomes) >= self.max_trials:
                raise _Stop("max-trials")
            if self._out_of_time():
                raise _Stop("budget")
            outcome = self.evaluate(config, dict(incumbent), None)
            if self.on_outcome is not None:
                self.on_outcome(outcome)
        self.outcomes.append(outcome)
        if outcome.status != MEASURED:
            self._final[label(config)] = outcome
        else:
            self._done[key] = outcome
        return outcome

    def _step(self, candidates: list[Outcome]) -> bool:
        """Move the incumbent to the best significant improvement among ``candidates``."""
        better = sorted(
            (o for o in candidates if o.beats_incumbent()),
            key=lambda o: o.vs_incumbent["median"],
            reverse=True,
        )
        if not better:
            return False
        champion, stop = self._head_to_head(better)
        self.incumbent = self.space.canonical(champion)
        self._resize()
        if stop is not None:
            raise stop
        return True

    def _resize(self) -> None:
        """Size the space again for the new answer (:attr:`resize`), from its latest
        measurement."""
        if self.resize is None:
            return
        wanted = label(self.incumbent)
        for outcome in reversed(self.outcomes):
            if outcome.status == MEASURED and outcome.label == wanted:
                self.space = self.resize(self.space, outcome)
                return

    def _head_to_head(self, better: list[Outcome]) -> tuple[dict, _Stop | None]:
        """The config that wins among ``better`` (significant steps, best median first), and
        the stop that cut the head-to-heads short (out of trials or time), if one did.

        Runners-up whose interval overlaps the leader's challenge the champion in turn; a
        challenger takes its place only when it is significantly faster than the champion
        (the verdict rule every other step uses: a direct median above 1 within the noise
        leaves the leader).
        """
        champion = better[0].config
        floor = _ci(better[0])[0]
        contenders = [o for o in better[1 : 1 + CONTENDERS] if _ci(o)[1] >= floor]
        for challenger in contenders:
            try:
                duel = self._try(challenger.config, against=champion)
            except _Stop as stop:
                return champion, stop
            if duel.beats_incumbent():
                champion = challenger.config
        return champion, None

    # ------------------------------------------------------------------ strategies
    def run(self, strategy: str = "staged", max_proposals: int | None = None) -> SearchResult:
        """Run ``strategy`` until converged, out of trials, or out of time."""
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}")
        try:
            stopped = self._staged() if strategy == "staged" else self._optuna(max_proposals)
        except _Stop as stop:
            stopped = stop.why
        # a knob with no value to try from the answer (threads on JAX) was not left by the
        # budget: the space's unavailable list says why it does not apply there
        untried = [k for k in self._knob_order() if k not in self.reached]
        unreached = tuple(k for k in untried if self._neighbours(k))
        off_runtime = tuple(k for k in untried if not self._neighbours(k)
                            and self.space.neighbours({}, k))
        return SearchResult(dict(self.incumbent), list(self.outcomes), stopped, unreached,
                            off_runtime)

    def start_point(self) -> dict:
        """The space's own starting config where no one-knob change of the default reaches it.

        The default (``{}``, what every candidate is measured against) runs on the space's bare
        runtime. When the space leaves that runtime out (``--runtimes litert`` on a Keras
        model), its configs run on its first runtime, and a knob's neighbours of the default
        change a knob on top of it (``runtime=litert,runtime_threads=1``): the runtime alone
        (``runtime=litert``) would never be measured, and with a single runtime the runtime is
        not even a knob. Returns that config, or ``{}`` where the default or the runtime knob
        already covers it.
        """
        start = self.space.canonical({})
        if not start:
            return {}
        reached = {label(c) for c in self.space.neighbours({}, "runtime")}
        return {} if label(start) in reached else start

    def _knob_order(self) -> list[str]:
        """The knobs in the order the staged search visits them."""
        knobs = self.space.knobs()
        if self.knob_order:
            rank = {k: i for i, k in enumerate(self.knob_order)}
            knobs.sort(key=lambda k: rank.get(k, len(rank)))
        if self.runtime_first and "runtime" in knobs:
            knobs.remove("runtime")
            knobs.insert(0, "runtime")
        return knobs

    def _staged(self) -> str:
        explored: dict[str, str] = {}  # knob -> incumbent label it was last explored from
        start = self.start_point()
        if start:
            self._step([self._try(start)])
        if self.reach_first:
            self._reach()
            if not self.sweeps:
                self._look_again()
                return "reached"
        for _ in range(self.sweeps):
            for knob in self._knob_order():
                if explored.get(knob) == label(self.incumbent):
                    continue
                tried: list[Outcome] = []
                try:
                    for candidate in self._neighbours(knob):
                        tried.append(self._try(candidate))
                        self.reached.add(knob)
                finally:
                    # A budget that runs out mid-knob still keeps the best step measured so far.
                    self._step(tried)
                explored[knob] = label(self.incumbent)
            if all(explored.get(k) == label(self.incumbent) for k in self.space.knobs()):
                return "converged"
        return "max-sweeps"

    def _reach(self) -> None:
        """One candidate of every knob first, in search order (the most promising value:
        the most steps per call, else the first other value), each step taken when it is
        significant, so that a budget that ends early has still measured every knob once."""
        knobs = self._knob_order()
        self._reaching = True
        try:
            for at, knob in enumerate(knobs):
                first = self._reach_candidate(knob)
                if first is None:
                    continue
                self._start_ahead(knobs[at:])
                self._tell_next_if_won(knobs[at + 1:])
                outcome = self._try(first)
                self.reached.add(knob)
                self._reach_outcomes[knob] = outcome
                self._step([outcome])
        finally:
            self._reaching = False
            self._tell_next_if_won(None)

    def _look_again(self) -> None:
        """After a reach that ends the search: a knob whose one candidate was undecided
        against its incumbent (:meth:`_promising`) is tried once more, its reach candidate
        from the answer, best median first, while :attr:`look_again` says the time allows.
        One noisy comparison otherwise decides such a knob for good (a quick tune of a
        transformer measured 8 steps per call at 1.11x [1.00-1.15] and answered without it,
        0.78-0.85 of the answers with it)."""
        if self.look_again is None:
            return
        for knob, stale in self._promising():
            candidate = self._reach_candidate(knob)
            if candidate is None or self._known(self.space.canonical(candidate)):
                continue
            allows = self.reach_again if stale else self.look_again
            if not allows(candidate):
                return
            self._tell_next_if_won([])
            try:
                self._step([self._try(candidate)])
            finally:
                self._tell_next_if_won(None)

    def _promising(self) -> list[tuple[str, bool]]:
        """The knobs of :meth:`_look_again`, best median first, each with whether it is
        *stale* (its gain may have grown on the answer's shorter step): their reach
        candidate, not the answer's, was not significantly faster than its incumbent, and
        either measured above the threshold or, stale, amortizes a fixed cost
        (:attr:`~tfperf.core.knobs.Knob.amortizes`) and was measured before the answer
        shortened the step by more than the threshold (a quick tune of a transformer
        measured 8 steps per call at 0.98x [0.85-1.15] the default's 17.4-ms step and
        answered ``xla=jit`` alone, 11.4 ms, 0.82 of the answers with both); a knob the
        answer holds whose ladder grew since (:meth:`_grew`) is stale too."""
        found = []
        for knob, outcome in self._reach_outcomes.items():
            vs = outcome.vs_incumbent or {}
            median = float(vs.get("median") or 0.0)
            bound = 1.0 + float(vs.get("threshold") or 0.0)
            if outcome.status != MEASURED:
                continue
            if outcome.beats_incumbent() or self.incumbent.get(knob) == outcome.config.get(knob):
                if self._grew(knob, outcome, bound):
                    found.append((median, knob, True))
                continue
            stale = KNOBS[knob].amortizes and self._shortened(outcome.incumbent, bound)
            if median > bound or stale:
                found.append((median, knob, stale))
        return [(knob, stale) for _, knob, stale in sorted(found, reverse=True)]

    def _grew(self, knob: str, outcome: Outcome, bound: float) -> bool:
        """Whether a knob the answer holds, one that hides a fixed cost, now has a larger
        value to try from the answer than the one it holds (its ladder sized again for the
        shorter step, :attr:`resize`), the answer having run faster than when the knob won by
        more than ``bound`` (a transformer's steps per call won at 8 on a 34-ms step; XLA then
        cut it to 22 ms, where 16 steps a call fit, and 8 with XLA ran 0.93 of 32 with XLA)."""
        if not KNOBS[knob].amortizes:
            return False
        candidate = self._reach_candidate(knob)
        if candidate is None or self._known(self.space.canonical(candidate)):
            return False
        new, held = candidate.get(knob), self.incumbent.get(knob)
        if not all(v is None or isinstance(v, int) for v in (new, held)):
            return False  # not a count (input_pipeline=tuned): nothing larger to try
        larger = int(new or 1) > int(held or 1)
        return larger and self._shortened(outcome.config, bound)

    def _shortened(self, then_config: Mapping[str, Any], bound: float) -> bool:
        """Whether the answer runs faster than ``then_config`` by more than ``bound``, both
        measured against the default."""
        then, now = self._speedup_of(then_config), self._speedup_of(self.incumbent)
        return then is not None and now is not None and now > then * bound

    def _speedup_of(self, config: Mapping[str, Any]) -> float | None:
        """The median speedup over the default of ``config``'s latest measurement (1 for the
        default), ``None`` where it has none."""
        if not config:
            return 1.0
        wanted = label(config)
        for outcome in reversed(self.outcomes):
            if outcome.status == MEASURED and outcome.label == wanted and outcome.speedup:
                return float(outcome.speedup.get("median") or 0.0) or None
        return None

    def _tell_next_if_won(self, knobs: list[str] | None) -> None:
        """Give an evaluator that can use it (``next_if_won``) what comes after the candidate
        tried now if it becomes the answer: the reach candidates of the next :data:`AHEAD`
        ``knobs`` from it, then what follows the search (:meth:`_then`); ``None``: nothing
        now. An evaluator that checks a winner before it is taken (a training tune's guard:
        compilation and steps, nothing timed) starts their workers meanwhile."""
        if not hasattr(self.evaluate, "next_if_won"):
            return
        if knobs is None:
            self.evaluate.next_if_won = None
            return
        # the winner's removal of its last knob is the incumbent, measured by then
        now = label(self.incumbent)

        def next_if_won(winner: dict) -> list[dict]:
            winner = self.space.canonical(winner)
            then = [c for c in self._then(winner) if label(c) != now]
            upcoming = self._upcoming(knobs, self._within_trials(AHEAD, trying=1), winner)
            return [*upcoming, *then][:AHEAD]

        self.evaluate.next_if_won = next_if_won

    def _then(self, answer: dict) -> list[dict]:
        """What the caller measures after a search that ends at ``answer`` (:attr:`after`),
        where the reach is the last phase; else nothing."""
        if self.after is None or self.sweeps:
            return []
        return [self.space.canonical(c) for c in self.after(answer, self.outcomes)]

    def _upcoming(self, knobs: list[str], count: int, incumbent: dict | None = None) -> list[dict]:
        """The reach candidates of ``knobs`` from ``incumbent`` (default: the incumbent), the
        first ``count`` of them (a knob with no value to try there has none)."""
        found = (self._reach_candidate(k, incumbent) for k in knobs)
        return list(itertools.islice((c for c in found if c is not None), count))

    def _reach_candidate(self, knob: str, incumbent: dict | None = None) -> dict | None:
        """The one candidate :meth:`_reach` tries of ``knob`` from ``incumbent`` (default:
        the incumbent)."""
        candidates = self._neighbours(knob, incumbent)
        if knob == "steps_per_execution":
            candidates.sort(key=lambda c: -int(c.get(knob) or 1))
        return candidates[0] if candidates else None

    def _start_ahead(self, knobs: list[str]) -> None:
        """Tell an evaluator that can start workers ahead (``start_ahead``) which candidates
        it tries now and next if the incumbent stays: the reach candidates of ``knobs`` (the
        first is the knob tried now; :data:`AHEAD` after it) not tried yet, then what follows
        the search (:meth:`_then`: the last knob's worker started alone left a core idle
        through a transformer's 10-s start, and the pruning's first removal then started
        alone after it). Their starts then overlap, two at a time (see
        :meth:`tfperf.tuning.evaluate.Evaluator.start_ahead`)."""
        start_ahead = getattr(self.evaluate, "start_ahead", None)
        if start_ahead is None:
            return
        upcoming = map(self.space.canonical,
                       self._upcoming(knobs, self._within_trials(AHEAD + 1)))
        fresh = [c for c in upcoming if not self._known(c)]
        fresh += self._then(self.incumbent)
        if fresh:
            start_ahead(*fresh[:AHEAD + 1])

    def _within_trials(self, count: int, trying: int = 0) -> int:
        """``count``, or fewer where ``max_trials`` leaves fewer candidates to evaluate
        after the ``trying`` ones being evaluated now: a worker started ahead for a candidate
        past the limit is never measured, and its start takes a core from the one measured
        now (a tune with ``--max-trials 1`` started two)."""
        if self.max_trials is None:
            return count
        return max(0, min(count, self.max_trials - len(self.outcomes) - trying))

    def _known(self, config: dict) -> bool:
        """Whether ``config`` against the incumbent has an outcome already (this search's, a
        resumed one's, or a final one)."""
        key = cache_key(config, self.incumbent)
        return key in self.cache or key in self._done or label(config) in self._final

    def _neighbours(self, knob: str, incumbent: dict | None = None) -> list[dict]:
        """The staged step's candidates for ``knob`` from ``incumbent`` (default: the
        incumbent): the runtimes at full parallelism (:meth:`Space.runtime_step`), any other
        knob's other values."""
        start = self.incumbent if incumbent is None else incumbent
        if knob == "runtime":
            return self.space.runtime_step(start)
        return self.space.neighbours(start, knob)

    def _optuna(self, max_proposals: int | None) -> str:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = optuna.samplers.TPESampler(seed=self.seed, n_startup_trials=5)
        study = optuna.create_study(direction="maximize", sampler=sampler)
        points = {label(p) for p in self.space.points()}
        seen: set[str] = set()
        limit = max_proposals or 20 * max(1, len(points))
        start = self.start_point()
        if start:
            study.enqueue_trial(self._params(start))
        for _ in range(limit):
            if seen >= points:
                return "exhausted"
            trial = study.ask()
            config = self._suggest(trial)
            name = label(config)
            if name in seen or name == "default" or not self.space.allowed(config):
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                seen.add(name)
                continue
            seen.add(name)
            outcome = self._try(config)
            self._step([outcome])
            if outcome.status == MEASURED and outcome.speedup and outcome.speedup.get("median"):
                study.tell(trial, math.log(outcome.speedup["median"]))
            else:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
        return "exhausted"

    def _params(self, config: Mapping[str, Any]) -> dict:
        """The Optuna parameters under which :meth:`_suggest` proposes ``config``."""
        runtime = self.space.canonical(config).get("runtime", self.space.bare_runtime)
        params: dict[str, Any] = {"runtime": runtime}
        for knob in self.space.knobs():
            if knob == "runtime" or not self.space.applicable(knob, {"runtime": runtime}):
                continue
            choices = list(self.space.values[knob])
            value = config.get(knob, KNOBS[knob].default)
            params[f"{knob}@{runtime}"] = choices.index(value) if value in choices else 0
        return params

    def _suggest(self, trial: Any) -> dict:
        """A config proposed by ``trial``: the runtime first, then the knobs it allows."""
        values = self.space.values
        runtimes = list(values.get("runtime", ("tf",)))
        config: dict = {"runtime": trial.suggest_categorical("runtime", runtimes)}
        for knob in self.space.knobs():
            if knob == "runtime" or not self.space.applicable(knob, config):
                continue
            choices = list(values[knob])
            index = trial.suggest_categorical(
                f"{knob}@{config['runtime']}", list(range(len(choices)))
            )
            config[knob] = choices[index]
        return self.space.canonical(config)
