"""The knob space: what is tried where, what adopting a config takes (no TensorFlow)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tfperf.core.config import Config
from tfperf.core.errors import UserError
from tfperf.core.knobs import KNOBS, adoption, label, normalize
from tfperf.machine.facts import collect_machine
from tfperf.tuning.space import (
    Space,
    SpaceFacts,
    TrainBaseline,
    build_space,
    fit_training_space,
    machine_facts,
    split_batch,
    steps_ladder,
    to_config_dict,
)

FULL = SpaceFacts(
    cores=8,
    bf16=True,
    allocators={"tcmalloc": "/lib/libtcmalloc.so.4", "jemalloc": "/lib/libjemalloc.so.2"},
    openvino=True,
)

FULL_TFLITE = SpaceFacts(
    cores=8, bf16=True, allocators=FULL.allocators, openvino=True, model_format="tflite"
)


def _why(space: Space) -> dict[tuple[str, str], str]:
    """``space.unavailable`` as (knob, value) -> reason."""
    return {(u["knob"], u["value"]): u["reason"] for u in space.unavailable}


def test_full_space_crosses_knobs_only_with_the_runtimes_they_act_on():
    space = build_space(FULL)
    assert space.values["runtime"][0] == "tf"
    assert "openvino-bf16" in space.values["runtime"]
    assert space.values["intra_threads"] == (None, 1, 4, 8)
    points = space.points()
    assert points[0] == {}
    labels = [label(p) for p in points]
    assert len(labels) == len(set(labels))
    for p in points:
        runtime = p.get("runtime", "tf")
        if runtime != "tf":
            assert not {"onednn", "xla", "precision", "intra_threads", "inter_threads"} & set(p)
        else:
            assert "runtime_threads" not in p
    assert space.applicable("allocator", {"runtime": "litert"})
    assert space.applicable("allocator", {})
    assert not space.applicable("onednn", {"runtime": "litert"})
    assert space.neighbours({"runtime": "litert"}, "onednn") == []
    assert {label(c) for c in space.neighbours({}, "xla")} == {"xla=jit", "xla=auto"}


def test_each_runtime_tries_the_thread_counts_it_does_not_take_by_itself():
    # LiteRT's interpreter runs on one thread unless told, TensorFlow's pools on every CPU of
    # the affinity mask: trying those counts again would measure the default twice.
    space = build_space(replace(FULL, cores=2, schedulable=2))
    assert [label(c) for c in space.neighbours({"runtime": "litert"}, "runtime_threads")] == [
        "runtime=litert,runtime_threads=2"
    ]
    assert space.canonical({"runtime": "litert-int8", "runtime_threads": 1}) == {
        "runtime": "litert-int8"
    }
    assert [label(c) for c in space.neighbours({}, "intra_threads")] == ["intra_threads=1"]
    openvino = space.neighbours({"runtime": "openvino-f32"}, "runtime_threads")
    assert {c["runtime_threads"] for c in openvino} == {1, 2}  # OpenVINO picks its own count
    # Under a cgroup quota of 4 CPUs in an affinity of 16, TensorFlow's default is 16 threads,
    # so 4 (every CPU the quota gives) is worth a try; the steps between on a large machine.
    quota = build_space(replace(FULL, cores=4, schedulable=16))
    assert {c.get("intra_threads") for c in quota.neighbours({}, "intra_threads")} == {1, 2, 4}
    big = build_space(replace(FULL, cores=32, schedulable=32))
    assert big.values["runtime_threads"] == (None, 1, 8, 16, 32)


def test_openvino_bf16_only_where_the_cpu_has_bf16():
    # Elsewhere OpenVINO runs f32 under the bf16 hint (a duplicate of openvino-f32 under a
    # misleading name) or bf16 in software, far slower than f32.
    space = build_space(replace(FULL, bf16=False))
    assert "openvino-f32" in space.values["runtime"]
    assert "openvino-bf16" not in space.values["runtime"]
    why = _why(space)[("runtime", "openvino-bf16")]
    assert "runs f32" in why and "in software" in why
    assert "bf16" not in space.values["precision"]


def test_openvino_keeps_the_system_allocator():
    # OpenVINO's CPU plugin aborts under a preloaded tcmalloc/jemalloc: never cross them.
    space = build_space(FULL)
    assert not space.applicable("allocator", {"runtime": "openvino-f32"})
    assert space.neighbours({"runtime": "openvino-bf16"}, "allocator") == []
    assert space.neighbours({"runtime": "litert"}, "allocator") != []
    openvino = [p for p in space.points() if p.get("runtime", "").startswith("openvino")]
    assert openvino and not any("allocator" in p for p in openvino)
    assert normalize({"runtime": "openvino-f32", "allocator": "jemalloc"}) == {
        "runtime": "openvino-f32"
    }
    why = _why(space)
    assert "system allocator" in why[("allocator", "tcmalloc/jemalloc with OpenVINO")]
    without = build_space(SpaceFacts(cores=8, allocators=FULL.allocators, openvino=False))
    assert not [u for u in without.unavailable if "OpenVINO" in u["value"]]


def test_missing_pieces_are_listed_with_what_to_install():
    facts = SpaceFacts(
        cores=1,
        bf16=False,
        allocators={"tcmalloc": None, "jemalloc": "/lib/libjemalloc.so.2"},
        allocator_packages={"tcmalloc": "libtcmalloc-minimal4"},
        openvino=False,
    )
    space = build_space(facts)
    why = _why(space)
    assert "libtcmalloc-minimal4" in why[("allocator", "tcmalloc")]
    assert "tfperf[openvino]" in why[("runtime", "openvino-f32")]
    assert "AVX512_BF16" in why[("precision", "bf16")]
    assert space.values["allocator"] == ("system", "jemalloc")
    assert space.values["precision"] == ("fp32",)
    assert "intra_threads" not in space.knobs()  # one core: nothing to choose


def test_training_and_tflite_workloads_get_their_own_spaces():
    train = build_space(SpaceFacts(cores=2, openvino=True, model_format="factory", train=True))
    assert train.values["runtime"] == ("tf",)  # jax is not installed here
    assert train.values["xla"] == (None, "off", "jit")
    why = _why(train)
    assert "jit_compile" in why[("xla", "auto")]
    assert "training" in why[("runtime", "litert/openvino")]
    tflite = build_space(SpaceFacts(cores=2, bf16=True, model_format="tflite"))
    assert tflite.values["runtime"] == ("litert",)
    # a .tflite model always runs on LiteRT: naming it changes nothing
    assert tflite.points()[0] == {}
    assert all(p.get("runtime", "litert") == "litert" for p in tflite.points())
    only = build_space(SpaceFacts(cores=2, runtimes=("tf", "litert")))
    assert only.values["runtime"] == ("tf", "litert")


def test_a_tflite_model_gets_litert_knobs_from_its_default():
    # The default config ({}) of a .tflite model runs on LiteRT, not TensorFlow.
    space = build_space(FULL_TFLITE)
    assert space.default_runtime() == "litert"
    moves = [c for knob in space.knobs() for c in space.neighbours({}, knob)]
    assert {c.get("runtime_threads") for c in moves} >= {4, 8}  # 1 is its default
    assert {"runtime": "litert", "runtime_threads": 4} in moves
    # the allocator alone needs no runtime named: adopting it stays env only
    assert {"allocator": "tcmalloc"} in moves and adoption({"allocator": "tcmalloc"}) == "env"
    assert {label(c) for c in moves} <= {label(p) for p in space.points()}
    assert not {"onednn", "intra_threads", "inter_threads", "xla", "precision"} & {
        k for c in moves for k in c
    }
    assert space.applicable("runtime_threads", {})
    assert not space.applicable("onednn", {})
    # a TensorFlow model keeps TensorFlow as its default runtime
    assert build_space(FULL).applicable("onednn", {})
    assert not build_space(FULL).applicable("runtime_threads", {})
    # a TensorFlow model restricted to LiteRT still names it: {} is TensorFlow there
    only = build_space(SpaceFacts(cores=8, allocators=FULL.allocators, runtimes=("litert",)))
    assert only.neighbours({}, "allocator") == [
        {"runtime": "litert", "allocator": "tcmalloc"},
        {"runtime": "litert", "allocator": "jemalloc"},
    ]


def test_a_tflite_model_says_its_file_fixes_the_precision():
    # The CPU of FULL_TFLITE has AVX512_BF16: the reason bf16 is not tried is the format.
    why = _why(build_space(FULL_TFLITE))
    assert ".tflite" in why[("precision", "bf16")] and "CPU" not in why[("precision", "bf16")]


def test_a_keras_training_step_tries_keras_on_jax_with_the_knobs_that_act_there():
    own = SpaceFacts(cores=2, bf16=True, train=True, model_format="factory", jax=True)
    space = build_space(own)
    assert space.values["runtime"] == ("tf", "keras-jax")
    jax = {"runtime": "keras-jax"}
    # the step's own knobs act on JAX too, and its threads are the CPUs it runs on; XLA,
    # TensorFlow's pools and oneDNN do not act there
    assert {k for k in space.knobs() if space.applicable(k, jax)} == {
        "runtime", "steps_per_execution", "precision", "input_pipeline", "runtime_threads"}
    assert {"runtime": "keras-jax", "steps_per_execution": 4} in space.neighbours(
        jax, "steps_per_execution")
    # every CPU is what JAX runs on anyway: one CPU is the candidate
    assert space.neighbours(jax, "runtime_threads") == [{**jax, "runtime_threads": 1}]
    assert Config.from_dict(jax).worker_env({}) == {"KERAS_BACKEND": "jax"}
    assert adoption(jax) == "env" and adoption({**jax, "precision": "bf16"}) == "code"
    assert adoption({**jax, "runtime_threads": 1}) == "code"
    # one search visits TensorFlow's knobs or JAX's, never both: --quick counts TensorFlow's
    on_tf = {k for k in space.knobs() if space.applicable(k, {})}
    assert "runtime_threads" not in on_tf and space.most_knobs() == len(on_tf)
    why = _why(space)
    assert "compiled by XLA" in why[("xla", "jit/off with keras-jax")]
    # an answer that moves to JAX from one that named XLA does not name it there
    assert space.canonical({"runtime": "keras-jax", "xla": "off"}) == jax
    assert {"runtime": "keras-jax"} in space.runtime_step({"xla": "off"})
    other = build_space(replace(own, jax=False))
    assert other.values["runtime"] == ("tf",)
    assert "pip install 'tfperf[jax]'" in _why(other)[("runtime", "keras-jax")]


def test_a_user_on_jax_runs_the_default_there_and_is_offered_keras_on_tensorflow():
    own = SpaceFacts(cores=2, bf16=True, train=True, model_format="factory", jax=True,
                     keras_backend="jax", allocators={"tcmalloc": "/lib/libtcmalloc.so.4"})
    space = build_space(own)
    assert space.values["runtime"] == ("keras-jax", "keras-tf")
    # the default is the user's JAX: naming it changes nothing, and TensorFlow's own knobs
    # are not crossed with it; the step's knobs are, without naming the runtime
    assert space.canonical({"runtime": "keras-jax"}) == {}
    assert space.canonical({"runtime": "keras-jax", "steps_per_execution": 32}) == {
        "steps_per_execution": 32}
    assert {k for k in space.knobs() if space.applicable(k, {})} == {
        "runtime", "steps_per_execution", "precision", "input_pipeline", "runtime_threads",
        "allocator", "xla"}
    assert space.runtime_step({}) == [{"runtime": "keras-tf"}]
    # JAX's CPU set names the runtime: the worker pins only a config that runs on JAX
    assert space.neighbours({}, "runtime_threads") == [
        {"runtime": "keras-jax", "runtime_threads": 1}]
    on_jax = "with the default (KERAS_BACKEND=jax is your backend)"
    assert ("xla", f"jit/off {on_jax}") not in _why(space)
    assert "no oneDNN switch" in _why(space)[("intra_threads/inter_threads/onednn", on_jax)]
    # XLA is the user's own JAX step's knob: jit where it ran eagerly, never eager where it
    # was compiled; a candidate of JAX's threads changes the threads alone
    eager = fit_training_space(space, TrainBaseline(jit_compile=False), 0.01)
    assert eager.neighbours({}, "xla") == [{"xla": "jit"}]
    assert eager.neighbours({}, "runtime_threads") == [
        {"runtime": "keras-jax", "runtime_threads": 1}]
    compiled = fit_training_space(space, TrainBaseline(jit_compile=True), 0.01)
    assert compiled.neighbours({}, "xla") == []
    assert "eagerly, op by op" in _why(compiled)[("xla", "off")]
    # on TensorFlow every TensorFlow knob is crossed again, its threads at their own default
    tf = {"runtime": "keras-tf"}
    assert {"runtime": "keras-tf", "xla": "jit"} in space.neighbours(tf, "xla")
    assert space.applicable("onednn", tf) and space.applicable("allocator", tf)
    assert space.canonical({**tf, "intra_threads": 2}) == tf
    assert Config.from_dict(tf).worker_env({"KERAS_BACKEND": "jax"}) == {
        "KERAS_BACKEND": "tensorflow"}
    assert adoption(tf) == "env"


def test_adoption_is_the_hardest_part_of_a_config():
    assert adoption({}) == "env"
    assert adoption({"onednn": False, "allocator": "jemalloc", "intra_threads": 1}) == "env"
    assert adoption({"xla": "auto"}) == "env"
    assert adoption({"xla": "jit", "onednn": False}) == "code"
    assert adoption({"precision": "bf16"}) == "code"
    assert adoption({"runtime": "litert-int8", "allocator": "tcmalloc"}) == "model"


def test_configs_normalise_and_round_trip_through_config():
    messy = {"runtime": "litert", "onednn": False, "runtime_threads": 1, "allocator": "system"}
    assert normalize(messy) == {"runtime": "litert", "runtime_threads": 1}
    # a label names every knob given; tune names its configs after normalising them
    assert label(normalize(messy)) == "runtime=litert,runtime_threads=1"
    assert label(messy) == "onednn=off,runtime=litert,runtime_threads=1"
    assert label({"onednn": False}) == "onednn=off" == Config.parse(["onednn=off"]).label()
    assert label({}) == "default"
    full = to_config_dict({"xla": "jit", "intra_threads": 1})
    assert set(full) == {*KNOBS, "env"} - {"batch"}  # a latency config never names a batch
    config = Config.from_dict(full)
    assert config.xla == "jit" and config.intra_threads == 1
    assert config.worker_env({})["TF_NUM_INTRAOP_THREADS"] == "1"


def test_facts_of_this_machine():
    machine = collect_machine()
    facts = machine_facts(machine)
    assert facts.cores == machine["cores"]["usable"] >= 1
    assert facts.bf16 == ("AVX512_BF16" in machine["isa"] or "AMX_BF16" in machine["isa"])
    found = {k for k, v in machine["allocators_available"].items() if v}
    space = build_space(facts)
    assert set(space.values["allocator"]) == {"system", *found}
    try:
        import openvino  # noqa: F401

        has_openvino = True
    except ImportError:
        has_openvino = False
    assert ("openvino-f32" in space.values["runtime"]) == has_openvino


@pytest.mark.parametrize("knob", list(KNOBS))
def test_every_knob_says_how_it_is_applied_and_adopted(knob):
    info = KNOBS[knob]
    assert info.applied in ("env", "call", "model", "inputs")
    assert info.adoption in ("env", "code", "model")
    assert info.runtimes and info.help


def test_restrict_keeps_other_knobs_at_their_default():
    space = build_space(FULL).restrict(("runtime", "allocator"))
    assert space.knobs() == ["runtime", "allocator"]
    assert all(set(p) <= {"runtime", "allocator"} for p in space.points())
    with pytest.raises(UserError):
        build_space(FULL).restrict(("speed",))
    former = build_space(FULL).restrict(("runtime", "litert_threads"))  # --knobs, old scripts
    assert former.knobs() == build_space(FULL).restrict(("runtime", "runtime_threads")).knobs()


def test_the_batch_knob_exists_only_in_a_throughput_tune():
    latency = build_space(FULL)
    assert "batch" not in latency.knobs()
    assert not any("batch" in p for p in latency.points())
    throughput = build_space(
        SpaceFacts(cores=2, allocators=FULL.allocators, batch=4, batches=(1, 4, 16, 64))
    )
    # None is the workload's own batch (4): it is the default, not a value tried again
    assert throughput.values["batch"] == (None, 1, 16, 64)
    assert throughput.knobs()[0] == "batch"  # visited first: it holds the largest gain
    assert {label(c) for c in throughput.neighbours({}, "batch")} == {
        "batch=1",
        "batch=16",
        "batch=64",
    }
    # crossed with every runtime, LiteRT included (a converted model per batch size)
    assert {"runtime": "litert", "batch": 16} in throughput.points()
    assert (
        throughput.size() == 4 * build_space(SpaceFacts(cores=2, allocators=FULL.allocators)).size()
    )
    assert adoption({"batch": 16}) == "code"
    assert label({"batch": 16, "runtime": "litert"}) == "batch=16,runtime=litert"


def test_a_config_carries_its_batch_apart_from_what_the_worker_applies():
    assert split_batch({"batch": 16, "xla": "jit"}) == (16, to_config_dict({"xla": "jit"}))
    assert split_batch({"xla": "jit"})[0] is None
    assert to_config_dict({"batch": 16})["batch"] == 16


def test_dropping_batch_sizes_lists_them_as_not_tried():
    space = build_space(SpaceFacts(cores=2, batches=(1, 4, 16, 64)))
    capped = space.drop("batch", (16, 64, None), "too slow")
    assert capped.values["batch"] == (None, 4)  # the default is never dropped
    assert _why(capped)[("batch", "64")] == "too slow"
    assert space.values["batch"] == (None, 4, 16, 64)  # the original is left alone


def test_onednn_knob_tries_the_setting_tensorflow_does_not_choose_itself():
    # x86 builds turn oneDNN on only for CPUs with VNNI/BF16/AMX: on an AVX2-only CPU it is off
    # by default, so "onednn=off" would repeat the default and "onednn=on" is the candidate.
    avx2 = machine_facts({"cpu": {"machine": "x86_64"}, "isa": ["AVX", "AVX2", "FMA"]})
    vnni = machine_facts({"cpu": {"machine": "x86_64"}, "isa": ["AVX2", "AVX512F", "AVX512_VNNI"]})
    arm = machine_facts({"cpu": {"machine": "aarch64"}, "isa": []})
    assert not avx2.onednn_default and vnni.onednn_default and arm.onednn_default
    space = build_space(replace(FULL, onednn_default=False))
    assert space.values["onednn"] == (None, True)
    assert [label(c) for c in space.neighbours({}, "onednn")] == ["onednn=on"]
    assert "already TensorFlow's default" in _why(space)[("onednn", "off")]
    assert Config.from_dict({"onednn": True}).worker_env({})["TF_ENABLE_ONEDNN_OPTS"] == "1"
    assert build_space(FULL).values["onednn"] == (None, False)


def test_bf16_is_never_tried_with_onednn_off_and_the_space_says_why():
    # without oneDNN, TensorFlow's bf16 kernels are Eigen's emulation: 8x slower than fp32
    space = build_space(replace(FULL, bf16=True))
    assert space.neighbours({"precision": "bf16"}, "onednn") == []
    assert space.neighbours({"onednn": False}, "precision") == []
    assert [label(c) for c in space.neighbours({}, "onednn")] == ["onednn=off"]
    assert not any(c.get("precision") == "bf16" and c.get("onednn") is False
                   for c in space.points())
    assert "Eigen's emulated path" in _why(space)[("onednn", "off with precision=bf16")]
    # where the CPU has no bf16 there is nothing to exclude, nor to say
    plain = build_space(replace(FULL, bf16=False))
    assert not plain.conflicts and ("onednn", "off with precision=bf16") not in _why(plain)


def test_the_runtime_step_puts_each_litert_runtime_on_every_usable_core():
    two = build_space(SpaceFacts(cores=2, bf16=True)).runtime_step({})
    threads = {c.get("runtime"): c.get("runtime_threads") for c in two}
    assert {r for r, t in threads.items() if t == 2} == {r for r in threads if "litert" in r}
    assert all(t is None for r, t in threads.items() if "litert" not in r)
    one = build_space(SpaceFacts(cores=1, bf16=True)).runtime_step({})
    assert all("runtime_threads" not in c for c in one)
    # A thread count the incumbent already names is the one every runtime is tried with.
    named = build_space(SpaceFacts(cores=2, bf16=True, openvino=True)).runtime_step(
        {"runtime": "openvino-f32", "runtime_threads": 1}
    )
    assert named and all(c.get("runtime_threads") != 2 for c in named)


def test_xla_aot_is_tried_with_and_without_its_threads_where_the_install_compiles():
    space = build_space(replace(FULL, cores=2, schedulable=2, xla_aot_missing=()))
    assert space.values["runtime"][-1] == "xla-aot"
    # First on every core (compiled with XLA's multithreading), then the thread step tries
    # the single-threaded library, which is the runtime's own default.
    step = {c["runtime"]: c for c in space.runtime_step({})}
    assert step["xla-aot"] == {"runtime": "xla-aot", "runtime_threads": 2}
    fewer = space.neighbours(step["xla-aot"], "runtime_threads")
    assert {"runtime": "xla-aot"} in fewer
    assert space.canonical({"runtime": "xla-aot", "runtime_threads": 1}) == {"runtime": "xla-aot"}
    assert not space.applicable("xla", {"runtime": "xla-aot"})
    assert space.applicable("allocator", {"runtime": "xla-aot"})


def test_xla_aot_missing_pieces_are_listed_and_not_tried():
    space = build_space(replace(FULL, xla_aot_missing=("a C++ compiler (apt-get install g++)",)))
    assert "xla-aot" not in space.values["runtime"]
    assert "apt-get install g++" in _why(space)[("runtime", "xla-aot")]
    unchecked = build_space(FULL)  # facts that never asked: neither tried nor listed
    assert "xla-aot" not in unchecked.values["runtime"]
    assert ("runtime", "xla-aot") not in _why(unchecked)




def _own_training_space() -> Space:
    return build_space(SpaceFacts(cores=2, bf16=True, model_format="factory", train=True))


def test_a_training_candidate_is_only_ever_another_value_than_the_users_own():
    space = _own_training_space()
    jit_user = fit_training_space(space, TrainBaseline(jit_compile=True, steps_per_execution=8),
                                  0.002)
    assert jit_user.neighbours({}, "xla") == [{"xla": "off"}]  # XLA off is the candidate
    spe = [c["steps_per_execution"] for c in jit_user.neighbours({}, "steps_per_execution")]
    assert 8 not in spe and 1 in spe and max(spe) == 128
    plain = fit_training_space(space, TrainBaseline(), 0.004)
    assert plain.neighbours({}, "xla") == [{"xla": "jit"}]
    assert 1 not in [c["steps_per_execution"] for c in plain.neighbours({},
                                                                         "steps_per_execution")]
    assert jit_user.canonical({"xla": "jit", "steps_per_execution": 8}) == {}


def test_steps_per_call_follow_the_step_time_and_keep_a_call_under_half_a_second():
    assert steps_ladder(0.001) == (4, 32, 128)
    assert steps_ladder(0.048) == (4, 8)  # 8 x 48 ms < 0.5 s < 16 x 48 ms
    assert steps_ladder(0.2) == (2,)
    assert steps_ladder(0.6) == ()
    assert steps_ladder(0.6, own=8) == (1,)


def test_under_quick_a_call_of_several_steps_stays_under_its_shorter_cap():
    from tfperf.tuning.space import QUICK_MAX_CALL_S

    # a 28 ms CNN step: 8 steps a call (0.22 s) rather than 16 (0.45 s)
    assert steps_ladder(0.028, max_call_s=QUICK_MAX_CALL_S) == (4, 8)
    assert steps_ladder(0.028) == (4, 16)
    quick = fit_training_space(_own_training_space(), TrainBaseline(), 0.028, QUICK_MAX_CALL_S)
    assert quick.values["steps_per_execution"] == (None, 4, 8)
    # the evaluator of a --quick tune fits its space so, from the default's measured steps
    from tfperf.tuning.options import TuneOptions
    from tfperf.tuning.traintune import TrainEvaluator

    for is_quick, top in ((True, 8), (False, 16)):
        evaluator = TrainEvaluator({"kind": "train", "path": "m.py", "batch": 8},
                                   TuneOptions(quick=is_quick))
        evaluator.default_ready = {"warmup": {"samples_s": [0.028] * 5}}
        fitted = evaluator.fit_space(_own_training_space())
        assert max(fitted.values["steps_per_execution"][1:]) == top


def test_a_factory_that_gives_arrays_has_no_input_pipeline_to_tune():
    assert _own_training_space().values["input_pipeline"] == (None, "tuned")
    space = fit_training_space(_own_training_space(), TrainBaseline(data="arrays"), 0.01)
    assert space.values["input_pipeline"] == (None,)
    assert "Keras' fit builds their pipeline" in _why(space)[("input_pipeline", "tuned")]
    kept = fit_training_space(_own_training_space(), TrainBaseline(data="dataset"), 0.01)
    assert kept.values["input_pipeline"] == (None, "tuned")


def test_a_factory_that_sets_a_mixed_policy_has_float32_tried_in_its_place():
    space = fit_training_space(_own_training_space(), TrainBaseline(
        policy="mixed_bfloat16", policy_source="factory"), 0.01)
    assert space.values["precision"] == ("fp32", "float32")
    assert "float32 is tried in its place" in _why(space)[("precision", "bf16")]
    # a policy of its own that is no mixed one is the factory's: nothing is tried
    own = fit_training_space(_own_training_space(), TrainBaseline(
        policy="float64", policy_source="factory"), 0.01)
    assert own.values["precision"] == ("fp32",)
    assert "your factory sets the policy (float64)" in _why(own)[("precision", "float32")]
    # where tfperf set the policy, float32 is the default itself
    plain = fit_training_space(_own_training_space(), TrainBaseline(), 0.01)
    assert "float32" not in plain.values["precision"] and "bf16" in plain.values["precision"]
    # --knobs without precision: float32 is not brought back
    chosen = fit_training_space(_own_training_space().restrict(("steps_per_execution",)),
                                TrainBaseline(policy="mixed_bfloat16", policy_source="factory"),
                                0.01)
    assert chosen.values["precision"] == ("fp32",)


@pytest.mark.parametrize(("data", "why"), [
    ("arrays", "your factory gives arrays, and Keras' fit builds their pipeline"),
    ("pydataset", "your factory gives a keras.utils.PyDataset, whose own settings are its "
                  "workers, use_multiprocessing and max_queue_size"),
])
def test_a_pipeline_that_is_not_the_users_tf_data_is_not_tuned_and_says_why(data, why):
    facts = SpaceFacts(cores=2, bf16=True, jax=True, model_format="factory", train=True)
    own = fit_training_space(build_space(facts), TrainBaseline(), 0.002)
    assert own.values["input_pipeline"] == (None, "tuned")
    given = fit_training_space(build_space(facts), TrainBaseline(data=data), 0.002)
    assert given.values["input_pipeline"] == (None,)
    assert _why(given)[("input_pipeline", "tuned")] == f"not tried: {why}" + (
        " (prefetch included)" if data == "arrays" else "")
