"""One Keras model served two ways, at one SLO, in one run: by KServe on loopback (loaded with
``tfperf bench --url``'s client over v2 REST and v2 gRPC) and by tfperf's own harness (one
worker instance), each with the load generator's own CPU use.

The model is an unseeded MLP (64 -> 256 -> 256 -> 10, float32, batch 1), written to a .keras
file by a child process (this process never imports TensorFlow). KServe runs from its own
virtual environment (it pins protobuf and psutil; the one the tests make and cache is reused,
or made here) with ``tests/serving/remote/servers/kserve_keras.py``, calling the model through
a ``tf.function`` as tfperf's worker does, so both run the same graph per request. Each
server gets the same SLO search (a closed-loop capacity probe, then open-loop levels
bisecting the rate). With two CPUs or more, the generator (this process) is pinned to the
first and every server to the second, and the output says so; with one, they share it.

Below each server's line, the level that answered the SLO: its p50/p99 beside the server's own
time per request (the harness: the model call, ``service`` p50/p99; KServe: its statistics,
which it does not keep, so ``server -``), the wait for a client connection (``client queue``
p50/p99), and over all the server's levels the reconnects the client made, the longest drain
after a level's window, and the warm-up (requests sent before the first level, failures).

Usage: ``python benchmarks/remote_load.py [--slo-ms 20] [--requests 300] [--seconds 2]
[--kserve-python PATH] [--levels]`` (``--levels``: every level of each server too). Prints
figures; asserts nothing. Measure under the measuring lock.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tfperf.core.config import Config
from tfperf.core.serving import ServingLayout
from tfperf.modelref import resolve_model
from tfperf.serving import LoadResult, LoadScenario, measure_load, pinned
from tfperf.serving.levels import LoadLevel
from tfperf.serving.load import describe_level, level_cap, measure_on
from tfperf.serving.remote import parse_target, prepare
from tfperf.serving.remote.client import RemoteServer
from tfperf.serving.remote.run import pool_of

REPO = Path(__file__).resolve().parent.parent
SERVER = REPO / "tests" / "serving" / "remote" / "servers" / "kserve_keras.py"
KSERVE = "0.21.0"
MODEL = (
    "import keras, sys\n"
    "x = keras.Input((64,), name='x')\n"
    "h = keras.layers.Dense(256, activation='relu')(x)\n"
    "h = keras.layers.Dense(256, activation='relu')(h)\n"
    "keras.Model(x, keras.layers.Dense(10)(h)).save(sys.argv[1])\n"
)


def _kserve_python(given: str | None) -> Path:
    """KServe's Python: given, the tests' cached environment, or a new one made there."""
    if given:
        return Path(given)
    from importlib.metadata import version

    tf = version("tensorflow-cpu")
    root = Path(os.environ.get("TFPERF_TEST_CACHE") or Path.home() / ".cache" / "tfperf-tests")
    folder = root / f"kserve-{KSERVE}-tf{tf}-py{sys.version_info[0]}{sys.version_info[1]}"
    if not (folder / ".ready").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(folder)], check=True)
        subprocess.run([str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet",
                        f"kserve=={KSERVE}", f"tensorflow-cpu=={tf}"], check=True)
        (folder / ".ready").touch()
    return folder / "bin" / "python"


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_kserve(python: Path, model: Path, cpus: set[int], log) -> tuple:
    http, grpc = _port(), _port()
    proc = subprocess.Popen(
        [str(python), str(SERVER), str(model), "m", str(http), str(grpc), "--tf-function"],
        stdout=log, stderr=subprocess.STDOUT,
        preexec_fn=lambda: os.sched_setaffinity(0, cpus),
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/models/m/ready", timeout=1):
                return proc, http, grpc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("KServe did not start")


def _remote(url: str, model_name: str | None, scenario: LoadScenario) -> tuple[LoadResult, dict]:
    prepared = prepare(parse_target(url, model_name=model_name), None)
    server = RemoteServer(prepared.wire, prepared.body, pool_of(scenario, None),
                          scenario.timeout_s, target={"label": url})
    with server:
        server.warm(scenario.timeout_s)
        server.warm_all(scenario.timeout_s)
        return measure_on(server, scenario), dict(server.warmup)


def _pair(values: dict | None) -> str:
    if not values:
        return "-"
    return "/".join("-" if values.get(k) is None else f"{values[k]:.3f}" for k in ("p50", "p99"))


def _answering(result: LoadResult) -> LoadLevel | None:
    """The level whose achieved rate is the SLO answer (the search may have decided against a
    higher rate one of whose levels passed)."""
    answer = result.max_qps_at_slo
    return next((lv for lv in result.levels if lv.scenario == "open"
                 and lv.achieved_qps == answer and lv.within(result.slo_ms)), None)


def _figures(result: LoadResult, warmup: dict | None) -> str:
    """The answering level's latency beside the server's own time, and the run's client
    figures (module docstring)."""
    level = _answering(result)
    own = "-"
    if level is not None and level.service_ms:
        own = f"service p50/p99 {_pair(level.service_ms)}"
    elif level is not None:
        server = level.server_ms or {}
        own = (f"server queue {server.get('queue_ms', 0):.3f} compute "
               f"{server.get('compute_ms', 0):.3f}" if server else "server -")
    at = "no level within the SLO" if level is None else (
        f"at {level.offered_qps:.1f}/s: p50/p99 {_pair({'p50': level.p50_ms, 'p99': level.p99_ms})}"
        f" ms, {own} ms, client queue p50/p99 {_pair(level.client_queue_ms)} ms")
    reconnects = sum(lv.reconnects or 0 for lv in result.levels)
    drain = max(lv.drain_s for lv in result.levels)
    sent = "" if warmup is None else (
        f", warm-up {warmup['requests']} requests, {len(warmup['retries'])} failed")
    return f"{'':<26} {at}; reconnects {reconnects}, longest drain {drain:.3f} s{sent}"


def _line(name: str, result: LoadResult) -> str:
    cpu = [lv.generator_cpu for lv in result.levels]
    answer = result.max_qps_at_slo
    return (
        f"{name:<26} max {'-' if answer is None else f'{answer:8.1f}'}/s within p99 "
        f"{result.slo_ms:g} ms   capacity {result.capacity_qps or 0:8.1f}/s   "
        f"generator CPU mean {sum(cpu) / len(cpu):.2f} max {max(cpu):.2f} of a core   "
        f"{len(result.levels)} levels"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slo-ms", type=float, default=20.0)
    parser.add_argument("--requests", type=int, default=300, help="at least, per level")
    parser.add_argument("--seconds", type=float, default=2.0, help="at least, per level")
    parser.add_argument("--kserve-python", default=None)
    parser.add_argument("--levels", action="store_true", help="print every level too")
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    generator, server = ({cpus[0]}, {cpus[1]}) if len(cpus) > 1 else (set(cpus), set(cpus))
    os.sched_setaffinity(0, generator)
    print(f"CPUs {cpus}: load generator pinned to {sorted(generator)}, every server to "
          f"{sorted(server)}" + ("" if len(cpus) > 1 else " (one CPU: they share it)"))
    scenario = LoadScenario(slo_ms=args.slo_ms, requests=args.requests, seconds=args.seconds,
                            max_seconds=level_cap(args.seconds))
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "mlp.keras"
        subprocess.run([sys.executable, "-c", MODEL, str(model)], check=True,
                       env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, capture_output=True)
        workload = resolve_model(str(model))
        layout = pinned(ServingLayout(instances=1), cpus=sorted(server))
        local = measure_load(workload, Config(), layout, scenario)
        with open(Path(tmp) / "kserve.log", "w") as log:
            proc, http, grpc = _start_kserve(_kserve_python(args.kserve_python), model, server, log)
            try:
                rest = _remote(f"http://127.0.0.1:{http}/v2/models/m/infer", None, scenario)
                grpc_result = _remote(f"grpc://127.0.0.1:{grpc}", "m", scenario)
            finally:
                proc.terminate()
                proc.wait(20)
    for name, (result, warmup) in (("tfperf harness (1 worker)", (local, None)),
                                   ("KServe v2 REST", rest), ("KServe v2 gRPC", grpc_result)):
        print(_line(name, result))
        print(_figures(result, warmup))
        for level in result.levels if args.levels else ():
            print(f"{'':<28}{describe_level(level)}; reconnects {level.reconnects or 0}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
