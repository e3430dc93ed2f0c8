"""Profiles: saved and loaded, rendered for a shell and for Python, checked against the machine."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, require, run_cli
from tfperf.core.allocators import find_allocator
from tfperf.core.errors import UserError
from tfperf.machine.facts import collect_machine
from tfperf.profiles import (
    code_lines,
    load_profile,
    mismatch_warnings,
    profile_from_tune,
    render,
    save_profile,
    tf_distribution_version,
    train_code_lines,
)
from tfperf.tuning.space import to_config_dict


def _profile(config: dict, **changes) -> dict:
    """The profile a tune with this recommendation would save on this machine."""
    machine = collect_machine()
    doc = {
        "workload": {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1},
        "install": {"tf_version": "x"},
        "recommendation": {
            "label": "custom",
            "config": to_config_dict(config),
            "keep_default": False,
            "speedup": {"median": 1.5, "ci95": [1.4, 1.6]},
            "max_abs_error": 0.0,
            "adoption": "env",
            "artifact": None,
        },
    }
    profile = profile_from_tune(doc, machine)
    profile.update(changes)
    return profile


def test_save_and_load_round_trip(tmp_path):
    profile = _profile({"onednn": False})
    path = save_profile(profile, tmp_path / "sub" / "p.json")
    assert load_profile(path) == json.loads(path.read_text()) == profile
    assert profile["env"] == {"TF_ENABLE_ONEDNN_OPTS": "0"}
    assert profile["install"]["tf_distribution"] == tf_distribution_version()


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("{not json", "not a readable profile"),
        ('{"a": 1}', "not a tfperf profile"),
        ('{"format": "tfperf-profile", "version": 99}', "version 99"),
        ('{"format": "tfperf-profile", "version": 1, "config": "xla=jit"}', "damaged.*config"),
        ('{"format": "tfperf-profile", "version": 1, "code": "x", "machine": 1}', "code, machine"),
    ],
)
def test_bad_profiles_are_refused_with_one_sentence(tmp_path, content, match):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(UserError, match=match):
        load_profile(path)
    with pytest.raises(UserError, match="no profile"):
        load_profile(tmp_path / "missing.json")


def test_env_and_sh_formats_set_the_knobs_in_a_real_shell(tmp_path):
    jemalloc = find_allocator("jemalloc")
    require(jemalloc is not None, "libjemalloc2 is not installed")
    profile = _profile({"allocator": "jemalloc", "xla": "auto", "intra_threads": 1})
    env_text = render(profile, "env")
    pairs = dict(line.split("=", 1) for line in env_text.splitlines())
    assert pairs["LD_PRELOAD"] == jemalloc
    assert "--tf_xla_auto_jit=2" in pairs["TF_XLA_FLAGS"]
    assert "--tf_xla_cpu_global_jit" in pairs["TF_XLA_FLAGS"]
    assert pairs["TF_NUM_INTRAOP_THREADS"] == "1"
    script = tmp_path / "profile.sh"
    script.write_text(render(profile, "sh"))
    shown = subprocess.run(
        ["sh", "-c", f'. "{script}"; echo "$TF_XLA_FLAGS|$TF_NUM_INTRAOP_THREADS|$LD_PRELOAD"'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert shown == f"{pairs['TF_XLA_FLAGS']}|1|{jemalloc}"


def test_python_format_sets_the_environment_before_tensorflow(tmp_path):
    profile = _profile({"onednn": False, "inter_threads": 1, "xla": "jit"})
    snippet = render(profile, "python")
    assert "jit_compile=True" in snippet
    env_part = snippet.split("import tensorflow")[0]
    code = (
        env_part + "import os; print(os.environ['TF_ENABLE_ONEDNN_OPTS'], "
        "os.environ['TF_NUM_INTEROP_THREADS'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["0", "1"]


def test_a_keras_on_jax_profile_runs_the_command_on_jax_and_says_what_to_install(tmp_path):
    require(importlib.util.find_spec("jax") is not None, "jax is not installed")
    train = {"kind": "train", "path": "m:build", "format": "factory", "batch": 32}
    profile = _profile({"runtime": "keras-jax", "steps_per_execution": 4}, workload=train)
    profile["code"] = train_code_lines(profile["config"])
    assert "KERAS_BACKEND=jax" in render(profile, "env").splitlines()
    assert "export KERAS_BACKEND=jax" in render(profile, "sh")
    assert any('"jax[cpu]"' in line for line in profile["code"])
    assert any("steps_per_execution=4" in line for line in profile["code"])
    path = save_profile(profile, tmp_path / "p.json")
    # the variable reaches the command before it imports keras: Keras itself says JAX
    result = run_cli(
        "run", "--profile", str(path), "--", sys.executable, "-c",
        "import keras; print(keras.backend.backend())",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "jax"
    # what run does not do is said, and only that: the install (escaped, not eaten as markup)
    assert 'cannot do: pip install "jax[cpu]"  # Keras on JAX' in result.stderr
    assert "KERAS_BACKEND=jax before" not in result.stderr
    # the Python snippet stays Python, its install a comment
    compile(render(profile, "python"), "snippet.py", "exec")


def test_a_keras_on_jax_profile_with_one_cpu_runs_the_command_and_the_snippet_on_one(tmp_path):
    usable = sorted(os.sched_getaffinity(0))
    require(len(usable) >= 2, "one CPU: nothing to pin")
    train = {"kind": "train", "path": "m:build", "format": "factory", "batch": 32}
    profile = _profile({"runtime": "keras-jax", "runtime_threads": 1}, workload=train)
    profile["code"] = train_code_lines(profile["config"])
    path = save_profile(profile, tmp_path / "p.json")
    show = "import os; print(sorted(os.sched_getaffinity(0)))"
    result = run_cli("run", "--profile", str(path), "--", sys.executable, "-c", show)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == str(usable[:1])
    # the Python snippet pins before anything is imported that could start a thread
    snippet = render(profile, "python")
    before_imports = snippet.split("import keras")[0].split("import tensorflow")[0]
    out = subprocess.run(
        [sys.executable, "-c", before_imports + "\n" + show],
        capture_output=True, text=True, check=True,
    ).stdout
    assert out.strip() == str(usable[:1])


def test_a_float32_answer_sets_float32_in_place_of_the_factory_s_mixed_policy():
    train = {"kind": "train", "path": "m:build", "format": "factory", "batch": 32}
    profile = _profile({"precision": "float32", "steps_per_execution": 8}, workload=train)
    profile["code"] = train_code_lines(profile["config"])
    (line,) = [c for c in profile["code"] if "set_global_policy" in c]
    assert line.startswith('keras.mixed_precision.set_global_policy("float32")')
    assert "in place of the mixed policy your factory sets" in line
    compile(render(profile, "python"), "snippet.py", "exec")


def test_a_jax_user_s_answer_names_no_backend_and_a_tensorflow_user_s_names_the_jit_it_set():
    jax = {"runtime": "keras-jax", "runtime_threads": 1, "xla": "jit"}
    own = train_code_lines(jax, own_backend="jax")
    assert not any("KERAS_BACKEND" in line or "pip install" in line for line in own)
    assert any("jit_compile=True" in line for line in own)
    forced = "XLA on JAX: jit_compile=True set over your compile's False (it runs the step ...)"
    moved = train_code_lines({"runtime": "keras-jax"}, notes=[forced])
    assert any(line.startswith("# KERAS_BACKEND=jax") for line in moved)
    assert any(line.startswith("model.compile(..., jit_compile=True)") for line in moved)
    assert not any("jit_compile" in line for line in train_code_lines({"runtime": "keras-jax"}))


def test_mismatch_warnings_name_the_machine_and_the_install():
    machine = collect_machine()
    assert mismatch_warnings(_profile({}), machine) == []
    # A saved profile's machine is as profile_from_tune wrote it (the CPU model as a string);
    # edit only its fingerprint and CPU, as a profile carried to another machine would read.
    other = _profile({}, install={"tf_distribution": "1.0.0"})
    other["machine"] = {**other["machine"], "fingerprint": "000000", "cpu": "Other CPU"}
    warnings = mismatch_warnings(other, machine)
    assert len(warnings) == 2
    assert "Other CPU" in warnings[0] and "000000" in warnings[0] and "1.0.0" in warnings[1]


def test_run_warns_on_another_machine_and_still_runs(tmp_path):
    profile = _profile({"onednn": False})
    profile["machine"] = {**profile["machine"], "fingerprint": "000000"}
    path = save_profile(profile, tmp_path / "p.json")
    result = run_cli(
        "run",
        "--profile",
        str(path),
        "--",
        sys.executable,
        "-c",
        "import os, sys; sys.exit(int(os.environ['TF_ENABLE_ONEDNN_OPTS']) + 5)",
    )
    assert result.returncode == 5, result.stderr
    assert "000000" in result.stderr and "Traceback" not in result.stderr


def test_apply_command_prints_each_format(tmp_path):
    path = save_profile(_profile({"onednn": False}), tmp_path / "p.json")
    for fmt, expected in (
        ("env", "TF_ENABLE_ONEDNN_OPTS=0"),
        ("sh", "export TF_ENABLE_ONEDNN_OPTS=0"),
        ("python", "os.environ['TF_ENABLE_ONEDNN_OPTS'] = '0'"),
    ):
        result = run_cli("apply", str(path), "--format", fmt)
        assert result.returncode == 0, result.stderr
        assert expected in result.stdout
    missing = run_cli("apply", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "no profile" in missing.stderr


def test_python_format_of_a_litert_profile_runs_as_printed(tmp_path):
    model = tmp_path / "model.tflite"
    build = (
        "import tensorflow as tf\n"
        "f = tf.function(lambda x: x * 2.0, input_signature=[tf.TensorSpec([1, 3], tf.float32)])\n"
        "c = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()])\n"
        f"open({str(model)!r}, 'wb').write(c.convert())\n"
    )
    subprocess.run([sys.executable, "-c", build], capture_output=True, check=True)
    profile = _profile({"runtime": "litert", "runtime_threads": 1}, artifact=str(model))
    profile["code"] = code_lines(profile["config"], "keras", str(model))
    snippet = render(profile, "python")
    assert "import tensorflow" not in snippet  # a converted model needs LiteRT only
    check = snippet + "interpreter.allocate_tensors(); print(len(interpreter.get_input_details()))"
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"


OLD_PROFILE = {
    "format": "tfperf-profile",
    "version": 1,
    "created_at": "2026-11-20T10:00:00+00:00",
    "workload": {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1},
    "label": "runtime=openvino-f32,litert_threads=1",
    "keep_default": False,
    "config": {
        "precision": "fp32",
        "xla": "off",
        "onednn": None,
        "intra_threads": None,
        "inter_threads": None,
        "runtime": "openvino-f32",
        "litert_threads": 1,
        "allocator": "system",
        "env": {},
    },
    "objective": "latency",
    "batch": 1,
    "speedup": {"median": 2.0, "ci95": [1.9, 2.1]},
    "max_abs_error": 1e-6,
    "adoption": "model",
    "env": {},
    "code": ["compiled = openvino.Core().compile_model('model.xml', 'CPU')"],
    "artifact": None,
    "machine": {"fingerprint": "c8481ba989b2", "cpu": "AMD EPYC", "cores": 2},
    "install": {"tf_version": "2.21.0", "tf_distribution": "2.21.0"},
}
"""A profile as `tune --profile-out` wrote it while the runtime's thread count was named
litert_threads."""


def test_a_profile_with_the_former_thread_knob_name_reads_with_todays(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps(OLD_PROFILE, indent=2))
    profile = load_profile(path)
    assert profile["config"]["runtime_threads"] == 1
    assert "litert_threads" not in profile["config"]
    assert profile["label"] == "runtime=openvino-f32,runtime_threads=1"
    applied = run_cli("apply", str(path), "--format", "python")
    assert applied.returncode == 0, applied.stderr
    assert "runtime=openvino-f32,runtime_threads=1" in applied.stdout
    assert "litert_threads" not in applied.stdout
    ran = run_cli("run", "--profile", str(path), "--", sys.executable, "-c", "print('served')")
    assert ran.returncode == 0, ran.stderr
    assert "served" in ran.stdout


TF_SERVING_PROTOS = REPO / "tests" / "data" / "tfserving"
"""TensorFlow Serving's session_bundle_config.proto, vendored unchanged (see its README)."""

TF_DESCRIPTORS = """
import importlib.util, sys, types
from google.protobuf import descriptor_pb2

# The installed TensorFlow's generated modules, without starting TensorFlow itself (seconds):
# its package stands in as a plain namespace over the same folder.
package = types.ModuleType("tensorflow")
package.__path__ = list(importlib.util.find_spec("tensorflow").submodule_search_locations)
sys.modules["tensorflow"] = package
from tensorflow.core.protobuf import config_pb2, named_tensor_pb2

out, seen = descriptor_pb2.FileDescriptorSet(), set()
def add(fd):
    if fd.name not in seen:
        seen.add(fd.name)
        for dep in fd.dependencies:
            add(dep)
        fd.CopyToProto(out.file.add())
for module in (config_pb2, named_tensor_pb2):
    add(module.DESCRIPTOR)
open(sys.argv[1], "wb").write(out.SerializeToString())
"""
"""The .proto files TensorFlow Serving's file imports from TensorFlow, as the installed
TensorFlow compiled them (a FileDescriptorSet protoc reads with --descriptor_set_in)."""


@pytest.fixture(scope="module")
def batching_parameters(tmp_path_factory):
    """TensorFlow Serving's own ``BatchingParameters`` message class, compiled by protoc from
    the upstream file, to parse what the tf-serving format prints as TensorFlow Serving does."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from grpc_tools import protoc

    folder = tmp_path_factory.mktemp("tfserving")
    deps, compiled = folder / "tensorflow.pb", folder / "session_bundle_config.pb"
    subprocess.run([sys.executable, "-c", TF_DESCRIPTORS, str(deps)], check=True,
                   capture_output=True, timeout=300)
    well_known = Path(protoc.__file__).parent / "_proto"  # google/protobuf/wrappers.proto
    args = [f"--descriptor_set_in={deps}", f"--descriptor_set_out={compiled}",
            "--include_imports", f"-I{TF_SERVING_PROTOS}", f"-I{well_known}",
            "tensorflow_serving/servables/tensorflow/session_bundle_config.proto"]
    # protoc in a process of its own: run in a test process that has loaded TensorFlow's
    # protobuf runtime, grpc_tools' compiler crashed it (SIGSEGV)
    done = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", *args],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    files = descriptor_pb2.FileDescriptorSet.FromString(compiled.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for proto in files.file:
        pool.Add(proto)
    found = pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters")
    return message_factory.GetMessageClass(found)


def _serving_profile(config: dict, **layout) -> dict:
    serving = {"instances": 2, "threads": 1, "cores": [[0], [1]], "max_batch": 8,
               "max_delay_ms": 2.0, "max_qps_at_slo": 1000.0, "slo_ms": 20.0, **layout}
    profile = _profile(config, objective="server")
    profile["serving"] = profile_from_tune(
        {"recommendation": {"label": "x", "config": {}, "serving": serving}}, collect_machine()
    )["serving"]
    return profile


def test_a_tune_for_a_server_saves_its_layout_in_the_profile(tmp_path):
    profile = _serving_profile({})
    assert profile["serving"] == {
        "instances": 2, "threads": 1, "cores": [[0], [1]], "max_batch": 8, "max_delay_ms": 2.0,
        "streams": None, "hint": None, "max_qps_at_slo": 1000.0, "slo_ms": 20.0,
    }
    path = save_profile(profile, tmp_path / "p.json")
    assert load_profile(path)["serving"] == profile["serving"]
    assert _profile({})["serving"] is None


@pytest.mark.tf
def test_tf_serving_format_is_a_batching_parameters_file_with_each_instance_s_flags(
    batching_parameters,
):
    from google.protobuf import text_format

    text = render(_serving_profile({"inter_threads": 1}), "tf-serving")
    params = text_format.Parse(text, batching_parameters())
    assert params.max_batch_size.value == 8
    assert list(params.allowed_batch_sizes) == [1, 8]  # a lone request, or padded to 8
    assert params.batch_timeout_micros.value == 2000
    assert params.num_batch_threads.value == 1  # the instance ran one batch at a time
    # 1000 requests/s over 2 instances for 20 ms: 10 requests, 2 batches of 8
    assert params.max_enqueued_batches.value == 2
    assert params.HasField("enable_large_batch_splitting")
    assert not params.enable_large_batch_splitting.value and not params.pad_variable_length_inputs
    for pin, port in (("taskset -c 0", 8500), ("taskset -c 1", 8502)):
        assert f"#   {pin} tensorflow_model_server --port={port} --rest_api_port={port + 1}" in text
    for flag in ("--tensorflow_intra_op_parallelism=1", "--tensorflow_inter_op_parallelism=1",
                 "--enable_batching=true --batching_parameters_file=batching_parameters.txt"):
        assert text.count(flag) == 2


@pytest.mark.tf
def test_tf_serving_batch_sizes_count_rows_of_the_batch_dimension(batching_parameters):
    from google.protobuf import text_format

    # each request carries the model's 4 rows: 8 requests are 32 rows
    profile = _serving_profile({}, instances=1, cores=[], max_batch=8) | {"batch": 4}
    params = text_format.Parse(render(profile, "tf-serving"), batching_parameters())
    assert params.max_batch_size.value == 32
    assert list(params.allowed_batch_sizes) == [4, 32]
    # TensorFlow Serving's own rule: increasing, the last one max_batch_size
    sizes = list(params.allowed_batch_sizes)
    assert sizes == sorted(set(sizes)) and sizes[-1] == params.max_batch_size.value


def test_tf_serving_format_without_batching_leaves_it_off(tmp_path):
    text = render(_serving_profile({}, instances=1, cores=[], max_batch=1, max_delay_ms=0.0),
                  "tf-serving")
    assert "leave --enable_batching off" in text and "--enable_batching=true" not in text
    assert "taskset" not in text and "max_batch_size" not in text
    path = save_profile(_profile({"runtime": "litert"}), tmp_path / "p.json")
    refused = run_cli("apply", str(path), "--format", "tf-serving")
    assert refused.returncode == 2 and "TensorFlow Serving cannot run" in refused.stderr
