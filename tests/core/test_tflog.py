"""tfperf.core.tflog on real log lines printed by several TensorFlow releases."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfperf.core.tflog import parse_tf_log

LOGS = Path(__file__).parent / "data" / "tflogs"

# What each real log says, read off the file by eye (TensorFlow's enum spelling).
EXPECTED = {
    "tf-2.21.0-linux-x86_64.log": (
        "current",
        ["AVX2", "FMA", "AVX512F", "AVX512_VNNI", "AVX512_BF16"],
    ),
    "tf-2.13-linux-x86_64.log": ("current", ["AVX2", "FMA", "AVX512F", "AVX512_VNNI"]),
    "tf-2.13-windows-x86_64.log": (
        "current",
        ["SSE", "SSE2", "SSE3", "SSE4_1", "SSE4_2", "AVX", "AVX2", "FMA"],
    ),
    "tf-2.9-linux-x86_64-sapphire-rapids.log": (
        "onednn",
        [
            "AVX2",
            "FMA",
            "AVX512F",
            "AVX512_VNNI",
            "AVX512_BF16",
            "AVX_VNNI",
            "AMX_TILE",
            "AMX_BF16",
            "AMX_INT8",
        ],
    ),
    "tf-2.7.0-conda-linux-x86_64.log": ("onednn", ["SSE4_1", "SSE4_2", "AVX", "AVX2", "FMA"]),
    "tf-2.5-linux-x86_64.log": ("onednn", ["AVX", "AVX2"]),
    "tf-2.2-linux-x86_64.log": ("old", ["AVX2", "FMA"]),
    "tf-1.12.0-linux-x86_64.log": ("old", ["AVX2", "FMA", "AVX512F"]),
    "tf-1.6-windows-x86_64.log": ("old", ["AVX"]),
    "tf-1.5-windows-x86_64.log": ("legacy", ["AVX", "AVX2"]),
    "tf-1.5-linux-x86_64-fatal.log": (None, []),
}


def test_every_log_file_has_an_expectation() -> None:
    assert sorted(p.name for p in LOGS.glob("*.log")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_log(name: str) -> None:
    wording, missing = EXPECTED[name]
    parsed = parse_tf_log((LOGS / name).read_text())
    assert parsed["wording"] == wording
    assert sorted(parsed["isa_missing"]) == sorted(missing)
    if wording:
        assert parsed["lines"], "the matching lines are kept as evidence"


def test_onednn_line_is_seen() -> None:
    assert parse_tf_log((LOGS / "tf-2.21.0-linux-x86_64.log").read_text())["onednn_on_line"]
    assert not parse_tf_log((LOGS / "tf-2.2-linux-x86_64.log").read_text())["onednn_on_line"]


def test_fatal_guard_names_the_instruction_the_cpu_lacks() -> None:
    parsed = parse_tf_log((LOGS / "tf-1.5-linux-x86_64-fatal.log").read_text())
    assert parsed["isa_required_missing"] == ["AVX2"]


def test_following_log_lines_are_not_taken_for_instruction_names() -> None:
    text = (LOGS / "tf-2.2-linux-x86_64.log").read_text()
    assert "CPU" not in parse_tf_log(text)["isa_missing"]
    assert parse_tf_log("")["wording"] is None
    assert parse_tf_log("I0000 something else entirely\n")["isa_missing"] == []
