"""Candidate environments: specs, the registry, and candidates that cannot be installed.

The install failures are real: the installer (uv, found beside this Python; pip where no uv is
found, for a version that does not exist) is asked for a version that does not exist, a wheel
for another platform, a file that is not a wheel, a path that does not exist.
"""

from __future__ import annotations

import json
import os
import sys
import zipfile
from pathlib import Path

import pytest

from tfperf.builds import envs
from tfperf.builds.envs import CandidateError, ensure_env, register_wheel, resolve_spec
from tfperf.core.errors import UserError


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """A private cache and registry for one test."""
    monkeypatch.setenv("TFPERF_BUILDS_CACHE", str(tmp_path / "envs"))
    monkeypatch.setenv("TFPERF_BUILDS_REGISTRY", str(tmp_path / "candidates.json"))
    return tmp_path


def _leftover_envs(root: Path) -> list[Path]:
    return [p for p in root.iterdir() if not p.name.startswith(".")] if root.exists() else []


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_version_that_does_not_exist_is_one_clear_line(isolated, monkeypatch, installer):
    if installer == "pip":  # a Python with no uv on PATH nor beside it
        monkeypatch.setattr(envs, "_uv", lambda: None)
    else:
        assert envs._uv() is not None, "the test environment installs uv beside its Python"
    with pytest.raises(CandidateError) as err:
        ensure_env("tensorflow-cpu==0.0.1")
    line = str(err.value)
    assert line.startswith("tensorflow-cpu==0.0.1: no such version")
    assert "\n" not in line
    assert _leftover_envs(isolated / "envs") == []


def test_wheel_for_another_platform_is_refused(isolated):
    wheel = isolated / "tensorflow_cpu-2.20.0-cp27-cp27m-win32.whl"
    info = "tensorflow_cpu-2.20.0.dist-info"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(
            f"{info}/METADATA", "Metadata-Version: 2.1\nName: tensorflow-cpu\nVersion: 2.20.0\n"
        )
        zf.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp27-cp27m-win32\n"
        )
        zf.writestr(f"{info}/RECORD", "")
    with pytest.raises(CandidateError, match="no wheel for Python"):
        ensure_env(str(wheel))
    assert _leftover_envs(isolated / "envs") == []


def test_file_that_is_not_a_wheel_is_refused(isolated):
    bogus = isolated / "tensorflow_cpu-2.20.0-py3-none-any.whl"
    bogus.write_bytes(b"this is not a zip archive")
    with pytest.raises(CandidateError, match="cannot be read as a wheel"):
        ensure_env(str(bogus))


def test_missing_wheel_and_bad_spec_fail_before_installing(isolated):
    with pytest.raises(CandidateError, match="does not exist"):
        resolve_spec(str(isolated / "nowhere.whl"))
    with pytest.raises(UserError, match="'tensorflow cpu please' is not a pip requirement"):
        resolve_spec("tensorflow cpu please")


def test_requirements_and_wheels_get_distinct_cache_keys(isolated):
    reqs, key = resolve_spec("tensorflow-cpu==2.15.1+intel-extension-for-tensorflow[cpu]")
    assert reqs == ["tensorflow-cpu==2.15.1", "intel-extension-for-tensorflow[cpu]"]
    wheel = isolated / "a-1.0-py3-none-any.whl"
    wheel.write_bytes(b"one")
    _, k1 = resolve_spec(str(wheel))
    wheel.write_bytes(b"two")
    _, k2 = resolve_spec(str(wheel))
    assert len({key, k1, k2}) == 3  # a rebuilt wheel is a new environment
    assert envs.env_dir(k1) != envs.env_dir(k2)


def test_a_local_version_is_one_requirement(isolated):
    reqs, key = resolve_spec("tensorflow==2.21.0+local")
    assert reqs == ["tensorflow==2.21.0+local"]
    assert key == "pip:tensorflow==2.21.0+local"


def test_several_requirements_are_joined_with_ampersand(isolated):
    both = ["tensorflow-cpu==2.15.1", "intel-extension-for-tensorflow[cpu]==2.15.0.2"]
    reqs, key = resolve_spec(" & ".join(both))
    assert reqs == both
    assert resolve_spec("tensorflow==2.21.0+local&keras >= 3.5")[0] == [
        "tensorflow==2.21.0+local",
        "keras>=3.5",
    ]
    # the older '+' form names the same environment
    assert resolve_spec("+".join(both)) == (reqs, key)
    assert resolve_spec("tf-nightly+tf-keras-nightly")[0] == ["tf-nightly", "tf-keras-nightly"]


def test_a_direct_reference_with_a_query_is_one_requirement(isolated):
    spec = "tensorflow @ https://example.org/tensorflow-2.21.0-py3-none-any.whl?a=1&b=2"
    assert resolve_spec(spec)[0] == [spec]


def test_a_requirement_that_does_not_parse_is_named(isolated):
    with pytest.raises(UserError, match=r"'tensorflow=2\.20' is not a pip requirement") as err:
        resolve_spec("keras==3.5.0 & tensorflow=2.20")
    assert "\n" not in str(err.value)
    with pytest.raises(UserError, match="names no requirement"):
        resolve_spec(" & ")


def test_the_installer_gets_a_local_version_and_each_requirement_whole(isolated, monkeypatch):
    # A stand-in for uv that records what it was asked to install and finds no such version.
    fake = isolated / "bin"
    fake.mkdir()
    calls = isolated / "calls.jsonl"
    (fake / "uv").write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"open({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "if sys.argv[1] == 'pip':\n"
        "    print('No solution found when resolving dependencies')\n"
        "    sys.exit(1)\n"
    )
    (fake / "uv").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    spec = "tensorflow==2.21.0+local & keras >= 3.5"
    with pytest.raises(CandidateError, match="no such version") as err:
        ensure_env(spec)
    assert str(err.value).startswith(spec + ": ")
    install = [json.loads(line) for line in calls.read_text().splitlines()][-1]
    assert install[:3] == ["pip", "install", "--compile-bytecode"]
    assert install[5:7] == ["tensorflow==2.21.0+local", "keras>=3.5"]
    assert _leftover_envs(isolated / "envs") == []


def test_a_bad_candidate_is_one_sentence_before_anything_is_installed(isolated, cli):
    store = isolated / "store.sqlite"
    res = cli(
        "builds",
        "compare",
        "--candidate",
        "tensorflow-cpu==2.20.0",
        "--candidate",
        "keras==3.5.0 & tensorflow cpu please",
        "--workload",
        "mlp",
        "--store",
        str(store),
        env={"TFPERF_BUILDS_CACHE": str(isolated / "envs")},
    )
    assert res.returncode == 2
    assert res.stderr.startswith("error:") and res.stderr.count("\n") == 1
    assert "'tensorflow cpu please' is not a pip requirement" in res.stderr
    assert "Traceback" not in res.stderr
    assert not store.exists() and _leftover_envs(isolated / "envs") == []


def test_registered_wheel_resolves_by_name(isolated, cli):
    wheel = isolated / "tensorflow_cpu-2.21.0-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"built")
    name, path = register_wheel(wheel, "tf-icelake")
    assert (name, Path(path)) == ("tf-icelake", wheel.resolve())
    reqs, _ = resolve_spec("tf-icelake")
    assert reqs == [str(wheel.resolve())]
    res = cli(
        "builds",
        "register",
        str(wheel),
        "--json",
        env={"TFPERF_BUILDS_REGISTRY": str(isolated / "candidates.json")},
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["name"] == wheel.stem
    with pytest.raises(UserError):
        register_wheel(isolated / "missing.whl")
    wheel.unlink()
    with pytest.raises(CandidateError, match="no longer exists"):
        resolve_spec("tf-icelake")


def test_failure_reasons_from_installer_output():
    assert "no such version" in envs.explain_install_failure(
        ["ERROR: Could not find a version that satisfies the requirement x==9"]
    )
    assert "cannot be reached" in envs.explain_install_failure(
        ["WARNING: Retrying", "Temporary failure in name resolution"]
    )
    assert envs.explain_install_failure(["boom"]).startswith("install failed (boom)")
