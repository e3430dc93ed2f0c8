"""This process's memory as the kernel counts it: the resident set now and its high-water mark.
Standard library only, so that any worker-side process (one that imports TensorFlow, or a
deployed runtime that must not) reads it the same way."""

from __future__ import annotations

import os
import resource
import sys


def peak_rss_bytes() -> int:
    """Peak resident set size of this process: the kernel's ``VmHWM`` where there is one.

    Not ``ru_maxrss`` on Linux: ``execve`` folds the RSS of the process it replaces into it, so
    a child forked from a large parent starts with the parent's size as its peak."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def rss_bytes() -> int:
    """Current resident set size of this process."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak_rss_bytes()
