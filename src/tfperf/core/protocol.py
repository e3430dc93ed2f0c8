"""The words the parent and its workers share: error kinds, exit codes, notes, row tiling,
the training guard's length.

Contract: both sides of the process boundary import these names and nothing else of each other.
:func:`repeat_rows` is the rule of the workload's ``tile_to``: a worker at another batch repeats the
sample rows by it, and the parent repeats the reference outputs the same way. The messages
themselves (``init``, ``ready``, ``run``, ``block``, ``outputs``, ``extra``, ``quit``, ``error``)
are described in ``docs/ARCHITECTURE.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

EXIT_ERROR = 3
"""A worker's exit code after it reported an error."""
EXIT_INJECTED = 17
"""The exit code of the ``exit-on-init`` fault a test injects."""

USER_KIND = "user"
"""The ``kind`` of an error caused by the user's input (a ``UserError`` in the worker)."""
SKIPPED_KIND = "skipped"
"""Error kind of a candidate left unmeasured because the baseline could not run the input."""
DIFFERS_KIND = "model-differs"
"""Error kind of a worker that loaded another model or other inputs than the first one."""

ARTIFACT_NOTE = "converted model: "
"""Prefix of the note that names the converted model file of a variant."""
COMPILED_NOTE = "compiled ahead of time (export, aot_compile_cpu, link) in "
"""Prefix of the note that says how long an ``xla-aot`` variant took to compile."""
OTHER_DRAWS_NOTE = (
    "input_pipeline=tuned: its batches differ from your pipeline's (a map that draws random "
    "numbers draws them in another order once it runs in parallel), so its guard compares "
    "training on other draws of your augmentation with training on yours")
"""The note of a training worker whose tuned input pipeline gave other batches than the
user's; the parent adds it to such a candidate's rejection."""

JIT_ON_JAX_NOTE = "XLA on JAX: jit_compile=True set over your compile's False"
"""The start of the note of a Keras-on-JAX worker of a TensorFlow user whose compile runs the
step eagerly there (``jit_compile=False``): tfperf compiles it, and an answer on JAX carries
the line that does."""
EAGER_ON_JAX_NOTE = ("jit_compile=False: on JAX your train step runs eagerly, op by op "
                     "(jax.jit is off); xla=jit is its candidate")
"""The baseline's note where the user's own backend is JAX and their compile is eager."""

GUARD_SECONDS = 60.0
"""A training guard stops once its steps took this long (``--guard-seconds``), if it has run
:data:`MIN_GUARD_STEPS` by then."""
MIN_GUARD_STEPS = 50
"""A training guard never runs fewer steps: a shorter trajectory cannot tell a late divergence."""
DEFAULT_GUARD_STEPS = 100
"""A training guard's steps unless ``--guard-steps`` says otherwise (at the workload's batch;
a worker at another batch runs as many steps as take the same samples)."""


def artifact_from_notes(notes: Sequence[str]) -> str | None:
    """The converted model path recorded in a worker's notes, or ``None``."""
    for note in notes:
        if note.startswith(ARTIFACT_NOTE):
            return note[len(ARTIFACT_NOTE) :]
    return None


def repeat_rows(array: Any, rows: int) -> Any:
    """``array`` with ``rows`` rows along its first axis, its own rows cycled (row ``i`` is
    row ``i % len(array)``): fewer rows take the first ones. A scalar, or an array that
    already has ``rows`` rows, is returned as it is; an empty one raises ``ValueError``."""
    import numpy as np

    array = np.asarray(array)
    if array.ndim == 0 or array.shape[0] == rows:
        return array
    if array.shape[0] == 0:
        raise ValueError("cannot repeat the rows of an empty array")
    return np.ascontiguousarray(np.take(array, np.arange(rows) % array.shape[0], axis=0))
