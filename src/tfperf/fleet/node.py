"""What runs on one node of a fleet: the ordinary ``tfperf`` commands, one after the other.

Contract:

- :func:`run_job` runs inside the Ray task placed on the node (:mod:`tfperf.fleet.dispatch`).
  It unpacks what the driver shipped (the model, its inputs, a profile to verify:
  :mod:`tfperf.fleet.payload`) into a temporary directory and runs the commands there. It
  first checks that this node runs the driver's tfperf: the same version
  (:attr:`Job.tfperf_version`) and the same code (:attr:`Job.tfperf_code`, a digest of the
  package's files: two commits of one checkout share a version); where it does not, it runs
  nothing and reports ``incompatible`` with the sentence that says what to install.
- Each :class:`Step` is ``python -m tfperf COMMAND ARGS --json``, started by
  :mod:`tfperf.runner.launcher` (a process group of its own, killed with the task, a deadline
  of :attr:`Job.timeout_s`), so the command starts its usual worker processes on the node (a
  verifying step adds the config of the profile it was shipped, read there). Its
  stdout (the JSON document) goes to a file; the rest of its output is kept for the reason of a
  failure. ``bench`` and ``tune`` also get a store and ``--export`` in a temporary directory of
  their own, ``tune`` a ``--profile-out`` and an ``--out-dir``; what they wrote comes back in the
  step's report: the document, the result file's document, the profile and the out dir's files.
- A step that fails (a non-zero exit, no document) ends the job as ``failed`` with its reason;
  the steps before it are kept.
- The command gets the task's environment without what Ray sets for every task
  (``OMP_NUM_THREADS`` set to the task's CPUs): a doctor on the node audits what its users get.
- The report is a plain dict (it crosses Ray's object store): ``status`` (``ok``, ``failed``,
  ``incompatible``), ``reason``, ``host``, ``tfperf_version``, ``tfperf_code``, ``python``,
  ``steps`` (name -> ``{status, reason, doc, result, profile, files}``).

Nothing here imports Ray or TensorFlow.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfperf import __version__
from tfperf.core.codeid import code_identity
from tfperf.core.config import Config
from tfperf.core.knobs import show_value
from tfperf.fleet.payload import unpack
from tfperf.runner.launcher import last_line, run

MAX_FILE_BYTES = 2**30
"""A file of a tune's out dir larger than this is not sent back (it is named instead)."""


SHIPPED_PROFILE = "tuned/profile.json"
"""Where a fleet tune's profile lands in the folder of a node that verifies it."""


@dataclass(frozen=True)
class Step:
    """One tfperf command to run on the node: ``tfperf COMMAND ARGS --json``; with
    ``profile`` (a path in the shipped folder), the profile's config is added as
    ``--set``/``--env`` arguments (:func:`config_args`), read on the node."""

    command: str
    args: tuple[str, ...] = ()
    profile: str | None = None


def config_args(config: Config) -> list[str]:
    """The ``--set``/``--env`` arguments that name ``config`` (empty for the default)."""
    args: list[str] = []
    for name, value in config.changes().items():
        if name.startswith("env:"):
            args += ["--env", f"{name[4:]}={value}"]
        else:
            args += ["--set", f"{name}={show_value(value)}"]
    return args


@dataclass(frozen=True)
class Job:
    """Everything one node runs, in order, and the tfperf the driver runs: its version and the
    identity of its code (:func:`tfperf.core.codeid.code_identity`; ``None``: the version alone
    is compared)."""

    steps: tuple[Step, ...]
    tfperf_version: str
    timeout_s: float
    task_cpus: float = 0.0
    tfperf_code: str | None = None


def _env(task_cpus: float) -> dict[str, str]:
    env = dict(os.environ)
    # Ray sets OMP_NUM_THREADS to the task's CPUs when the user did not: not the node's own.
    if task_cpus and env.get("OMP_NUM_THREADS") == str(int(task_cpus)):
        env.pop("OMP_NUM_THREADS")
    return env


def _argv(step: Step, tmp: Path, cwd: Path | None) -> list[str]:
    argv = [sys.executable, "-m", "tfperf", step.command, *step.args, "--json"]
    if step.profile is not None:
        profile = _read_json((cwd or Path.cwd()) / step.profile) or {}
        argv += config_args(Config.from_dict(profile.get("config")))
    if step.command in ("bench", "tune"):
        argv += ["--store", str(tmp / "store.sqlite"), "--export", str(tmp / "result.json")]
    if step.command == "tune":
        argv += ["--profile-out", str(tmp / "profile.json"), "--out-dir", str(tmp / "out")]
    return argv


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _files(folder: Path) -> dict[str, Any]:
    """A tune's out dir: relative path -> bytes (a file too large for that: its size)."""
    out: dict[str, Any] = {}
    if not folder.is_dir():
        return out
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        size = path.stat().st_size
        out[str(path.relative_to(folder))] = path.read_bytes() if size <= MAX_FILE_BYTES else size
    return out


def run_step(
    step: Step, tmp: Path, timeout_s: float, env: dict[str, str], cwd: Path | None = None
) -> dict[str, Any]:
    """Run one step in ``cwd``; its report (module docstring)."""
    tmp.mkdir(parents=True, exist_ok=True)
    if step.profile is not None and not ((cwd or Path.cwd()) / step.profile).is_file():
        reason = f"the profile shipped to this node is missing ({step.profile})"
        return {"status": "failed", "reason": reason, "doc": None, "result": None}
    stdout = tmp / "stdout.json"
    argv = ["sh", "-c", 'exec "$@" > "$0"', str(stdout), *_argv(step, tmp, cwd)]
    ended = run(argv, env=env, cwd=cwd, timeout_s=timeout_s)
    doc = _read_json(stdout)
    report: dict[str, Any] = {
        "status": "ok" if ended.ok and doc is not None else "failed",
        "reason": None,
        "command": shlex.join(["tfperf", step.command, *step.args, "--json"]),
        "doc": doc,
        "result": _read_json(tmp / "result.json"),
        "profile": _read_json(tmp / "profile.json"),
        "files": _files(tmp / "out"),
    }
    if report["status"] != "ok":
        said = last_line(ended.tail)
        report["reason"] = f"`tfperf {step.command}` " + (
            ended.reason() if not ended.ok else f"printed no JSON document: {said}"
        )
    return report


def _incompatible(job: Job) -> str | None:
    """Why this node cannot run the driver's job, or ``None``: another tfperf version, or the
    same version with other code (two commits of one checkout both say the same version)."""
    if __version__ != job.tfperf_version:
        return (
            f"this node runs tfperf {__version__} and the driver {job.tfperf_version}: install "
            f"tfperf=={job.tfperf_version} in the node's Python ({sys.executable})."
        )
    if job.tfperf_code is not None and code_identity() != job.tfperf_code:
        return (
            f"this node runs tfperf {code_identity()} and the driver {job.tfperf_code} (the same "
            f"version, other code): install the driver's tfperf in the node's Python "
            f"({sys.executable}), from the same commit or wheel."
        )
    return None


def run_job(job: Job, payload: bytes | None = None) -> dict[str, Any]:
    """Run the job's steps on this node with ``payload`` (:meth:`Payload.archive`) unpacked
    where they run (module docstring); never raises for a failed step."""
    report: dict[str, Any] = {
        "status": "ok",
        "reason": None,
        "host": socket.gethostname(),
        "tfperf_version": __version__,
        "tfperf_code": code_identity(),
        "python": sys.executable,
        "steps": {},
    }
    reason = _incompatible(job)
    if reason is not None:
        report.update(status="incompatible", reason=reason)
        return report
    env = _env(job.task_cpus)
    with tempfile.TemporaryDirectory(prefix="tfperf-fleet-") as tmp:
        work = Path(tmp) / "work"
        unpack(payload, work)
        for index, step in enumerate(job.steps):
            out = Path(tmp) / f"{index}-{step.command}"
            done = run_step(step, out, job.timeout_s, env, cwd=work)
            report["steps"][step.command] = done
            if done["status"] != "ok":
                report.update(status="failed", reason=done["reason"])
                break
    return report
