"""CPU instruction sets, named the way TensorFlow names them.

Contract: tfperf speaks of instruction sets in the spelling of TensorFlow's ``CPUFeature`` enum
(``tsl/platform/cpu_info.h``): ``SSE4_1``, ``SSE4_2``, ``AVX``, ``AVX2``, ``FMA``, ``AVX512F``,
``AVX512_VNNI``, ``AVX512_BF16``, ``AVX512_FP16``, ``AVX_VNNI``, ``AMX_TILE``, ``AMX_BF16``,
``AMX_INT8``... TensorFlow's own log prints ``SSE4.1``/``SSE4.2`` with a dot; :func:`normalize`
maps both spellings to the enum's. :func:`isa_from_flags` turns Linux ``/proc/cpuinfo`` flags
into that list, in :data:`TF_ORDER` order; :func:`parse_cpuinfo` reads those flags (and the
model, vendor, sockets and cores) from ``/proc/cpuinfo``'s text.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

FLAG_TO_TF: dict[str, str] = {
    "sse": "SSE",
    "sse2": "SSE2",
    "pni": "SSE3",
    "sse3": "SSE3",
    "ssse3": "SSSE3",
    "sse4_1": "SSE4_1",
    "sse4_2": "SSE4_2",
    "popcnt": "POPCNT",
    "avx": "AVX",
    "avx2": "AVX2",
    "fma": "FMA",
    "f16c": "F16C",
    "avx512f": "AVX512F",
    "avx512cd": "AVX512CD",
    "avx512dq": "AVX512DQ",
    "avx512bw": "AVX512BW",
    "avx512vl": "AVX512VL",
    "avx512ifma": "AVX512IFMA",
    "avx512vbmi": "AVX512VBMI",
    "avx512_vnni": "AVX512_VNNI",
    "avx512_4vnniw": "AVX512_4VNNIW",
    "avx512_4fmaps": "AVX512_4FMAPS",
    "avx512_bf16": "AVX512_BF16",
    "avx512_fp16": "AVX512_FP16",
    "avx_vnni": "AVX_VNNI",
    "avx_vnni_int8": "AVX_VNNI_INT8",
    "avx_ne_convert": "AVX_NE_CONVERT",
    "amx_tile": "AMX_TILE",
    "amx_bf16": "AMX_BF16",
    "amx_int8": "AMX_INT8",
    "amx_fp16": "AMX_FP16",
}
"""Linux cpuinfo flag -> TensorFlow ``CPUFeature`` name."""

TF_ORDER: tuple[str, ...] = tuple(dict.fromkeys(FLAG_TO_TF.values()))
"""Every known name, in a stable order (roughly oldest extension first)."""

GUARDED: tuple[str, ...] = (
    "SSE",
    "SSE2",
    "SSE3",
    "SSE4_1",
    "SSE4_2",
    "AVX",
    "AVX2",
    "AVX512F",
    "AVX_VNNI",
    "AVX512_VNNI",
    "AVX512_BF16",
    "AVX512_FP16",
    "AMX_TILE",
    "AMX_INT8",
    "AMX_BF16",
    "FMA",
)
"""The instruction sets TensorFlow's cpu_feature_guard reports when a binary lacks them."""

NEURAL_FEATURES: tuple[str, ...] = (
    "AVX512_VNNI",
    "AVX512_BF16",
    "AVX_VNNI",
    "AMX_TILE",
    "AMX_INT8",
    "AMX_BF16",
)
"""Features for which x86 Linux builds turn oneDNN on by default (``DefaultOneDnnPolicy``)."""

_ALIASES = {"SSE4.1": "SSE4_1", "SSE4.2": "SSE4_2", "AVX512VNNI": "AVX512_VNNI"}


def normalize(name: str) -> str:
    """One instruction-set name in TensorFlow's enum spelling (``"SSE4.2"`` -> ``"SSE4_2"``)."""
    upper = name.strip().strip(",.;").upper()
    return _ALIASES.get(upper, upper)


def order(names: Iterable[str]) -> list[str]:
    """``names`` normalised, de-duplicated, known ones in :data:`TF_ORDER`, unknown ones last."""
    seen = list(dict.fromkeys(normalize(n) for n in names if n.strip()))
    rank = {n: i for i, n in enumerate(TF_ORDER)}
    return sorted(seen, key=lambda n: (rank.get(n, len(rank)), n))


def isa_from_flags(flags: Iterable[str]) -> list[str]:
    """TensorFlow names for the instruction sets in a set of ``/proc/cpuinfo`` flags."""
    return order(FLAG_TO_TF[f] for f in flags if f in FLAG_TO_TF)


def onednn_default_for(isa: Iterable[str]) -> bool:
    """Whether a stock x86 Linux build turns oneDNN on by default on a CPU with ``isa``."""
    return any(name in NEURAL_FEATURES for name in isa)


def parse_cpuinfo(text: str) -> dict[str, Any]:
    """Model, vendor, flags, sockets and (physical id, core id) pairs from ``/proc/cpuinfo``."""
    model = vendor = None
    flags: set[str] = set()
    sockets: set[str] = set()
    cores: set[tuple[str, str]] = set()
    logical = 0
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        if "processor" not in fields:
            continue
        logical += 1
        model = model or fields.get("model name") or fields.get("Processor")
        vendor = vendor or fields.get("vendor_id") or fields.get("CPU implementer")
        flags.update((fields.get("flags") or fields.get("Features") or "").split())
        if "physical id" in fields:
            sockets.add(fields["physical id"])
            cores.add((fields["physical id"], fields.get("core id", fields["processor"])))
    return {
        "model": model,
        "vendor": vendor,
        "flags": flags,
        "logical": logical,
        "sockets": len(sockets) or None,
        "physical": len(cores) or None,
    }
