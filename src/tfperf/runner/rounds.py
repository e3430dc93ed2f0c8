"""Interleaved rounds: the one engine bench, compare, builds and tune measure with.

Contract:

- A member of the rounds (:class:`Member`) runs one block of calls when asked and says whether
  it still measures. :meth:`Rounds.run` runs rounds: each round runs one block of every live
  member, in an order shuffled each round, hands each block to ``on_block(member, round,
  samples)`` as it arrives, and after the round asks ``stop(rounds_done)`` whether to stop
  (a reason, or ``None`` to go on). It returns ``(rounds_done, reason)``; ``"no live trial"``
  when no member is left.
- The order is shuffled, not rotated: a rotation keeps the cyclic order, so with three
  configs each would always follow the same other one, and a block can be slowed by the one
  before it (that worker's threads still spinning, its data filling the caches); an A/A
  control (the default twice) came out 0.81-0.95 under rotation on a busy machine. The
  shuffle is seeded (:data:`ORDER_SEED`): the same run repeats the same orders. One
  :class:`Rounds` keeps its generator across runs (tune measures many candidates with one).
- :func:`calls_per_block` sizes a block from a worker's warm-up: about ``block_s`` seconds
  of calls at the median of its last five warm-up calls (its first call when it has none).
- :func:`block_info` is the info stored with each steady block: its round and, after the
  first, the worker process that measured it.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

ORDER_SEED = 20_231
"""Seed of the per-round block order."""
MAX_CALLS_PER_BLOCK = 2000
"""Very fast calls get shorter blocks rather than huge sample lists in the store."""


class Member(Protocol):
    """What the rounds ask of each thing they measure."""

    @property
    def alive(self) -> bool:
        """Whether it still measures."""

    def block(self, round_no: int) -> list[float] | None:
        """Run one block of calls in round ``round_no``: its samples (seconds per call), or
        ``None`` when it failed (it is then no longer alive)."""


def calls_per_block(ready: Mapping[str, Any], block_s: float, cap: int | None = None) -> int:
    """Calls that fill about ``block_s`` seconds, from a worker's ``ready`` message."""
    tail = (ready.get("warmup") or {}).get("samples_s", [])[-5:] or [
        ready.get("first_call_s") or block_s
    ]
    per_call = max(statistics.median(tail), 1e-7)
    return int(min(cap or MAX_CALLS_PER_BLOCK, max(1, round(block_s / per_call))))


def block_info(round_no: int, process: int = 0) -> dict[str, int]:
    """``{"round": r}``, plus ``"process"`` for a block from a later worker process."""
    return {"round": round_no} if not process else {"round": round_no, "process": process}


class Rounds:
    """Runs interleaved rounds (see the module docstring)."""

    def __init__(self, seed: int = ORDER_SEED) -> None:
        self._rng = random.Random(seed)

    def run(
        self,
        members: Sequence[Member],
        on_block: Callable[[Member, int, list[float]], None],
        stop: Callable[[int], str | None],
    ) -> tuple[int, str]:
        """Rounds until ``stop`` gives a reason or no member is alive."""
        done = 0
        while True:
            live = [m for m in members if m.alive]
            if not live:
                return done, "no live trial"
            self._rng.shuffle(live)
            for member in live:
                samples = member.block(done)
                if samples is not None:
                    on_block(member, done, samples)
            done += 1
            why = stop(done)
            if why is not None:
                return done, why
