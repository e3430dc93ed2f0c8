"""Strict JSON: what tfperf writes for programs (``--json``, the store, result files).

Contract: :func:`to_json` serialises a document with NaN and infinity as ``null`` and numpy
scalars as Python numbers, indented for reading; it never writes the non-standard ``NaN``.
"""

from __future__ import annotations

import json
import math
from typing import Any


def _clean(value: Any) -> Any:
    """Make ``value`` JSON-safe: NaN/inf become ``None``, numpy scalars become Python numbers."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__ == "numpy":
        return _clean(item())
    return value


def to_json(doc: Any) -> str:
    """Serialise ``doc`` as strict JSON (no NaN), indented for reading."""
    return json.dumps(_clean(doc), indent=2, sort_keys=False, allow_nan=False)
