"""The Ray cluster a fleet command runs on: connecting to it, and its nodes.

Contract:

- :func:`connect` joins an existing cluster named by ``--ray-address`` or ``RAY_ADDRESS``
  (``HOST:PORT`` of the head's GCS, ``ray://HOST:10001`` for Ray Client, ``auto`` for the
  cluster started on this machine). It never starts a cluster of its own: no address is a
  :class:`~tfperf.core.errors.UserError` saying how to name one, as are a missing Ray and a
  cluster that cannot be reached (nothing answering at ``HOST:PORT`` is found out within
  :data:`CONNECT_TIMEOUT_S`, before Ray's own connection, which waits without end).
- :func:`nodes` lists the alive nodes (:class:`Node`: Ray node id, host name, address, CPUs and
  GPUs Ray schedules), optionally only those named by host name or node id (a prefix of at
  least 6 characters); a name that matches nothing is a UserError.
- :func:`disconnect` leaves the cluster (nothing when not joined); Ray prints cluster events
  (a node marked dead) from threads of its own until then.
- Ray is imported here, inside the functions, never at import time.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

from tfperf.core.errors import UserError

ADDRESS_ENV = "RAY_ADDRESS"
CONNECT_TIMEOUT_S = 10.0
MIN_ID_PREFIX = 6


@dataclass(frozen=True)
class Node:
    """One alive node of the cluster, as Ray schedules it."""

    node_id: str
    host: str
    address: str
    cpus: float
    gpus: float

    @property
    def name(self) -> str:
        """``host (node id's first 8 hex digits)``: two nodes may share a host."""
        return f"{self.host} ({self.node_id[:8]})"

    def to_dict(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "host": self.host, "address": self.address}


CLIENT_INIT_TRIES = 3
_TRANSIENT = "Initialization failure from server"
"""What Ray Client says when its head could not start the client's server in time."""


def require_ray() -> Any:
    """The ``ray`` module, or a UserError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UserError(
            "tfperf fleet runs on Ray, which is not installed here: "
            "pip install 'tfperf[ray]' (the same Ray version as the cluster's)."
        ) from None
    return ray


def connect(address: str | None) -> Any:
    """Join the cluster at ``address`` (or ``RAY_ADDRESS``); returns the ``ray`` module."""
    address = address or os.environ.get(ADDRESS_ENV)
    if not address:
        raise UserError(
            "name the Ray cluster to run on: --ray-address HOST:PORT (or ray://HOST:10001, or "
            "'auto' for the cluster on this machine), or set RAY_ADDRESS (docs/fleet.md)."
        )
    ray = require_ray()
    if ray.is_initialized():
        return ray
    _check_reachable(address)
    for attempt in range(CLIENT_INIT_TRIES):
        try:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
            return ray
        except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            # Ray Client's head starts a server process per client; on a busy head it may
            # not be up within the proxy's wait, and the next connection usually is.
            if _TRANSIENT in why and attempt < CLIENT_INIT_TRIES - 1:
                time.sleep(1.0)
                continue
            raise UserError(
                f"cannot join the Ray cluster at {address} ({why[:200]}); check that it runs "
                "(`ray status` on its head) and that --ray-address / RAY_ADDRESS names it."
            ) from None
    return ray


def _check_reachable(address: str) -> None:
    """Fail at once for a ``HOST:PORT`` (or ``ray://HOST:PORT``) nobody answers on: Ray's own
    connection waits and retries without end."""
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto", or a form Ray resolves itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise UserError(
            f"nothing answers at {address} ({exc.strerror or exc}); check that the Ray cluster "
            "runs (`ray status` on its head) and that --ray-address / RAY_ADDRESS names its GCS "
            "(HOST:6379) or its client server (ray://HOST:10001)."
        ) from None


def disconnect() -> None:
    """Leave the cluster this process joined, if it joined one."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def _node(entry: dict[str, Any]) -> Node:
    resources = entry.get("Resources") or {}
    return Node(
        node_id=str(entry["NodeID"]),
        host=str(entry.get("NodeManagerHostname") or entry.get("NodeManagerAddress")),
        address=str(entry.get("NodeManagerAddress")),
        cpus=float(resources.get("CPU", 0.0)),
        gpus=float(resources.get("GPU", 0.0)),
    )


def nodes(ray: Any, only: tuple[str, ...] = ()) -> list[Node]:
    """The alive nodes, by host then node id; with ``only``, those it names."""
    alive = sorted(
        (_node(n) for n in ray.nodes() if n.get("Alive")), key=lambda n: (n.host, n.node_id)
    )
    if not only:
        return alive
    chosen = []
    for name in only:
        found = [
            n
            for n in alive
            if n.host == name or (len(name) >= MIN_ID_PREFIX and n.node_id.startswith(name))
        ]
        if not found:
            known = ", ".join(n.name for n in alive) or "none"
            raise UserError(
                f"--node {name!r} names no alive node of the cluster (alive: {known}); pass a "
                f"host name or the first {MIN_ID_PREFIX}+ characters of a node id."
            )
        chosen += [n for n in found if n not in chosen]
    return chosen
