"""Machine facts: CPU, instruction sets, microarchitecture, cores, quota, memory, GPUs.

Contract: :func:`collect_machine` returns a JSON-ready dict and never imports TensorFlow; it
reads ``/proc``, ``/sys`` and cgroup files directly and takes well under 0.3 s. Its keys:

- ``cpu``: ``model``, ``vendor``, ``microarchitecture`` (archspec name), ``generic_target``
  (the ``x86_64_vN`` level), ``compiler_flags`` (``{"gcc": ..., "clang": ...}`` for a source
  build aimed at this microarchitecture), ``machine`` (``x86_64``, ``aarch64``...).
- ``isa``: instruction sets in TensorFlow's spelling (see :mod:`tfperf.core.isa`).
- ``cores``: ``physical``, ``logical``, ``sockets``, ``numa_nodes``, ``affinity`` (CPUs this
  process may be scheduled on), ``cgroup_quota`` (CPUs' worth of CFS quota, ``None`` when
  unlimited), ``cgroup_version``, ``usable`` (``min(affinity, ceil(quota))``: the CPUs this
  process may really use).
- ``memory``: ``total_bytes``, ``available_bytes``, ``cgroup_limit_bytes`` (the container's
  memory limit, :func:`cgroup_memory_limit`; ``None`` when there is none).
- ``gpus``: a list of ``{"index", "name", "memory_bytes", "driver", "cuda_driver"}`` from NVML;
  empty when there is no NVIDIA GPU or no driver.
- ``allocators_available``: ``{"tcmalloc": path | None, "jemalloc": path | None}``.
- ``os``: kernel and distribution; ``fingerprint``: a short stable hash of the hardware facts.

:func:`machine_summary` is the part of that record a result document carries.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import platform
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tfperf.core import isa as isa_mod
from tfperf.core.allocators import available_allocators

CGROUP_ROOT = "/sys/fs/cgroup"


def _read(path: str | Path) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _quota_v2(text: str | None) -> float | None:
    if not text:
        return None
    parts = text.split()
    if len(parts) < 2 or parts[0] == "max":
        return None
    return int(parts[0]) / int(parts[1])


def _quota_v1(quota: str | None, period: str | None) -> float | None:
    if not quota or not period:
        return None
    q, p = int(quota.strip()), int(period.strip())
    return q / p if q > 0 and p > 0 else None


def _candidate_dirs(root: Path, rel: str) -> list[Path]:
    """``root/rel`` and its ancestors up to ``root`` (a quota anywhere above limits us too)."""
    rel_parts = [p for p in rel.strip("/").split("/") if p]
    dirs = [root.joinpath(*rel_parts[:i]) for i in range(len(rel_parts), -1, -1)]
    return [d for d in dirs if d.is_dir()]


def cgroup_cpu_quota(
    root: str | Path = CGROUP_ROOT, proc_cgroup: str | None = None
) -> tuple[float | None, int | None]:
    """CPUs' worth of CFS quota for this process and the cgroup version (``None`` = unlimited).

    Reads cgroup v2 ``cpu.max`` or cgroup v1 ``cpu.cfs_quota_us``/``cpu.cfs_period_us`` along
    the process's cgroup path (from ``/proc/self/cgroup``, or ``proc_cgroup``) and every ancestor
    up to ``root``; the tightest limit wins. Inside a container the path often does not exist in
    its own mount namespace, so ``root`` itself is always read too.
    """
    root = Path(root)
    text = proc_cgroup if proc_cgroup is not None else (_read("/proc/self/cgroup") or "")
    v1_path = v2_path = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2_path = parts[2]
        elif "cpu" in parts[1].split(","):
            v1_path = parts[2]
    quotas: list[float] = []
    version = None
    if v1_path is not None:
        for sub in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
            base = root / sub
            for d in _candidate_dirs(base, v1_path) if base.is_dir() else []:
                version = 1
                q = _quota_v1(_read(d / "cpu.cfs_quota_us"), _read(d / "cpu.cfs_period_us"))
                if q:
                    quotas.append(q)
    if version is None and (root / "cgroup.controllers").exists():
        version = 2
        for d in _candidate_dirs(root, v2_path or "/"):
            q = _quota_v2(_read(d / "cpu.max"))
            if q:
                quotas.append(q)
    return (min(quotas) if quotas else None), version


def usable_cpus(affinity: int, quota: float | None) -> int:
    """The CPUs a process may really keep busy: affinity, capped by the CFS quota (rounded up)."""
    if quota is None:
        return affinity
    return max(1, min(affinity, math.ceil(quota - 1e-9)))


def _numa_nodes() -> int | None:
    try:
        nodes = [n for n in os.listdir("/sys/devices/system/node") if re.fullmatch(r"node\d+", n)]
    except OSError:
        return None
    return len(nodes) or None


def _affinity() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _archspec(machine: str) -> dict[str, Any]:
    try:
        import archspec.cpu
    except ImportError:
        return {"microarchitecture": None, "generic_target": None, "compiler_flags": {}}
    host = archspec.cpu.host()
    generic = host
    while generic.vendor != "generic" and generic.parents:
        generic = generic.parents[0]
    flags: dict[str, str] = {}
    for compiler, version in (("gcc", "13.2"), ("clang", "18.1")):
        try:
            flags[compiler] = host.optimization_flags(compiler, version)
        except Exception:  # archspec raises its own error types for unsupported pairs
            continue
    return {
        "microarchitecture": host.name,
        "generic_target": generic.name if generic is not host else host.name,
        "compiler_flags": flags,
    }


def _gpus() -> list[dict[str, Any]]:
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver / no library: NVMLError subclasses
        return []
    gpus: list[dict[str, Any]] = []
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        cuda_driver = f"{cuda // 1000}.{(cuda % 1000) // 10}"
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            gpus.append(
                {
                    "index": i,
                    "name": _text(pynvml.nvmlDeviceGetName(handle)),
                    "memory_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(handle).total),
                    "driver": driver,
                    "cuda_driver": cuda_driver,
                }
            )
    except Exception:  # a GPU that vanished mid-query: report what was read
        pass
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
    return gpus


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def cgroup_memory_limit(
    root: str | Path = CGROUP_ROOT, proc_cgroup: str | None = None
) -> int | None:
    """The tightest cgroup memory limit on this process in bytes (``None``: unlimited): v2
    ``memory.max`` or v1 ``memory.limit_in_bytes`` along the cgroup path and its ancestors,
    ``root`` included, as :func:`cgroup_cpu_quota` reads the CPU quota."""
    root = Path(root)
    text = proc_cgroup if proc_cgroup is not None else (_read("/proc/self/cgroup") or "")
    limits: list[int] = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            base, name = root, "memory.max"
        elif "memory" in parts[1].split(","):
            base, name = root / "memory", "memory.limit_in_bytes"
        else:
            continue
        for d in _candidate_dirs(base, parts[2]) if base.is_dir() else []:
            value = (_read(d / name) or "").strip()
            # v1 says "no limit" with a huge page-rounded number
            if value.isdigit() and int(value) < 2**60:
                limits.append(int(value))
    return min(limits) if limits else None


def _memory() -> dict[str, int | None]:
    info: dict[str, int] = {}
    for line in (_read("/proc/meminfo") or "").splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            info[key] = int(parts[0]) * 1024
    return {
        "total_bytes": info.get("MemTotal"),
        "available_bytes": info.get("MemAvailable"),
        "cgroup_limit_bytes": cgroup_memory_limit(),
    }


def _os() -> dict[str, str | None]:
    pretty = None
    for line in (_read("/etc/os-release") or "").splitlines():
        if line.startswith("PRETTY_NAME="):
            pretty = line.split("=", 1)[1].strip('"')
    return {"system": platform.system(), "kernel": platform.release(), "distribution": pretty}


def fingerprint(machine: dict[str, Any]) -> str:
    """A 12-hex-digit hash of the hardware facts (not of load, quota or free memory)."""
    cpu, cores = machine.get("cpu", {}), machine.get("cores", {})
    total = (machine.get("memory") or {}).get("total_bytes") or 0
    facts = {
        "model": cpu.get("model"),
        "vendor": cpu.get("vendor"),
        "uarch": cpu.get("microarchitecture"),
        "isa": machine.get("isa"),
        "physical": cores.get("physical"),
        "logical": cores.get("logical"),
        "sockets": cores.get("sockets"),
        "numa": cores.get("numa_nodes"),
        "memory_gib": round(total / 2**30),
        "gpus": [g.get("name") for g in machine.get("gpus", [])],
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:12]


def collect_machine() -> dict[str, Any]:
    """Every machine fact doctor prints, as a JSON-ready dict (see the module docstring)."""
    info = isa_mod.parse_cpuinfo(_read("/proc/cpuinfo") or "")
    arch = platform.machine()
    logical = os.cpu_count() or info["logical"] or 1
    affinity = _affinity()
    quota, cg_version = cgroup_cpu_quota()
    machine: dict[str, Any] = {
        "cpu": {
            "model": info["model"] or platform.processor() or None,
            "vendor": info["vendor"],
            "machine": arch,
            **_archspec(arch),
        },
        "isa": isa_mod.isa_from_flags(info["flags"]),
        "cores": {
            "physical": info["physical"] or logical,
            "logical": logical,
            "sockets": info["sockets"] or 1,
            "numa_nodes": _numa_nodes() or 1,
            "affinity": affinity,
            "cgroup_quota": quota,
            "cgroup_version": cg_version,
            "usable": usable_cpus(affinity, quota),
        },
        "memory": _memory(),
        "gpus": _gpus(),
        "allocators_available": available_allocators(),
        "os": _os(),
    }
    machine["fingerprint"] = fingerprint(machine)
    return machine


def machine_summary(machine: Mapping[str, Any]) -> dict[str, Any]:
    """The few machine facts a result carries (the store keeps the whole record); a record
    that lacks one (an old or hand-written one) gives ``None`` for it."""
    cpu, cores = machine.get("cpu"), machine.get("cores")
    return {
        "fingerprint": machine.get("fingerprint"),
        "cpu": cpu.get("model") if isinstance(cpu, Mapping) else cpu,
        "cores": cores.get("usable") if isinstance(cores, Mapping) else cores,
    }
