"""The built-in workload registry: names, descriptions and sizes, without TensorFlow.

Contract: :data:`BUILTINS` maps a name to a :class:`WorkloadInfo`; :func:`get_builtin` looks one up
and raises :class:`~tfperf.core.errors.UserError` listing the valid names; :func:`builtin_workload`
returns the JSON-able workload dict a worker receives (see ``docs/ARCHITECTURE.md``);
:func:`tfperf.modelref.workload_from_args` turns a command's ``--workload NAME`` or ``MODEL``
argument into that dict. The Keras models themselves live in :mod:`tfperf.worker.models` (worker
side, imports TensorFlow); a training built-in (``cnn-train``) is a factory of
:mod:`tfperf.worker.trainmodels`, measured and tuned as the user's own training step. This
catalog is part of the shared core: the parent lists and checks the built-ins, the worker
builds them.

Every workload has a ``standard`` size (what ``tfperf bench --workload NAME`` measures) and a
``tiny`` size (the same architecture, shrunk so that it builds and runs in about a second, for
tests). A size is a dict of the builder's parameters. Building the same workload twice gives the
same weights and the same inputs (fixed seed), so outputs of two variants can be compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from tfperf.core.errors import UserError
from tfperf.core.kerasbackend import configured_backend

SIZES = ("standard", "tiny")
"""The sizes every built-in workload has."""

SEED = 1234
"""Seed for weights and sample inputs of every built-in workload."""


@dataclass(frozen=True)
class WorkloadInfo:
    """One built-in workload: what it is and the parameters of each size."""

    name: str
    description: str
    task: Literal["inference", "train"]
    standard: dict[str, Any] = field(default_factory=dict)
    tiny: dict[str, Any] = field(default_factory=dict)
    factory: str = ""
    """A training workload's ``module:function`` at the standard size (the tiny size's ends
    in ``_tiny``); its sizes hold the factory's parameters and the batch."""

    def params(self, size: str) -> dict[str, Any]:
        """The builder parameters for ``size`` ("standard" or "tiny")."""
        if size not in SIZES:
            raise UserError(f"Unknown size {size!r}: use one of {', '.join(SIZES)}.")
        return dict(self.standard if size == "standard" else self.tiny)


BUILTINS: dict[str, WorkloadInfo] = {
    info.name: info
    for info in (
        WorkloadInfo(
            "lstm",
            "LSTM(128) over 50 steps of 64 features: the classic small RNN",
            "inference",
            standard={"units": 128, "steps": 50, "features": 64},
            tiny={"units": 16, "steps": 8, "features": 8},
        ),
        WorkloadInfo(
            "encoder",
            "4-layer transformer encoder, d_model 256, 4 heads, FFN 1024, sequence 128",
            "inference",
            standard={"layers": 4, "d_model": 256, "heads": 4, "ffn": 1024, "seq": 128},
            tiny={"layers": 2, "d_model": 32, "heads": 2, "ffn": 64, "seq": 16},
        ),
        WorkloadInfo(
            "mobilenetv2",
            "MobileNetV2 image classifier, 224x224 inference (random weights, logits out)",
            "inference",
            standard={"image": 224, "alpha": 1.0, "classes": 1000},
            tiny={"image": 32, "alpha": 0.35, "classes": 10},
        ),
        WorkloadInfo(
            "resnet50",
            "ResNet-50 image classifier, 224x224 inference (random weights, logits out)",
            "inference",
            standard={"image": 224, "classes": 1000, "blocks": [3, 4, 6, 3], "width": 64},
            tiny={"image": 32, "classes": 10, "blocks": [1, 1, 1, 1], "width": 8},
        ),
        WorkloadInfo(
            "cnn-train",
            "training step of a small VGG-style CNN with batch norm (Adam) on 32x32 RGB images",
            "train",
            standard={"samples": 2048, "image": 32, "widths": [16, 32], "batch": 64},
            tiny={"samples": 256, "image": 8, "widths": [4, 8], "batch": 32},
            factory="tfperf.worker.trainmodels:cnn_train",
        ),
        WorkloadInfo(
            "gan-train",
            "custom training loop of a small GAN (dense generator and discriminator, two Adam "
            "optimizers, tf.GradientTape in a tf.function step) on 16x16 images",
            "train",
            standard={"samples": 4096, "image": 16, "latent": 64, "hidden": 256, "batch": 64},
            tiny={"samples": 256, "image": 4, "latent": 4, "hidden": 16, "batch": 32},
            factory="tfperf.worker.trainmodels:gan_train",
        ),
        WorkloadInfo(
            "mlp",
            "3-layer MLP (256 -> 512 -> 512 -> 10), serving latency",
            "inference",
            standard={"features": 256, "hidden": [512, 512], "classes": 10},
            tiny={"features": 16, "hidden": [32, 32], "classes": 4},
        ),
        WorkloadInfo(
            "wide-deep",
            "wide & deep recommender: 8 categorical columns (embeddings) + 13 dense features",
            "inference",
            standard={
                "categorical": 8,
                "vocab": 10000,
                "embed_dim": 16,
                "dense": 13,
                "hidden": [256, 128, 64],
            },
            tiny={"categorical": 3, "vocab": 50, "embed_dim": 4, "dense": 4, "hidden": [16, 8]},
        ),
    )
}
"""Every built-in workload by name."""


def get_builtin(name: str) -> WorkloadInfo:
    """The built-in workload called ``name``; :class:`UserError` listing the valid names if none."""
    try:
        return BUILTINS[name]
    except KeyError:
        raise UserError(
            f"Unknown workload {name!r}: choose one of {', '.join(BUILTINS)}."
        ) from None


def builtin_workload(name: str, size: str = "standard", batch: int = 1) -> dict[str, Any]:
    """The workload dict for built-in ``name`` at ``size`` with ``batch`` samples per call.

    A training built-in (task ``"train"``) is a workload of kind ``"train"``, measured and
    tuned as a user's training factory is; its batch is its size's unless another than 1 is
    given (1 is every command's default for a built-in). Raises :class:`UserError` for an
    unknown name or size, or a batch below 1.
    """
    info = get_builtin(name)
    params = info.params(size)
    check_batch(batch)
    if info.task == "train":
        return _training(info, size, params["batch"] if batch == 1 else batch)
    return {"kind": "builtin", "name": info.name, "size": size, "batch": int(batch)}


def is_training_builtin(name: str | None) -> bool:
    """Whether ``name`` is a built-in training workload (``False`` for any other name)."""
    info = BUILTINS.get(name or "")
    return info is not None and info.task == "train"


def _training(info: WorkloadInfo, size: str, batch: int) -> dict[str, Any]:
    """A training built-in as the user's own factory is measured: the workload dict of
    :func:`tfperf.modelref.resolve_train_target` (no search path: the factory is tfperf's)
    with ``builtin`` and ``size`` naming it."""
    return {
        "kind": "train",
        "path": info.factory + ("_tiny" if size == "tiny" else ""),
        "format": "factory",
        "inputs": None,
        "labels": None,
        "validation": None,
        "unsafe": False,
        "batch": int(batch),
        "guard_steps": None,
        "guard_seconds": None,
        "loss_keys": [],
        "steps_counter": None,
        "keras_backend": configured_backend()[0],
        "builtin": info.name,
        "size": size,
    }


def check_batch(batch: object) -> int:
    """``batch`` as an int if it is a whole number >= 1, else :class:`UserError`."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise UserError(f"Batch size must be a whole number of at least 1, not {batch!r}.")
    return batch
