"""``tfperf doctor`` as a library: audit the machine and the TensorFlow install.

Contract: :func:`run_doctor` returns the document described in ``docs/doctor-schema.md``
(``schema_version`` :data:`SCHEMA_VERSION`), whose ``xla_aot`` (``{"available",
"missing"}``) says whether this install can compile ahead of time (the ``xla-aot``
runtime), ``keras_backend`` (the Keras backend the user's processes run, ``None`` when the
probe failed) and ``jax`` (whether it imports, for the ``keras-jax`` training runtime). It
starts the install probe first and collects the machine facts while TensorFlow
imports in the probe, so it costs about one ``import tensorflow``. It never raises for a
broken or missing TensorFlow: that is ``install.status`` plus an error finding. Callers that
gate on it use :func:`worst_severity`.
"""

from __future__ import annotations

import time
from typing import Any

from tfperf import __version__
from tfperf.core.perfenv import perf_env
from tfperf.diagnosis.install import finish_probe, install_fingerprint, kill_probe, start_probe
from tfperf.diagnosis.rules import evaluate
from tfperf.machine.facts import collect_machine
from tfperf.machine.wakeup import wakeup_latency

SCHEMA_VERSION = 1
NO_PROBE_AOT = {"available": False, "missing": ["a TensorFlow that imports (see the findings)"]}
"""``xla_aot`` when the probe could not look (TensorFlow missing or failing to import)."""


def run_doctor(timeout: float = 120, python: str | None = None) -> dict[str, Any]:
    """Audit this machine and the TensorFlow that ``python`` (default: this one) imports."""

    started = time.perf_counter()
    handle = start_probe(python)
    try:
        machine = collect_machine()
    except BaseException:
        kill_probe(handle)
        raise
    install = finish_probe(handle, timeout)
    wakeup = wakeup_latency()
    machine["wakeup"] = wakeup.to_dict() if wakeup else None
    if install.get("status") == "ok":
        install["fingerprint"] = install_fingerprint(install)
    else:
        install.setdefault("env", perf_env())
        install.setdefault("isa_missing", [])
    findings = evaluate(machine, install)
    return {
        "schema_version": SCHEMA_VERSION,
        "tfperf_version": __version__,
        "machine": machine,
        "install": install,
        "xla_aot": install.pop("xla_aot", None) or NO_PROBE_AOT,
        "keras_backend": install.pop("keras_backend", None),
        "keras_backend_source": install.pop("keras_backend_source", None),
        "jax": install.pop("jax", None),
        "findings": findings,
        "elapsed_s": time.perf_counter() - started,
    }


def worst_severity(doc: dict[str, Any]) -> str | None:
    """The most severe finding's severity (``"error"`` > ``"warn"`` > ``"info"``), or None."""
    order = {"info": 0, "warn": 1, "error": 2}
    found = [f["severity"] for f in doc.get("findings", [])]
    return max(found, key=order.__getitem__) if found else None


def fails_on(doc: dict[str, Any], level: str) -> bool:
    """Whether ``--fail-on level`` (``"warn"`` or ``"error"``) is met by ``doc``'s findings."""
    order = {"info": 0, "warn": 1, "error": 2}
    worst = worst_severity(doc)
    return worst is not None and order[worst] >= order[level]
