"""What each TensorFlow release needs to be built from source.

Contract: :func:`release_info` maps a TensorFlow version (``"2.20.0"``, ``"2.20"``) to a
:class:`Release` with the exact Bazel version of that release's ``.bazelversion``, the Python
versions it ships wheels for, the Clang it is built with, and how its wheel target is spelled.
An unknown release raises :class:`~tfperf.core.errors.UserError` naming the supported ones.

Sources, per field:

- Bazel: the ``.bazelversion`` pins as recorded by Spack's ``py-tensorflow`` package
  (spack/spack-packages, ``repos/spack_repo/builtin/packages/py_tensorflow/package.py``:
  ``bazel@7.4.1`` for 2.20, ``bazel@6.5.0`` for 2.16-2.19, ``bazel@6.1.0`` for 2.14-2.15).
  For 2.21 no pinned record was found; it keeps 2.20's 7.4.1 and is marked ``verified=False``.
  Every generated script compares this value with the checked-out ``.bazelversion`` and stops
  with a clear message if they differ, so a wrong table entry cannot produce a silent build.
- Python: the same Spack file (``python@3.9:3.13`` for 2.20, ``3.9:3.12`` for 2.16-2.19,
  ``3.9:3.11`` for 2.14-2.15); 2.21 from its wheel metadata (``Requires-Python: >=3.10``).
- Compiler: TensorFlow's "tested build configurations" table on tensorflow.org/install/source
  (Clang 16 for 2.15, Clang 17 for 2.16-2.18, Clang 18 for 2.19 on); of these, only "Clang is
  the default compiler from 2.13" and the switch to Clang 18 (tensorflow/tensorflow commit
  9122d7a) were re-checked against a stored copy. The version only selects archspec's flags
  and the ``llvm-N`` package; the build itself uses TensorFlow's own toolchain settings.
- Wheel target: ``//tensorflow/tools/pip_package:wheel`` from 2.17 on (the wheel lands in
  ``bazel-bin/tensorflow/tools/pip_package/wheel_house``), ``build_pip_package`` before.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version

from tfperf.core.errors import UserError
from tfperf.core.versions import parse, release


@dataclass(frozen=True)
class Release:
    """Build requirements of one TensorFlow minor release."""

    minor: str
    """``"2.20"``."""
    bazel: str
    """Exact Bazel version (the release's ``.bazelversion``)."""
    python_min: str
    python_max: str
    clang: str
    """Clang major.minor.patch the release is tested with."""
    wheel_target: str
    """Bazel target that produces the pip wheel."""
    hermetic_python: bool
    """True when Python is chosen with ``HERMETIC_PYTHON_VERSION`` (2.17 on)."""
    verified: bool = True
    """False where the Bazel pin is carried over rather than read from a record."""

    def pythons(self) -> list[str]:
        """Every supported ``3.x`` version, oldest first."""
        lo, hi = Version(self.python_min).minor, Version(self.python_max).minor
        return [f"3.{m}" for m in range(lo, hi + 1)]

    @property
    def clang_major(self) -> int:
        """``18`` for Clang ``18.1.8`` (the ``llvm-N`` package, archspec's flags)."""
        return Version(self.clang).major


_WHEEL_NEW = "//tensorflow/tools/pip_package:wheel"
_WHEEL_OLD = "//tensorflow/tools/pip_package:build_pip_package"

RELEASES: dict[str, Release] = {
    r.minor: r
    for r in (
        Release("2.15", "6.1.0", "3.9", "3.11", "16.0.0", _WHEEL_OLD, False),
        Release("2.16", "6.5.0", "3.9", "3.12", "17.0.6", _WHEEL_OLD, False),
        Release("2.17", "6.5.0", "3.9", "3.12", "17.0.6", _WHEEL_NEW, True),
        Release("2.18", "6.5.0", "3.9", "3.12", "17.0.6", _WHEEL_NEW, True),
        Release("2.19", "6.5.0", "3.9", "3.12", "18.1.8", _WHEEL_NEW, True),
        Release("2.20", "7.4.1", "3.9", "3.13", "18.1.8", _WHEEL_NEW, True),
        Release("2.21", "7.4.1", "3.10", "3.13", "18.1.8", _WHEEL_NEW, True, verified=False),
    )
}
"""Supported releases, keyed by ``major.minor``."""

DEFAULT_TENSORFLOW = "2.21.0"


def release_info(version: str) -> Release:
    """The :class:`Release` for ``version`` (``"2.20.0"`` or ``"2.20"``)."""
    numbers = release(version)
    minor = ".".join(str(n) for n in numbers[:2])
    if len(numbers) < 2 or minor not in RELEASES:
        supported = ", ".join(RELEASES)
        raise UserError(
            f"TensorFlow {version!r} is not a release tfperf can plan a build for; "
            f"choose one of {supported} (e.g. --tensorflow {DEFAULT_TENSORFLOW})."
        )
    return RELEASES[minor]


def full_version(version: str) -> str:
    """``"2.20"`` -> ``"2.20.0"``; a full version is returned as written (``v`` dropped), so a
    tag such as ``2.21.0-rc1`` keeps its spelling."""
    text = version.strip().lstrip("v")
    parsed = parse(text, "TensorFlow", DEFAULT_TENSORFLOW)
    if len(parsed.release) >= 3:
        return text
    numbers = [*parsed.release, 0, 0][:3]
    return ".".join(map(str, numbers)) + str(parsed)[len(parsed.base_version) :]


def pick_python(release: Release, current: str) -> str:
    """``current`` (``"3.11"``) when the release supports it, else its newest Python."""
    return current if current in release.pythons() else release.pythons()[-1]
