"""The error types a user can cause, and the exit codes every command shares.

Contract: library functions raise :class:`UserError` for anything the user can fix (a missing
file, an unknown name, no TensorFlow installed). Its message is one sentence that says what to
do. The CLI turns it into that sentence on stderr and exit code :data:`EXIT_USAGE`; it never
prints a traceback for it.
"""

from __future__ import annotations

EXIT_OK = 0
"""The command did what was asked."""
EXIT_FAIL_ON = 1
"""A ``--fail-on`` / ``--fail-on-regression`` condition was met."""
EXIT_USAGE = 2
"""Bad input or a missing prerequisite (no TensorFlow, unreadable file, unknown name)."""


class UserError(Exception):
    """Something the user can fix; ``str(err)`` is one actionable sentence."""

    exit_code: int = EXIT_USAGE


class FailOnTriggered(Exception):
    """A gate the user asked for (``--fail-on``) was met; exit code :data:`EXIT_FAIL_ON`."""

    exit_code: int = EXIT_FAIL_ON
