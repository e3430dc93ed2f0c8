"""This machine's wake-up latency: how long a thread asleep on a pipe takes to run once woken.

Every request a served layout answers wakes sleeping threads: the instance's, blocked on its
pipe, and the load generator's, blocked in ``select``. Between requests arriving a few
milliseconds apart the CPUs go idle, and waking one costs what the machine makes it cost
(an idle state to leave, a virtual CPU the hypervisor must schedule again): tens of
microseconds on one machine, hundreds on another. That time is the machine's, not the
model's nor tfperf's (``docs/serving.md``, "The harness's own floor").

Contract: :func:`wakeup_latency` has one thread sleep in a blocking ``os.read`` of a pipe
while another, after sleeping :data:`GAP_S` itself (so that the CPUs go idle, as between
requests a few milliseconds apart), writes one byte to it; a sample is the time from just
before the write to the moment the woken thread runs (``time.perf_counter``, one clock for
both). Where this process may run on two CPUs or more, the two threads are pinned to two
different ones: the woken thread's CPU is idle and must be woken too, as an instance's is
when the generator sends it a request. It takes at most ``rounds`` samples and stops after
``budget_s`` seconds, so it costs its caller about that much; it returns a :class:`Wakeup`
(p50 and p99 in ms, the samples' count and whether the threads were on two CPUs), or
``None`` where threads, pipes or pinning fail. It never imports TensorFlow.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

ROUNDS = 80
GAP_S = 0.002
"""The caller's sleep before each wake-up: long enough for the CPUs to go idle."""
BUDGET_S = 0.17


@dataclass(frozen=True)
class Wakeup:
    """Wake-up latency of a sleeping thread, woken through a pipe (module docstring)."""

    p50_ms: float
    p99_ms: float
    samples: int
    cross_cpu: bool
    """The two threads ran on two different CPUs."""

    def to_dict(self) -> dict[str, float | int | bool]:
        return {"p50_ms": self.p50_ms, "p99_ms": self.p99_ms, "samples": self.samples,
                "cross_cpu": self.cross_cpu}


def _quantile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile of sorted values, linearly interpolated (as numpy's default)."""
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def _pin(cpu: int | None) -> None:
    if cpu is not None:
        os.sched_setaffinity(threading.get_native_id(), {cpu})  # this thread alone


class _Pair:
    """The sleeping thread and the waking one, each pinned to a CPU of its own when given."""

    def __init__(self, cpus: tuple[int | None, int | None]) -> None:
        self.cpus = cpus
        self.wake_r, self.wake_w = os.pipe()
        self.back_r, self.back_w = os.pipe()
        self.sent: list[float] = []
        self.woke: list[float] = []
        self.failed = False

    def sleeper(self) -> None:
        try:
            _pin(self.cpus[1])
            os.write(self.back_w, b"r")
            while os.read(self.wake_r, 1) == b"w":
                self.woke.append(time.perf_counter())
                os.write(self.back_w, b"k")
        except OSError:
            self.failed = True
            os.write(self.back_w, b"x")

    def waker(self, rounds: int, gap_s: float, budget_s: float) -> None:
        try:
            _pin(self.cpus[0])
            if os.read(self.back_r, 1) != b"r":  # the sleeper is pinned and reading
                return
            deadline = time.perf_counter() + budget_s
            while len(self.sent) < rounds and time.perf_counter() + gap_s < deadline:
                time.sleep(gap_s)
                self.sent.append(time.perf_counter())
                os.write(self.wake_w, b"w")
                if os.read(self.back_r, 1) != b"k":  # it ran; it sleeps again before the next
                    return
        except OSError:
            self.failed = True
        finally:
            os.write(self.wake_w, b"q")

    def close(self) -> None:
        for fd in (self.wake_r, self.wake_w, self.back_r, self.back_w):
            os.close(fd)


def wakeup_latency(
    rounds: int = ROUNDS, gap_s: float = GAP_S, budget_s: float = BUDGET_S
) -> Wakeup | None:
    """Time ``rounds`` wake-ups at most, within ``budget_s`` (module docstring)."""
    cpus = _cpus()
    pinned: tuple[int | None, int | None] = (cpus[0], cpus[-1]) if len(cpus) > 1 else (None, None)
    try:
        pair = _Pair(pinned)
    except OSError:
        return None
    threads = [threading.Thread(target=pair.sleeper, name="tfperf-sleeper", daemon=True),
               threading.Thread(target=pair.waker, args=(rounds, gap_s, budget_s),
                                name="tfperf-waker", daemon=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(budget_s + 1.0)
    if any(thread.is_alive() for thread in threads):
        return None  # its pipes stay open: a thread still blocked on one keeps it
    pair.close()
    ms = sorted((w - s) * 1000.0 for s, w in zip(pair.sent, pair.woke, strict=False))
    if pair.failed or not ms:
        return None
    return Wakeup(_quantile(ms, 0.5), _quantile(ms, 0.99), len(ms), pinned[0] is not None)
