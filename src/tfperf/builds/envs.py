"""One isolated, cached Python environment per candidate TensorFlow build.

Contract: :func:`ensure_env` turns a candidate SPEC into a ready :class:`CandidateEnv` or raises
:class:`CandidateError` whose message is one line naming the spec and why it cannot be
installed. A SPEC is

- one or several pip requirements (PEP 508, parsed by ``packaging``): ``tensorflow-cpu==2.20.0``,
  ``tf-nightly``, ``tensorflow==2.21.0+local`` (a local version), several joined with ``&``:
  ``tensorflow-cpu==2.15.1 & intel-extension-for-tensorflow[cpu]==2.15.0.2``. The older
  separator ``+`` is still read where the text is not one requirement
  (``tensorflow-cpu==2.15.1+intel-extension-for-tensorflow[cpu]==2.15.0.2``); a ``+`` right
  after an ``==`` version is a local version label (PEP 440). A requirement that does not parse
  raises :class:`~tfperf.core.errors.UserError` naming it (:func:`check_spec` checks a spec
  without installing or reading anything);
- a local wheel path (``./tensorflow_cpu-2.21.0-cp311-cp311-linux_x86_64.whl``);
- the name a wheel was registered under (:func:`register_wheel`, which ``build.sh`` of
  ``tfperf builds plan`` calls as its last step).

Environments are created with ``uv venv`` + ``uv pip install --compile-bytecode`` when ``uv`` is
on PATH or beside the running Python, and with ``venv`` + ``pip`` otherwise (both
byte-compiled), under ``<platform cache dir>/tfperf/builds/envs`` (override:
``TFPERF_BUILDS_CACHE``), keyed by the spec, the wheel's content (for a path) and the Python
version, and reused while their ``ready.json`` marker exists. Creation is atomic (built in a
temporary folder, then renamed) and serialised by a lock, so an interrupted install is never
reused and two processes never build the same environment at once.

The worker is made importable without installing tfperf's dependencies: the environment's
``site-packages`` gets a ``.pth`` file naming a folder that holds only a link to the running
tfperf package, so the candidate always runs the parent's worker code and sees none of the
parent's other packages. :data:`WORKER_DEPS` (small, pure Python) are installed beside the
candidate.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

import tfperf
from tfperf.core.errors import UserError
from tfperf.runner import launcher

WORKER_DEPS: tuple[str, ...] = ("psutil", "platformdirs", "rich", "click")
"""What the worker imports besides TensorFlow and numpy (which every candidate brings)."""

TF_DISTRIBUTIONS = (
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-intel",
    "tf-nightly",
    "tf-nightly-cpu",
    "intel-extension-for-tensorflow",
)
"""Distributions whose versions describe a candidate (read from metadata, TF not imported)."""

INSTALL_TIMEOUT_S = 1800.0


class CandidateError(Exception):
    """A candidate that cannot be installed; ``str()`` is one line naming the spec and why."""

    def __init__(self, spec: str, reason: str) -> None:
        super().__init__(f"{spec}: {reason}")
        self.spec = spec
        self.reason = reason


@dataclass
class CandidateEnv:
    """A ready environment for one candidate."""

    spec: str
    path: Path
    python: Path
    versions: dict[str, str] = field(default_factory=dict)
    """Installed versions of :data:`TF_DISTRIBUTIONS` (and keras), by distribution name."""
    created: bool = False
    """True when this call created it, False when it was reused from the cache."""
    installer: str = "pip"

    @property
    def label(self) -> str:
        """Short name for tables: ``tensorflow-cpu 2.20.0``."""
        for name in TF_DISTRIBUTIONS:
            if name in self.versions:
                return f"{name} {self.versions[name]}"
        return self.spec

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "spec": self.spec,
            "path": str(self.path),
            "python": str(self.python),
            "versions": dict(self.versions),
            "created": self.created,
            "installer": self.installer,
            "label": self.label,
        }


def cache_root() -> Path:
    """Where candidate environments live."""
    override = os.environ.get("TFPERF_BUILDS_CACHE")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("tfperf")) / "builds" / "envs"


def registry_path() -> Path:
    """The file mapping registered candidate names to wheel paths."""
    override = os.environ.get("TFPERF_BUILDS_REGISTRY")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_data_dir("tfperf")) / "builds" / "candidates.json"


def registered() -> dict[str, str]:
    """Registered candidates: name -> absolute wheel path."""
    path = registry_path()
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def register_wheel(wheel: str | Path, name: str | None = None) -> tuple[str, str]:
    """Record ``wheel`` as a candidate named ``name`` (default: the wheel's stem); return both.

    Raises :class:`tfperf.core.errors.UserError` when the wheel does not exist or is not a wheel.
    """
    path = Path(wheel).expanduser().resolve()
    if not path.is_file() or path.suffix != ".whl":
        raise UserError(f"{wheel} is not a wheel file; pass the .whl that build.sh produced.")
    key = name or path.stem
    data = registered()
    data[key] = str(path)
    reg = registry_path()
    reg.parent.mkdir(parents=True, exist_ok=True)
    tmp = reg.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(reg)
    return key, str(path)


def _python_tag() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


REQUIREMENT_SEPARATOR = "&"
"""Joins several requirements in one candidate (``&`` appears in no PEP 508 requirement but a
URL's query or a quoted marker string, and a spec that parses whole is taken whole)."""


def _parse(text: str) -> Requirement | str:
    """The requirement ``text`` names, or why it names none (packaging's first line)."""
    try:
        return Requirement(text)
    except InvalidRequirement as exc:
        return str(exc).splitlines()[0]


def _piece_requirements(spec: str, piece: str) -> list[Requirement]:
    """One ``&``-separated piece: a requirement, or the older ``+``-joined ones."""
    whole = _parse(piece)
    if isinstance(whole, Requirement):
        return [whole]
    parts = [_parse(p.strip()) for p in piece.split("+")]
    if len(parts) > 1 and all(isinstance(p, Requirement) for p in parts):
        return parts  # type: ignore[return-value]
    raise UserError(
        f"--candidate {spec!r}: {piece!r} is not a pip requirement ({whole}); write one like "
        "'tensorflow-cpu==2.20.0', join several with ' & ', or give a wheel path."
    )


def parse_requirements(spec: str) -> list[Requirement]:
    """The requirements a candidate SPEC names (see the module docstring). Raises
    :class:`~tfperf.core.errors.UserError` naming the first one that does not parse."""
    whole = _parse(spec.strip())
    if isinstance(whole, Requirement):  # a local version label, or a '&' in a URL or marker
        return [whole]
    pieces = [p.strip() for p in spec.split(REQUIREMENT_SEPARATOR) if p.strip()]
    if not pieces:
        raise UserError(f"--candidate {spec!r} names no requirement; give one or a wheel path.")
    return [req for piece in pieces for req in _piece_requirements(spec, piece)]


def _names_wheel(spec: str) -> bool:
    """Whether ``spec`` names a wheel (registered, or a path) rather than requirements; a
    direct reference (``name @ https://.../x.whl``) is a requirement."""
    if spec in registered():
        return True
    if "@" in spec and isinstance(_parse(spec), Requirement):
        return False
    return spec.endswith(".whl") or os.sep in spec or spec.startswith(".")


def check_spec(spec: str) -> None:
    """Raise :class:`~tfperf.core.errors.UserError` when ``spec``'s requirements do not parse;
    installs and reads nothing, so every candidate is checked before the first install."""
    spec = spec.strip()
    if not spec:
        raise UserError("a --candidate is empty; give a pip requirement or a wheel path.")
    if not _names_wheel(spec):
        parse_requirements(spec)


def resolve_spec(spec: str) -> tuple[list[str], str]:
    """``spec`` -> (pip requirements, cache key material). Raises :class:`CandidateError`, or
    :class:`~tfperf.core.errors.UserError` for a requirement that does not parse."""
    spec = spec.strip()
    if not spec:
        raise CandidateError(spec, "empty candidate spec")
    names = registered()
    if spec in names:
        spec_path = names[spec]
        if not Path(spec_path).is_file():
            raise CandidateError(spec, f"registered wheel {spec_path} no longer exists")
        return _wheel_requirement(spec, Path(spec_path))
    if _names_wheel(spec):
        return _wheel_requirement(spec, Path(spec).expanduser())
    reqs = [str(req) for req in parse_requirements(spec)]
    return reqs, "pip:" + f" {REQUIREMENT_SEPARATOR} ".join(reqs)


def _wheel_requirement(spec: str, path: Path) -> tuple[list[str], str]:
    """A local wheel: its absolute path and a key from its content."""
    if not path.is_file():
        raise CandidateError(spec, f"wheel file {path} does not exist")
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return [str(path.resolve())], "wheel:" + digest.hexdigest()


def env_dir(key: str, root: Path | None = None) -> Path:
    """The cache folder for key material ``key`` under this Python version."""
    tag = _python_tag()
    digest = hashlib.sha256(f"{key}|py{tag}".encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", key.split(":", 1)[1])[:40].strip("-")
    if key.startswith("wheel:"):
        slug = "wheel"
    return (root or cache_root()) / f"{slug}-py{tag}-{digest}"


def ensure_env(
    spec: str,
    root: Path | None = None,
    log: Any = None,
    timeout: float = INSTALL_TIMEOUT_S,
) -> CandidateEnv:
    """A ready environment for ``spec``, created on first use and reused afterwards.

    ``log(line)`` receives progress lines (installer output). Raises :class:`CandidateError`.
    """
    reqs, key = resolve_spec(spec)
    target = env_dir(key, root)
    target.parent.mkdir(parents=True, exist_ok=True)
    lock_path = target.parent / f".{target.name}.lock"
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        env = _load_ready(spec, target)
        if env is None:
            env = _create(spec, reqs, target, log, timeout)
        _link_worker(env)
        return env


def _load_ready(spec: str, target: Path) -> CandidateEnv | None:
    marker = target / "ready.json"
    python = target / "bin" / "python"
    if not marker.is_file() or not python.exists():
        return None
    try:
        info = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    return CandidateEnv(
        spec, target, python, info.get("versions", {}), False, info.get("installer", "pip")
    )


def _uv() -> str | None:
    """``uv`` on PATH, else the one installed beside the running Python (``make`` installs it
    there; a tfperf run as ``.venv/bin/tfperf`` has no ``.venv/bin`` on its PATH): it
    installs a TensorFlow wheel in about half pip's time and makes an environment without
    bootstrapping pip into it."""
    beside = Path(sys.executable).parent / "uv"
    return shutil.which("uv") or (str(beside) if os.access(beside, os.X_OK) else None)


def _create(spec: str, reqs: list[str], target: Path, log: Any, timeout: float) -> CandidateEnv:
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    uv = _uv()
    installer = "uv" if uv else "pip"
    python = tmp / "bin" / "python"
    try:
        if uv:
            _call([uv, "venv", "--quiet", "--python", sys.executable, str(tmp)], spec, log, timeout)
            # byte-compiled as pip does: else a candidate's cold start pays for compiling
            # TensorFlow's Python, every start where PYTHONDONTWRITEBYTECODE is set
            install = [uv, "pip", "install", "--compile-bytecode", "--python", str(python)]
        else:
            _call([sys.executable, "-m", "venv", str(tmp)], spec, log, timeout)
            install = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
        _call([*install, *reqs, *WORKER_DEPS], spec, log, timeout)
        versions = _installed_versions(python)
        if not any(name in versions for name in TF_DISTRIBUTIONS):
            raise CandidateError(spec, "installed, but no TensorFlow distribution came with it")
        info = {
            "spec": spec,
            "requirements": reqs,
            "versions": versions,
            "installer": installer,
            "python": _python_tag(),
            "created": time.time(),
        }
        (tmp / "ready.json").write_text(json.dumps(info, indent=2) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return CandidateEnv(spec, target, target / "bin" / "python", versions, True, installer)


def _call(cmd: list[str], spec: str, log: Any, timeout: float) -> None:
    """Run an installer command; a failure becomes a one-line :class:`CandidateError`. The
    deadline holds even when the installer prints nothing (a resolver stuck on the network)."""
    lines: list[str] = []

    def on_line(line: str) -> None:
        lines.append(line.rstrip())
        if log is not None:
            log(line.rstrip())

    try:
        ended = launcher.run(cmd, timeout_s=timeout, on_line=on_line)
    except launcher.LaunchError as exc:
        raise CandidateError(spec, str(exc)) from exc
    if ended.timed_out:
        raise CandidateError(spec, f"install took more than {timeout:.0f} s; stopped")
    if not ended.ok:
        raise CandidateError(spec, explain_install_failure(lines))


_NO_VERSION = "no such version on the package index, or none for Python {py} on this platform"
_FAILURES: tuple[tuple[str, str], ...] = (
    (
        r"is not a supported wheel on this platform|has no wheels with a matching",
        "no wheel for Python {py} on this platform",
    ),
    (r"No matching distribution found|No solution found when resolving", _NO_VERSION),
    (r"Invalid wheel filename|not a valid wheel filename", "not a valid wheel file name"),
    (
        r"BadZipFile|not a zip file|zip archive|invalid zip|\.whl is invalid|Failed to read",
        "the file cannot be read as a wheel",
    ),
    (r"ResolutionImpossible|conflicting dependencies", "its requirements conflict"),
    (r"Could not find a version that satisfies|No matching", _NO_VERSION),
    (
        r"Temporary failure in name resolution|Failed to establish a new connection",
        "the package index cannot be reached",
    ),
)
"""Installer output pattern -> the reason given to the user (first match wins)."""


def explain_install_failure(lines: list[str]) -> str:
    """One sentence for the installer output ``lines`` (the last error line as evidence)."""
    text = "\n".join(lines)
    py = _python_tag()
    evidence = next(
        (ln.strip() for ln in reversed(lines) if "error" in ln.lower() and ln.strip()),
        lines[-1].strip() if lines else "no output",
    )
    evidence = re.sub(r"\s+", " ", evidence)[:200]
    for pattern, reason in _FAILURES:
        if re.search(pattern, text, re.IGNORECASE):
            return f"{reason.format(py=py)} ({evidence})"
    return f"install failed ({evidence})"


def _installed_versions(python: Path) -> dict[str, str]:
    """Versions of TF-related distributions in an environment, read from metadata."""
    names = [*TF_DISTRIBUTIONS, "keras", "numpy"]
    code = (
        "import json, importlib.metadata as m\n"
        "out = {}\n"
        f"for n in {names!r}:\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))\n"
    )
    lines: list[str] = []
    ended = launcher.run([str(python), "-c", code], timeout_s=120, on_line=lines.append)
    if not ended.ok or not lines:
        return {}
    return json.loads(lines[-1])


def _site_packages(python: Path) -> Path:
    env = python.parent.parent
    found = sorted(env.glob("lib/python*/site-packages"))
    if not found:
        raise CandidateError(str(env), "the environment has no site-packages folder")
    return found[0]


def _link_worker(env: CandidateEnv) -> None:
    """Point the environment's ``tfperf`` at the running package (see module docstring)."""

    pkg = Path(tfperf.__file__).resolve().parent
    holder = env.path / "tfperf-path"
    holder.mkdir(exist_ok=True)
    link = holder / "tfperf"
    if link.is_symlink() or link.exists():
        if link.is_symlink() and link.resolve() == pkg:
            return
        link.unlink()
    link.symlink_to(pkg, target_is_directory=True)
    (_site_packages(env.python) / "_tfperf_worker.pth").write_text(str(holder) + "\n")
