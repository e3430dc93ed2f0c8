"""Kinds of machine: the hosts of a fleet that should behave alike, from their doctor documents.

Contract:

- :func:`kind_of` names the kind of one host from its ``tfperf doctor --json`` document: what
  decides speed and nothing else -- the hardware fingerprint (CPU model, microarchitecture,
  instruction sets, physical and logical cores, sockets, NUMA nodes, memory rounded to GiB,
  GPUs: :func:`tfperf.machine.facts.fingerprint`), the CPUs it may use (affinity and cgroup
  quota), and the TensorFlow install (version, distribution, the instructions it was built
  without). Not the host name, the load, the free memory nor the install's path. A host whose
  doctor failed has no kind (``None``).
- :class:`Kind` is that key (``id``: 8 hex digits) with a line a person reads.
- :func:`group` maps kind id -> the names of its hosts, in the order given.
- :func:`differing_findings` says which doctor findings a host has that the rest of its kind
  does not, and which it lacks that they all have: where to look when it is slower.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Kind:
    """One kind of machine: its id and a description."""

    id: str
    description: str
    facts: dict[str, Any]


def _facts(doc: Mapping[str, Any]) -> dict[str, Any]:
    machine, install = doc.get("machine") or {}, doc.get("install") or {}
    cores = machine.get("cores") or {}
    dist = install.get("distribution") or {}
    return {
        "hardware": machine.get("fingerprint"),
        "usable_cpus": cores.get("usable"),
        "cgroup_quota": cores.get("cgroup_quota"),
        "tf_version": install.get("tf_version"),
        "tf_distribution": [dist.get("name"), dist.get("version")],
        "tf_isa_missing": sorted(install.get("isa_missing") or []),
    }


def _describe(doc: Mapping[str, Any]) -> str:
    machine, install = doc.get("machine") or {}, doc.get("install") or {}
    cpu, cores = machine.get("cpu") or {}, machine.get("cores") or {}
    gib = ((machine.get("memory") or {}).get("total_bytes") or 0) / 2**30
    quota = cores.get("cgroup_quota")
    cpus = f"{cores.get('usable')} CPUs" + (f" (quota {quota:g})" if quota else "")
    dist = (install.get("distribution") or {}).get("name") or "?"
    tf = f"TF {install.get('tf_version')} ({dist})" if install.get("tf_version") else "no TF"
    return f"{cpu.get('model')} {cpu.get('microarchitecture')}, {cpus}, {gib:.0f} GiB, {tf}"


def kind_of(doc: Mapping[str, Any] | None) -> Kind | None:
    """The kind of the host ``doc`` (a doctor document) describes (module docstring)."""
    if not doc or not doc.get("machine"):
        return None
    facts = _facts(doc)
    digest = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:8]
    return Kind(digest, _describe(doc), facts)


def group(kinds: Iterable[tuple[str, Kind | None]]) -> dict[str, list[str]]:
    """Kind id -> host names, from ``(name, kind)`` pairs; hosts without a kind are left out."""
    out: dict[str, list[str]] = {}
    for name, kind in kinds:
        if kind is not None:
            out.setdefault(kind.id, []).append(name)
    return out


def _ids(doc: Mapping[str, Any] | None) -> set[str]:
    return {str(f.get("id")) for f in (doc or {}).get("findings") or []}


def differing_findings(
    doc: Mapping[str, Any] | None, others: Iterable[Mapping[str, Any] | None]
) -> dict[str, list[str]]:
    """``{"only_here": [...], "missing_here": [...]}``: finding ids this host has that no other
    host of its kind has, and those every other host has but this one lacks."""
    mine = _ids(doc)
    theirs = [_ids(o) for o in others]
    if not theirs:
        return {"only_here": [], "missing_here": []}
    anywhere = set().union(*theirs)
    everywhere = set.intersection(*theirs)
    return {"only_here": sorted(mine - anywhere), "missing_here": sorted(everywhere - mine)}
