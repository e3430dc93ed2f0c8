"""What every protocol's client does, and how its failures are told.

Contract:

- A :class:`Wire` speaks one protocol to one :class:`~tfperf.serving.remote.target.RemoteTarget`.
  ``await open()`` makes one connection (an HTTP client holding one kept-alive connection, or
  one gRPC channel), ``await close(conn)`` ends it; ``await metadata(conn)`` returns the
  model's inputs as the server publishes them (``None`` when it publishes none) and where they
  came from; ``encode(arrays)`` builds the request once (every request of a run sends the same
  body, as perf_analyzer does); ``await call(conn, body, timeout_s)`` sends it and returns when
  the answer is read whole.
- A server's error answer raises :class:`CallFailed` with ``status`` (``HTTP 500``,
  ``gRPC UNAVAILABLE``) and its message; an address that refuses or does not answer raises
  :class:`Unreachable`. Only ``target.origin`` is ever contacted: no redirect is followed and
  no proxy from the environment is used.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from tfperf.serving.remote.tensors import InputSpec


class CallFailed(Exception):
    """The server answered with an error: ``status`` and its ``message``."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class Unreachable(Exception):
    """Nothing answered at the target's address (refused, unknown host, timed out)."""


def short(text: str, limit: int = 200) -> str:
    """A server's message on one line, cut at ``limit`` characters."""
    one = " ".join(str(text).split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


class Wire(Protocol):
    """One protocol's client (module docstring)."""

    async def open(self) -> Any: ...

    async def close(self, conn: Any) -> None: ...

    async def metadata(self, conn: Any) -> tuple[list[InputSpec] | None, str]: ...

    def encode(self, arrays: dict[str, np.ndarray]) -> Any: ...

    async def call(self, conn: Any, body: Any, timeout_s: float) -> None: ...
