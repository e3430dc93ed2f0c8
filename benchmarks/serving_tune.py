"""Tune built-in workloads for a server and print default vs tuned requests per second within
the SLO, and the layout tune chose.

For each workload the SLO is 4x its single-stream p50 (``tfperf bench --json``, a short
measurement), at least :data:`MIN_SLO_MS`: a served request also crosses the load generator,
a dispatcher and a pipe, which a sub-millisecond model's bound would not leave room for.
Then ``tfperf tune --objective server --slo-ms SLO`` runs with every runtime, and, for the
first workload, once more with ``--runtimes tf`` (what the layout alone gives). Each line
shows the default's and the tuned ``max_qps_at_slo`` (medians of tune's own confirmation,
default and winner in alternating SLO searches), their ratio with its range over the
confirmation pairs, the layout, and how long the tune took.

The baseline a user of OpenVINO would start from is measured too: one OpenVINO instance with
the ``THROUGHPUT`` hint alone, served by OpenVINO's asynchronous requests (``tfperf bench
--set runtime=openvino-f32 --hint THROUGHPUT --slo-ms SLO``). Its line gives its rate within
the same SLO and the tuned rate over it (the tuned layout should reach at least that). Where
the tune's answer is that very layout, the line says so: the two rates are then two searches of
one layout minutes apart, and their ratio is the machine's drift between them.

    python benchmarks/serving_tune.py                         # the built-in suite, 660 s each
    python benchmarks/serving_tune.py --workloads mlp --budget 120
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tfperf.core.serving import ServingLayout
from tfperf.tuning.server import ServerCandidate

MIN_SLO_MS = 5.0
BASELINE = ServerCandidate({"runtime": "openvino-f32"}, ServingLayout(hint="THROUGHPUT"))
"""What a user of OpenVINO starts from: one instance, the THROUGHPUT hint alone."""


def _tfperf(*args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "tfperf", *args, "--json"], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"tfperf {' '.join(args)} failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout)


def single_stream_p50_ms(workload: str, store: str) -> float:
    doc = _tfperf(
        "bench", "--workload", workload, "--budget", "5", "--no-peak", "--processes", "1",
        "--store", store,
    )
    return float(doc["results"][0]["latency_ms"]["p50"])


def openvino_throughput_hint(workload: str, slo_ms: float, store: str) -> float | None:
    """One OpenVINO instance, THROUGHPUT hint, its rate within ``slo_ms``."""
    doc = _tfperf(
        "bench", "--workload", workload, "--set", "runtime=openvino-f32", "--hint", "THROUGHPUT",
        "--slo-ms", f"{slo_ms:.3f}", "--store", store,
    )
    return doc.get("max_qps_at_slo")


def _qps(value: float | None) -> str:
    return "-" if not value else f"{value:8.1f}"


def tune_line(
    workload: str, slo_ms: float, runtimes: str | None, budget: float, tmp: str,
    baseline: float | None,
) -> str:
    args = ["tune", "-w", workload, "--objective", "server", "--slo-ms", f"{slo_ms:.3f}",
            "--budget", str(budget), "--store", f"{tmp}/store.db",
            "--profile-out", f"{tmp}/{workload}-{runtimes or 'all'}.json"]
    if runtimes:
        args += ["--runtimes", runtimes]
    started = time.monotonic()
    doc = _tfperf(*args)
    took = time.monotonic() - started
    rec = doc["recommendation"]
    default = doc["default"]["serving"]["max_qps_at_slo"]
    tuned = rec["serving"]["max_qps_at_slo"]
    speedup = rec.get("speedup") or {}
    low, high = (speedup.get("ci95") or [None, None])[:2]
    ratio = "-" if not speedup.get("median") else f"{speedup['median']:.2f}x"
    span = "" if low is None else f" [{low:.2f}-{high:.2f}]"
    answer = "keep the default: " + rec["reason"] if rec["keep_default"] else rec["label"]
    tuned = tuned or default
    versus = f"{tuned / baseline:.2f}x" if tuned and baseline else "-"
    if rec["label"] == BASELINE.key():  # two searches of one layout, minutes apart
        versus += " (the baseline's own layout)"
    return (
        f"{workload:12} {runtimes or 'all':5} slo {slo_ms:7.2f} ms  default {_qps(default)}/s  "
        f"tuned {_qps(tuned)}/s  {ratio}{span}  vs OpenVINO THROUGHPUT {_qps(baseline)}/s: "
        f"{versus}  {doc['trials']:2d} layouts {took:5.0f} s  {answer}"
    )


@contextlib.contextmanager
def _folder(keep: str | None) -> Iterator[str]:
    if keep is None:
        with tempfile.TemporaryDirectory(prefix="tfperf-serving-tune-") as tmp:
            yield tmp
    else:
        Path(keep).mkdir(parents=True, exist_ok=True)
        yield keep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="lstm,mlp,wide-deep,encoder,mobilenetv2,resnet50")
    parser.add_argument("--budget", type=float, default=660.0, help="seconds per tune")
    parser.add_argument("--layout-only", action=argparse.BooleanOptionalAction, default=True,
                        help="also tune the first workload with --runtimes tf")
    parser.add_argument("--keep", metavar="DIR", default=None,
                        help="keep the store and the profiles in DIR (default: a temporary one)")
    args = parser.parse_args()
    with _folder(args.keep) as tmp:
        store = str(Path(tmp) / "store.db")
        for i, workload in enumerate(args.workloads.split(",")):
            slo = max(4.0 * single_stream_p50_ms(workload, store), MIN_SLO_MS)
            baseline = openvino_throughput_hint(workload, slo, store)
            for runtimes in ([None, "tf"] if i == 0 and args.layout_only else [None]):
                print(tune_line(workload, slo, runtimes, args.budget, tmp, baseline), flush=True)


if __name__ == "__main__":
    main()
