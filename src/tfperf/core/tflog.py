"""Parse what TensorFlow logs about the CPU while importing (cpu_feature_guard, oneDNN).

TensorFlow reports the instruction sets its binary was built without, in four wordings over
its history (all parsed here, each tested on real log lines under ``tests/data/tflogs``):

- ``current`` (2.12 and later)::

    This TensorFlow binary is optimized to use available CPU instructions in
    performance-critical operations.
    To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild ...

- ``onednn`` (2.3 to 2.11)::

    This TensorFlow binary is optimized with oneAPI Deep Neural Network Library (oneDNN) to use
    the following CPU instructions in performance-critical operations:  AVX2 FMA
    To enable them in other operations, rebuild TensorFlow with the appropriate compiler flags.

- ``old`` (1.6 to 2.2)::

    Your CPU supports instructions that this TensorFlow binary was not compiled to use: AVX2 FMA

- ``legacy`` (1.0 to 1.5), one line per instruction set::

    The TensorFlow library wasn't compiled to use AVX2 instructions, but these are available on
    your machine and could speed up CPU computations.

It also spots the fatal opposite (a binary built for instructions this CPU lacks) and the oneDNN
switch lines. Contract: :func:`parse_tf_log` is pure (text in, dict out); names come back in
TensorFlow's enum spelling (``SSE4_2``, see :mod:`tfperf.core.isa`).
"""

from __future__ import annotations

import re
from typing import Any

from tfperf.core.isa import order

_NAME = r"[A-Z][A-Z0-9_.]*"
_NAMES = rf"({_NAME}(?:[ \t]+{_NAME})*)"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("current", re.compile(r"To enable the following instructions:[ \t]*" + _NAMES + r"[ \t]*,")),
    (
        "onednn",
        re.compile(
            r"optimized with oneAPI Deep Neural Network Library \(oneDNN\)\s*to use the following"
            r" CPU instructions in performance-critical operations:[ \t]*" + _NAMES + r"[ \t]*$",
            re.MULTILINE,
        ),
    ),
    (
        "old",
        re.compile(
            r"Your CPU supports instructions that this Tensor[Ff]low b\w*ary was not compiled"
            r" to use:[ \t]*" + _NAMES + r"[ \t.]*$",
            re.MULTILINE,
        ),
    ),
    (
        "legacy",
        re.compile(
            r"The TensorFlow library wasn't compiled to use ([A-Z0-9_.]+) instructions, but these"
            r" are available"
        ),
    ),
)
_FATAL = re.compile(
    r"The TensorFlow library was compiled to use ([A-Z0-9_.]+) instructions, but these aren't"
    r" available on your machine"
)
_ONEDNN_ON = re.compile(r"oneDNN custom operations are on")
_ONEDNN_BAD_VALUE = re.compile(r"TF_ENABLE_ONEDNN_OPTS is not set to either")


def parse_tf_log(text: str) -> dict[str, Any]:
    """What TensorFlow's import-time log says about the CPU.

    Returns ``{"isa_missing": [...], "wording": "current"|"onednn"|"old"|"legacy"|None,
    "isa_required_missing": [...], "onednn_on_line": bool, "onednn_bad_value": bool,
    "lines": [the matching log lines]}``. ``wording`` is ``None`` when no cpu_feature_guard
    line was found (a binary built for this very CPU, or logging turned down).
    """
    # Each message keeps its list of names on one line (the prose around it may wrap).
    flat = text.replace("\r", "")
    missing: list[str] = []
    wording = None
    for name, pattern in _PATTERNS:
        found = pattern.findall(flat)
        if found:
            wording = wording or name
            for group in found:
                missing.extend(group.split())
    lines = [
        line.strip()
        for line in text.splitlines()
        if "cpu_feature_guard" in line
        or "To enable the following instructions" in line
        or "To enable them in other operations" in line
        or _ONEDNN_ON.search(line)
    ]
    return {
        "isa_missing": order(missing),
        "wording": wording,
        "isa_required_missing": order(_FATAL.findall(flat)),
        "onednn_on_line": bool(_ONEDNN_ON.search(text)),
        "onednn_bad_value": bool(_ONEDNN_BAD_VALUE.search(text)),
        "lines": lines,
    }
