"""A pinned recipe to build TensorFlow from source for one CPU, and running it.

Contract: :func:`make_plan` returns a :class:`BuildPlan` whose ``script`` (bash) and
``dockerfile`` build one TensorFlow release with the Bazel version that release pins, Clang,
``--config=opt`` and the CPU flags of :func:`tfperf.builds.cpuflags.cpu_flags`, answer
``./configure`` through its environment variables (CUDA or not), and, as the last step, register
the wheel as a ``tfperf builds compare`` candidate. :func:`write_plan` writes ``build.sh``,
``Dockerfile`` and ``plan.json`` to a folder; :func:`run_plan` executes ``build.sh`` with its
output streamed to a log file and progress shown per step. ``dry_run=True`` runs the same script
with ``TFPERF_DRY_RUN=1``: every step is announced and every command printed instead of run,
which exercises the plumbing (steps, log, exit status, registration call) without a network.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfperf.builds.cpuflags import CpuFlags, cpu_flags
from tfperf.builds.releases import (
    DEFAULT_TENSORFLOW,
    Release,
    full_version,
    pick_python,
    release_info,
)
from tfperf.core.errors import UserError
from tfperf.core.strictjson import to_json
from tfperf.core.versions import parse
from tfperf.runner import launcher

BAZEL_ARCH = {"x86_64": "x86_64", "aarch64": "arm64"}
"""archspec family -> the architecture in Bazel's Linux release file names
(``bazel-7.4.1-linux-arm64``)."""
STEP_MARK = "==> ["
"""Every step of ``build.sh`` starts with a line ``==> [i/N] title``."""


@dataclass
class BuildPlan:
    """Everything needed to build one TensorFlow release for one CPU."""

    tensorflow: str
    release: Release
    python: str
    cuda: bool
    cpu: CpuFlags
    bazel_flags: list[str]
    configure_env: dict[str, str]
    candidate_name: str
    script: str = ""
    dockerfile: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def copts(self) -> list[str]:
        """Compiler flags passed with ``--copt``."""
        return self.cpu.copts

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (what ``tfperf builds plan --json`` prints)."""
        return {
            "tensorflow": self.tensorflow,
            "bazel_version": self.release.bazel,
            "bazel_version_verified": self.release.verified,
            "python": self.python,
            "compiler": self.cpu.compiler,
            "cuda": self.cuda,
            "target": self.cpu.target,
            "copts": self.copts,
            "extra_features": self.cpu.extra_features,
            "native_fallback": self.cpu.native_fallback,
            "bazel_flags": self.bazel_flags,
            "configure_env": self.configure_env,
            "wheel_target": self.release.wheel_target,
            "candidate_name": self.candidate_name,
            "notes": self.notes,
            "script": self.script,
            "dockerfile": self.dockerfile,
        }


def _minor(python: str) -> str:
    """``--python 3.11.7`` -> ``"3.11"``: wheels are built per minor version."""
    version = parse(python, "--python", "3.11")
    return f"{version.major}.{version.minor}"


def make_plan(
    tensorflow: str = DEFAULT_TENSORFLOW,
    cuda: bool = False,
    target: str = "auto",
    host_features: set[str] | None = None,
    python: str | None = None,
    tfperf_python: str | None = None,
) -> BuildPlan:
    """Plan a build of ``tensorflow`` for ``target`` (``"auto"``: this machine).

    ``python`` defaults to this interpreter's version when the release supports it.
    ``tfperf_python`` is the interpreter whose tfperf registers the wheel (default: this one).
    """
    release = release_info(tensorflow)
    version = full_version(tensorflow)
    current = f"{sys.version_info.major}.{sys.version_info.minor}"
    py = _minor(python) if python else pick_python(release, current)
    if py not in release.pythons():
        raise UserError(
            f"TensorFlow {version} supports Python {release.python_min}-{release.python_max}; "
            f"pass --python with one of {', '.join(release.pythons())}."
        )
    clang_major = release.clang_major
    cpu = cpu_flags(target, "clang", release.clang, host_features)
    notes = list(cpu.notes)
    if not release.verified:
        notes.append(
            f"Bazel {release.bazel} for TensorFlow {release.minor} is carried over from the "
            "previous release; the script checks it against the source's .bazelversion"
        )
    if py != current and python is None:
        notes.append(f"TensorFlow {version} has no Python {current} wheels; building for {py}")
    configure_env = {
        "PYTHON_BIN_PATH": f"$(command -v python{py})",
        "USE_DEFAULT_PYTHON_LIB_PATH": "1",
        "TF_NEED_CLANG": "1",
        "CLANG_COMPILER_PATH": f"/usr/lib/llvm-{clang_major}/bin/clang",
        "CC_OPT_FLAGS": " ".join(cpu.copts),
        "TF_NEED_ROCM": "0",
        "TF_NEED_CUDA": "1" if cuda else "0",
        "TF_NEED_TENSORRT": "0",
        "TF_SET_ANDROID_WORKSPACE": "0",
    }
    if cuda:
        configure_env["TF_CUDA_CLANG"] = "1"
        configure_env["TF_CUDA_COMPUTE_CAPABILITIES"] = _compute_capabilities()
    wheel_name = "tensorflow" if cuda else "tensorflow_cpu"
    flags = ["--config=opt", *(f"--copt={c}" for c in cpu.copts)]
    if cuda:
        flags.append("--config=cuda")
    if release.hermetic_python:
        flags += [f"--repo_env=HERMETIC_PYTHON_VERSION={py}", f"--repo_env=WHEEL_NAME={wheel_name}"]
    name = f"tf-{version}-{cpu.target}" + ("-cuda" if cuda else "")
    plan = BuildPlan(version, release, py, cuda, cpu, flags, configure_env, name, notes=notes)
    plan.script = render_script(plan, tfperf_python or sys.executable)
    plan.dockerfile = render_dockerfile(plan)
    return plan


def _compute_capabilities() -> str:
    """CUDA compute capabilities of this machine's GPUs, or a common default list."""
    try:
        import pynvml

        pynvml.nvmlInit()
        caps = set()
        for i in range(pynvml.nvmlDeviceGetCount()):
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(
                pynvml.nvmlDeviceGetHandleByIndex(i)
            )
            caps.add(f"sm_{major}{minor}")
        pynvml.nvmlShutdown()
        if caps:
            return ",".join(sorted(caps))
    except Exception:  # no driver, no GPU, no nvidia-ml-py
        pass
    return "sm_70,sm_80,sm_89,sm_90,compute_90"


def render_script(plan: BuildPlan, tfperf_python: str) -> str:
    """The bash recipe (``build.sh``)."""
    steps = _build_steps(plan)
    body = _preamble(plan, tfperf_python, len(steps))
    for i, (title, code) in enumerate(steps, start=1):
        body += ["", f'step {i} "{title}"', code]
    body += ["", 'echo "done: $WHEEL"', ""]
    return "\n".join(body)


def _build_steps(plan: BuildPlan) -> list[tuple[str, str]]:
    """The recipe's numbered steps: (title, bash code)."""
    r = plan.release
    configure_lines = "\n".join(
        f'export {k}="{v}"' if k != "PYTHON_BIN_PATH" else f"export {k}={v}"
        for k, v in plan.configure_env.items()
    )
    bazel_cmd = " \\\n    ".join(
        ["bazel build", *(shlex.quote(f) for f in plan.bazel_flags), r.wheel_target]
    )
    pip_dir = "bazel-bin/tensorflow/tools/pip_package"
    if r.wheel_target.endswith(":wheel"):
        collect = f'run_in "$SRC" bash -c \'cp {pip_dir}/wheel_house/*.whl "$0"\' "$OUT_DIR"'
    else:
        collect = f'run_in "$SRC" ./{pip_dir}/build_pip_package "$OUT_DIR"'
    configure = f"{configure_lines}\nrun_in \"$SRC\" bash -c './configure < /dev/null'"
    return [
        ("install build tools (Clang, Python headers, git)", _tools_step(plan, r.clang_major)),
        (f"install Bazel {r.bazel}", _bazel_step(BAZEL_ARCH[plan.cpu.family])),
        (f"fetch TensorFlow v{plan.tensorflow}", _fetch_step()),
        ("check the pinned Bazel version against .bazelversion", _check_step()),
        ("configure (answers from the environment)", configure),
        ("build the wheel", f'cd_or_dry "$SRC"\nrun {bazel_cmd}'),
        ("collect the wheel", f'mkdir -p "$OUT_DIR"\n{collect}\n' + _wheel_lookup()),
        ("register the wheel as a builds compare candidate", _register_step()),
    ]


def _preamble(plan: BuildPlan, tfperf_python: str, n_steps: int) -> list[str]:
    """The recipe's header: what it builds, its pinned versions and its shell helpers."""
    r = plan.release
    return [
        "#!/usr/bin/env bash",
        f"# Build TensorFlow {plan.tensorflow} from source for {plan.cpu.target} "
        f"({'CUDA' if plan.cuda else 'CPU only'}).",
        f"# Pinned: Bazel {r.bazel} (the release's .bazelversion), {plan.cpu.compiler}, "
        f"Python {plan.python}.",
        f"# CPU flags: {' '.join(plan.cpu.copts)}",
        *(f"# note: {n}" for n in plan.notes),
        "# Environment: TFPERF_DRY_RUN=1 prints each command instead of running it;",
        "# TFPERF_BUILD_DIR (work folder), TFPERF_OUT_DIR (wheel folder),",
        "# TFPERF_SKIP_REGISTER=1 (e.g. inside Docker) leaves registration to you.",
        "set -euo pipefail",
        f"TF_VERSION={plan.tensorflow}",
        f"BAZEL_VERSION={r.bazel}",
        f"PYTHON_VERSION={plan.python}",
        f"CLANG_MAJOR={r.clang_major}",
        f"CANDIDATE_NAME={shlex.quote(plan.candidate_name)}",
        f'TFPERF_PYTHON="${{TFPERF_PYTHON:-{tfperf_python}}}"',
        'HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"',
        'WORK="${TFPERF_BUILD_DIR:-$HERE/work}"',
        'OUT_DIR="${TFPERF_OUT_DIR:-$HERE/wheels}"',
        'SRC="$WORK/tensorflow"',
        'DRY_RUN="${TFPERF_DRY_RUN:-0}"',
        'SUDO=""; if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi',
        'export PATH="$WORK/bin:$PATH"',
        f"STEPS={n_steps}",
        'step() { echo "==> [$1/$STEPS] $2"; }',
        "run() {",
        '  if [ "$DRY_RUN" = 1 ]; then echo "[dry-run] $*"; else "$@"; fi',
        "}",
        'run_in() { local dir="$1"; shift',
        '  if [ "$DRY_RUN" = 1 ]; then echo "[dry-run] (cd $dir) $*"; else (cd "$dir" && "$@"); fi',
        "}",
        'cd_or_dry() { if [ "$DRY_RUN" = 1 ]; then echo "[dry-run] cd $1"; else cd "$1"; fi; }',
        'mkdir -p "$WORK/bin"',
    ]


def _tools_step(plan: BuildPlan, clang_major: int) -> str:
    pkgs = f"git curl ca-certificates patchelf python{plan.python}-dev python{plan.python}-venv"
    return "\n".join(
        [
            f"if ! command -v clang-{clang_major} >/dev/null; then",
            '  run bash -c "curl -fsSL https://apt.llvm.org/llvm.sh | $SUDO bash -s '
            f'{clang_major}"',
            "fi",
            f"run $SUDO apt-get install -y {pkgs} || echo 'warning: install {pkgs} yourself'",
        ]
    )


def _bazel_step(arch: str) -> str:
    url = (
        "https://github.com/bazelbuild/bazel/releases/download/"
        f"${{BAZEL_VERSION}}/bazel-${{BAZEL_VERSION}}-linux-{arch}"
    )
    return "\n".join(
        [
            'if [ "$(bazel --version 2>/dev/null)" != "bazel $BAZEL_VERSION" ]; then',
            f'  run curl -fsSL -o "$WORK/bin/bazel" "{url}"',
            '  run chmod +x "$WORK/bin/bazel"',
            "fi",
        ]
    )


def _fetch_step() -> str:
    return "\n".join(
        [
            'if [ ! -d "$SRC/.git" ]; then',
            '  run git clone --depth 1 --branch "v$TF_VERSION" '
            'https://github.com/tensorflow/tensorflow.git "$SRC"',
            "fi",
        ]
    )


def _check_step() -> str:
    return "\n".join(
        [
            'if [ "$DRY_RUN" != 1 ]; then',
            '  actual="$(cat "$SRC/.bazelversion" | grep -v "^#" | head -n1)"',
            '  if [ "$actual" != "$BAZEL_VERSION" ]; then',
            '    echo "error: TensorFlow $TF_VERSION pins Bazel $actual, the plan says '
            '$BAZEL_VERSION; re-plan or install Bazel $actual" >&2',
            "    exit 2",
            "  fi",
            "else",
            '  echo "[dry-run] compare $SRC/.bazelversion with $BAZEL_VERSION"',
            "fi",
        ]
    )


def _wheel_lookup() -> str:
    return "\n".join(
        [
            'if [ "$DRY_RUN" = 1 ]; then',
            '  WHEEL="$OUT_DIR/tensorflow-$TF_VERSION-dry-run.whl"',
            "else",
            '  WHEEL="$(ls -t "$OUT_DIR"/*.whl | head -n1)"',
            "fi",
            'echo "wheel: $WHEEL"',
        ]
    )


def _register_step() -> str:
    return "\n".join(
        [
            'if [ "${TFPERF_SKIP_REGISTER:-0}" = 1 ] || [ ! -x "$TFPERF_PYTHON" ]; then',
            '  echo "to register: tfperf builds register $WHEEL --name $CANDIDATE_NAME"',
            "else",
            '  run "$TFPERF_PYTHON" -m tfperf builds register "$WHEEL" --name "$CANDIDATE_NAME"',
            "fi",
        ]
    )


def render_dockerfile(plan: BuildPlan) -> str:
    """A Dockerfile that runs the same ``build.sh`` and exports the wheel.

    Use: ``docker build --output type=local,dest=wheels .`` in the plan folder, then
    ``tfperf builds register wheels/<wheel> --name NAME``.
    """
    clang_major = plan.release.clang_major
    return "\n".join(
        [
            "# syntax=docker/dockerfile:1",
            f"# TensorFlow {plan.tensorflow} for {plan.cpu.target}: "
            f"Bazel {plan.release.bazel}, {plan.cpu.compiler}, Python {plan.python}.",
            "# Build: docker build --output type=local,dest=wheels .",
            f"FROM python:{plan.python}-bookworm AS build",
            "ARG DEBIAN_FRONTEND=noninteractive",
            "RUN apt-get update && apt-get install -y --no-install-recommends \\",
            "      git curl ca-certificates gnupg lsb-release software-properties-common "
            "patchelf wget \\",
            f" && curl -fsSL https://apt.llvm.org/llvm.sh | bash -s {clang_major} \\",
            " && rm -rf /var/lib/apt/lists/*",
            f"RUN ln -s /usr/local/bin/python{plan.python} /usr/bin/python{plan.python} || true",
            "COPY build.sh /plan/build.sh",
            "ENV TFPERF_BUILD_DIR=/build TFPERF_OUT_DIR=/out TFPERF_SKIP_REGISTER=1",
            "RUN bash /plan/build.sh",
            "",
            "FROM scratch AS wheel",
            "COPY --from=build /out/ /",
            "",
        ]
    )


def write_plan(plan: BuildPlan, out_dir: str | Path) -> dict[str, str]:
    """Write ``build.sh``, ``Dockerfile`` and ``plan.json`` under ``out_dir``; return paths."""

    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {out} ({exc.strerror}); pass another --out.") from exc
    script = out / "build.sh"
    script.write_text(plan.script)
    script.chmod(0o755)
    docker = out / "Dockerfile"
    docker.write_text(plan.dockerfile)
    meta = out / "plan.json"
    doc = {k: v for k, v in plan.to_dict().items() if k not in ("script", "dockerfile")}
    meta.write_text(to_json(doc) + "\n")
    return {"script": str(script), "dockerfile": str(docker), "plan": str(meta)}


@dataclass
class RunResult:
    """What running ``build.sh`` did."""

    returncode: int
    log: str
    steps_done: list[str]
    total_steps: int
    wheel: str | None
    dry_run: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return dict(self.__dict__)


def run_plan(
    out_dir: str | Path,
    dry_run: bool = False,
    log_path: str | Path | None = None,
    on_line: Any = None,
    env: dict[str, str] | None = None,
) -> RunResult:
    """Run ``out_dir/build.sh``, streaming its output to ``log_path`` (default ``build.log``).

    ``on_line(line, step_index, total_steps)`` is called for every output line (progress).
    Raises :class:`UserError` when the script is missing or exits non-zero (naming the step
    it stopped in and the log).
    """
    script = Path(out_dir) / "build.sh"
    if not script.is_file():
        raise UserError(f"{script} does not exist; run `tfperf builds plan --out {out_dir}` first.")
    log = Path(log_path) if log_path else Path(out_dir) / "build.log"
    full_env = dict(os.environ)
    full_env.update(env or {})
    if dry_run:
        full_env["TFPERF_DRY_RUN"] = "1"
    steps: list[str] = []
    total = 0
    wheel = None
    with log.open("w") as fh:

        def follow(text: str) -> None:
            nonlocal total, wheel
            fh.write(text + "\n")
            fh.flush()
            if text.startswith(STEP_MARK):
                head, _, title = text[len(STEP_MARK) :].partition("] ")
                total = int(head.split("/")[1])
                steps.append(title)
            elif text.startswith("wheel: "):
                wheel = text[len("wheel: ") :]
            if on_line is not None:
                on_line(text, len(steps), total)

        ended = launcher.run(["bash", str(script)], env=full_env, on_line=follow)
    rc = ended.returncode if ended.returncode is not None else -1
    result = RunResult(rc, str(log), steps, total, wheel, dry_run)
    if rc != 0:
        where = steps[-1] if steps else "before the first step"
        raise UserError(
            f"build.sh stopped with exit code {rc} at step {len(steps)} ({where}); "
            f"read {log} for the cause."
        )
    return result
