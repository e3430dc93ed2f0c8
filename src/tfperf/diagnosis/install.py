"""Parent side of the install probe: start it, time it out, turn every failure into facts.

Contract: :func:`start_probe` launches ``python -m tfperf.worker.probe --out FILE`` with the user's
environment (plus ``TF_CPP_MIN_LOG_LEVEL=0``) and returns at once, so the caller can collect
machine facts while TensorFlow imports. :func:`finish_probe` waits for it and always returns an
install dict whose ``status`` is one of:

- ``ok`` -- the probe's record (see :mod:`tfperf.worker.probe`);
- ``not_installed`` -- ``import tensorflow`` found no module;
- ``import_failed`` -- TensorFlow raised while importing or running its first op;
- ``crashed`` -- the probe died by a signal or exited without a record;
- ``timeout`` -- it ran past the time limit and was killed.

Failed statuses carry ``error``: ``{"kind", "message", "returncode", "signal", "stderr_tail"}``.
Nothing here imports TensorFlow.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from tfperf.core.errors import UserError
from tfperf.core.paths import read_text
from tfperf.runner.launcher import Child, Ended, LaunchError

STDERR_TAIL = 2000


@dataclass
class ProbeHandle:
    """A running probe: the child, where it writes, and when it started."""

    child: Child
    out_path: str
    workdir: str
    started: float = field(default_factory=time.perf_counter)


def probe_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The probe's environment: the user's own, with TensorFlow's C++ logging turned fully on."""
    env = dict(os.environ if base is None else base)
    env["TF_CPP_MIN_LOG_LEVEL"] = "0"
    env.pop("TF_CPP_MAX_VLOG_LEVEL", None)
    return env


def start_probe(python: str | None = None, env: dict[str, str] | None = None) -> ProbeHandle:
    """Launch the probe in the background with ``python`` (default: this interpreter)."""
    workdir = tempfile.mkdtemp(prefix="tfperf-probe-")
    out_path = os.path.join(workdir, "install.json")
    python = python or sys.executable
    child = Child([python, "-m", "tfperf.worker.probe", "--out", out_path], env=probe_env(env))
    try:
        child.start()
    except LaunchError as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        raise UserError(
            f"Cannot run the Python interpreter {python!r} ({exc.__cause__ or exc}): pass the "
            "path of an existing interpreter with --python."
        ) from exc
    return ProbeHandle(child=child, out_path=out_path, workdir=workdir)


def _tail(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(lines[-12:])[-STDERR_TAIL:]


def kill_probe(handle: ProbeHandle) -> None:
    """Stop the probe and anything it started, and remove its files."""
    handle.child.close()
    shutil.rmtree(handle.workdir, ignore_errors=True)


def finish_probe(handle: ProbeHandle, timeout: float = 120) -> dict[str, Any]:
    """Wait for the probe (at most ``timeout`` seconds from its start) and describe the install."""
    try:
        ended = handle.child.wait(timeout)
        elapsed = time.perf_counter() - handle.started
        output = ended.tail + read_text(handle.out_path + ".stderr")
        record_text = read_text(handle.out_path)
    finally:  # Ctrl-C included: the probe runs in its own group, so it is stopped here
        kill_probe(handle)
    if not record_text and ended.code == 1 and "No module named 'tfperf'" in output:
        python = handle.child.argv[0]
        raise UserError(
            f"The interpreter {python} cannot import tfperf: install it there with "
            f"`{python} -m pip install tfperf`, or run tfperf from that environment."
        )
    if record_text and not ended.timed_out:
        record = _record(record_text, ended, output)
        if record is not None:
            record["probe_s"] = elapsed
            return record
    if ended.timed_out:
        status, message = "timeout", f"the probe did not finish within {timeout:g} s and was killed"
    else:
        reason = f"died by {ended.signal}" if ended.signal else (
            f"exited with code {ended.code} without a record"
        )
        message = f"python -m tfperf.worker.probe {reason} while importing TensorFlow"
        status = "crashed"
    return {
        "status": status,
        "probe_s": elapsed,
        "env": {},
        "error": {
            "kind": status,
            "message": message,
            "returncode": ended.returncode,
            "signal": ended.signal,
            "stderr_tail": _tail(output),
        },
    }


def _record(text: str, ended: Ended, output: str) -> dict[str, Any] | None:
    """The probe's own record, its error (if any) completed with how the process ended."""
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    if record.get("status") != "ok":
        err = record.setdefault("error", {})
        err.setdefault("kind", record.get("status"))
        err.update(returncode=ended.returncode, signal=None, stderr_tail=_tail(output))
    return record


def run_probe(timeout: float = 120, python: str | None = None) -> dict[str, Any]:
    """Start the probe and wait for it: :func:`start_probe` then :func:`finish_probe`."""
    return finish_probe(start_probe(python), timeout)


def install_fingerprint(install: dict[str, Any]) -> str:
    """A 12-hex-digit hash that names one TensorFlow installation.

    Built from what identifies the binary (version, git version, distribution, location,
    Python version, CUDA/ROCm build facts), not from the environment it runs under.
    """
    dist = install.get("distribution") or {}
    build = install.get("build") or {}
    facts = {
        "tf_version": install.get("tf_version"),
        "git_version": install.get("git_version"),
        "distribution": [dist.get("name"), dist.get("version"), dist.get("channel")],
        "path": install.get("path"),
        "python": (install.get("python") or {}).get("version"),
        "build": {k: build.get(k) for k in sorted(build)},
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:12]
