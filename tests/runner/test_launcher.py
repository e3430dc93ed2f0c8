"""tfperf.runner.launcher: the one way tfperf starts a child, with real children.

A silent child still meets its deadline; leaving (an exception, Ctrl-C) stops the child and
everything it started; how a child ended is one sentence. The commands built on it keep these
promises: Ctrl-C during ``tfperf pipeline`` leaves no worker behind, and an installer that
hangs without printing a line is stopped at its deadline.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tfperf.builds.envs import CandidateError, ensure_env
from tfperf.runner import launcher

SLEEP_WITH_A_GRANDCHILD = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(600)\n"
)


def gone(pid: int, within_s: float = 5.0) -> bool:
    """Whether process ``pid`` is gone (or a zombie) within ``within_s``: a SIGKILL is
    delivered at once, but the kernel tears a process down asynchronously."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def test_a_silent_child_meets_its_deadline_and_is_killed():
    lines: list[str] = []
    with launcher.Child(
        [sys.executable, "-c", "import time; time.sleep(600)"], stream=True
    ) as child:
        ended = child.wait(1.0, on_line=lines.append)
        pid = child.pid
    assert ended.timed_out and lines == []
    assert ended.reason() == "did not finish within 1 s and was killed"
    assert gone(pid)


def test_leaving_by_an_exception_stops_the_child_and_what_it_started():
    lines: list[str] = []
    with pytest.raises(RuntimeError), launcher.Child(
        [sys.executable, "-c", SLEEP_WITH_A_GRANDCHILD], stream=True
    ) as child:
        child.wait(30, on_line=lambda line: (lines.append(line), _stop()))
    grandchild = int(lines[0])
    assert gone(child.pid) and gone(grandchild)


def _stop() -> None:
    raise RuntimeError("the caller gave up")


@pytest.mark.parametrize(
    ("code", "sentence"),
    [
        ("import sys; print('one'); print('the last line'); sys.exit(3)",
         "exited with code 3: the last line"),
        ("import ctypes; ctypes.string_at(0)", "crashed with SIGSEGV"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
         "was killed with SIGKILL (the system may have run out of memory)"),
    ],
)
def test_how_a_child_ended_is_one_sentence(code, sentence):
    ended = launcher.run([sys.executable, "-c", code])
    assert not ended.ok
    assert ended.reason() == sentence


def test_a_program_that_does_not_exist_is_a_launch_error():
    with pytest.raises(launcher.LaunchError, match="cannot run /no/such/program"):
        launcher.run(["/no/such/program"])


def test_an_installer_that_hangs_silently_is_stopped_at_its_deadline(tmp_path, monkeypatch):
    # A resolver stuck on the network prints nothing; the deadline used to be checked only
    # when a line arrived, so such an install never timed out.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "uv").write_text("#!/bin/sh\nexec sleep 600\n")
    (fake / "uv").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(CandidateError, match="install took more than 2 s; stopped"):
        ensure_env("tensorflow-cpu==2.20.0", root=tmp_path / "envs", timeout=2)
    stuck = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "600"]]
    assert all(gone(p.pid) for p in stuck), "the hung installer was left running"


@pytest.mark.tf
@pytest.mark.slow
def test_ctrl_c_during_pipeline_leaves_no_worker(tmp_path: Path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "tfperf", "pipeline", "--demo", "--store", str(tmp_path / "s.db")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # like a shell job: Ctrl-C goes to its whole group
    )
    worker = None
    deadline = time.monotonic() + 120
    while worker is None and time.monotonic() < deadline and proc.poll() is None:
        for child in psutil.Process(proc.pid).children(recursive=True):
            if "tfperf.worker.pipeline.main" in " ".join(child.cmdline()):
                worker = child
        time.sleep(0.2)
    assert worker is not None, "the pipeline worker never started"
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout=60)
    assert gone(worker.pid), "Ctrl-C left the pipeline worker running"


def test_a_child_given_cpus_runs_on_them_and_the_parent_keeps_its_own():
    before = os.sched_getaffinity(0)
    cpu = min(before)
    show = "import os; print(sorted(os.sched_getaffinity(0)))"
    with launcher.Child([sys.executable, "-c", show], cpus=[cpu], stream=True) as child:
        lines: list[str] = []
        assert child.wait(60, on_line=lines.append).ok
    assert lines == [str([cpu])]
    assert os.sched_getaffinity(0) == before
