"""What a ``--quick`` tune gives a compile it may not afford: the ``xla-aot`` candidate.

Contract: XLA's ahead-of-time compile of a model runs in its candidate's worker before its first
call, and takes seconds for a small model and many minutes for a large one (a 4-layer
encoder's ran past the 300-s candidate timeout, and its quick tune waited for all of it).
Under ``--quick`` (:func:`limit`) such a worker gets :data:`QUICK_COMPILE_S` to start, its
compile included; one that runs past it is failed with :func:`too_slow`'s sentence, and
:class:`SlowCompiles` remembers it in the cache (keyed by the workload, the config and the
TensorFlow version), so that the next quick tune of that model on this machine says so at once
(:meth:`SlowCompiles.known`) instead of waiting again. A compile that finished is cached by the
worker itself (:mod:`tfperf.worker.aot`), and then costs nothing. A tune without ``--quick``
gives it ``--candidate-timeout``, as any candidate.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tfperf.core.knobs import XLA_AOT, label
from tfperf.core.paths import cache_dir

QUICK_COMPILE_S = 45.0
"""Under ``--quick``, the most an ``xla-aot`` candidate's worker may take to start (the
model's export, its compile and link, its first call): the built-in MLP, wide & deep model and
LSTM started in 13-29 s with an empty cache on a 2-core machine (the LSTM's 29 s include the
kernel libraries every later compile reuses), and a quick tune of about two minutes cannot
afford more."""
RECORD = "slow-compiles.json"


def compiles(config: Mapping[str, Any]) -> bool:
    """Whether ``config`` compiles the model ahead of time in its worker."""
    return config.get("runtime") == XLA_AOT


def limit(config: Mapping[str, Any], quick: bool, timeout_s: float) -> float:
    """How long ``config``'s worker may take to start: ``timeout_s``, and no more than
    :data:`QUICK_COMPILE_S` for an ahead-of-time compile under ``--quick``."""
    return min(timeout_s, QUICK_COMPILE_S) if quick and compiles(config) else timeout_s


def too_slow(seconds: float, before: bool = False) -> str:
    """The reason of an ``xla-aot`` candidate whose compile ``--quick`` did not wait for."""
    when = "ran past" if not before else "ran past, when this model was tuned here before,"
    return (f"not tried: XLA's ahead-of-time compile of this model {when} the {seconds:g} s "
            "--quick gives it; tune without --quick to give it up to --candidate-timeout (a "
            "compile that finishes is cached for every later tune)")


class SlowCompiles:
    """The compiles that ran past :data:`QUICK_COMPILE_S` here (the cache's record)."""

    def __init__(self, workload: Mapping[str, Any], tf_version: str | None,
                 folder: Path | None = None) -> None:
        self.model = json.dumps(dict(workload), sort_keys=True, default=str)
        self.tf_version = tf_version or "?"
        self.path = (folder or cache_dir()) / RECORD

    def _key(self, config: Mapping[str, Any]) -> str:
        return f"{self.model}|{label(config)}|{self.tf_version}"

    def _read(self) -> dict[str, float]:
        try:
            found = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def known(self, config: Mapping[str, Any]) -> float | None:
        """The bound ``config``'s compile ran past before, or ``None``."""
        value = self._read().get(self._key(config))
        return float(value) if isinstance(value, (int, float)) else None

    def remember(self, config: Mapping[str, Any], seconds: float) -> None:
        """Note that ``config``'s compile ran past ``seconds`` (a record that cannot be
        written is only a lost shortcut)."""
        record = self._read()
        record[self._key(config)] = seconds
        with contextlib.suppress(OSError):
            self.path.write_text(json.dumps(record, indent=1, sort_keys=True))
