"""The server under test: K model instances, each a worker process, behind one dispatcher.

Contract:

- :class:`Harness` starts ``layout.instances`` workers (:class:`tfperf.runner.handle.Worker`,
  started through :mod:`tfperf.runner.launcher`), each with the ``serving`` section of the
  worker protocol: its core set (``layout.cores[i]``; the worker pins itself before
  TensorFlow starts a thread), the dynamic batch and its delay, and OpenVINO's ``streams`` and
  ``hint`` (with either, the instance serves through OpenVINO's asynchronous requests and
  reports how many it keeps in flight). ``layout.threads`` becomes each instance's thread
  count: TensorFlow's ``intra_threads`` for the ``tf`` runtime, ``runtime_threads`` for the
  others, unless the config sets it already. Every instance must load the same model
  (:class:`tfperf.runner.identity.SameModel`).
- It is a :class:`tfperf.serving.generator.Server`: ``submit`` sends a request to the instance
  with the fewest outstanding (ties: the lowest index), and holds at most
  :meth:`Harness.capacity` per instance (twice the batch times the calls it serves at once, so
  a batch can form while the last one runs); beyond that the generator's queue holds them.
  All traffic is the workers' pipes: nothing listens on a network address.
- An instance that dies (crash, error, timeout of its start) answers every request it held
  as failed, naming the instance and the reason; :attr:`Harness.faults` keeps one sentence per
  death, and :meth:`Harness.restart_dead` starts a fresh one in its place (between levels).
  With no instance alive, a request fails at once.
- For the load sweep it offers ``label``, ``sweep_info`` and ``saturating_concurrency``
  (twice what the instances serve at once, so its saturation is known), as every server under
  test does; it sees nothing of a level beyond its answers (``end_level`` is ``None``), and
  the generator's queue is its dispatcher's, not a client's. Each answer carries the model
  call's time that served it (``service_s``, as the instance reports it: a dynamic batch's one
  call for each of its requests).
- ``submit(id, null=True)`` sends a request its instance answers without the model call (the
  harness's own floor, :mod:`tfperf.serving.floor`). With ``trace``, every instance stamps
  its answers (:mod:`tfperf.worker.requests`) and :attr:`Harness.traced` keeps, per request
  id, when ``submit`` began, the instance's stamps, when ``poll`` woke to its answer and when
  it had read it (``time.monotonic()``).
- :func:`pinned` gives a layout core sets of its own: this process's CPUs split evenly
  between the instances (round robin when there are more instances than CPUs).
"""

from __future__ import annotations

import dataclasses
import os
import select
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tfperf.core.config import Config
from tfperf.core.errors import UserError
from tfperf.core.memory import Memory
from tfperf.core.serving import ServingLayout
from tfperf.runner.handle import Worker, WorkerFailed, close_all
from tfperf.runner.identity import SameModel
from tfperf.runner.memory import LayoutMemory
from tfperf.serving.generator import Answer

OPENVINO_PREFIX = "openvino"


def available_cpus() -> list[int]:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def pinned(layout: ServingLayout, cpus: Sequence[int] | None = None) -> ServingLayout:
    """``layout`` with a core set per instance (see the module docstring)."""
    cpus = list(cpus) if cpus is not None else available_cpus()
    k = layout.instances
    if k <= len(cpus):
        sets = tuple(tuple(cpus[i * len(cpus) // k : (i + 1) * len(cpus) // k]) for i in range(k))
    else:
        sets = tuple((cpus[i % len(cpus)],) for i in range(k))
    return dataclasses.replace(layout, cores=sets)


def instance_config(config: Config, layout: ServingLayout) -> Config:
    """The config each instance runs: ``layout.threads`` as the runtime's thread count."""
    if layout.threads is None:
        return config
    if config.runtime == "tf":
        if config.intra_threads is None:
            return dataclasses.replace(config, intra_threads=layout.threads)
        return config
    if config.runtime_threads is None:
        return dataclasses.replace(config, runtime_threads=layout.threads)
    return config


EXECUTORS = 1
"""Executor threads of one instance: OpenVINO's asynchronous requests are counted by the
instance itself (``ready["serving"]["infer_requests"]``)."""


def _as_dict(memory: Memory | None) -> dict[str, Any] | None:
    return memory.to_dict() if memory else None


@dataclasses.dataclass
class _Instance:
    index: int
    worker: Worker
    held: set[int] = dataclasses.field(default_factory=set)
    alive: bool = True


class Harness:
    """The instances serving one (workload, config, layout); see the module docstring."""

    target = None
    """A server tfperf starts listens nowhere (a remote server under test names its address)."""
    client_queue = False
    """A request waiting for an instance with room waits in the server's own dispatcher."""
    saturation_known = True

    def __init__(
        self,
        workload: Mapping[str, Any],
        config: Config,
        layout: ServingLayout,
        *,
        timeout_s: float = 120.0,
        memory_limit_bytes: int | None = None,
        python: str = sys.executable,
        environ: Mapping[str, str] | None = None,
        trace: bool = False,
    ) -> None:
        self.workload = dict(workload)
        self.config = instance_config(config, layout)
        self.layout = layout
        self.timeout_s = timeout_s
        self.memory_limit_bytes = memory_limit_bytes
        self.python = python
        self.environ = environ
        self.instances: list[_Instance] = []
        self.ready: list[dict[str, Any]] = []
        self.faults: list[str] = []
        self._identity = SameModel("the serving instances")
        self._failed_now: list[Answer] = []
        self.trace = trace
        self.traced: dict[int, dict[str, Any]] = {}
        self._capacity: int | None = None
        self._memory = LayoutMemory(layout)

    # -- life ---------------------------------------------------------------------------------

    def serving_section(self, index: int) -> dict[str, Any]:
        layout = self.layout
        openvino = self.config.runtime.startswith(OPENVINO_PREFIX)
        return {
            "instance": index,
            "cores": list(layout.cores[index]) if layout.cores else [],
            "max_batch": layout.max_batch,
            "max_delay_ms": layout.max_delay_ms,
            "executors": EXECUTORS,
            "streams": layout.streams if openvino else None,
            "hint": layout.hint if openvino else None,
            "trace": self.trace,
        }

    def _worker(self, index: int) -> Worker:
        return Worker(
            self.workload,
            self.config,
            python=self.python,
            timeout_s=self.timeout_s,
            memory_limit_bytes=self.memory_limit_bytes,
            environ=self.environ,
            serving=self.serving_section(index),
        )

    def start(self) -> Harness:
        """Start every instance (all at once) and wait until each is ready."""
        workers = [self._worker(i) for i in range(self.layout.instances)]
        self.instances = [_Instance(i, w) for i, w in enumerate(workers)]
        try:
            for w in workers:
                w.start()
            for w in workers:
                ready = w.wait_ready()
                self._identity.check(ready)
                self.ready.append(ready)
        except WorkerFailed as exc:
            self.close()
            if exc.user_error:
                raise UserError(exc.message or exc.reason) from None
            raise
        except BaseException:
            self.close()
            raise
        return self

    def restart_dead(self) -> int:
        """Start a fresh instance in place of each dead one; how many were restarted."""
        dead = [inst for inst in self.instances if not inst.alive]
        for inst in dead:
            worker = self._worker(inst.index)
            worker.start()
            ready = worker.wait_ready()
            self._identity.check(ready)
            self.instances[inst.index] = _Instance(inst.index, worker)
        return len(dead)

    def close(self) -> None:
        close_all(inst.worker for inst in self.instances)

    def __enter__(self) -> Harness:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the load sweep asks of the server under test ---------------------------------------

    def label(self) -> str:
        """The trial's label: the layout and the config."""
        return f"{self.layout.label()} {self.config.label()}"

    def sweep_info(self) -> dict[str, Any]:
        """What the trial records of the server: its layout and its instances' start."""
        first = self.ready[0] if self.ready else {}
        return {
            "layout": self.layout.to_dict(),
            "layout_label": self.layout.label(),
            "batch": first.get("batch"),
            "notes": first.get("notes", []),
            "startup_s": [r.get("startup_s") for r in self.ready],
            "instance_cpus": [(r.get("serving") or {}).get("cores") for r in self.ready],
            "memory": _as_dict(self.memory()),
        }

    def infer_requests(self) -> tuple[int, ...]:
        """Each instance's asynchronous infer requests, where OpenVINO serves it so."""
        counts = [(r.get("serving") or {}).get("infer_requests") for r in self.ready]
        return tuple(int(c) for c in counts if c)

    def memory(self) -> Memory | None:
        """The live instances' memory, summed; a converted runtime's as deployed
        (:class:`tfperf.runner.memory.LayoutMemory`)."""
        return self._memory([inst.worker for inst in self._alive()])

    def saturating_concurrency(self) -> int:
        """A concurrency that keeps every instance busy: twice what they serve at once."""
        return self.layout.instances * self.capacity()

    def begin_level(self, load: object = None, probe: bool = False) -> None:
        """Nothing to tell the instances: a level is the requests they answer."""

    def end_level(self) -> None:
        """The instances report nothing of a level beyond their answers."""
        return None

    # -- the Server the generator drives ------------------------------------------------------

    def capacity(self) -> int:
        """Requests one instance holds at most: twice what it serves at once (its infer
        requests, where OpenVINO serves asynchronously)."""
        if self._capacity is not None:
            return self._capacity
        serving = (self.ready[0].get("serving") or {}) if self.ready else {}
        at_once = int(serving.get("infer_requests") or EXECUTORS)
        if self.ready:  # asked for every request: the first instance's answer, kept
            self._capacity = 2 * self.layout.max_batch * at_once
        return 2 * self.layout.max_batch * at_once

    def _alive(self) -> list[_Instance]:
        return [inst for inst in self.instances if inst.alive]

    def room(self) -> bool:
        alive = self._alive()
        return not alive or any(len(inst.held) < self.capacity() for inst in alive)

    def submit(self, request_id: int, null: bool = False) -> None:
        alive = [inst for inst in self._alive() if len(inst.held) < self.capacity()]
        if not alive:
            self._failed_now.append(Answer(request_id, False, "no instance alive"))
            return
        inst = min(alive, key=lambda i: (len(i.held), i.index))
        inst.held.add(request_id)
        began = time.monotonic() if self.trace else 0.0
        try:
            inst.worker.request(request_id, null)
        except WorkerFailed as exc:
            self._failed_now += self._died(inst, exc)
        if self.trace:
            self.traced[request_id] = {"submit": began}

    def poll(self, timeout_s: float) -> list[Answer]:
        answers, self._failed_now = self._failed_now, []
        if answers:
            timeout_s = 0.0
        fds = {inst.worker.result_fd: inst for inst in self._alive()}
        fds.pop(None, None)
        if not fds:
            return answers
        ready, _, _ = select.select(list(fds), [], [], timeout_s)
        for fd in ready:
            inst = fds[fd]
            woke = time.monotonic() if self.trace else 0.0
            try:
                messages = inst.worker.answers(readable=True)
            except WorkerFailed as exc:
                answers += self._died(inst, exc)
                continue
            answers += self._answers(inst, messages)
            if self.trace:
                self._stamp(messages, woke)
        late, self._failed_now = self._failed_now, []
        return answers + late

    def _answers(self, inst: _Instance, messages: list[dict[str, Any]]) -> list[Answer]:
        out = []
        for msg in messages:
            ok = msg.get("error") is None
            service = msg.get("service_s")
            for rid in msg.get("ids", []):
                inst.held.discard(rid)
                out.append(Answer(int(rid), ok, msg.get("error"), inst.index, service))
        return out

    def _stamp(self, messages: list[dict[str, Any]], woke: float) -> None:
        read = time.monotonic()
        for msg in messages:
            stamps = msg.get("trace") or {}
            for i, rid in enumerate(msg.get("ids", [])):
                self.traced.setdefault(int(rid), {}).update(
                    {k: v for k, v in stamps.items() if k != "read"},
                    received=stamps["read"][i] if stamps else None, woke=woke, read=read,
                )

    def _died(self, inst: _Instance, exc: WorkerFailed) -> list[Answer]:
        inst.alive = False
        lost = sorted(inst.held)
        inst.held.clear()
        self.faults.append(
            f"instance {inst.index} {exc.reason.removeprefix('worker ')}; "
            f"{len(lost)} request{'s' if len(lost) != 1 else ''} it held were lost"
        )
        return [Answer(rid, False, exc.reason, inst.index) for rid in lost]
