"""The deliberate environment a bench or tune worker starts from.

Contract: :func:`worker_base_env` keeps an allowlist of variables a process needs to run at all
(paths, locale, home, proxies, virtual environment, which GPU to use) and drops everything else.
Variables that change TensorFlow's speed (``TF_*``, ``XLA_FLAGS``, ``OMP_*``, ``KMP_*``,
``MKL_*``, ``DNNL_*``/``ONEDNN_*``, ``LD_PRELOAD``, allocator tuning, BLAS thread counts) are
*not* inherited: they come back in a second dict so results can say "you had set X, it was not
applied". A variable set to an empty (or blank) value is dropped without being reported: it sets
nothing (``LD_PRELOAD=`` preloads no library, ``OMP_NUM_THREADS=`` is ignored), so there is no
setting of the user's that the workers missed. A measured configuration sets them explicitly
through :class:`tfperf.core.config.Config`.

``KERAS_BACKEND`` passes through as the user set it, so the Keras backend the user trains on is
the default's; the runtime ``keras-jax`` sets it to ``jax`` over that
(:data:`tfperf.core.knobs.RUNTIME_ENV`, applied by ``Config.worker_env``).

Three of tfperf's own variables pass through: ``TFPERF_CACHE_DIR`` (a worker writes converted
models and other cached files under :func:`tfperf.core.paths.cache_dir`, which must be the
parent's), the testing hook ``TFPERF_INJECT_FAULT`` (see :mod:`tfperf.worker.serve`) and
``TFPERF_AOT_TARGET=level`` (:data:`tfperf.core.aot.LEVEL_ONLY_ENV`: xla-aot compiled for the
CPU's x86-64 level, which ``benchmarks/xla_aot_suite.py`` measures beside the CPU's own name).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from tfperf.core.aot import LEVEL_ONLY_ENV
from tfperf.core.paths import CACHE_ENV

ALLOWED = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "TMPDIR",
        "TMP",
        "TEMP",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CONDA_DEFAULT_ENV",
        "LD_LIBRARY_PATH",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_HOME",
        "CUDA_PATH",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "KERAS_HOME",
        "KERAS_BACKEND",
        "TFHUB_CACHE_DIR",
        "HF_HOME",
        "SYSTEMROOT",
        CACHE_ENV,
        "TFPERF_INJECT_FAULT",
        LEVEL_ONLY_ENV,
    }
)
"""Variables a worker inherits unchanged."""

_ALLOWED_PREFIXES = ("LC_", "XDG_")

_SPEED = re.compile(
    r"^(TF_.*|XLA_FLAGS|OMP_.*|KMP_.*|MKL_.*|DNNL_.*|ONEDNN_.*|LD_PRELOAD|MALLOC_.*|"
    r"TCMALLOC_.*|JE_MALLOC_CONF|MALLOC_CONF|_RJEM_MALLOC_CONF|OPENBLAS_.*|GOTO_NUM_THREADS|"
    r"NUMEXPR_.*|VECLIB_.*|TF_CPP_.*|CUDA_CACHE_.*|NCCL_.*|GOMP_.*|PYTHONOPTIMIZE|"
    r"PYTHONMALLOC|TFLITE_.*|OV_.*|OPENVINO_.*)$"
)

_LOGGING_ONLY = frozenset({"TF_CPP_MIN_LOG_LEVEL", "TF_CPP_MAX_VLOG_LEVEL", "TF_CPP_VMODULE"})

_NOT_TENSORFLOW = re.compile(
    r"^TF_(CLI_.*|LOG.*|VAR_.*|INPUT|IN_AUTOMATION|DATA_DIR|WORKSPACE|PLUGIN_CACHE_DIR|"
    r"REGISTRY_.*|TOKEN_.*|IGNORE|STATE_PERSIST_INTERVAL|APPEND_USER_AGENT)$"
)
"""Terraform's ``TF_*`` variables: neither inherited nor reported."""

DELIBERATE = {
    "PYTHONUNBUFFERED": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "TF_CPP_MIN_LOG_LEVEL": "1",
}
"""Set in every worker whatever the user had: quiet info logs, unbuffered error output."""


def is_speed_relevant(name: str) -> bool:
    """Whether variable ``name`` can change how fast TensorFlow runs."""
    if name in _LOGGING_ONLY or _NOT_TENSORFLOW.match(name):
        return False
    return bool(_SPEED.match(name))


def worker_base_env(environ: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Split ``environ`` into (the worker's base env, speed-relevant variables not inherited).

    The second dict holds only variables with a value: an empty one has no effect to report.
    """
    base: dict[str, str] = {}
    not_inherited: dict[str, str] = {}
    for name, value in environ.items():
        if name in ALLOWED or name.startswith(_ALLOWED_PREFIXES):
            base[name] = value
        elif value.strip() and is_speed_relevant(name):
            not_inherited[name] = value
    base.update(DELIBERATE)
    return base, dict(sorted(not_inherited.items()))
