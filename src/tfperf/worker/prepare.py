"""Worker side: a workload and a config become the callables a worker times.

Contract (see ``docs/ARCHITECTURE.md``):

- :func:`prepare` loads the workload (:func:`tfperf.worker.loading.load_workload`, which
  raises :class:`~tfperf.core.errors.UserError` for anything the user can cause) and returns a
  :class:`Prepared`. Runtime ``"tf"`` with precision ``"fp32"`` (the default for every format
  but ``.tflite``) is handled here: the model called through a ``tf.function``
  (``jit_compile=True`` when ``config["xla"] == "jit"``), its outputs materialised so that a
  call has really finished. A workload of kind ``"train"`` (the user's training step or a
  training built-in) goes to :func:`tfperf.worker.training.train_prepared`. A
  ``.tflite`` model runs on LiteRT with ``config["runtime_threads"]`` threads
  (:func:`litert_prepared`; ``None``: LiteRT's default). ``intra_threads`` and
  ``inter_threads`` size TensorFlow's thread pools and are *not* read for LiteRT: the CLI
  exposes the interpreter's count as its own knob (``--set runtime_threads=N``), as tune's
  space does, so a measured LiteRT config always says which count it ran with. A TensorFlow
  knob set for a LiteRT run (xla, threads, oneDNN) is named in ``Prepared.notes`` as ignored
  (:func:`ignored_by_litert`).
  Any other runtime or precision goes to ``tfperf.worker.convert.prepare_variant(loaded, config)``.
- :func:`prepare` does not call the model: the worker times the first call itself.
- :class:`Loaded`, :class:`Prepared`, :func:`load_workload` and :func:`litert_prepared` are
  re-exported here from :mod:`tfperf.core.workloads`, where they live.
"""

from __future__ import annotations

from typing import Any

from tfperf.worker.convert import prepare_variant
from tfperf.worker.litert import litert_prepared
from tfperf.worker.loading import load_keras_file, load_workload
from tfperf.worker.tfrun import tf_prepared
from tfperf.worker.training import train_prepared
from tfperf.worker.workload import FORMATS, Loaded, Prepared

__all__ = [
    "FORMATS",
    "Loaded",
    "Prepared",
    "ignored_by_litert",
    "litert_prepared",
    "load_keras_file",
    "load_workload",
    "prepare",
    "prepare_loaded",
    "tf_prepared",
]


def prepare(workload: dict[str, Any], config: dict[str, Any]) -> Prepared:
    """Load ``workload`` and return what to time under ``config`` (see the module docstring).
    A workload of kind ``"train"`` is a training step, the user's own or a training built-in
    (:func:`tfperf.worker.training.train_prepared`)."""
    if workload.get("kind") == "train":
        return train_prepared(workload, config)
    loaded = load_workload(workload)
    prepared = prepare_loaded(loaded, config)
    prepared.fingerprint = loaded.fingerprint
    return prepared


def prepare_loaded(loaded: Loaded, config: dict[str, Any]) -> Prepared:
    """:func:`prepare` for an already loaded workload."""
    if config.get("precision") == "float32":  # a saved model computes in its own fp32
        config = {**config, "precision": "fp32"}
    runtime = config.get("runtime") or "tf"
    precision = config.get("precision") or "fp32"
    if loaded.format == "tflite" and runtime in ("tf", "litert") and precision == "fp32":
        # TensorFlow cannot run a .tflite file: its default (and only fp32) runtime is LiteRT
        return litert_prepared(
            loaded.model,
            loaded.inputs,
            config.get("runtime_threads"),
            notes=[*loaded.notes, *ignored_by_litert(config)],
        )
    if precision == "fp32" and runtime == "tf":
        return tf_prepared(loaded, config)
    return prepare_variant(loaded, config)


_TF_ONLY_KNOBS = {
    "xla": None,
    "intra_threads": None,
    "inter_threads": None,
    "onednn": None,
}
"""TensorFlow's knobs (and their defaults), which do nothing to a LiteRT interpreter."""


def ignored_by_litert(config: dict[str, Any]) -> list[str]:
    """One note per TensorFlow knob ``config`` sets that a LiteRT interpreter ignores."""
    notes = []
    for knob, default in _TF_ONLY_KNOBS.items():
        if config.get(knob, default) != default:
            hint = ": LiteRT's thread count is runtime_threads" if "threads" in knob else ""
            notes.append(f"{knob} does not apply to LiteRT{hint}")
    return notes
