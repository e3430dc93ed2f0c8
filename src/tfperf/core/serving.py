"""The serving layout: how many model instances serve requests, and how each one is run.

Contract:

- :class:`ServingLayout` is frozen and JSON-able: ``ServingLayout.from_dict(l.to_dict()) == l``.
  A layout says nothing about the runtime or its knobs (those are the :class:`Config` each
  instance runs); it says how the instances share the machine.
- ``instances`` worker processes serve at once. ``cores`` gives each its own core set (one
  tuple of CPU ids per instance) or is empty when they are not pinned. ``threads`` is the
  thread count each instance runs with (``None``: its runtime's default).
- ``max_batch`` > 1 turns the dynamic batcher on: requests that wait are joined into one call
  of up to ``max_batch``, after at most ``max_delay_ms`` of waiting for more. ``max_batch`` 1
  means every request is its own call, and then ``max_delay_ms`` is 0.
- ``streams`` is OpenVINO's throughput streams, ``None`` for any other runtime or OpenVINO's
  own choice; ``hint`` is OpenVINO's ``PERFORMANCE_HINT`` (:data:`HINTS`: ``"THROUGHPUT"`` or
  ``"LATENCY"``), ``None`` when not set. An OpenVINO instance with either is served the way
  OpenVINO serves: an ``AsyncInferQueue`` of as many requests as the compiled model asks for
  (``OPTIMAL_NUMBER_OF_INFER_REQUESTS``); without, by one synchronous request at a time.
- :data:`DEFAULT_LAYOUT` is the baseline every serving answer is compared with: one instance,
  not pinned, its runtime's threads, no batching.
- A bad value raises :class:`~tfperf.core.errors.UserError` with what is allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tfperf.core.errors import UserError

HINTS = ("THROUGHPUT", "LATENCY")
"""OpenVINO's ``PERFORMANCE_HINT`` values a layout may set."""


@dataclass(frozen=True)
class ServingLayout:
    """The instances that serve requests and how each runs (see the module's contract)."""

    instances: int = 1
    threads: int | None = None
    cores: tuple[tuple[int, ...], ...] = ()
    max_batch: int = 1
    max_delay_ms: float = 0.0
    streams: int | None = None
    hint: str | None = None

    def __post_init__(self) -> None:
        if self.instances < 1:
            raise UserError(f"A serving layout needs at least one instance, not {self.instances}.")
        if self.threads is not None and self.threads < 1:
            raise UserError(f"Threads per instance must be at least 1, not {self.threads}.")
        if self.cores and len(self.cores) != self.instances:
            raise UserError(
                f"Give one core set per instance: {self.instances} instances, "
                f"{len(self.cores)} core sets."
            )
        if self.max_batch < 1:
            raise UserError(f"The dynamic batch must be at least 1, not {self.max_batch}.")
        if self.max_delay_ms < 0 or (self.max_batch == 1 and self.max_delay_ms):
            raise UserError(
                "The batcher's delay must be 0 or more, and 0 when the batch is 1 "
                f"(got max_batch={self.max_batch}, max_delay_ms={self.max_delay_ms})."
            )
        if self.streams is not None and self.streams < 1:
            raise UserError(f"OpenVINO streams must be at least 1, not {self.streams}.")
        if self.hint is not None and self.hint not in HINTS:
            raise UserError(
                f"OpenVINO's performance hint is one of {', '.join(HINTS)}, not {self.hint!r}."
            )
        if (self.hint or self.streams) and self.max_batch > 1:
            raise UserError(
                "OpenVINO's asynchronous requests (--hint, --streams) serve one request per "
                "call: leave --max-batch at 1 with them."
            )

    @property
    def asynchronous(self) -> bool:
        """Served by OpenVINO's own asynchronous requests (a hint or streams set)."""
        return bool(self.hint or self.streams)

    @property
    def pinned(self) -> bool:
        return bool(self.cores)

    @property
    def batching(self) -> bool:
        return self.max_batch > 1

    def label(self) -> str:
        """``"1x"`` for the default; ``"2x1t pinned batch=8/2ms"`` and so on otherwise."""
        text = f"{self.instances}x" + (f"{self.threads}t" if self.threads else "")
        if self.pinned:
            text += " pinned"
        if self.batching:
            text += f" batch={self.max_batch}/{self.max_delay_ms:g}ms"
        if self.streams:
            text += f" streams={self.streams}"
        if self.hint:
            text += f" hint={self.hint}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "instances": self.instances,
            "threads": self.threads,
            "cores": [list(c) for c in self.cores],
            "max_batch": self.max_batch,
            "max_delay_ms": self.max_delay_ms,
            "streams": self.streams,
            "hint": self.hint,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServingLayout:
        """Read :meth:`to_dict`'s form; keys this tfperf does not know are ignored."""
        return cls(
            instances=int(data.get("instances", 1)),
            threads=None if data.get("threads") is None else int(data["threads"]),
            cores=tuple(tuple(int(c) for c in s) for s in data.get("cores") or ()),
            max_batch=int(data.get("max_batch", 1)),
            max_delay_ms=float(data.get("max_delay_ms", 0.0)),
            streams=None if data.get("streams") is None else int(data["streams"]),
            hint=data.get("hint"),
        )


DEFAULT_LAYOUT = ServingLayout()
