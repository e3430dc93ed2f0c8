"""`tfperf builds plan`: pinned recipes for several microarchitectures, and the --run plumbing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import archspec.cpu
import pytest

from tfperf.builds.cpuflags import GCC_FEATURE_FLAGS, cpu_flags
from tfperf.builds.plan import make_plan, run_plan, write_plan
from tfperf.builds.releases import RELEASES, release_info
from tfperf.core.errors import UserError

ICELAKE_PLUS = set(archspec.cpu.TARGETS["icelake"].features) | {
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
}
"""A CPU archspec would call icelake that also has the three ISAs icelake's -march omits."""


@pytest.mark.parametrize(
    ("target", "compiler_version", "march"),
    [
        ("haswell", "18.1.8", "-march=haswell"),
        ("skylake_avx512", "18.1.8", "-march=skylake-avx512"),
        ("icelake", "18.1.8", "-march=icelake-client"),
        ("sapphirerapids", "17.0.6", "-march=sapphirerapids"),
        ("zen3", "17.0.6", "-march=znver3"),
        ("zen4", "18.1.8", "-march=znver4"),
    ],
)
def test_named_x86_targets_lead_with_their_march(target, compiler_version, march):
    flags = cpu_flags(target, "clang", compiler_version)
    assert flags.copts[0] == march
    assert not flags.native_fallback
    assert flags.extra_features == []  # a named target is a portable build: nothing from here


def test_icelake_gets_explicit_flags_for_the_isas_its_march_omits():
    flags = cpu_flags("icelake", "clang", "18.1.8", host_features=ICELAKE_PLUS)
    assert flags.copts[:2] == ["-march=icelake-client", "-mtune=icelake-client"]
    assert flags.extra_features == ["avx512_bf16", "avx512_fp16", "avx_vnni"]
    assert flags.copts[2:] == ["-mavx512bf16", "-mavx512fp16", "-mavxvnni"]
    assert any("AVX512_FP16" in n for n in flags.notes)


def test_features_that_do_not_cover_the_target_add_nothing():
    haswell = set(archspec.cpu.TARGETS["haswell"].features)
    flags = cpu_flags("icelake", "clang", "18.1.8", host_features=haswell | {"avx512_bf16"})
    assert flags.copts == ["-march=icelake-client", "-mtune=icelake-client"]
    assert flags.notes


def test_unsupported_cpu_compiler_pair_falls_back_to_native():
    # archspec raises for zen5 with clang 18 (it needs 19.1) and for zen4 with gcc 12.2.
    for target, compiler, version in (("zen5", "clang", "18.1.8"), ("zen4", "gcc", "12.2.0")):
        flags = cpu_flags(target, compiler, version)
        assert flags.copts == ["-march=native"]
        assert flags.native_fallback
        assert "-march=native" in flags.notes[0]


def test_arm_target_uses_archspec_flags_and_no_x86_flags():
    flags = cpu_flags("neoverse_v1", "clang", "18.1.8")
    assert flags.copts[0].startswith("-march=armv8")
    assert "+sve" in flags.copts[0]
    assert not set(flags.copts[1:]) & set(GCC_FEATURE_FLAGS.values())


def test_this_host_plan_adds_what_archspec_target_lacks():
    flags = cpu_flags("auto")
    uarch = archspec.cpu.TARGETS[flags.target]
    assert not set(flags.extra_features) & set(uarch.features)
    assert flags.copts[len(flags.copts) - len(flags.extra_features) :] == [
        GCC_FEATURE_FLAGS[f] for f in flags.extra_features
    ]


@pytest.mark.parametrize(
    ("version", "bazel", "hermetic"),
    [("2.15.1", "6.1.0", False), ("2.18", "6.5.0", True), ("2.20.0", "7.4.1", True)],
)
def test_plan_pins_bazel_python_and_configure_answers(version, bazel, hermetic):
    plan = make_plan(version, cuda=False, target="icelake", host_features=ICELAKE_PLUS)
    script = plan.script
    assert f"BAZEL_VERSION={bazel}\n" in script
    assert f"PYTHON_VERSION={plan.python}\n" in script
    assert plan.python in release_info(version).pythons()
    assert "--config=opt" in script
    assert "--copt=-march=icelake-client" in script
    assert "--copt=-mavx512fp16" in script
    assert 'export TF_NEED_CUDA="0"' in script
    assert "--config=cuda" not in script
    assert ("HERMETIC_PYTHON_VERSION" in script) is hermetic
    assert release_info(version).wheel_target in script
    last_step = script.rsplit("step ", 1)[1]
    assert "builds register" in last_step
    assert f"FROM python:{plan.python}-bookworm" in plan.dockerfile
    assert "COPY build.sh" in plan.dockerfile
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


def test_cuda_plan_answers_configure_for_cuda():
    plan = make_plan("2.20.0", cuda=True, target="haswell")
    assert 'export TF_NEED_CUDA="1"' in plan.script
    assert "--config=cuda" in plan.script
    assert "TF_CUDA_COMPUTE_CAPABILITIES" in plan.script
    assert "--repo_env=WHEEL_NAME=tensorflow \\\n" in plan.script


def test_every_release_has_a_pinned_bazel():
    for minor, rel in RELEASES.items():
        assert rel.bazel.count(".") == 2, minor
        assert rel.pythons()


def test_unknown_release_and_python_are_user_errors():
    with pytest.raises(UserError, match=r"2\.21"):
        make_plan("2.10.0")
    with pytest.raises(UserError, match="Python"):
        make_plan("2.15.0", python="3.13")
    with pytest.raises(UserError, match=r"'2\.x' is not a release"):
        make_plan("2.x")


def test_versions_are_read_as_versions_not_split_by_hand():
    plan = make_plan("v2.20", python="3.11.7", target="haswell")
    assert (plan.tensorflow, plan.python) == ("2.20.0", "3.11")
    rc = make_plan("2.21.0-rc1", target="haswell")
    assert rc.tensorflow == "2.21.0-rc1"  # the git tag's spelling
    assert "llvm-18/bin/clang" in plan.script


def test_cli_plan_json_has_the_documented_keys(cli):
    res = cli("builds", "plan", "--tensorflow", "2.19.0", "--target", "zen3", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["bazel_version"] == "6.5.0"
    assert doc["copts"][0] == "-march=znver3"
    assert "#!/usr/bin/env bash" in doc["script"]
    assert doc["dockerfile"].startswith("# syntax=docker/dockerfile:1")


def test_cli_rejects_dry_run_without_run_and_unknown_target(cli):
    assert cli("builds", "plan", "--dry-run").returncode == 2
    res = cli("builds", "plan", "--target", "pentium9000")
    assert res.returncode == 2
    assert "Traceback" not in res.stderr


def test_run_dry_run_streams_every_step_to_the_log(cli, tmp_path):
    out = tmp_path / "plan"
    res = cli("builds", "plan", "--run", "--dry-run", "--out", str(out), "--json")
    assert res.returncode == 0, res.stderr
    run = json.loads(res.stdout)["run"]
    assert run["dry_run"] is True
    assert run["total_steps"] == len(run["steps_done"]) == 8
    log = Path(run["log"]).read_text()
    assert log.count("==> [") == 8
    assert "[dry-run] bazel build --config=opt --copt=-march=" in log
    assert "builds register" in log
    assert run["wheel"].endswith(".whl")
    assert (out / "build.sh").is_file() and (out / "Dockerfile").is_file()


def test_run_failure_names_the_step_and_the_log(tmp_path):
    plan = make_plan("2.20.0", target="haswell")
    write_plan(plan, tmp_path)
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    # The wheel folder cannot be created under a regular file: step 7 fails for real.
    with pytest.raises(UserError, match=r"step 7 \(collect the wheel\).*build\.log"):
        run_plan(tmp_path, dry_run=True, env={"TFPERF_OUT_DIR": str(blocked / "wheels")})
    assert "==> [7/8]" in (tmp_path / "build.log").read_text()


@pytest.mark.parametrize("target", ["neoverse_v1", "neoverse_v2", "a64fx"])
def test_arm_plan_downloads_bazel_for_arm64(target):
    # Bazel names its Arm Linux binaries linux-arm64, whether archspec gives -march or -mcpu.
    plan = make_plan("2.20.0", target=target)
    assert '-linux-arm64"' in plan.script and "linux-x86_64" not in plan.script
    assert "linux-aarch64" not in plan.script


def test_plan_refuses_a_cpu_family_tensorflow_is_not_built_for(cli):
    res = cli("builds", "plan", "--target", "power9le")
    assert res.returncode == 2
    assert "ppc64le" in res.stderr and "Traceback" not in res.stderr


def test_printed_script_is_not_wrapped(cli):
    # Printed without --out, the script is meant to be copied: a long line must stay one line.
    res = cli("builds", "plan", "--target", "icelake", "--tensorflow", "2.20.0")
    assert res.returncode == 0, res.stderr
    plan = make_plan("2.20.0", target="icelake")
    longest = max(plan.script.splitlines(), key=len)
    assert len(longest) > 80
    assert longest in res.stdout.splitlines()
