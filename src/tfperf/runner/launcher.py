"""The one way tfperf starts a child process, and the one account of how it ended.

Contract:

- :class:`Child` starts ``argv`` in a process group of its own (so that everything it starts can
  be stopped with it), with the environment it is given (``None``: this one), stdin closed,
  and stdout and stderr together in a log file kept for the error report. ``pass_fds`` hands it
  pipe ends (a worker's protocol); ``stream=True`` reads its output line by line instead,
  handing each line to the ``on_line`` of :meth:`Child.wait`. ``cpus`` pins it (and all it
  starts) to those CPU ids from its first instruction on.
- :meth:`Child.wait` waits for it to end, at most ``timeout_s`` seconds from its start; the
  deadline fires even when the child prints nothing. On the deadline the whole group is killed
  and the :class:`Ended` record says so (``timed_out``). ``on_poll`` is called about every 0.1 s
  while it runs (a progress file to read, say).
- Leaving the ``with`` block -- normally, by an exception, or by Ctrl-C -- kills the whole group
  if it still runs, so no child outlives the command that started it. A child started with
  ``own_group=False`` (the user's own command under ``tfperf run``) stays in tfperf's group, so
  the terminal's Ctrl-C reaches it too; it is then asked to stop (SIGTERM) and killed only
  after :data:`GRACE_S` seconds.
- :class:`Ended` (``code``, ``signal``, ``timed_out``, ``timeout_s``, ``tail``) says how it ended;
  :meth:`Ended.reason` is one sentence ("exited with code 2: <its last line>", "crashed with
  SIGSEGV", "was killed with SIGKILL (the system may have run out of memory)", "did not finish
  within 30 s and was killed").
- :func:`run` is start, wait and close in one call, for a child whose end is all that matters.
- A program that cannot be started raises :class:`LaunchError` (an ``OSError``) with one
  sentence naming it.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

TAIL_CHARS = 4000
_KEPT_CHARS = 4 * TAIL_CHARS
"""What is read or kept of the output to find its last :data:`TAIL_CHARS` telling ones."""
_NOISE = b"Extension modules:"
"""Python's crash report ends with one line naming every loaded extension module (several
thousand characters in a TensorFlow worker), which would push the crash itself out of the tail."""
"""How much of the end of a child's output an error report keeps."""
GRACE_S = 5.0
"""How long a child asked to stop gets before it is killed."""
POLL_S = 0.1


class LaunchError(OSError):
    """A program that could not be started; ``str(err)`` is one sentence."""


def signal_name(number: int) -> str:
    """``SIGSEGV`` for 11, ``signal 99`` for a number Python does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def last_line(text: str) -> str:
    """The last non-blank line of ``text`` (at most 300 characters)."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


@dataclass(frozen=True)
class Ended:
    """How a child ended: its exit ``code`` (``None`` when a signal ended it), the ``signal``'s
    name, whether the deadline killed it, and the end of its output."""

    code: int | None
    signal: str | None
    timed_out: bool = False
    timeout_s: float | None = None
    tail: str = ""

    @property
    def returncode(self) -> int | None:
        """``subprocess``'s convention: the exit code, or minus the number of the signal."""
        if self.signal is None:
            return self.code
        try:
            return -int(signal.Signals[self.signal])
        except KeyError:
            return None

    @property
    def ok(self) -> bool:
        """Whether it exited with code 0 by itself."""
        return self.code == 0 and not self.timed_out

    def reason(self) -> str:
        """One sentence (without a subject) for how it ended."""
        if self.timed_out:
            return f"did not finish within {self.timeout_s:g} s and was killed"
        if self.signal == "SIGKILL":
            return "was killed with SIGKILL (the system may have run out of memory)"
        if self.signal:
            return f"crashed with {self.signal}"
        last = last_line(self.tail)
        return f"exited with code {self.code}" + (f": {last}" if last else "")


class Child:
    """One child process in a process group of its own (see the module docstring)."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        pass_fds: Sequence[int] = (),
        stream: bool = False,
        own_group: bool = True,
        log: bool = True,
        cpus: Sequence[int] | None = None,
    ) -> None:
        self.argv = [str(a) for a in argv]
        self.cpus = None if cpus is None else {int(c) for c in cpus}
        self.own_group = own_group
        self.keep_log = log
        self.env = None if env is None else dict(env)
        self.cwd = cwd
        self.pass_fds = tuple(pass_fds)
        self.stream = stream
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at: float | None = None
        self._log: IO[bytes] | None = None
        self._tail = b""

    # -- life ---------------------------------------------------------------------------------
    def start(self) -> Child:
        """Start it; raises :class:`LaunchError` when the program cannot be run."""
        out: Any = subprocess.PIPE
        if not self.stream and self.keep_log:
            self._log = tempfile.TemporaryFile(prefix="tfperf-child-")  # noqa: SIM115 (closed in close())
            out = self._log
        elif not self.stream:
            out = None  # the user's own command writes to the terminal
        unpin = _pin_this_thread(self.cpus)
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL if self.keep_log or self.stream else None,
                stdout=out,
                stderr=subprocess.STDOUT if out is not None else None,
                env=self.env,
                cwd=self.cwd,
                pass_fds=self.pass_fds,
                start_new_session=self.own_group,
            )
        except OSError as exc:
            self.close()
            raise LaunchError(
                f"cannot run {self.argv[0]} ({exc.strerror or exc}): check that it exists"
            ) from exc
        finally:
            unpin()
        self.started_at = time.monotonic()
        return self

    def __enter__(self) -> Child:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait(
        self,
        timeout_s: float | None = None,
        *,
        on_line: Callable[[str], None] | None = None,
        on_poll: Callable[[], None] | None = None,
    ) -> Ended:
        """Wait for the end (see the module docstring); kills the group on the deadline."""
        assert self.proc is not None, "start() first"
        deadline = None if timeout_s is None else (self.started_at or 0.0) + timeout_s
        if self.stream:
            finished = self._pump(deadline, on_line, on_poll)
        else:
            finished = self._poll(deadline, on_poll)
        if not finished:
            self.kill()
        return self.ended(timed_out=not finished, timeout_s=timeout_s)

    def _poll(self, deadline: float | None, on_poll: Callable[[], None] | None) -> bool:
        assert self.proc is not None
        while self.proc.poll() is None:
            if on_poll is not None:
                on_poll()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=POLL_S if left is None else min(POLL_S, left))
        return True

    def _pump(
        self,
        deadline: float | None,
        on_line: Callable[[str], None] | None,
        on_poll: Callable[[], None] | None,
    ) -> bool:
        """Read output lines until the pipe closes; ``False`` when the deadline came first."""
        assert self.proc is not None and self.proc.stdout is not None
        pipe = self.proc.stdout
        buffer = b""
        with selectors.DefaultSelector() as sel:
            sel.register(pipe, selectors.EVENT_READ)
            while True:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                if on_poll is not None:
                    on_poll()
                ready = sel.select(POLL_S if left is None else min(POLL_S, left))
                if not ready:
                    continue
                chunk = os.read(pipe.fileno(), 1 << 16)
                if not chunk:
                    break
                self._tail = (self._tail + chunk)[-_KEPT_CHARS:]
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if on_line is not None:
                        on_line(line.decode("utf-8", "replace"))
        if buffer and on_line is not None:
            on_line(buffer.decode("utf-8", "replace"))
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            self.proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            return False
        return True

    def ended(self, *, timed_out: bool = False, timeout_s: float | None = None) -> Ended:
        """The :class:`Ended` record of a child that has ended (or was just killed)."""
        assert self.proc is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=GRACE_S)
        code = self.proc.returncode
        name = signal_name(-code) if code is not None and code < 0 else None
        return Ended(
            code=code if code is not None and code >= 0 else None,
            signal=name,
            timed_out=timed_out,
            timeout_s=timeout_s,
            tail=self.tail(),
        )

    def kill(self) -> None:
        """Kill the whole process group at once (SIGKILL) and reap the child; a child in
        tfperf's own group is asked to stop first (SIGTERM) and killed after a grace."""
        if self.proc is None:
            return
        if not self.own_group:
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()
            try:
                self.proc.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self.own_group:
                os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=GRACE_S)

    def close(self) -> None:
        """Kill the group if it still runs and release the log (idempotent)."""
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
        elif self.proc is not None and self.own_group:
            # the leader ended; what it started in its group may not have
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        if self._log is not None:
            self._tail = self._read_log_tail()
            self._log.close()
            self._log = None

    def tail(self) -> str:
        """The end of the child's output (at most :data:`TAIL_CHARS` characters), without
        the crash report's list of extension modules."""
        data = self._read_log_tail() if self._log is not None else self._tail
        lines = data.splitlines(keepends=True)
        telling = b"".join(line for line in lines if not line.lstrip().startswith(_NOISE))
        return telling[-TAIL_CHARS:].decode("utf-8", "replace")

    def _read_log_tail(self) -> bytes:
        if self._log is None:
            return self._tail
        try:
            self._log.flush()
            size = self._log.seek(0, os.SEEK_END)
            self._log.seek(max(0, size - _KEPT_CHARS))
            return self._log.read()
        except (OSError, ValueError):
            return b""


def _pin_this_thread(cpus: set[int] | None) -> Callable[[], None]:
    """Pin this thread to ``cpus`` while a child is forked from it, and return what restores
    its mask. The child inherits the mask before it runs a single instruction (pinning it after
    the start would leave the threads it made meanwhile unpinned); only the calling thread's
    mask changes."""
    if cpus is None:
        return lambda: None
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    return lambda: os.sched_setaffinity(0, before)


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout_s: float | None = None,
    on_line: Callable[[str], None] | None = None,
) -> Ended:
    """Start ``argv``, wait for its end (``on_line`` gets each line of its output as it comes)
    and make sure nothing of it is left running."""
    with Child(argv, env=env, cwd=cwd, stream=on_line is not None) as child:
        return child.wait(timeout_s, on_line=on_line)
