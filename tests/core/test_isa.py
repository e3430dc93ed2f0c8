"""tfperf.core.isa: cpuinfo flags to TensorFlow's instruction-set names."""

from __future__ import annotations

import platform
from pathlib import Path

from tfperf.core import isa


def test_real_cpuinfo_flags_map_to_tensorflow_names() -> None:
    text = Path("/proc/cpuinfo").read_text()
    flags = next(line for line in text.splitlines() if line.startswith(("flags", "Features")))
    flags = flags.split(":", 1)[1].split()
    names = isa.isa_from_flags(flags)
    if platform.machine() == "x86_64":
        assert "SSE2" in names  # every x86-64 CPU has it
    assert set(names) <= set(isa.TF_ORDER)
    assert names == isa.order(names)
    assert ("AVX2" in names) == ("avx2" in flags)


def test_issue_names_are_all_known() -> None:
    wanted = (
        "SSE4_2 AVX AVX2 FMA AVX512F AVX512_VNNI AVX512_BF16 AVX512_FP16 AVX_VNNI "
        "AMX_TILE AMX_BF16 AMX_INT8"
    )
    for name in wanted.split():
        assert name in isa.TF_ORDER


def test_constructed_flags() -> None:
    flags = ["fpu", "sse4_2", "pni", "avx2", "avx", "fma", "amx_tile", "avx_vnni"]
    assert isa.isa_from_flags(flags) == [
        "SSE3",
        "SSE4_2",
        "AVX",
        "AVX2",
        "FMA",
        "AVX_VNNI",
        "AMX_TILE",
    ]


def test_log_spelling_is_normalized() -> None:
    assert isa.normalize("SSE4.2") == "SSE4_2"
    assert isa.order(["FMA", "SSE4.1", "AVX2", "FMA", "NEWTHING"]) == [
        "SSE4_1",
        "AVX2",
        "FMA",
        "NEWTHING",
    ]


def test_onednn_default_policy() -> None:
    assert isa.onednn_default_for(["AVX2", "AVX512_VNNI"])
    assert isa.onednn_default_for(["AVX2", "AVX_VNNI"])
    assert not isa.onednn_default_for(["AVX", "AVX2", "FMA", "AVX512F"])
