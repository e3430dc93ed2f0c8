"""The worker process: serves one Config for one Workload (``python -m tfperf.worker``).

Contract (the protocol of ``docs/ARCHITECTURE.md``): the parent passes two pipe fds,
``--cmd-fd R --res-fd W``; every message is one line of JSON. The worker reads ``init``,
applies call-level knobs (thread pools) before its first op, builds the workload with
``tfperf.worker.prepare.prepare(workload, config)``, times the first call, warms up and answers
``ready`` (its ``install`` is :func:`tfperf.worker.probe.describe_install` plus a few keys, see
:func:`_install_facts`); then it answers ``run``, ``outputs``, ``extra`` and ``profile``
(``bench --ops``: :mod:`tfperf.worker.opprofile`) requests until ``quit``. An ``init`` with
a ``serving`` section (``cores``, ``max_batch``, ``max_delay_ms``,
``executors``, ``streams``, ``instance``) makes it one instance of a served model: pinned to
``cores`` before TensorFlow starts a thread, it also answers ``request`` messages
asynchronously (:mod:`tfperf.worker.requests`: a ``null`` request skips the model call,
``trace`` in the section stamps each answer); its ``ready`` then has ``serving:
{"cores"}``, the CPUs it may run on, and ``infer_requests`` where OpenVINO serves it
asynchronously (a ``hint`` or ``streams`` in the section). A config on Keras on JAX with
``runtime_threads`` N is pinned the same way, to the first N CPUs it may use
(:meth:`tfperf.core.config.Config.pinned_cpus`); every ``ready`` says in ``cpus`` which CPUs
the worker runs on.
Any exception becomes ``{"op": "error", "kind", "message"}`` and exit code 3: ``kind`` is
:data:`USER_KIND` (``"user"``) for a :class:`tfperf.core.errors.UserError` -- something the user
caused and can fix (a corrupt model file, a .keras that needs --unsafe, a factory that raises or
returns the wrong thing, inputs that do not fit the model) -- and the exception's class name
otherwise; ``message`` is one sentence. Its stdout and stderr are only captured for error
reports (faulthandler adds the Python stack of a crash).

This module also runs under other TensorFlow installs (down to TF 2.15 with Keras 2 on Python
3.9): it uses only ``tf.config.threading`` and ``tf.__version__`` from TensorFlow itself (the
install description, :func:`tfperf.worker.probe.describe_install`, reads more, and a failure there
never stops the worker), and nothing newer than Python 3.9.

Testing hooks (environment variables, for tests that inject faults for real; they reach a
worker through the config's env, see "Testing hooks" in ``docs/ARCHITECTURE.md``):

- ``TFPERF_INJECT_FAULT``: ``segfault-on-run`` (dereference NULL on the first ``run``),
  ``hang-on-run`` (sleep forever), ``oom-on-run`` (allocate and touch memory until killed;
  it stops growing at ``TFPERF_INJECT_OOM_CAP_GIB``, 16 by default, then sleeps),
  ``exit-on-init`` (exit with code 17 on ``init`` without answering), ``segfault-on-extra``
  (dereference NULL on the first ``extra``: a training step's timed ``fit``),
  ``segfault-on-request`` (dereference NULL on the ``TFPERF_INJECT_AT``-th request, 1 by
  default, in the serving instance ``TFPERF_INJECT_INSTANCE`` only when that is set).
- ``TFPERF_PREPARE=module:function``: use that function instead of
  ``tfperf.worker.prepare.prepare``.
"""

from __future__ import annotations

import argparse
import faulthandler
import functools
import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from tfperf.core.errors import UserError
from tfperf.core.protocol import EXIT_ERROR, EXIT_INJECTED, USER_KIND, artifact_from_notes
from tfperf.worker.requests import AsyncServer, Batching, RequestServer
from tfperf.worker.rss import peak_rss_bytes, rss_bytes
from tfperf.worker.tfimport import hidden_note, import_tensorflow, jax_is_needed
from tfperf.worker.workload import call_error_sentence, told_lines


def _input_shapes(prepared: Any) -> list | None:
    """``[[shape, dtype], ...]`` of the arrays a timed call takes (``None`` for a training step)."""
    inputs = getattr(prepared.call, "inputs", None)
    if inputs is None:
        return None
    return [[[int(d) for d in a.shape], str(a.dtype)] for a in inputs]


def _timed(fn: Callable[[], Any], calls: int, returned: list[Any] | None = None) -> list[float]:
    """Run ``fn`` ``calls`` times; one perf_counter duration per call, in seconds. Where
    ``returned`` is given, each call's figure is appended to it: the number it returned (a
    "fit"'s seconds to its end of training), else ``None`` -- what "eager" or "predict"
    return is the model's outputs, neither kept across calls nor sent back."""
    clock = time.perf_counter
    out = []
    for _ in range(calls):
        t0 = clock()
        value = fn()
        out.append(clock() - t0)
        if returned is not None:
            returned.append(float(value) if isinstance(value, (int, float)) else None)
    return out


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


def warm_up(call: Callable[[], Any], min_calls: int, max_seconds: float) -> list[float]:
    """Call until at least ``min_calls`` were made and either the time runs out or the median
    of the last 5 calls stopped falling (within 3% of the 5 before)."""
    samples: list[float] = []
    start = time.perf_counter()
    while True:
        samples.extend(_timed(call, 1))
        n = len(samples)
        if n < max(min_calls, 1):
            continue
        if time.perf_counter() - start >= max_seconds:
            return samples
        if n >= 10 and _median(samples[-5:]) >= 0.97 * _median(samples[-10:-5]):
            return samples


def _inject(fault: str, when: str) -> None:
    """Fail for real, the way ``TFPERF_INJECT_FAULT`` asks (a testing hook)."""
    if fault == "exit-on-init" and when == "init":
        os._exit(EXIT_INJECTED)
    if fault == f"segfault-on-{when}" and when in ("run", "extra"):
        import ctypes

        ctypes.string_at(0)
    if when != "run":
        return
    if fault == "hang-on-run":
        while True:
            time.sleep(3600)
    elif fault == "oom-on-run":
        cap = float(os.environ.get("TFPERF_INJECT_OOM_CAP_GIB", "16")) * 2**30
        hoard = []
        chunk = 32 * 2**20
        while len(hoard) * chunk < cap:
            hoard.append(bytearray(b"\x01") * chunk)
        while True:
            time.sleep(3600)


def _prepare_function() -> Callable[[dict, dict], Any]:
    hook = os.environ.get("TFPERF_PREPARE")
    if hook:
        module, _, name = hook.partition(":")
        return getattr(importlib.import_module(module), name)
    try:  # imported at init: an environment that cannot import it answers with the reason
        from tfperf.worker.prepare import prepare
    except ImportError as exc:
        raise RuntimeError(
            f"tfperf.worker.prepare cannot be imported in this environment ({exc}); install tfperf "
            "with its TensorFlow extras there."
        ) from exc
    return prepare


def _install_facts(tf: Any) -> dict[str, Any]:
    """The ``install`` of the ``ready`` message: :func:`tfperf.worker.probe.describe_install`
    (version, distribution, build, Python, oneDNN on/off and why, XLA, allocator) plus
    ``executable``, ``keras_version`` and the env knobs ``TF_ENABLE_ONEDNN_OPTS``,
    ``TF_XLA_FLAGS`` and ``LD_PRELOAD`` as this worker saw them. Should describing fail under
    some install, the worker still answers, with the version, Python and the reason
    (``describe_error``)."""
    try:  # imported here: a probe that fails to import must not lose the measurement
        from tfperf.worker.probe import describe_install

        facts = describe_install()
    except Exception as exc:  # never lose a measurement over a description
        facts = {
            "tf_version": getattr(tf, "__version__", None),
            "python": {"version": sys.version.split()[0], "executable": sys.executable},
            "describe_error": _one_sentence(exc),
        }
    facts["executable"] = sys.executable
    try:
        import keras

        facts["keras_version"] = getattr(keras, "__version__", None)
    except Exception:  # keras missing or broken: the workload will say so
        facts["keras_version"] = None
    for name in ("TF_ENABLE_ONEDNN_OPTS", "TF_XLA_FLAGS", "LD_PRELOAD"):
        facts[name] = os.environ.get(name)
    return facts


def _request_fault(fault: str, serving: dict[str, Any]) -> Callable[[], None]:
    """What runs before each served call: ``segfault-on-request`` counts requests (a hook)."""
    wanted = os.environ.get("TFPERF_INJECT_INSTANCE")
    if fault != "segfault-on-request" or (
        wanted is not None and str(serving.get("instance")) != wanted
    ):
        return lambda: None
    at = int(os.environ.get("TFPERF_INJECT_AT", "1"))
    seen = [0]

    def count() -> None:
        seen[0] += 1
        if seen[0] >= at:
            _inject("segfault-on-run", "run")

    return count


class Session:
    """The state of one worker: the prepared workload and the answers to each request."""

    def __init__(self, fault: str, send: Callable[[dict[str, Any]], None] = print) -> None:
        self.fault = fault
        self.send = send
        self.prepared: Any = None
        self.server: RequestServer | AsyncServer | None = None
        self.batched_artifact: str | None = None
        self.runtime = "tf"

    def init(self, msg: dict[str, Any]) -> dict[str, Any]:
        _inject(self.fault, "init")
        config = msg.get("config") or {}
        serving = msg.get("serving")
        _pin(config, serving)
        if serving and serving.get("streams"):
            config = {**config, "streams": int(serving["streams"])}  # OpenVINO compiles with them
        if serving and serving.get("hint"):
            config = {**config, "hint": str(serving["hint"])}
        self.runtime = _runtime_of(msg["workload"], config)
        needs_jax = jax_is_needed(self.runtime)
        t0 = time.perf_counter()
        tf, hidden = import_tensorflow(hide_jax=not needs_jax)
        import_s = time.perf_counter() - t0
        if config.get("intra_threads"):
            tf.config.threading.set_intra_op_parallelism_threads(int(config["intra_threads"]))
        if config.get("inter_threads"):
            tf.config.threading.set_inter_op_parallelism_threads(int(config["inter_threads"]))
        t1 = time.perf_counter()
        before_model = rss_bytes()  # TensorFlow imported, the model not yet built or loaded
        self.prepared = _prepare_function()(msg["workload"], config)
        load_s = time.perf_counter() - t1
        first_call_s = self._first_call(msg["workload"])
        policy = msg.get("warmup") or {}
        warm = warm_up(
            self.prepared.call,
            int(policy.get("min_calls", 5)),
            float(policy.get("max_seconds", 5.0)),
        )
        if serving:
            self._start_serving(msg["workload"], config, serving, policy)
        return {
            "op": "ready",
            "import_s": import_s,
            "load_s": load_s,
            "first_call_s": first_call_s,
            "warmup": {"samples_s": warm},
            "install": _install_facts(tf),
            "flops": {
                "per_call": self.prepared.flops_per_call,
                "source": self.prepared.flops_source,
            },
            "batch": self.prepared.batch,
            "fingerprint": getattr(self.prepared, "fingerprint", None),
            "notes": list(self.prepared.notes) + [hidden_note(name) for name in hidden],
            "extra_available": sorted(self.prepared.extra),
            "rss_before_model_bytes": before_model,
            "input_shapes": _input_shapes(self.prepared),
            "rss_bytes": rss_bytes(),
            "peak_rss_bytes": peak_rss_bytes(),
            "cpus": _cpus(),
            **({"serving": self._serving_facts()} if serving else {}),
            **({"train": self.prepared.train} if getattr(self.prepared, "train", None) else {}),
        }

    def _first_call(self, workload: dict[str, Any]) -> float:
        """Time the first call. An exception there, on the user's own model, is a
        :class:`UserError` naming TensorFlow's reason (inputs that do not fit, say): the
        parent ends the command with it when the default configuration raised it."""
        try:
            return _timed(self.prepared.call, 1)[0]
        except Exception as exc:
            if workload.get("kind") != "model":
                raise

            raise UserError(
                f"Calling the model on its sample inputs raised {call_error_sentence(exc)}: "
                "give inputs that fit the model (from the factory, or --inputs FILE.npz)."
            ) from exc

    def _start_serving(
        self, workload: dict[str, Any], config: dict[str, Any], serving: dict[str, Any],
        policy: dict[str, Any],
    ) -> None:
        """Prepare the batched model when the batcher is on, warm it, start the executors;
        or OpenVINO's asynchronous requests, with a hint or streams."""
        before = _request_fault(self.fault, serving)
        make_queue = getattr(self.prepared, "async_queue", None)
        if make_queue is not None and (serving.get("hint") or serving.get("streams")):
            self.server = AsyncServer(make_queue, self.send, before, bool(serving.get("trace")))
            return
        batching = Batching.from_message(serving)
        calls = {1: _call_maker(self.prepared)}
        if batching.max_batch > 1:
            batched = _prepare_function()(
                {**workload, "tile_to": self.prepared.batch * batching.max_batch}, config
            )
            warm_up(batched.call, int(policy.get("min_calls", 5)), 1.0)
            calls[batching.max_batch] = _call_maker(batched)
            # a converted runtime's batched call runs an artifact of its own: the parent
            # measures the layout's memory as deployed on it (tfperf.runner.memory)
            self.batched_artifact = artifact_from_notes(batched.notes)
        self.server = RequestServer(calls, batching, self.send, before)

    def _serving_facts(self) -> dict[str, Any]:
        """The ``serving`` of ``ready``: the CPUs it may run on and, served asynchronously,
        how many infer requests it keeps in flight."""
        jobs = getattr(self.server, "jobs", None)
        return {"cores": _cpus(), **({"infer_requests": jobs} if jobs else {}),
                **({"batched_artifact": self.batched_artifact} if self.batched_artifact else {})}

    def request(self, msg: dict[str, Any]) -> None:
        if self.server is None:
            raise ValueError("request before a serving init")
        self.server.submit(int(msg["id"]), bool(msg.get("null")), time.monotonic())

    def run(self, msg: dict[str, Any]) -> dict[str, Any]:
        _inject(self.fault, "run")
        samples = _timed(self.prepared.call, int(msg["calls"]))
        return {
            "op": "block",
            "samples_s": samples,
            "rss_bytes": rss_bytes(),
            "peak_rss_bytes": peak_rss_bytes(),
        }

    def outputs(self, msg: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        arrays = [np.asarray(a) for a in self.prepared.outputs()]
        np.savez(msg["path"], **{f"output_{i}": a for i, a in enumerate(arrays)})
        return {"op": "outputs", "path": msg["path"], "count": len(arrays)}

    def profile(self, msg: dict[str, Any]) -> dict[str, Any]:
        """``bench --ops``: the op profile of about ``seconds`` of calls (docs/ops.md)."""
        from tfperf.worker.opprofile import profile_record  # only runs that ask for it

        record = profile_record(self.prepared, self.runtime, float(msg.get("seconds", 1.0)))
        return {"op": "profile", "profile": record}

    def extra(self, msg: dict[str, Any]) -> dict[str, Any]:
        _inject(self.fault, "extra")
        name = msg["name"]
        fn = self.prepared.extra.get(name)
        if fn is not None and msg.get("arg") is not None:
            fn = functools.partial(fn, msg["arg"])
        figures: list[float | None] = []
        samples = _timed(fn, int(msg["calls"]), figures) if fn is not None else []
        reply = {"op": "extra", "name": name, "available": fn is not None, "samples_s": samples}
        if any(value is not None for value in figures):
            reply["returned"] = figures
        return reply


def _runtime_of(workload: dict[str, Any], config: dict[str, Any]) -> str:
    """The runtime a worker runs: a .tflite file always runs on LiteRT."""
    runtime = config.get("runtime") or "tf"
    return "litert" if workload.get("format") == "tflite" and runtime == "tf" else runtime


def _pin(config: dict[str, Any], serving: dict[str, Any] | None) -> None:
    """Pin this process to a serving instance's cores, or to the CPUs of Keras on JAX's
    ``runtime_threads``, before TensorFlow or XLA starts a thread: each thread they start
    inherits the set, and XLA sizes its CPU pool from it."""
    if not hasattr(os, "sched_setaffinity"):
        return
    cores = (serving or {}).get("cores")
    if not cores:
        from tfperf.core.config import Config

        cores = Config.from_dict(config).pinned_cpus(os.sched_getaffinity(0))
    if cores:
        os.sched_setaffinity(0, [int(c) for c in cores])


def _cpus() -> list[int] | None:
    """The CPUs this process may run on (``None`` where the system does not say)."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def _call_maker(prepared: Any) -> Callable[[], Callable[[], None]]:
    """What makes each executor's call: the prepared call itself."""
    return lambda: prepared.call



def error_message(exc: BaseException) -> dict[str, Any]:
    """The ``error`` message for ``exc`` (see the module docstring for ``kind``)."""
    kind = USER_KIND if isinstance(exc, UserError) else type(exc).__name__
    return {"op": "error", "kind": kind, "message": _one_sentence(exc)}


def _one_sentence(exc: BaseException) -> str:

    return (told_lines(str(exc)) or [type(exc).__name__])[0]


_LEFT_FOR_EXIT: list[Any] = []
"""Sessions never deleted: the process ends by ``os._exit`` (``tfperf.worker.__main__``), and
deleting a session's model and dataset iterators first waited for tf.data's autotune thread to
wake (its period doubles to 60 s): a worker asked to quit after its ``fit`` took 1.6-1.9 s to
exit, and a tune's last ones took the parent's whole 5 s grace."""


def serve(cmd: Any, res: Any, fault: str) -> int:
    """Answer requests from ``cmd`` on ``res`` until ``quit``; the worker's exit code."""
    lock = threading.Lock()  # the executors of a serving worker answer from their threads

    def send(obj: dict[str, Any]) -> None:
        line = json.dumps(obj) + "\n"
        with lock:
            res.write(line)
            res.flush()

    session = Session(fault, send)
    _LEFT_FOR_EXIT.append(session)
    handlers = {
        "init": session.init,
        "run": session.run,
        "outputs": session.outputs,
        "extra": session.extra,
        "profile": session.profile,
        "request": session.request,
    }

    for line in cmd:
        try:
            msg = json.loads(line)
            op = msg.get("op")
            if op == "quit":
                return 0
            handler = handlers.get(op)
            if handler is None:
                raise ValueError(f"unknown request {op!r}")
            if op != "init" and session.prepared is None:
                raise ValueError(f"request {op!r} before init")
            answer = handler(msg)
            if answer is not None:  # a request is answered later, by an executor
                send(answer)
        except Exception as exc:
            send(error_message(exc))
            import traceback

            traceback.print_exc()
            return EXIT_ERROR
    return 0


def _die_with_parent() -> None:
    """On Linux, have the kernel kill this worker if the parent dies (even by SIGKILL)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # the pipe's EOF still ends an idle worker


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m tfperf.worker --cmd-fd R --res-fd W``."""
    parser = argparse.ArgumentParser(prog="python -m tfperf.worker")
    parser.add_argument("--cmd-fd", type=int, required=True)
    parser.add_argument("--res-fd", type=int, required=True)
    args = parser.parse_args(argv)
    faulthandler.enable()  # a crash inside TensorFlow leaves its Python stack in the log
    _die_with_parent()
    with (
        os.fdopen(args.cmd_fd, "r", encoding="utf-8") as cmd,
        os.fdopen(args.res_fd, "w", encoding="utf-8") as res,
    ):
        return serve(cmd, res, os.environ.get("TFPERF_INJECT_FAULT", ""))


if __name__ == "__main__":
    sys.exit(main())
