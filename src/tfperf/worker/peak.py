"""Worker side of the machine's matmul peak: ``python -m tfperf.worker.peak --out FILE``.

Contract: times a square ``tf.function`` matmul (``--matrix``, default 1024, all cores) for about
a second per precision (fp32, and bf16 with ``--bf16``) and writes ``{"matrix", "tf_version",
"fp32_gflops", "bf16_gflops", "bandwidth_gbs", "measured_at"}`` to FILE, each matmul figure the
best block median as ``2 n^3 / t``, the memory bandwidth that of ``x + 1`` over 128 MiB
(:func:`_bandwidth`). The parent's side (cache, re-check, share of peak) is :mod:`tfperf.peak`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any


def _best_median(call: Any, seconds: float) -> float:
    """The best median of blocks of 5 calls of ``call`` (3 calls first, to settle), over
    about ``seconds``."""
    for _ in range(3):
        call()
    best = float("inf")
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        block = []
        for _ in range(5):
            t0 = time.perf_counter()
            call()
            block.append(time.perf_counter() - t0)
        best = min(best, sorted(block)[2])
    return best


def _probe(matrix: int, dtypes: list[str], seconds: float = 1.0) -> dict[str, Any]:
    """Worker side: best block-median GFLOP/s of an ``n x n`` matmul per dtype."""
    import tensorflow as tf

    result: dict[str, Any] = {"matrix": matrix, "tf_version": tf.__version__}
    flops = 2.0 * matrix**3
    for name in dtypes:
        dtype = tf.bfloat16 if name == "bf16" else tf.float32
        a = tf.cast(tf.random.normal([matrix, matrix], seed=1), dtype)
        b = tf.cast(tf.random.normal([matrix, matrix], seed=2), dtype)
        mm = tf.function(lambda x, y: tf.matmul(x, y))
        best = _best_median(lambda mm=mm, a=a, b=b: mm(a, b).numpy(), seconds)
        result[f"{name}_gflops"] = flops / best / 1e9
    result.setdefault("bf16_gflops", None)
    result["bandwidth_gbs"] = _bandwidth(seconds)
    result["measured_at"] = time.time()
    return result


BANDWIDTH_ELEMENTS = 1 << 25
"""128 MiB of fp32: far larger than any CPU's last-level cache."""


def _bandwidth(seconds: float = 1.0) -> float:
    """Best block-median GB/s of ``y = x + 1`` over :data:`BANDWIDTH_ELEMENTS` fp32 values on
    all cores (each call reads and writes the array once: ``8 * n`` bytes), STREAM's "add"
    kernel with one input, the rate a memory-bound op of a model can hope for."""
    import tensorflow as tf

    x = tf.random.uniform([BANDWIDTH_ELEMENTS], seed=3)
    add = tf.function(lambda v: v + 1.0)
    # eager CPU ops return once computed
    return 8.0 * BANDWIDTH_ELEMENTS / _best_median(lambda: add(x), seconds) / 1e9


def main(argv: list[str] | None = None) -> int:
    """``python -m tfperf.worker.peak --out FILE [--matrix N] [--bf16]``."""
    parser = argparse.ArgumentParser(prog="python -m tfperf.worker.peak")
    parser.add_argument("--out", required=True)
    parser.add_argument("--matrix", type=int, default=1024)
    parser.add_argument("--bf16", action="store_true")
    args = parser.parse_args(argv)
    record = _probe(args.matrix, ["fp32", "bf16"] if args.bf16 else ["fp32"])
    Path(args.out).write_text(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
