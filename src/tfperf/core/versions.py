"""Version numbers read the one way: PEP 440 through ``packaging``.

Contract:

- :func:`release` is the numeric release of a version (``"2.21.0rc1"`` -> ``(2, 21, 0)``,
  ``"12.4"`` -> ``(12, 4)``, ``"v2.20"`` -> ``(2, 20)``) and ``()`` for ``None`` or text that is
  not a version, so a rule that compares versions simply does not fire on an unknown one.
- :func:`same_release` says whether a worker's ``tf.__version__`` is the version its
  environment installed: equal public versions (a local label such as ``+local`` is the
  builder's and absent from ``tf.__version__``), or, for a nightly (a dev release on either
  side: ``2.21.0-dev20250101`` and ``2.21.0.dev20250101`` alike), the same release numbers.
- :func:`parse` raises :class:`~tfperf.core.errors.UserError` for a version a user typed.

The worker never imports this module: candidate environments of ``tfperf builds`` have no
``packaging``.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from tfperf.core.errors import UserError


def parse(text: str, what: str, example: str) -> Version:
    """``text`` as a version; one sentence naming ``what`` (e.g. ``--tensorflow``) otherwise."""
    try:
        return Version(text.strip())
    except InvalidVersion:
        raise UserError(
            f"{what} {text!r} is not a version number; write one like {example}."
        ) from None


def release(text: str | None) -> tuple[int, ...]:
    """The release numbers of ``text``; ``()`` when it is not a version."""
    try:
        return Version(str(text).strip()).release if text else ()
    except InvalidVersion:
        return ()


def same_release(got: str, want: str) -> bool:
    """Whether version ``got`` (``tf.__version__``) is the installed version ``want``."""
    try:
        a, b = Version(got), Version(want)
    except InvalidVersion:
        return got == want
    if a.public == b.public:
        return True
    return (a.is_devrelease or b.is_devrelease) and a.release == b.release
