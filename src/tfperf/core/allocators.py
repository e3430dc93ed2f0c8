"""Fast memory allocators (tcmalloc, jemalloc): find them on the system, name the one in use.

Contract:

- :data:`ALLOCATOR_PACKAGES` maps an allocator name to the Debian/Ubuntu package that ships it
  (Fedora/RHEL: ``gperftools-libs`` and ``jemalloc``; Arch: ``gperftools`` and ``jemalloc``;
  conda-forge: ``gperftools`` and ``jemalloc``).
- :func:`find_allocator` returns the absolute path of a loadable shared library, or ``None``.
- :func:`allocator_in_maps` names the allocator mapped into a process from its
  ``/proc/<pid>/maps`` text: ``"tcmalloc"``, ``"jemalloc"`` or ``"system"``.
- :func:`preload_env` builds the ``LD_PRELOAD`` value that loads an allocator, and raises
  :class:`~tfperf.core.errors.UserError` naming the package to install when it is missing.

Nothing here imports TensorFlow or any heavy library; every function is cheap.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import subprocess
import sys

from tfperf.core.errors import UserError

ALLOCATOR_PACKAGES: dict[str, str] = {
    "tcmalloc": "libtcmalloc-minimal4",
    "jemalloc": "libjemalloc2",
}
"""Allocator name -> the Debian package that installs its shared library."""

_LIBRARY_NAMES: dict[str, tuple[str, ...]] = {
    # Preferred first: the minimal tcmalloc has no profiler and no libunwind dependency.
    "tcmalloc": (
        "libtcmalloc_minimal.so.4",
        "libtcmalloc.so.4",
        "libtcmalloc_minimal.so",
        "libtcmalloc.so",
    ),
    "jemalloc": ("libjemalloc.so.2", "libjemalloc.so.1", "libjemalloc.so"),
}

_SEARCH_DIRS: tuple[str, ...] = (
    "/usr/lib/x86_64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/usr/local/lib64",
    "/opt/homebrew/lib",
)

_MAPS_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("tcmalloc", re.compile(r"/lib(tcmalloc\w*)\.so")),
    ("jemalloc", re.compile(r"/libjemalloc\w*\.so")),
)


def _check_name(name: str) -> None:
    if name not in ALLOCATOR_PACKAGES:
        known = ", ".join(sorted(ALLOCATOR_PACKAGES))
        raise UserError(f"Unknown allocator {name!r}: choose one of {known} (or 'system').")


@functools.cache
def _ldconfig_entries() -> dict[str, str]:
    """Library file name -> path from ``ldconfig -p`` (empty when ldconfig is unavailable)."""
    for exe in ("ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"):
        try:
            out = subprocess.run(
                [exe, "-p"], capture_output=True, text=True, timeout=5, check=False
            ).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        wants_64 = sys.maxsize > 2**32
        entries: dict[str, str] = {}
        for line in out.splitlines():
            m = re.match(r"\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)", line)
            if m and ("64" in m.group(2)) == wants_64:
                entries.setdefault(m.group(1), m.group(3))
        return entries
    return {}


def _loadable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.R_OK)


def find_allocator(name: str) -> str | None:
    """Absolute path of a loadable ``tcmalloc``/``jemalloc`` library, or ``None`` when absent.

    Looks in the usual (multiarch) library directories first, then in ``ldconfig -p``;
    preferred names come first (``libtcmalloc_minimal.so.4``, ``libjemalloc.so.2``).
    """
    _check_name(name)
    for lib in _LIBRARY_NAMES[name]:
        for directory in _SEARCH_DIRS:
            path = os.path.join(directory, lib)
            if _loadable(path):
                return path
        path = _ldconfig_entries().get(lib)
        if path and _loadable(path):
            return path
    # Versioned names not in the list (e.g. a conda env's libjemalloc.so.3).
    prefix = "libtcmalloc" if name == "tcmalloc" else "libjemalloc"
    for directory in _SEARCH_DIRS:
        for path in sorted(glob.glob(os.path.join(directory, prefix + "*.so*"))):
            if "debug" not in path and _loadable(path):
                return path
    return None


def available_allocators() -> dict[str, str | None]:
    """``{"tcmalloc": path | None, "jemalloc": path | None}`` for this system."""
    return {name: find_allocator(name) for name in ALLOCATOR_PACKAGES}


def allocator_in_maps(maps_text: str) -> str:
    """Name the allocator mapped into a process: ``"tcmalloc" | "jemalloc" | "system"``.

    ``maps_text`` is the content of ``/proc/<pid>/maps``. When both are mapped (an odd setup),
    the one mapped first wins, as it is the one the dynamic linker binds ``malloc`` to.
    """
    first: tuple[int, str] | None = None
    for name, pattern in _MAPS_PATTERNS:
        m = pattern.search(maps_text)
        if m and (first is None or m.start() < first[0]):
            first = (m.start(), name)
    return first[1] if first else "system"


def current_allocator() -> str:
    """The allocator this process runs with (``"system"`` where /proc is not available)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            return allocator_in_maps(fh.read())
    except OSError:
        return "system"


def preload_env(name: str, base_ld_preload: str | None) -> str:
    """The ``LD_PRELOAD`` value that loads allocator ``name`` ahead of ``base_ld_preload``.

    Any other allocator already listed in ``base_ld_preload`` is dropped (two allocators in one
    process do not mix). Raises :class:`UserError` naming the package to install when the
    allocator is not on this system.
    """
    _check_name(name)
    path = find_allocator(name)
    if path is None:
        raise UserError(
            f"{name} is not installed on this system: install it with "
            f"`sudo apt-get install -y {ALLOCATOR_PACKAGES[name]}` (Debian/Ubuntu) and retry."
        )
    kept = [
        item
        for item in re.split(r"[:\s]+", base_ld_preload or "")
        if item and allocator_in_maps("/" + os.path.basename(item)) == "system"
    ]
    return ":".join([path, *kept])
