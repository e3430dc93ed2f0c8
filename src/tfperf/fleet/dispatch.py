"""One Ray task per node, placed on that node, each result handed on as it finishes.

Contract:

- :func:`run_on_nodes` starts one task per :class:`~tfperf.fleet.cluster.Node` with a hard
  node affinity (``NodeAffinitySchedulingStrategy(soft=False)``: it runs there or not at all,
  never elsewhere), no retry, and every CPU and GPU Ray schedules on that node: no other task
  of this fleet command, nor of anyone else's Ray job, runs on the node while it measures. The
  task runs :func:`tfperf.fleet.node.run_job` with the node's payload (what the driver ships
  it, :mod:`tfperf.fleet.payload`, put in Ray's object store once per distinct payload) and
  adds the Ray node id it really ran on.
- Each node's :class:`Outcome` is handed to ``on_done`` as soon as its task ends
  (``ray.wait``), in the order they finish. A task that fails is an outcome too, never an
  exception: ``lost`` when its node or worker died (with Ray's reason), ``failed`` for any other
  error, ``timeout`` when it ran past ``timeout_s`` (then it is cancelled), ``cancelled`` on
  Ctrl-C; the other nodes go on.
- Ctrl-C (``KeyboardInterrupt``) cancels every task still running -- first as Ray's
  interrupt, so that each node's launcher kills the tfperf command's process group, then with
  ``force`` after :data:`CANCEL_GRACE_S` -- records them as ``cancelled`` and re-raises.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tfperf import __version__
from tfperf.fleet.cluster import Node
from tfperf.fleet.node import Job, run_job
from tfperf.fleet.payload import Payload

_NO_TFPERF = (
    "tfperf is not installed in the Python of the node's Ray workers: install "
    "tfperf=={version} there (the driver's version)."
)
CANCEL_GRACE_S = 5.0
WAIT_S = 0.5
LOST_ERRORS = ("NodeDiedError", "WorkerCrashedError", "LocalRayletDiedError", "ObjectLostError")


@dataclass(frozen=True)
class Outcome:
    """How one node's task ended: ``status`` (``ok``, ``failed``, ``incompatible``, ``lost``,
    ``timeout``, ``cancelled``), the reason when not ok, and the node's report."""

    node: Node
    status: str
    reason: str | None
    report: Mapping[str, Any]

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _on_node(job: Job, payload: bytes | None) -> dict[str, Any]:
    """The Ray task: the job, and the node it really ran on."""
    import ray

    report = run_job(job, payload)
    report["ran_on"] = ray.get_runtime_context().get_node_id()
    return report


def _reason(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    text = next((ln for ln in lines if not ln.startswith("ray::")), type(exc).__name__)
    return text[:400]


def _outcome(ray: Any, ref: Any, node: Node) -> Outcome:
    try:
        report = ray.get(ref)
    except ray.exceptions.RayError as exc:
        names = {type(exc).__name__, type(getattr(exc, "cause", None)).__name__}
        if "No module named 'tfperf'" in str(exc):
            return Outcome(node, "incompatible", _NO_TFPERF.format(version=__version__), {})
        status = "lost" if names & set(LOST_ERRORS) else "failed"
        what = "the node or its worker died" if status == "lost" else "the task failed"
        return Outcome(node, status, f"{what}: {_reason(exc)}", {})
    if report.get("ran_on") not in (None, node.node_id):
        return Outcome(node, "failed", f"the task ran on node {report['ran_on']}", report)
    return Outcome(node, str(report["status"]), report.get("reason"), report)


def _cancel(ray: Any, refs: list[Any]) -> None:
    """Interrupt the tasks (their launchers kill the commands), then force what is left."""
    for ref in refs:
        ray.cancel(ref, force=False)
    deadline = time.monotonic() + CANCEL_GRACE_S
    left = list(refs)
    while left and time.monotonic() < deadline:
        _, left = ray.wait(left, num_returns=len(left), timeout=WAIT_S)
    for ref in left:
        ray.cancel(ref, force=True)


def _task_options(node: Node) -> dict:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {
        "num_cpus": node.cpus,
        "num_gpus": node.gpus,
        "max_retries": 0,
        "scheduling_strategy": NodeAffinitySchedulingStrategy(node.node_id, soft=False),
    }


def _shipped(ray: Any, payloads: Mapping[Node, Payload]) -> dict[Node, Any]:
    """Each payload's archive put in the object store once, however many nodes get it."""
    refs: dict[int, Any] = {}
    out = {}
    for node, payload in payloads.items():
        if id(payload) not in refs:
            archive = payload.archive()
            refs[id(payload)] = None if archive is None else ray.put(archive)
        out[node] = refs[id(payload)]
    return out


def run_on_nodes(
    ray: Any,
    jobs: Mapping[Node, Job],
    payloads: Mapping[Node, Payload],
    on_done: Callable[[Outcome], None],
    timeout_s: float,
) -> list[Outcome]:
    """Run each node's job there with its payload (none when ``payloads`` does not name the
    node); ``on_done`` gets each outcome as it comes (module docstring)."""
    task = ray.remote(_on_node)
    shipped = _shipped(ray, payloads)
    refs = {
        task.options(**_task_options(node)).remote(job, shipped.get(node)): node
        for node, job in jobs.items()
    }
    pending = list(refs)
    outcomes: list[Outcome] = []

    def done(outcome: Outcome) -> None:
        outcomes.append(outcome)
        on_done(outcome)

    deadline = time.monotonic() + timeout_s
    try:
        while pending and time.monotonic() < deadline:
            finished, pending = ray.wait(pending, num_returns=1, timeout=WAIT_S)
            for ref in finished:
                done(_outcome(ray, ref, refs[ref]))
    except KeyboardInterrupt:
        _cancel(ray, pending)
        for ref in pending:
            done(Outcome(refs[ref], "cancelled", "stopped by Ctrl-C", {}))
        raise
    if pending:
        _cancel(ray, pending)
        for ref in pending:
            why = f"did not finish within {timeout_s:g} s and was cancelled"
            done(Outcome(refs[ref], "timeout", why, {}))
    return outcomes
