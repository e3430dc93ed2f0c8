"""Several copies of one command run together, as the instances of a served model.

Contract:

- :func:`run_copies` starts one :class:`~tfperf.runner.launcher.Child` per :class:`Copy`
  (its own environment, and its own CPU set when it has one), all in tfperf's process group
  with the terminal as their output, so that the terminal's Ctrl-C reaches each of them as it
  would without tfperf. It waits until every copy has ended and returns the exit code of the
  first copy that failed (``128 + N`` for one killed by signal N), or 0 when all exited with 0.
- A copy that ends with an error is told to ``on_failure`` at once, in one sentence naming
  it, while the others keep running: one instance that cannot start (its port taken, say) does
  not take the served model down.
- Leaving -- by Ctrl-C (``KeyboardInterrupt``) or any exception -- asks every copy still
  running to stop (SIGTERM to all at once), and kills those still there after
  :data:`~tfperf.runner.launcher.GRACE_S` seconds: no copy outlives the command.
- A program that cannot be started raises :class:`~tfperf.runner.launcher.LaunchError`, after
  the copies already started are stopped.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tfperf.runner.launcher import POLL_S, Child, Ended


@dataclass(frozen=True)
class Copy:
    """One copy of the command: its environment and the CPUs it is pinned to (``None``:
    not pinned)."""

    env: Mapping[str, str]
    cpus: tuple[int, ...] | None = None
    name: str = field(default="copy")
    """How a report names it ("instance 1 of 2")."""


def exit_code(ended: Ended) -> int:
    """The shell's convention: the exit code, or 128 + the signal's number."""
    code = ended.returncode
    if code is None:
        return 1
    return 128 - code if code < 0 else code


def run_copies(
    argv: Sequence[str],
    copies: Sequence[Copy],
    *,
    on_failure: Callable[[str], None] | None = None,
) -> int:
    """Run ``argv`` once per copy until all have ended (see the module docstring)."""
    children: list[Child] = []
    try:
        for copy in copies:
            child = Child(argv, env=copy.env, own_group=False, log=False, cpus=copy.cpus)
            children.append(child)
            child.start()
        return _wait_all(children, copies, on_failure)
    finally:
        _stop_all(children)


def _wait_all(
    children: Sequence[Child], copies: Sequence[Copy], on_failure: Callable[[str], None] | None
) -> int:
    """Wait for every child; report each failure as it happens; the first failure's code."""
    first_failure = 0
    running = set(range(len(children)))
    while running:
        for index in sorted(running):
            if children[index].running():
                continue
            running.discard(index)
            ended = children[index].ended()
            if ended.ok:
                continue
            first_failure = first_failure or exit_code(ended)
            if on_failure is not None:
                others = "; the others keep running" if running else ""
                on_failure(f"{copies[index].name} {ended.reason()}{others}")
        if running:
            time.sleep(POLL_S)
    return first_failure


def _stop_all(children: Sequence[Child]) -> None:
    """Ask all at once to stop, then close each (which kills it after the grace)."""
    for child in children:
        if child.running() and child.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                child.proc.terminate()
    for child in children:
        child.close()
