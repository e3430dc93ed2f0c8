"""The identity of the installed tfperf code: its version and a digest of its files.

Contract: :func:`code_identity` is ``VERSION+DIGEST``, ``DIGEST`` being the first 16 hex digits
of a SHA-256 over the package's Python files (each file's path inside the package and its
bytes, in path order). Two installs with the same ``__version__`` but other code (two commits
of a checkout, an edited site-packages) have different identities; the same files installed
anywhere have the same one. Computed once per process (a few milliseconds). Nothing here
imports anything but the standard library.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from tfperf import __version__

DIGEST_CHARS = 16


@functools.cache
def code_identity() -> str:
    """``VERSION+DIGEST`` of the tfperf package this process imports (module docstring)."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return f"{__version__}+{digest.hexdigest()[:DIGEST_CHARS]}"
