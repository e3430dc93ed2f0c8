"""A built-in workload under load, served by 1 instance and by 2 pinned instances, in one run.

For each layout, on one harness (its instances started once): a closed-loop concurrency sweep,
an open-loop rate sweep that goes past capacity (the same rates for both layouts: fractions of
the 1-instance capacity the closed sweep measured), and the SLO search with an SLO of 4x the
1-instance single-stream p50. Printed side by side: each level's offered and achieved rate
(over its window of arrivals), p50/p99 (ms, from the scheduled arrival; ``-`` where p99 does
not stand on 1000 requests) with p99's 95% interval, completed/sent, failed (f) and timed out
(t), the generator's CPU (share of one core) and, open loop, its own lag (p99, ms), the model
call's time per request (``svc`` p50/p99, as the instance reports it), the drain after the
window (``drain`` s) and why the level stopped (``min``imums, ``stable`` p99, ``cap``); then
both layouts' SLO answers. Levels run as ``tfperf bench``'s do: at least ``--requests`` and
``--seconds``, then on until p99 is stable, at most 4 times ``--seconds``.

Each level is printed with its harness floor (``floor p50/p99``: the same load with every model
call skipped). Then, on one instance, where a request's time goes at ``--breakdown-rate`` (200
per second by default), from the instance's stamps of each answer
(:func:`tfperf.serving.floor.breakdown`): the generator's own delay, the request's way to the
instance, the model call and the answer's way back, each stage's p50 and p99, for the model and
for the floor, and the model call back to back (closed loop at concurrency 1) to compare; how
busy other processes kept the CPUs meanwhile; tfperf's own work per floor
request (this process's and the instance's CPU time over the floor level, per request, less
what the sleeps on a request's way cost a thread in CPU here); this machine's wake-up latency
(:func:`tfperf.machine.wakeup.wakeup_latency`, as ``doctor`` measures it) and the floor's p50
less the wake-ups every request waits for (:data:`WAKEUPS`).

Usage: ``python benchmarks/serving_load.py [--workload mlp] [--size standard]
[--requests 300] [--seconds 2] [--slo-ms X] [--breakdown-rate 200] [--breakdown-only]
[--set KNOB=VALUE ...]``.
Prints figures; asserts nothing. Measure under ``flock /tmp/tfperf-measure.lock``.
"""

from __future__ import annotations

import argparse
import os
import resource
import select
import time

import numpy as np
import psutil

from tfperf.core.config import Config
from tfperf.core.serving import ServingLayout
from tfperf.machine import contention
from tfperf.machine.wakeup import wakeup_latency
from tfperf.serving import Harness, LoadLevel, LoadScenario, measure_on, pinned
from tfperf.serving.floor import STAGES, NullCalls, breakdown
from tfperf.serving.generator import ClosedLoop, LevelRecord, OpenLoop, run_level
from tfperf.serving.load import level_cap
from tfperf.serving.tail import LevelLength

RATE_FRACTIONS = (0.5, 0.8, 1.2, 1.6)
WAKEUPS = (
    "the generator's timer at the arrival",
    "the instance's main thread, asleep on its pipe",
    "the instance's executor thread, asleep on its queue",
    "the generator, asleep in select until the answer",
)
"""The sleeping threads every request wakes on its way, in order."""


def _ms(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def _level(level: LoadLevel) -> str:
    offered = "" if level.offered_qps is None else f"off {level.offered_qps:7.1f} "
    floor = level.harness_floor
    shown = "" if floor is None else f" floor {floor.p50_ms:.3f}/{_ms(floor.p99_ms)}"
    service = level.service_ms or {}
    return offered + (
        f"ach {level.achieved_qps:7.1f}/s p50 {_ms(level.p50_ms, '7.3f')} "
        f"p99 {_ms(level.p99_ms, '8.3f')} [{level.p99_ci_ms[0]:.3g},{level.p99_ci_ms[1]:.3g}] "
        f"{level.completed}/{level.sent} f{level.failed} t{level.timed_out} "
        f"cpu {level.generator_cpu:.2f}"
        + ("" if level.generator_lag_p99_ms is None else f" lag {level.generator_lag_p99_ms:.2f}")
        + f" svc {_ms(service.get('p50'))}/{_ms(service.get('p99'))}"
        + f" drain {level.drain_s:.3f} {level.stopped}"
        + shown
    )


def _measure(
    workload: dict, config: Config, layout: ServingLayout, base: LoadScenario, first: dict
) -> dict:
    """Closed sweep, rate sweep and SLO search of one layout on one harness."""
    with Harness(workload, config, layout) as harness:
        closed = measure_on(harness, LoadScenario(concurrency=(1, 2, 4), **base))
        capacity = max(lv.achieved_qps for lv in closed.levels)
        first.setdefault("capacity", capacity)
        first.setdefault("slo_ms", 4 * closed.levels[0].p50_ms)
        rates = tuple(round(f * first["capacity"], 1) for f in RATE_FRACTIONS)
        opened = measure_on(harness, LoadScenario(rates=rates, **base))
        slo = measure_on(harness, LoadScenario(slo_ms=first["slo_ms"], **base))
    return {"closed": closed, "open": opened, "slo": slo, "capacity": capacity}


def _p50_p99(ms: np.ndarray) -> tuple[float, float]:
    return float(np.quantile(ms, 0.5)), float(np.quantile(ms, 0.99))


def _cpu_s(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of process ``pid`` (this one: its own usage)."""
    if pid == os.getpid():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime, usage.ru_stime
    times = psutil.Process(pid).cpu_times()
    return times.user, times.system


def _stages(harness: Harness, null: bool, rate: float, requests: int, seconds: float) -> dict:
    """One traced open-loop level at ``rate`` (null requests for the floor): each stage's
    p50/p99 in ms, with the generator's own delay and the latency from the arrival; the CPU
    time per request (us, user and system) of this process and of the instance; and the
    share of the CPUs other processes kept busy meanwhile."""
    harness.traced.clear()
    load = OpenLoop(rate, LevelLength(requests, seconds, 20.0), seed=1)
    pids = (os.getpid(), harness.instances[0].worker.pid)
    cpu0, busy0 = [_cpu_s(pid) for pid in pids], contention.snapshot()
    record: LevelRecord = run_level(NullCalls(harness) if null else harness, load, 10.0)
    cpu1, busy1 = [_cpu_s(pid) for pid in pids], contention.snapshot()
    per_request = [[(b - a) * 1e6 / record.completed for a, b in zip(c0, c1, strict=True)]
                   for c0, c1 in zip(cpu0, cpu1, strict=True)]
    latency = np.asarray(record.latencies_s) * 1000.0
    generator = latency - np.asarray(record.from_send_s) * 1000.0
    return {"generator": _p50_p99(generator), **breakdown(harness.traced),
            "latency": _p50_p99(latency), "cpu_us": per_request,
            "others": contention.other_cpu_share(busy0, busy1)}


def _sleep_cpu_us(sleeps: int = 200, gap_s: float = 0.005) -> float:
    """The CPU time (us) a thread is charged for one sleep of ``gap_s`` in ``select`` and its
    wake-up here: what every sleep of a request's way costs besides its latency."""
    read_end, write_end = os.pipe()
    try:
        t0 = time.thread_time()
        for _ in range(sleeps):
            select.select([read_end], [], [], gap_s)
        return (time.thread_time() - t0) / sleeps * 1e6
    finally:
        os.close(read_end)
        os.close(write_end)


def _table(model: dict, floor: dict) -> None:
    print(f"  {'stage':<13}{'model':>17}{'floor':>17}   what")
    what = {name: text for name, _, _, text in STAGES}
    what.update(generator="the generator's own delay: from the scheduled arrival to its send",
                total="from the send to the answer read",
                latency="from the scheduled arrival to the answer (the level's latency)")
    for name in ("generator", *(stage[0] for stage in STAGES), "total", "latency"):
        pair = [f"{m[name][0]:7.3f} / {m[name][1]:7.3f}" for m in (model, floor)]
        print(f"  {name:<13}{pair[0]:>17}{pair[1]:>17}   {what[name]}")


def _back_to_back_call_ms(harness: Harness, requests: int) -> float:
    """The model call's p50 (ms) with the requests back to back: closed loop, concurrency 1."""
    harness.traced.clear()
    run_level(harness, ClosedLoop(1, LevelLength(requests, 0.5, 20.0)), 10.0)
    return breakdown(harness.traced)["model call"][0]


def _breakdown(
    workload: dict, config: Config, rate: float, requests: int, seconds: float
) -> None:
    """Where a request's time goes at ``rate`` on one instance (module docstring)."""
    with Harness(workload, config, ServingLayout(), trace=True) as harness:
        model = _stages(harness, False, rate, requests, seconds)
        floor = _stages(harness, True, rate, requests, seconds)
        hot = _back_to_back_call_ms(harness, requests)
    wake = wakeup_latency(rounds=300, budget_s=1.5)
    print(f"\nbreakdown of a request at {rate:g}/s, 1 instance of {config.label()} (ms, "
          f"p50 / p99; at least {requests} requests and {seconds:g} s each)")
    _table(model, floor)
    print(f"the model call back to back (closed loop, concurrency 1): p50 {hot:.3f} ms")
    others = [m["others"] for m in (model, floor)]
    print("other processes kept " + " and ".join(
        "?" if o is None else f"{o:.0%}" for o in others) + " of the CPUs busy meanwhile")
    (gen_user, gen_sys), (inst_user, inst_sys) = floor["cpu_us"]
    work = (gen_user + gen_sys + inst_user + inst_sys) / 1000.0
    sleep = _sleep_cpu_us() / 1000.0
    print(f"CPU time per floor request (over the level / requests): generator "
          f"{gen_user:.0f} us user + {gen_sys:.0f} us system, instance {inst_user:.0f} + "
          f"{inst_sys:.0f} us: {work:.3f} ms; a 5 ms sleep in select and its wake-up cost a "
          f"thread {sleep * 1000:.0f} us of CPU here, and a request's way holds "
          f"{len(WAKEUPS)}: tfperf's own work {work - len(WAKEUPS) * sleep:.3f} ms per request")
    if wake is None:
        print("this machine's wake-up latency could not be measured")
        return
    print(f"this machine's wake-up latency (a thread asleep on a pipe, woken "
          f"{'on another CPU' if wake.cross_cpu else 'on its CPU'}): p50 {wake.p50_ms:.3f} ms, "
          f"p99 {wake.p99_ms:.3f} ms over {wake.samples}")
    print(f"every request wakes {len(WAKEUPS)} sleeping threads: " + "; ".join(WAKEUPS))
    rest = floor["latency"][0] - len(WAKEUPS) * wake.p50_ms
    print(f"the floor's p50 {floor['latency'][0]:.3f} ms less {len(WAKEUPS)} x "
          f"{wake.p50_ms:.3f} ms of wake-ups: {rest:.3f} ms (tfperf's work, and waiting for "
          f"CPUs others kept busy); the model call {model['model call'][0]:.3f} ms of the "
          f"level's {model['latency'][0]:.3f} ms p50")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="mlp")
    parser.add_argument("--size", default="standard", choices=["standard", "tiny"])
    parser.add_argument("--requests", type=int, default=300, help="at least, per level")
    parser.add_argument("--seconds", type=float, default=2.0, help="at least, per level")
    parser.add_argument("--slo-ms", type=float, default=None,
                        help="the SLO (default: 4x the 1-instance single-stream p50)")
    parser.add_argument("--breakdown-rate", type=float, default=200.0,
                        help="the rate of the per-request breakdown (0: none)")
    parser.add_argument("--breakdown-only", action="store_true",
                        help="print the breakdown alone, without the sweeps")
    parser.add_argument("--set", action="append", default=[], metavar="KNOB=VALUE",
                        help="the config the instances run, as tfperf bench --set")
    args = parser.parse_args()
    workload = {"kind": "builtin", "name": args.workload, "size": args.size, "batch": 1}
    config = Config.parse(args.set)
    if args.breakdown_only:
        _breakdown(workload, config, args.breakdown_rate, args.requests, args.seconds)
        return 0
    base = {"requests": args.requests, "seconds": args.seconds,
            "max_seconds": level_cap(args.seconds)}
    layouts = [ServingLayout(), pinned(ServingLayout(instances=2))]
    first: dict = {} if args.slo_ms is None else {"slo_ms": args.slo_ms}
    started = time.perf_counter()
    results = {lay.label(): _measure(workload, config, lay, base, first) for lay in layouts}
    names = list(results)
    print(f"workload {args.workload} ({args.size}, batch 1); levels of >= {args.requests} "
          f"requests and >= {args.seconds:g} s; latency from the scheduled arrival (ms)")
    print(f"{'level':<14}" + "".join(f"| {n:<130}" for n in names))
    for part in ("closed", "open", "slo"):
        rows = zip(*(results[n][part].levels for n in names), strict=False)
        for levels in rows:
            lv = levels[0]
            what = (f"c={lv.concurrency}" if lv.scenario == "closed"
                    else f"{lv.offered_qps:.1f}/s")
            if part == "slo":
                what = "slo search"
            print(f"{what:<14}" + "".join(f"| {_level(x):<130}" for x in levels))
    why = "given" if args.slo_ms is not None else "4x the 1-instance single-stream p50"
    print(f"SLO: p99 within {first['slo_ms']:.3f} ms ({why})")
    for n in names:
        r = results[n]
        answer = r["slo"].max_qps_at_slo
        shown = "none within the SLO" if answer is None else f"{answer:.1f}/s"
        print(f"  {n:<12} capacity (closed, best) {r['capacity']:8.1f}/s   "
              f"max_qps_at_slo {shown}")
    if args.breakdown_rate > 0:
        _breakdown(workload, config, args.breakdown_rate, args.requests, args.seconds)
    print(f"total wall time {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
