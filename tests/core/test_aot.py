"""Whether an install can compile ahead of time, read from files and PATH (no TensorFlow)."""

from __future__ import annotations

import subprocess
import sys

from tfperf.core.aot import xla_aot_facts
from tfperf.core.aot_loader import host_target

ZEN5 = "processor : 0\nflags : fpu sse4_2 ssse3 popcnt avx2 fma bmi1 bmi2 movbe f16c " + (
    "avx512f avx512bw avx512cd avx512dq avx512vl\n"
)


def test_the_target_is_the_highest_x86_64_level_the_flags_allow():
    assert host_target(ZEN5) == "x86-64-v4"
    assert host_target(ZEN5.replace(" avx512bw", "")) == "x86-64-v3"
    assert host_target("flags : sse4_2 ssse3 popcnt\n") == "x86-64-v2"
    assert host_target("flags : sse2\n") == "x86-64"


def test_each_missing_piece_is_named_with_its_fix(tmp_path):
    (tmp_path / "python").mkdir()
    environ = {"PATH": str(tmp_path), "CXX": "/nonexistent/g++"}
    facts = xla_aot_facts(tmp_path, environ)
    assert facts["available"] is False
    text = " | ".join(facts["missing"])
    for piece in (
        "aot_compile_cpu command",
        "xla_aot_runtime_src",
        "tensorflow/include",
        "CXX=/nonexistent/g++ is not found",
        "apt-get install binutils",
    ):
        assert piece in text, text
    assert "apt-get install g++" in " ".join(xla_aot_facts(tmp_path, {"PATH": ""})["missing"])


def test_this_install_is_probed_without_importing_tensorflow():
    code = (
        "import sys; from tfperf.core.aot import xla_aot_facts; facts = xla_aot_facts(); "
        "print(sorted(facts), facts['available'] == (not facts['missing']), "
        "'tensorflow' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split("\n")[0] == "['available', 'missing'] True False", done.stderr


def test_the_loader_refuses_a_library_whose_instructions_this_cpu_lacks():
    from tfperf.core.aot_loader import refusal

    meta = {"target_cpu": "znver4", "cpu_flags": ["avx2", "avx512f", "sse3"]}
    here = ZEN5.replace("flags : ", "flags : pni ")  # the kernel calls SSE3 "pni"
    assert refusal(meta, here) is None
    assert refusal(meta, here.replace(" avx512f", "")) == (
        "was compiled for znver4 CPUs and this one lacks avx512f"
    )
    # a model.json of an earlier tfperf names a level only
    assert refusal({"target_cpu": "x86-64-v4"}, ZEN5) is None
    assert "this one runs x86-64-v3" in refusal({"target_cpu": "x86-64-v4"},
                                                ZEN5.replace(" avx512bw", ""))


def test_the_target_is_this_cpu_s_own_llvm_name_with_the_level_as_the_fallback():
    from tfperf.core.aot import aot_target, runtime_marches
    from tfperf.core.aot_loader import host_flags, level_flags

    target = aot_target()
    assert target is not None and target.level == host_target()
    assert set(target.cpu_flags) <= host_flags()
    assert set(level_flags(target.level)) <= host_flags()
    assert runtime_marches(target)[-1].startswith("-march=x86-64")
    if target.named:
        assert not target.cpu.startswith("x86-64")
        assert runtime_marches(target)[0] == f"-march={target.cpu}"
