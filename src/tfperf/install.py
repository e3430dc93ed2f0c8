"""Parent side of the install probe: start it, time it out, turn every failure into facts.

Contract: :func:`start_probe` launches ``python -m tfperf.probe --out FILE`` with the user's
environment (plus ``TF_CPP_MIN_LOG_LEVEL=0``) and returns at once, so the caller can collect
machine facts while TensorFlow imports. :func:`finish_probe` waits for it and always returns an
install dict whose ``status`` is one of:

- ``ok`` -- the probe's record (see :mod:`tfperf.probe`);
- ``not_installed`` -- ``import tensorflow`` found no module;
- ``import_failed`` -- TensorFlow raised while importing or running its first op;
- ``crashed`` -- the probe died by a signal or exited without a record;
- ``timeout`` -- it ran past the time limit and was killed.

Failed statuses carry ``error``: ``{"kind", "message", "returncode", "signal", "stderr_tail"}``.
Nothing here imports TensorFlow.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from tfperf.errors import UserError
from tfperf.probe import read_text

STDERR_TAIL = 2000


@dataclass
class ProbeHandle:
    """A running probe: its process, where it writes, and when it started."""

    proc: subprocess.Popen[bytes]
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
    try:
        proc = subprocess.Popen(
            [python or sys.executable, "-m", "tfperf.probe", "--out", out_path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=probe_env(env),
            start_new_session=True,
        )
    except OSError as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        raise UserError(
            f"Cannot run the Python interpreter {python or sys.executable!r} ({exc.strerror}): "
            "pass the path of an existing interpreter with --python."
        ) from exc
    return ProbeHandle(proc=proc, out_path=out_path, workdir=workdir)


def _signal_name(returncode: int) -> str | None:
    if returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _tail(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(lines[-12:])[-STDERR_TAIL:]


def kill_probe(handle: ProbeHandle) -> None:
    """Kill the probe and anything it started (it leads its own process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(handle.proc.pid, signal.SIGKILL)


def finish_probe(handle: ProbeHandle, timeout: float = 120) -> dict[str, Any]:
    """Wait for the probe (at most ``timeout`` seconds from its start) and describe the install."""
    remaining = max(0.1, timeout - (time.perf_counter() - handle.started))
    timed_out = False
    try:
        stdout, _ = handle.proc.communicate(timeout=remaining)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_probe(handle)
        stdout, _ = handle.proc.communicate()
    except BaseException:  # Ctrl-C: the probe runs in its own session, so stop it here
        kill_probe(handle)
        handle.proc.wait()
        shutil.rmtree(handle.workdir, ignore_errors=True)
        raise
    elapsed = time.perf_counter() - handle.started
    try:
        output = (stdout or b"").decode(errors="replace") + read_text(handle.out_path + ".stderr")
        record_text = read_text(handle.out_path)
    finally:
        shutil.rmtree(handle.workdir, ignore_errors=True)
    rc = handle.proc.returncode
    if not record_text and rc == 1 and "No module named 'tfperf'" in output:
        python = handle.proc.args[0] if isinstance(handle.proc.args, list) else "python"
        raise UserError(
            f"The interpreter {python} cannot import tfperf: install it there with "
            f"`{python} -m pip install tfperf`, or run tfperf from that environment."
        )
    if record_text and not timed_out:
        try:
            record = json.loads(record_text)
        except ValueError:
            record = None
        if isinstance(record, dict):
            record["probe_s"] = elapsed
            if record.get("status") != "ok":
                err = record.setdefault("error", {})
                err.setdefault("kind", record.get("status"))
                err.update(returncode=rc, signal=None, stderr_tail=_tail(output))
            return record
    if timed_out:
        status, message = "timeout", f"the probe did not finish within {timeout:g} s and was killed"
    else:
        sig = _signal_name(rc)
        reason = f"died by {sig}" if sig else f"exited with code {rc} without a record"
        status, message = "crashed", f"python -m tfperf.probe {reason} while importing TensorFlow"
    return {
        "status": status,
        "probe_s": elapsed,
        "env": {},
        "error": {
            "kind": status,
            "message": message,
            "returncode": rc,
            "signal": _signal_name(rc) if rc is not None else None,
            "stderr_tail": _tail(output),
        },
    }


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
