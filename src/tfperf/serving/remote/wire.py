"""What every protocol's client does, and how its failures are told.

Contract:

- A :class:`Wire` speaks one protocol to one :class:`~tfperf.serving.remote.target.RemoteTarget`.
  ``await open()`` makes one connection (an HTTP client holding one kept-alive connection, or
  one gRPC channel), ``await close(conn)`` ends it; ``await metadata(conn)`` returns the
  model's inputs as the server publishes them (``None`` when it publishes none) and where they
  came from; ``encode(arrays)`` builds the request once (every request of a run sends the same
  body, as perf_analyzer does); ``await call(conn, body, timeout_s)`` sends it, returns when
  the answer is read whole and checked (an answer that is not the protocol's is a failure,
  ``bad answer``, with its first bytes), and returns a :class:`Sent`: how many times the
  request was sent again (only ever where the server cannot have read it whole: REST's rule)
  and how many connections the call had to make first (a kept-alive connection the server had
  closed is made again, and that handshake is in the request's latency).
- ``await stats(conn, timeout_s)`` reads the server's own statistics of the model
  (:mod:`tfperf.serving.remote.stats`): :class:`~tfperf.serving.remote.stats.Counters`, or the
  sentence saying why the server gives none.
- A server's error answer raises :class:`CallFailed` with ``status`` (``HTTP 500``,
  ``gRPC UNAVAILABLE``, ``timeout``, ``connection``, ``bad answer``), its message and the
  resends it had; an address that refuses or does not answer raises :class:`Unreachable`
  (:class:`Untrusted` when TLS failed). Only ``target.origin`` is ever contacted: no redirect
  is followed and no proxy from the environment is used. :func:`why` names the cause of a
  network failure in words (``connection refused``, ``TLS certificate not trusted: ...``).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from tfperf.serving.remote.stats import Counters
from tfperf.serving.remote.tensors import InputSpec


@dataclass(frozen=True)
class Sent:
    """What one call took besides its answer: resends, and connections made."""

    resent: int = 0
    connects: int = 0


class CallFailed(Exception):
    """A request failed: ``status``, its ``message``, the times it was ``resent`` and the
    connections it made (``connects``)."""

    def __init__(self, status: str, message: str, resent: int = 0, connects: int = 0) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.resent = resent
        self.connects = connects


class Unreachable(Exception):
    """Nothing answered at the target's address (refused, unknown host, timed out)."""


class Untrusted(Unreachable):
    """The TLS handshake failed (a certificate not trusted, most often)."""


def why(exc: BaseException) -> str:
    """The cause of a network failure in words, from the first cause in its chain that
    says more than the library's own message."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, ConnectionResetError):
            return "connection reset by the server"
        if isinstance(seen, ssl.SSLCertVerificationError):
            return f"TLS certificate not trusted: {seen.verify_message}"
        if isinstance(seen, ssl.SSLError):
            return f"TLS failed: {seen.reason or seen}"
        seen = seen.__cause__ or seen.__context__
    return short(str(exc) or type(exc).__name__)


FIRST_BYTES = 60
"""How much of an answer that is not the protocol's is kept to show."""


def first_bytes(content: bytes) -> str:
    """The start of an answer that is not what was expected, as it came."""
    more = "..." if len(content) > FIRST_BYTES else ""
    return f"{content[:FIRST_BYTES]!r}{more}"


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

    async def call(self, conn: Any, body: Any, timeout_s: float) -> Sent: ...

    async def stats(self, conn: Any, timeout_s: float) -> Counters | str: ...
