"""Compiler flags for a TensorFlow build tuned to one CPU.

Contract: :func:`cpu_flags` turns an archspec target (the host's, or one named by the user) into
:class:`CpuFlags`: the archspec flags for the compiler, led by ``-march=<target>`` (or
``-mcpu=`` on Arm), then one explicit ``-m`` flag per host feature that matters to TensorFlow's
kernels and that the target's ``-march`` does not imply (archspec names some CPUs by an older
or generic target; e.g. a CPU called ``icelake`` may have AVX512_BF16, AVX512_FP16 and
AVX_VNNI, which ``-march=icelake-client`` leaves out). When archspec cannot give flags for the
CPU/compiler pair (it raises for targets newer than the compiler), the flags fall back to
``-march=native`` and the reason is recorded in ``notes``.

With ``target="auto"`` the features are those archspec detects on this machine; a named target
plans a portable build for that microarchitecture and adds no extra flags, unless the caller
passes the features of the machine it plans for (``host_features``). Extra flags are added only
when those features include all of the target's (the machine can run the target's code).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tfperf.core.errors import UserError

GCC_FEATURE_FLAGS: dict[str, str] = {
    "sse4_1": "-msse4.1",
    "sse4_2": "-msse4.2",
    "avx": "-mavx",
    "avx2": "-mavx2",
    "fma": "-mfma",
    "f16c": "-mf16c",
    "bmi1": "-mbmi",
    "bmi2": "-mbmi2",
    "avx512f": "-mavx512f",
    "avx512cd": "-mavx512cd",
    "avx512bw": "-mavx512bw",
    "avx512dq": "-mavx512dq",
    "avx512vl": "-mavx512vl",
    "avx512ifma": "-mavx512ifma",
    "avx512vbmi": "-mavx512vbmi",
    "avx512_vbmi2": "-mavx512vbmi2",
    "avx512_vnni": "-mavx512vnni",
    "avx512_bitalg": "-mavx512bitalg",
    "avx512_vpopcntdq": "-mavx512vpopcntdq",
    "avx512_bf16": "-mavx512bf16",
    "avx512_fp16": "-mavx512fp16",
    "avx_vnni": "-mavxvnni",
    "amx_tile": "-mamx-tile",
    "amx_int8": "-mamx-int8",
    "amx_bf16": "-mamx-bf16",
    "gfni": "-mgfni",
    "vaes": "-mvaes",
    "vpclmulqdq": "-mvpclmulqdq",
}
"""x86 features (as Linux/archspec name them) that TensorFlow's kernels or Eigen can use, and the
GCC/Clang flag that enables each. Order is the order flags are emitted in."""


FAMILIES = ("x86_64", "aarch64")
"""CPU families a build can be planned for."""


@dataclass
class CpuFlags:
    """The CPU part of a build plan."""

    target: str
    """archspec name of the target (``"icelake"``)."""
    compiler: str
    """``"clang@18.1.8"``."""
    copts: list[str]
    """Flags for ``--copt``, ``-march``/``-mcpu`` first."""
    extra_features: list[str] = field(default_factory=list)
    """Host features the target's ``-march`` lacks, each given its own ``-m`` flag."""
    native_fallback: bool = False
    notes: list[str] = field(default_factory=list)
    family: str = "x86_64"
    """archspec family of the target: ``"x86_64"`` or ``"aarch64"``."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "target": self.target,
            "compiler": self.compiler,
            "copts": list(self.copts),
            "extra_features": list(self.extra_features),
            "native_fallback": self.native_fallback,
            "notes": list(self.notes),
            "family": self.family,
        }


def host_target() -> tuple[str, set[str]]:
    """archspec's name for this CPU and the features it detects here."""
    import archspec.cpu
    import archspec.cpu.detect

    host = archspec.cpu.host()
    try:
        features = set(archspec.cpu.detect.detected_info().features)
    except Exception:  # archspec versions without detected_info
        features = set(host.features)
    return host.name, features


def resolve_target(name: str) -> Any:
    """The archspec Microarchitecture for ``name``; unknown names raise :class:`UserError`."""
    import archspec.cpu

    if name not in archspec.cpu.TARGETS:
        near = sorted(t for t in archspec.cpu.TARGETS if name[:3].lower() in t)[:8]
        hint = f" (close: {', '.join(near)})" if near else ""
        raise UserError(
            f"{name!r} is not an archspec microarchitecture{hint}; use --target auto or a name "
            "from `python -c 'import archspec.cpu; print(sorted(archspec.cpu.TARGETS))'`."
        )
    return archspec.cpu.TARGETS[name]


def cpu_flags(
    target: str = "auto",
    compiler: str = "clang",
    compiler_version: str = "18.1.8",
    host_features: set[str] | None = None,
) -> CpuFlags:
    """Flags for ``target`` built with ``compiler@compiler_version``.

    ``target="auto"`` plans for this machine. ``host_features`` overrides the detected host
    features (to plan for another machine whose features are known, and in tests).
    """
    if target == "auto":
        name, detected = host_target()
    else:
        name, detected = target, None
    uarch = resolve_target(name)
    family = uarch.family.name
    if family not in FAMILIES:
        raise UserError(
            f"{name} is a {family} CPU; tfperf plans TensorFlow builds for "
            f"{' and '.join(FAMILIES)} only (the CPUs TensorFlow and Bazel publish builds for)."
        )
    features = host_features if host_features is not None else (detected or set())
    notes: list[str] = []
    native = False
    try:
        base = uarch.optimization_flags(compiler, compiler_version).split()
    except Exception as exc:  # archspec.cpu.UnsupportedMicroarchitecture and kin
        base = ["-march=native"]
        native = True
        notes.append(
            f"archspec cannot give flags for {name} with {compiler}@{compiler_version} "
            f"({exc}); using -march=native, so build on the machine that will run the wheel"
        )
    if not base:
        base = ["-march=native"]
        native = True
        notes.append(f"archspec has no flags for {name}; using -march=native")
    extra: list[str] = []
    if uarch.family.name == "x86_64" and not native and set(uarch.features) <= features:
        extra = [f for f in GCC_FEATURE_FLAGS if f in features and f not in uarch.features]
    elif features and not set(uarch.features) <= features:
        notes.append(f"the given CPU features do not cover {name}'s; no extra -m flags added")
    copts = base + [GCC_FEATURE_FLAGS[f] for f in extra]
    if extra:
        notes.append(
            f"-march for {name} omits {', '.join(f.upper() for f in extra)}, which this CPU "
            "has; they are enabled with explicit -m flags"
        )
    return CpuFlags(name, f"{compiler}@{compiler_version}", copts, extra, native, notes, family)
