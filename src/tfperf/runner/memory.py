"""The memory of a worker's configuration (:class:`tfperf.core.memory.Memory`), read the way a
user means it.

Contract: :func:`memory_of` ``(worker) -> Memory`` for a worker that is ready (it may have
measured since):

- In the worker: ``peak_rss_mb`` is the worker's high-water mark (the kernel's ``VmHWM`` it
  reports with each answer, and the RSS this process polls, :attr:`Worker.peak_rss_bytes`),
  ``steady_rss_mb`` its RSS at its last answer, ``model_mb`` its RSS when ready minus its RSS
  before the model was built or loaded (TensorFlow already imported).
- For a converted runtime (LiteRT, OpenVINO, XLA AOT) the worker imported TensorFlow and ran
  the converter, which no deployment does: a one-shot ``python -m tfperf.worker.deployed`` of
  the worker's interpreter and environment (its allocator preload included) loads the artifact
  alone, runs it on the worker's input shapes, and its figures are the record
  (``measured_in="deployed"``; the worker's peak is kept as ``worker_peak_rss_mb``). If that
  process fails, or anything in it imported TensorFlow (its figures would then hold
  TensorFlow's), the worker's figures stand: the record says ``measured_in="worker"`` and
  ``not_deployed`` says why (:func:`deployed_memory` gives either).
- ``artifact_mb``: the artifact on disk (OpenVINO's ``.xml`` with its ``.bin``).

:class:`LayoutMemory` is a served layout's: the sum over its instances
(:func:`tfperf.core.memory.summed`), each instance's figure read as :func:`memory_of` reads it.
The instances of a layout run one config on one artifact, so a converted runtime's deployed
process runs once per layout and stands for each instance -- and runs the artifact as the
layout does: where the layout batches, the batcher's own artifact (the instance converted the
model at the batch's size, and says where: ``ready["serving"]["batched_artifact"]``) on inputs
of ``max_batch`` times the sample rows; with OpenVINO's ``PERFORMANCE_HINT`` and
``NUM_STREAMS``, every infer request the compiled model asks for at once. A batched or
``THROUGHPUT`` layout holds more than one call at batch 1 does, and a ceiling must see it.

It runs while nothing is timed: callers ask between measurements.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from tfperf.core.knobs import INTERPRETERS
from tfperf.core.memory import DEPLOYED, Memory, mib, summed
from tfperf.core.protocol import artifact_from_notes
from tfperf.core.serving import ServingLayout
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


def _artifact(worker: Worker, layout: ServingLayout | None = None) -> str | None:
    """The artifact ``layout`` runs on ``worker``: the batcher's where the layout batches."""
    ready = worker.ready or {}
    if layout is not None and layout.max_batch > 1:
        return (ready.get("serving") or {}).get("batched_artifact")
    return artifact_from_notes(ready.get("notes") or [])


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


def deployed_argv(worker: Worker, artifact: str, seconds: float = DEPLOYED_SECONDS,
                  layout: ServingLayout | None = None) -> list[str]:
    """The command of the deployed process for ``worker``'s artifact, run as ``layout`` runs
    it (module docstring; its environment is the worker's, :meth:`Worker.environment`)."""
    config = worker.config
    argv = [worker.python, "-m", "tfperf.worker.deployed", str(config.runtime), artifact,
            "--seconds", str(seconds)]
    if config.runtime_threads:
        argv += ["--threads", str(config.runtime_threads)]
    shapes = (worker.ready or {}).get("input_shapes")
    batch = layout.max_batch if layout is not None else 1
    if shapes and batch > 1:  # the batcher's call: its rows repeated max_batch times
        shapes = [[[shape[0] * batch, *shape[1:]] if shape else shape, dtype]
                  for shape, dtype in shapes]
    if shapes:
        argv += ["--inputs", json.dumps(shapes)]
    if layout is not None and layout.hint:
        argv += ["--hint", layout.hint]
    if layout is not None and layout.streams:
        argv += ["--streams", str(layout.streams)]
    return argv


def deployed_record(worker: Worker, artifact: str,
                    layout: ServingLayout | None = None) -> dict[str, Any] | str:
    """What ``python -m tfperf.worker.deployed`` printed for ``worker``'s artifact (run as
    ``layout`` runs it), or the sentence saying why it printed nothing usable."""
    argv = deployed_argv(worker, artifact, layout=layout)
    ended = run(argv, env=worker.environment(), timeout_s=DEPLOYED_TIMEOUT_S)
    if not ended.ok:
        return f"the deployed process {ended.reason()}"[:400]
    for line in reversed(ended.tail.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return "the deployed process printed no record"


def deployed_memory(worker: Worker, layout: ServingLayout | None = None) -> Memory | str | None:
    """The deployed process's figures for ``worker``'s converted artifact, run as ``layout``
    runs it (module docstring), the sentence saying why there are none, or ``None`` for a
    runtime deployed as it runs (TensorFlow)."""
    if worker.config.runtime not in INTERPRETERS:
        return None
    artifact = _artifact(worker, layout)
    if not artifact:
        return None if _artifact(worker) is None else (
            "the instances did not say where their batched artifact is, so the layout's "
            "memory at its batch could not be measured deployed")
    record = deployed_record(worker, artifact, layout)
    if isinstance(record, str):
        return record
    if record.get("tensorflow_loaded") is not False:
        return ("the deployed process imported TensorFlow (something on its path loads it), "
                "so its figures are not those of the artifact alone")
    return Memory(
        peak_rss_mb=mib(record["peak_rss_bytes"]),
        steady_rss_mb=mib(record["steady_rss_bytes"]),
        model_mb=mib(record["loaded_rss_bytes"] - record["base_rss_bytes"]),
        measured_in=DEPLOYED,
    )


def _as_deployed(own: Memory, deployed: Memory | str | None) -> Memory:
    """``own`` (the worker's figures) replaced by the deployed ones, or marked with why not."""
    if deployed is None:
        return own
    if isinstance(deployed, str):
        return replace(own, not_deployed=deployed)
    return replace(deployed, artifact_mb=own.artifact_mb, worker_peak_rss_mb=own.peak_rss_mb)


def memory_of(worker: Worker) -> Memory:
    """The configuration's memory (module docstring)."""
    return _as_deployed(worker_memory(worker), deployed_memory(worker))


class LayoutMemory:
    """A served layout's memory (module docstring): call it with the live instances' workers."""

    def __init__(self, layout: ServingLayout | None = None) -> None:
        self.layout = layout
        self._deployed: Memory | str | None = None
        self._read = False

    def __call__(self, workers: list[Worker]) -> Memory | None:
        if workers and not self._read:
            self._deployed, self._read = deployed_memory(workers[0], self.layout), True
        return summed([_as_deployed(worker_memory(w), self._deployed) for w in workers])
