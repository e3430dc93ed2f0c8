"""Config: --set/--env parsing, labels, the dict round trip and the worker env it implies."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import require
from tfperf.core.allocators import find_allocator
from tfperf.core.config import XLA_AUTO_FLAGS, Config
from tfperf.core.errors import UserError
from tfperf.core.knobs import PRECISIONS, RUNTIMES, label


def test_parse_reads_every_kind_of_knob():
    cfg = Config.parse(
        ["onednn=off", "intra_threads=2", "inter-threads=1", "xla=jit", "runtime=litert"],
        ["OMP_NUM_THREADS=1", "EMPTY="],
    )
    assert cfg.onednn is False
    assert (cfg.intra_threads, cfg.inter_threads) == (2, 1)
    assert cfg.xla == "jit" and cfg.runtime == "litert"
    assert dict(cfg.env) == {"OMP_NUM_THREADS": "1", "EMPTY": ""}


@pytest.mark.parametrize(
    ("sets", "envs", "needle"),
    [
        (["bogus=1"], [], "use one of"),
        (["onednn=maybe"], [], "on, off or default"),
        (["intra_threads=0"], [], ">= 1"),
        (["xla=fast"], [], "off, jit, auto"),
        (["allocator=mimalloc"], [], "system, tcmalloc, jemalloc"),
        (["onednn"], [], "KEY=VALUE"),
        ([], ["1BAD=x"], "not an environment variable name"),
    ],
)
def test_bad_input_is_one_sentence_naming_valid_values(sets, envs, needle):
    with pytest.raises(UserError) as err:
        Config.parse(sets, envs)
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_every_runtime_the_worker_builds_parses(runtime):
    assert Config.parse([f"runtime={runtime.upper()}"], []).runtime == runtime


@pytest.mark.parametrize("precision", PRECISIONS)
def test_every_precision_the_worker_builds_parses(precision):
    assert Config.parse([f"precision={precision}"], []).precision == precision


@pytest.mark.parametrize(("key", "value"), [("precision", "int8"), ("precision", "fp16")])
def test_values_no_worker_builds_are_refused_naming_the_ones_it_does(key, value):
    with pytest.raises(UserError) as err:
        Config.parse([f"{key}={value}"], [])
    assert ", ".join(PRECISIONS) in str(err.value)


def test_config_imports_neither_tensorflow_nor_numpy():
    code = (
        "import sys, tfperf.core.config; "
        "print(sorted(m for m in ('tensorflow', 'keras', 'numpy') if m in sys.modules))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "[]"


def test_unknown_knob_error_lists_the_valid_keys():
    with pytest.raises(UserError) as err:
        Config.parse(["threads=2"], [])
    for key in ("onednn", "intra_threads", "allocator", "xla"):
        assert key in str(err.value)


def test_labels_name_the_changes():
    assert Config().label() == "default"
    assert Config.parse(["onednn=default"], []).label() == "default"
    assert Config.parse(["onednn=off"], []).label() == "onednn=off"
    label = Config.parse(["xla=jit", "intra_threads=2"], ["A=1"]).label()
    assert label == "xla=jit,intra_threads=2,env:A=1"  # the knob table's order, as tune names them


def test_the_runtime_thread_count_is_read_under_its_former_name_too():
    # It was litert_threads until it also set OpenVINO's count: scripts, profiles and stored
    # runs written then keep working, and everything reads back under today's name.
    assert Config.parse(["runtime=openvino-f32", "litert_threads=2"]) == Config.parse(
        ["runtime=openvino-f32", "runtime_threads=2"]
    )
    cfg = Config.parse(["runtime=openvino-f32", "litert-threads=1"])
    assert cfg.label() == "runtime=openvino-f32,runtime_threads=1"
    stored = {"runtime": "litert", "litert_threads": 2, "env": {}}
    assert Config.from_dict(stored).runtime_threads == 2
    assert "litert_threads" not in Config.from_dict(stored).to_dict()
    both = {"runtime": "litert", "litert_threads": 2, "runtime_threads": 4}
    assert Config.from_dict(both).runtime_threads == 4  # today's name wins
    assert label({"runtime": "litert", "litert_threads": 2}) == "runtime=litert,runtime_threads=2"


def test_round_trip_keeps_unknown_keys():
    data = Config.parse(["onednn=on"], ["K=V"]).to_dict()
    data["future_knob"] = {"level": 3}
    cfg = Config.from_dict(data)
    assert cfg.extra == {"future_knob": {"level": 3}}
    assert cfg.to_dict() == data
    assert Config.from_dict(cfg.to_dict()) == cfg
    assert hash(Config.from_dict(cfg.to_dict())) == hash(cfg)
    assert "future_knob" in cfg.label()


def test_worker_env_applies_env_knobs():
    cfg = Config.parse(["onednn=off", "xla=auto", "intra_threads=3", "inter_threads=2"], ["X=1"])
    env = cfg.worker_env({"TF_XLA_FLAGS": "--tf_xla_clustering_debug", "PATH": "/bin"})
    assert env["TF_ENABLE_ONEDNN_OPTS"] == "0"
    assert env["TF_XLA_FLAGS"] == f"--tf_xla_clustering_debug {XLA_AUTO_FLAGS}"
    assert "--tf_xla_auto_jit=2" in env["TF_XLA_FLAGS"]
    assert "--tf_xla_cpu_global_jit" in env["TF_XLA_FLAGS"]
    assert env["TF_NUM_INTRAOP_THREADS"] == "3" and env["TF_NUM_INTEROP_THREADS"] == "2"
    assert env["X"] == "1" and env["PATH"] == "/bin"
    assert "TF_ENABLE_ONEDNN_OPTS" not in Config().worker_env({})
    assert Config.parse(["onednn=on"], []).worker_env({})["TF_ENABLE_ONEDNN_OPTS"] == "1"


def test_keras_on_jax_with_runtime_threads_runs_on_that_many_of_the_usable_cpus():
    jax = Config.parse(["runtime=keras-jax", "runtime_threads=2"])
    assert jax.pinned_cpus([7, 3, 5]) == (3, 5)
    # no other runtime is pinned by its thread count, nor JAX without one
    assert Config.parse(["runtime=litert", "runtime_threads=2"]).pinned_cpus([0, 1]) is None
    assert Config.parse(["runtime=keras-jax"]).pinned_cpus([0, 1]) is None
    with pytest.raises(UserError, match="may use only 2: set at most 2"):
        Config.parse(["runtime=keras-jax", "runtime_threads=3"]).pinned_cpus([0, 1])


def test_env_entries_override_knobs():
    env = Config.parse(["onednn=off"], ["TF_ENABLE_ONEDNN_OPTS=1"]).worker_env({})
    assert env["TF_ENABLE_ONEDNN_OPTS"] == "1"


def test_allocator_knob_preloads_the_library():
    path = find_allocator("jemalloc")
    require(path is not None, "libjemalloc2 is not installed")
    env = Config.parse(["allocator=jemalloc"], []).worker_env({"LD_PRELOAD": "/x/libfoo.so"})
    assert env["LD_PRELOAD"].split(":") == [path, "/x/libfoo.so"]
