"""The doctor's rule set: machine and install facts in, findings out.

Contract: every rule is a pure function ``rule(machine, install) -> list[Finding]`` over the dicts
of :func:`tfperf.machine.facts.collect_machine` and
:func:`tfperf.diagnosis.install.finish_probe`; it
reads only those dicts (never the live system), so each rule is tested on constructed facts. A
finding is a JSON-ready dict::

    {"id": "onednn-off", "severity": "info"|"warn"|"error", "title": "one line",
     "evidence": "what was seen", "fix": "a command, an env line or a package", "gain": None}

``gain`` stays ``None`` until a measurement fills it. :func:`evaluate` runs every rule in
:data:`RULES` and returns the findings, errors first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tfperf.core.allocators import ALLOCATOR_PACKAGES
from tfperf.core.versions import release

Finding = dict[str, Any]
Facts = dict[str, Any]

SEVERITIES = ("info", "warn", "error")
LATEST_KNOWN_RELEASE = (2, 21)
"""The newest TensorFlow minor release this tfperf version knows of."""
OLD_AFTER_MINORS = 4
"""A release this many minors behind :data:`LATEST_KNOWN_RELEASE` (about two years) is old."""

XLA_ENV = "TF_XLA_FLAGS='--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit'"


def finding(rule_id: str, severity: str, title: str, evidence: str, fix: str) -> Finding:
    """Build one finding (see the module docstring)."""
    assert severity in SEVERITIES, severity
    return {
        "id": rule_id,
        "severity": severity,
        "title": title,
        "evidence": evidence,
        "fix": fix,
        "gain": None,
    }


def _ok(install: Facts) -> bool:
    return install.get("status") == "ok"


def _pip(install: Facts) -> str:
    python = (install.get("python") or {}).get("executable") or "python"
    return f"{python} -m pip"


def rule_probe_failed(machine: Facts, install: Facts) -> list[Finding]:
    """TensorFlow missing, failing on import, crashing the probe, or hanging."""
    status = install.get("status")
    err = install.get("error") or {}
    tail = (err.get("stderr_tail") or "").strip()
    evidence = err.get("message") or status or "unknown failure"
    if tail:
        evidence += "\n" + "\n".join(tail.splitlines()[-6:])
    if status == "not_installed":
        return [
            finding(
                "tensorflow-missing",
                "error",
                "TensorFlow is not installed in this Python environment",
                evidence,
                "python -m pip install tensorflow-cpu  (or `tensorflow[and-cuda]` on a machine "
                "with an NVIDIA GPU)",
            )
        ]
    if status in ("import_failed", "crashed", "timeout"):
        required = (install.get("log") or {}).get("isa_required_missing") or []
        if required or err.get("signal") == "SIGILL":
            fix = (
                "this TensorFlow build needs CPU instructions this machine lacks"
                + (f" ({' '.join(required)})" if required else "")
                + ": install a build for this CPU, or build from source with "
                + f"--copt=-march={(machine.get('cpu') or {}).get('microarchitecture') or 'native'}"
            )
        elif status == "timeout":
            fix = "run `python -c 'import tensorflow'` by hand to see where it hangs"
        else:
            fix = (
                "run `python -c 'import tensorflow'` to see the full error, then reinstall: "
                "python -m pip install --force-reinstall tensorflow-cpu"
            )
        return [
            finding(
                f"tensorflow-{status.replace('_', '-')}",
                "error",
                "TensorFlow cannot be imported",
                evidence,
                fix,
            )
        ]
    return []


def rule_isa_gap(machine: Facts, install: Facts) -> list[Finding]:
    """The binary was built without instruction sets this CPU has."""
    missing = install.get("isa_missing") or []
    cpu_isa = set(machine.get("isa") or [])
    gap = [name for name in missing if not cpu_isa or name in cpu_isa]
    if not _ok(install) or not gap:
        return []
    cpu = machine.get("cpu") or {}
    uarch = cpu.get("microarchitecture") or "native"
    flags = (cpu.get("compiler_flags") or {}).get("gcc") or f"-march={uarch}"
    copts = " ".join(f"--copt={f}" for f in flags.split())
    xla = (
        f"either XLA, which compiles for this CPU at run time: `export {XLA_ENV}` or "
        "`tf.function(jit_compile=True)` (measure it: `tfperf tune`); or "
        if install.get("xla_available") is not False
        else "this build has no XLA, so: "
    )
    return [
        finding(
            "isa-gap",
            "warn",
            "TensorFlow was built without instruction sets this CPU has",
            f"TensorFlow {install.get('tf_version')} reports it was compiled without "
            f"{' '.join(gap)}, which this CPU ({cpu.get('model')}, {uarch}) supports; "
            "oneDNN kernels use them anyway, other kernels do not.",
            xla + "a source build for this microarchitecture: "
            f"`bazel build {copts} //tensorflow/tools/pip_package:wheel` (see `tfperf builds`)",
        )
    ]


def rule_onednn(machine: Facts, install: Facts) -> list[Finding]:
    """oneDNN turned off on an x86 CPU, or TF_ENABLE_ONEDNN_OPTS set to a value TF rejects."""
    if not _ok(install):
        return []
    out: list[Finding] = []
    onednn = install.get("onednn") or {}
    if (install.get("log") or {}).get("onednn_bad_value"):
        value = (install.get("env") or {}).get("TF_ENABLE_ONEDNN_OPTS")
        out.append(
            finding(
                "onednn-env-invalid",
                "warn",
                "TF_ENABLE_ONEDNN_OPTS has a value TensorFlow ignores",
                f"TF_ENABLE_ONEDNN_OPTS={value!s}; TensorFlow accepts only 0, 1, true or false "
                "and fell back to its default.",
                "export TF_ENABLE_ONEDNN_OPTS=1  (or 0 to turn oneDNN off on purpose)",
            )
        )
    arch = (machine.get("cpu") or {}).get("machine") or ""
    if onednn.get("enabled") is False and arch in ("x86_64", "AMD64", "aarch64"):
        if onednn.get("source") == "env":
            fix = "unset TF_ENABLE_ONEDNN_OPTS  (or export TF_ENABLE_ONEDNN_OPTS=1)"
        else:
            fix = "export TF_ENABLE_ONEDNN_OPTS=1"
        out.append(
            finding(
                "onednn-off",
                "warn",
                "oneDNN is off",
                f"oneDNN optimizations are off: {onednn.get('why')}. oneDNN's kernels use this "
                "CPU's vector and matrix instructions whatever the binary was built for.",
                fix + "  -- then compare both with `tfperf bench` (most models gain, a few lose)",
            )
        )
    return out


def rule_allocator(machine: Facts, install: Facts) -> list[Finding]:
    """No fast allocator installed, or one installed but not loaded."""
    available = {k: v for k, v in (machine.get("allocators_available") or {}).items() if v}
    if not available:
        packages = " ".join(ALLOCATOR_PACKAGES.values())
        return [
            finding(
                "allocator-missing",
                "warn",
                "No fast memory allocator (tcmalloc, jemalloc) is installed",
                "Neither libtcmalloc nor libjemalloc was found in the system library paths; "
                "glibc malloc is slower for TensorFlow's many short-lived tensors.",
                f"sudo apt-get install -y {packages}  (Fedora: gperftools-libs jemalloc)",
            )
        ]
    if not _ok(install) or install.get("allocator") not in (None, "system"):
        return []
    name = "tcmalloc" if "tcmalloc" in available else next(iter(available))
    return [
        finding(
            "allocator-not-loaded",
            "info",
            "A fast allocator is installed but TensorFlow runs with glibc malloc",
            f"{name} is at {available[name]}, but the probe's /proc/self/maps shows the "
            "system allocator.",
            f"LD_PRELOAD={available[name]} python your_script.py  (or "
            "`tfperf run --profile P -- ...`; measure first with `tfperf tune`)",
        )
    ]


def rule_threads(machine: Facts, install: Facts) -> list[Finding]:
    """Thread pools or OMP_NUM_THREADS larger than the CPUs this process may use."""
    if not _ok(install):
        return []
    cores = machine.get("cores") or {}
    usable = cores.get("usable")
    if not usable:
        return []
    threads = install.get("threads") or {}
    over = []
    for pool in ("intra_op", "inter_op"):
        info = threads.get(pool) or {}
        eff = info.get("effective")
        if eff and eff > usable:
            over.append(f"{pool} pool {eff} threads ({info.get('source')})")
    omp = (install.get("env") or {}).get("OMP_NUM_THREADS")
    if omp and omp.isdigit() and int(omp) > usable and (install.get("openmp") or {}).get("linked"):
        over.append(f"OMP_NUM_THREADS={omp}")
    if not over:
        return []
    quota = cores.get("cgroup_quota")
    limit = f"{usable} usable CPUs"
    if quota is not None:
        limit += (
            f" (cgroup CPU quota {quota:g} of {cores.get('affinity')} CPUs in the affinity mask)"
        )
    inter = min(usable, 2)
    return [
        finding(
            "threads-oversubscribe",
            "warn",
            "Thread pools are larger than the CPUs this process may use",
            f"{'; '.join(over)} for {limit}: threads wait on each other and on the quota.",
            f"export TF_NUM_INTRAOP_THREADS={usable} TF_NUM_INTEROP_THREADS={inter}  (or "
            f"tf.config.threading.set_intra_op_parallelism_threads({usable}) before the first op)",
        )
    ]


_OMP_VAR = re.compile(r"^(OMP_|KMP_|GOMP_)")


def rule_omp_no_effect(machine: Facts, install: Facts) -> list[Finding]:
    """OMP_*/KMP_* variables set for a TensorFlow whose libraries use no OpenMP runtime."""
    if not _ok(install):
        return []
    openmp = install.get("openmp") or {}
    names = sorted(k for k in (install.get("env") or {}) if _OMP_VAR.match(k))
    if not names or openmp.get("linked") is not False:
        return []
    others = openmp.get("mapped") or []
    note = (
        f" Other libraries map their own OpenMP runtime ({', '.join(others)}): the variables "
        "reach only them."
        if others
        else ""
    )
    kmp = [n for n in names if n.startswith("KMP_")]
    omp = [n for n in names if n not in kmp]
    fix = "size TensorFlow's pools with TF_NUM_INTRAOP_THREADS / TF_NUM_INTEROP_THREADS (or "
    fix += "tf.config.threading)"
    if kmp:
        fix += f"; unset {' '.join(kmp)} (read only by Intel's OpenMP runtime)"
    if omp:
        fix += (
            f"; keep {' '.join(omp)} only if it is meant for numpy/scipy (OpenBLAS reads "
            "OMP_NUM_THREADS too)"
        )
    return [
        finding(
            "omp-no-effect",
            "warn",
            "OpenMP variables have no effect on this TensorFlow build",
            f"{', '.join(names)} set, but none of the {openmp.get('libraries_checked')} "
            "TensorFlow libraries loaded links an OpenMP runtime: its oneDNN runs on "
            f"TensorFlow's own thread pools.{note}",
            fix,
        )
    ]


def _cuda_mismatch(install: Facts, build: Facts, gpu: Facts) -> Finding | None:
    want = release(build.get("cuda_version"))[:2]
    have = release(gpu.get("cuda_driver"))[:2]
    if not (want and have and have < want):
        return None
    return finding(
        "cuda-mismatch",
        "error",
        "The NVIDIA driver is older than the CUDA this TensorFlow was built with",
        f"TensorFlow {install.get('tf_version')} needs CUDA {build.get('cuda_version')}"
        f" (cuDNN {build.get('cudnn_version')}); driver {gpu.get('driver')} "
        f"supports up to CUDA {gpu.get('cuda_driver')}.",
        "upgrade the NVIDIA driver, or install a TensorFlow release built for CUDA "
        f"{gpu.get('cuda_driver')}",
    )


def _cudnn_mismatch(install: Facts, build: Facts) -> Finding | None:
    want = release(build.get("cudnn_version"))[:1]
    have = release((install.get("cuda_wheels") or {}).get("cudnn"))[:1]
    if not (want and have and want != have):
        return None
    return finding(
        "cudnn-mismatch",
        "error",
        "The installed cuDNN is not the major version this TensorFlow was built with",
        f"TensorFlow {install.get('tf_version')} was built with cuDNN "
        f"{build.get('cudnn_version')}; the cuDNN wheel installed is "
        f"{install['cuda_wheels']['cudnn']}.",
        f"{_pip(install)} install 'tensorflow[and-cuda]=={install.get('tf_version')}' "
        "(it pins the matching cuDNN)",
    )


def _gpu_not_visible(install: Facts, build: Facts, names: str) -> Finding | None:
    if install.get("gpus_visible"):
        return None
    reason = install.get("gpu_error") or "TensorFlow lists no GPU device"
    return finding(
        "gpu-not-visible",
        "error",
        "TensorFlow cannot see the GPU",
        f"GPU: {names}; {reason}; CUDA_VISIBLE_DEVICES="
        f"{(install.get('env') or {}).get('CUDA_VISIBLE_DEVICES', '(unset)')}; build "
        f"CUDA {build.get('cuda_version')}, cuDNN {build.get('cudnn_version')}.",
        f"{_pip(install)} install 'tensorflow[and-cuda]=={install.get('tf_version')}' "
        "(the matching CUDA and cuDNN wheels), or check CUDA_VISIBLE_DEVICES",
    )


def rule_gpu(machine: Facts, install: Facts) -> list[Finding]:
    """A GPU the install cannot use: CPU-only build, CUDA newer than the driver, GPU not seen."""
    gpus = machine.get("gpus") or []
    if not gpus or not _ok(install):
        return []
    build = install.get("build") or {}
    names = ", ".join(g.get("name", "?") for g in gpus)
    dist = (install.get("distribution") or {}).get("name") or "tensorflow"
    if not build.get("is_cuda_build"):
        return [
            finding(
                "gpu-cpu-only-build",
                "warn",
                "This machine has an NVIDIA GPU but TensorFlow is a CPU-only build",
                f"GPU: {names}; {dist} {install.get('tf_version')} was built without CUDA.",
                f"{_pip(install)} uninstall -y {dist} && {_pip(install)} install "
                "'tensorflow[and-cuda]'",
            )
        ]
    found = [
        _cuda_mismatch(install, build, gpus[0]),
        _cudnn_mismatch(install, build),
        _gpu_not_visible(install, build, names),
    ]
    return [f for f in found if f is not None]


def rule_duplicate_distributions(machine: Facts, install: Facts) -> list[Finding]:
    """Two distributions that both install the ``tensorflow`` package."""
    dists = install.get("distributions") or []
    if len(dists) < 2:
        return []
    listed = ", ".join(f"{d['name']} {d['version']}" for d in dists)
    active = (install.get("distribution") or {}).get("name") or dists[0]["name"]
    others = " ".join(d["name"] for d in dists if d["name"] != active) or dists[-1]["name"]
    return [
        finding(
            "tf-duplicate-distributions",
            "warn",
            "Two TensorFlow distributions are installed side by side",
            f"{listed} all write the same `tensorflow` package; whichever was installed last "
            "overwrote files of the other, a mix no one tested.",
            f"{_pip(install)} uninstall -y {' '.join(d['name'] for d in dists)} && "
            f"{_pip(install)} install {active}  (keep one; {others} goes)",
        )
    ]


def rule_old_release(machine: Facts, install: Facts) -> list[Finding]:
    """A TensorFlow release far behind the newest one tfperf knows."""
    if not _ok(install):
        return []
    version = release(install.get("tf_version"))
    if len(version) < 2:
        return []
    latest = LATEST_KNOWN_RELEASE
    behind = (latest[0] - version[0]) * 100 + latest[1] - version[1]
    if behind < OLD_AFTER_MINORS:
        return []
    extra = ""
    if version < (2, 9):
        extra = " Before 2.9, oneDNN was off by default on Linux."
    return [
        finding(
            "tf-old-release",
            "warn",
            "TensorFlow is an old release",
            f"TensorFlow {install.get('tf_version')} is {behind} minor releases behind "
            f"{latest[0]}.{latest[1]}; newer releases ship newer oneDNN and XLA.{extra}",
            f"{_pip(install)} install -U "
            f"{(install.get('distribution') or {}).get('name') or 'tensorflow'}  (in a copy of "
            "the environment first; then compare with `tfperf builds`)",
        )
    ]


def rule_xla_aot(machine: Facts, install: Facts) -> list[Finding]:
    """What this install lacks to compile a model ahead of time (the ``xla-aot`` runtime)."""
    aot = install.get("xla_aot") or {}
    missing = aot.get("missing") or []
    if not _ok(install) or aot.get("available") or not missing:
        return []
    return [
        finding(
            "xla-aot-missing",
            "info",
            "XLA ahead-of-time compilation (runtime xla-aot) cannot run on this install",
            "It needs " + "; ".join(missing) + ". Compiled ahead of time, a small model is "
            "called without TensorFlow's per-call overhead.",
            "install what is named in parentheses, then `tfperf tune MODEL` tries xla-aot",
        )
    ]


OPTIONAL_IMPORTS_NOTED_S = 0.1
"""Below this, what keras's optional imports add to a process start is not worth a line."""


def rule_optional_imports(machine: Facts, install: Facts) -> list[Finding]:
    """Packages TensorFlow and keras import in every process because they are installed."""
    found = install.get("optional_imports") or []
    total = sum(item["seconds"] for item in found)
    if not _ok(install) or total < OPTIONAL_IMPORTS_NOTED_S:
        return []
    distributions = [item["distribution"] for item in found]
    parts = ", ".join(
        f"{item['distribution']} {item['seconds']:.2f} s"
        + (f" (by {item['imported_by']})" if item.get("imported_by") else "")
        for item in found
    )
    uses = "the full `mlflow` package uses scikit-learn and matplotlib; `mlflow-skinny` logs " \
        "runs without them"
    if "jax" in distributions:
        uses += "; jax is needed only where keras runs on JAX (tfperf's keras-jax runtime)"
    return [
        finding(
            "optional-imports",
            "info",
            f"TensorFlow imports {' and '.join(distributions)} in every process here, "
            "for no model",
            f"Importing TensorFlow took {install.get('import_s', 0):.2f} s, of which {parts}: "
            "each is imported whenever it is installed, and no model needs it to run. Every "
            "process that imports TensorFlow here pays for them at start: a training job, each "
            "serving instance, a restarted server (tfperf's own TensorFlow workers import it "
            "without jax, so their cold starts leave jax out).",
            f"{_pip(install)} uninstall {' '.join(distributions)}, where nothing in this "
            f"environment uses them ({uses})",
        )
    ]


def rule_keras_jax(machine: Facts, install: Facts) -> list[Finding]:
    """jax not importable: Keras on JAX (the ``keras-jax`` training runtime) cannot be tried."""
    jax = install.get("jax") or {}
    if not _ok(install) or not jax or jax.get("importable"):
        return []
    return [
        finding(
            "keras-jax-missing",
            "info",
            "Keras on JAX (runtime keras-jax) cannot be tried for training here",
            f"{jax.get('error') or 'jax not installed'} in this environment. Keras 3 runs the "
            "same model and fit on JAX with KERAS_BACKEND=jax, faster than TensorFlow for "
            "some models and slower for others: `tfperf tune --train` measures which.",
            f"{_pip(install)} install 'jax[cpu]' (or {jax.get('install')})",
        )
    ]


Rule = Callable[[Facts, Facts], list[Finding]]
RULES: tuple[Rule, ...] = (
    rule_probe_failed,
    rule_isa_gap,
    rule_onednn,
    rule_allocator,
    rule_threads,
    rule_omp_no_effect,
    rule_gpu,
    rule_duplicate_distributions,
    rule_old_release,
    rule_xla_aot,
    rule_optional_imports,
    rule_keras_jax,
)
"""Every rule, in the order their findings are reported within one severity."""


def evaluate(machine: Facts, install: Facts) -> list[Finding]:
    """Run every rule; findings sorted errors first, then warnings, then information."""
    found = [f for rule in RULES for f in rule(machine, install)]
    rank = {s: i for i, s in enumerate(reversed(SEVERITIES))}
    return sorted(found, key=lambda f: rank[f["severity"]])
