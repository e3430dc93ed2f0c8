"""The memory of a worker's configuration (:class:`tfperf.core.memory.Memory`), read the way a
user means it.

Contract: :func:`memory_of` ``(worker) -> Memory`` for a worker that is ready (it may have
measured since):

- In the worker: ``peak_rss_mb`` is the worker's high-water mark (the kernel's ``ru_maxrss``
  it reports and the RSS this process polls, :attr:`Worker.peak_rss_bytes`), ``steady_rss_mb``
  its RSS at its last answer, ``model_mb`` its RSS when ready minus its RSS before the model
  was built or loaded (TensorFlow already imported).
- For a converted runtime (LiteRT, OpenVINO, XLA AOT) the worker imported TensorFlow and ran
  the converter, which no deployment does: a one-shot ``python -m tfperf.worker.deployed`` of
  the worker's interpreter and environment (its allocator preload included) loads the artifact
  alone, runs it on the worker's input shapes, and its figures are the record
  (``measured_in="deployed"``; the worker's peak is kept as ``worker_peak_rss_mb``). If that
  process fails, the worker's figures stand, and the record says ``measured_in="worker"``.
- ``artifact_mb``: the artifact on disk (OpenVINO's ``.xml`` with its ``.bin``).

It runs while nothing is timed: callers ask between measurements.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tfperf.core.knobs import INTERPRETERS
from tfperf.core.memory import DEPLOYED, Memory, mib
from tfperf.core.protocol import artifact_from_notes
from tfperf.runner.handle import Worker
from tfperf.runner.launcher import run

DEPLOYED_TIMEOUT_S = 120.0
DEPLOYED_SECONDS = 1.0


def artifact_bytes(artifact: str | None) -> int | None:
    """The artifact's size on disk (an OpenVINO ``.xml`` counts its ``.bin``)."""
    if not artifact or not Path(artifact).is_file():
        return None
    path = Path(artifact)
    weights = path.with_suffix(".bin") if path.suffix == ".xml" else None
    return path.stat().st_size + (weights.stat().st_size if weights and weights.is_file() else 0)


def _artifact(worker: Worker) -> str | None:
    return artifact_from_notes((worker.ready or {}).get("notes") or [])


def worker_memory(worker: Worker) -> Memory:
    """The worker's own figures (module docstring)."""
    ready = worker.ready or {}
    before, at_ready = ready.get("rss_before_model_bytes"), ready.get("rss_bytes")
    model = at_ready - before if before is not None and at_ready is not None else None
    return Memory(
        peak_rss_mb=mib(worker.peak_rss_bytes or None),
        steady_rss_mb=mib(worker.last_rss_bytes),
        model_mb=mib(model),
        artifact_mb=mib(artifact_bytes(_artifact(worker))),
    )


def deployed_record(worker: Worker, artifact: str) -> dict[str, Any] | None:
    """What ``python -m tfperf.worker.deployed`` printed for ``worker``'s artifact, or ``None``
    when it failed."""
    config = worker.config
    argv = [worker.python, "-m", "tfperf.worker.deployed", str(config.runtime), artifact,
            "--seconds", str(DEPLOYED_SECONDS)]
    if config.runtime_threads:
        argv += ["--threads", str(config.runtime_threads)]
    shapes = (worker.ready or {}).get("input_shapes")
    if shapes:
        argv += ["--inputs", json.dumps(shapes)]
    ended = run(argv, env=worker.environment(), timeout_s=DEPLOYED_TIMEOUT_S)
    if not ended.ok:
        return None
    for line in reversed(ended.tail.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None


def memory_of(worker: Worker) -> Memory:
    """The configuration's memory (module docstring)."""
    own = worker_memory(worker)
    artifact = _artifact(worker)
    if worker.config.runtime not in INTERPRETERS or not artifact:
        return own
    record = deployed_record(worker, artifact)
    if record is None:
        return own
    return Memory(
        peak_rss_mb=mib(record["peak_rss_bytes"]),
        steady_rss_mb=mib(record["steady_rss_bytes"]),
        model_mb=mib(record["loaded_rss_bytes"] - record["base_rss_bytes"]),
        artifact_mb=own.artifact_mb,
        measured_in=DEPLOYED,
        worker_peak_rss_mb=own.peak_rss_mb,
    )
