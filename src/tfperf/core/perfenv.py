"""The environment variables that change TensorFlow's speed, and the ones that are set.

Contract: :func:`perf_env` returns the performance-relevant variables of an environment (by
default this process's), sorted by name: the names in :data:`PERF_ENV_NAMES` and those starting
with one of :data:`PERF_ENV_PREFIXES`, without the logging and unrelated ones that share a
prefix. Both sides use it: the doctor reports what the user runs with, the worker's install
description says what it saw, and bench and tune name what their workers did not inherit.
"""

from __future__ import annotations

import os

PERF_ENV_NAMES: tuple[str, ...] = ("LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "NVIDIA_TF32_OVERRIDE")
PERF_ENV_PREFIXES: tuple[str, ...] = (
    "TF_",
    "XLA_",
    "OMP_",
    "KMP_",
    "GOMP_",
    "MKL_",
    "DNNL_",
    "ONEDNN_",
    "OPENBLAS_",
    "TCMALLOC_",
    "MALLOC_CONF",
    "JEMALLOC_",
)
"""Environment variables that change TensorFlow's speed (logging ones are left out)."""
_NOT_PERF = (
    "TF_CPP_",  # logging
    # Terraform's variables share the prefix.
    "TF_CLI_",
    "TF_VAR_",
    "TF_LOG",
    "TF_INPUT",
    "TF_IN_AUTOMATION",
    "TF_WORKSPACE",
    "TF_DATA_DIR",
    "TF_PLUGIN_CACHE_DIR",
    "TF_REGISTRY_",
    "TF_TOKEN_",
)


def perf_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The performance-relevant environment variables that are set, sorted by name."""
    environ = dict(os.environ if environ is None else environ)
    return {
        k: v
        for k, v in sorted(environ.items())
        if (k in PERF_ENV_NAMES or k.startswith(PERF_ENV_PREFIXES)) and not k.startswith(_NOT_PERF)
    }
