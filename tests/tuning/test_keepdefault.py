"""tfperf.tuning.keepdefault: every "keep the default" says which case it is, from tune's rows."""

from __future__ import annotations

from tfperf.tuning.keepdefault import keep_default_why, rejection_advice


def row(label, status, time_ms=None, rel=None, reason=None, config=None, batch=1):
    return {
        "label": label,
        "status": status,
        "time_ms": time_ms,
        "batch": batch,
        "max_rel_error": rel,
        "reason": reason,
        "config": config or {},
    }


def test_faster_candidates_rejected_by_the_guard():
    rows = [
        row("runtime=litert", "measured", 9.8, 1e-7),
        row("runtime=litert-int8", "rejected", 2.0, 0.31, config={"runtime": "litert-int8"}),
        row("runtime=litert-fp16", "rejected", 5.0, 0.05, config={"runtime": "litert-fp16"}),
        row("xla=jit", "failed", reason="worker crashed with SIGSEGV"),
    ]
    why = keep_default_why(rows, default_ms=10.0)
    assert why["case"] == "rejected"
    assert (why["rejected"], why["failed"]) == (2, 1)
    assert why["best_rejected"] == {
        "label": "runtime=litert-int8",
        "speedup": 5.0,
        "max_rel_error": 0.31,
    }
    assert why["commonest_failure"] == "worker crashed with SIGSEGV"
    assert "runtime=litert-int8" in why["summary"] and "5.00x" in why["summary"]


def test_slower_rejections_leave_the_case_to_the_measured_ones():
    rows = [
        row("runtime=litert", "measured", 9.9, 1e-7),
        row("precision=bf16", "rejected", 12.0, 0.04, config={"precision": "bf16"}),
    ]
    why = keep_default_why(rows, default_ms=10.0)
    assert why["case"] == "none_faster"
    assert why["best_rejected"]["label"] == "precision=bf16"
    assert why["best_rejected"]["speedup"] < 1


def test_nothing_measured_and_failures_is_the_failed_case_with_the_commonest_reason():
    crash = "worker crashed with SIGSEGV inside the LiteRT converter"
    rows = [
        row("runtime=litert", "failed", reason=crash),
        row("runtime=litert-fp16", "failed", reason=crash),
        row("runtime=openvino-f32", "failed", reason="worker exceeded the 300 s timeout"),
    ]
    why = keep_default_why(rows, default_ms=10.0)
    assert why["case"] == "failed" and why["failed"] == 3 and why["best_rejected"] is None
    assert why["commonest_failure"] == crash
    assert crash in why["summary"]


def test_a_throughput_tune_compares_rejected_candidates_per_sample():
    # 16 samples in 40 ms beat 1 sample in 10 ms by 4x per sample, though the call is slower
    rows = [row("batch=16", "rejected", 40.0, 0.5, batch=16, config={"runtime": "litert-int8"})]
    assert keep_default_why(rows, 10.0, 1, per_sample=True)["best_rejected"]["speedup"] == 4.0
    assert keep_default_why(rows, 10.0, 1, per_sample=False)["case"] == "none_faster"


def test_a_family_rejected_by_a_wide_margin_is_explained():
    litert = [
        row(f"runtime={r}", "rejected", 1.0, 0.9, config={"runtime": r})
        for r in ("litert", "litert-fp16")
    ]
    openvino = {"runtime": "openvino-f32"}
    measured_ov = row("runtime=openvino-f32", "measured", 5.0, 1e-7, config=openvino)
    (advice,) = rejection_advice([*litert, measured_ov], rel_limit=0.02)
    assert advice.startswith("every LiteRT candidate was rejected by a wide margin")
    # close misses are not "a wide margin"
    near = [row("runtime=litert", "rejected", 1.0, 0.05, config={"runtime": "litert"})]
    assert rejection_advice(near, rel_limit=0.02) == []
    # every family far off: the outputs themselves are the suspects
    everything = [*litert, {**measured_ov, "status": "rejected", "max_rel_error": 1.2}]
    (advice,) = rejection_advice(everything, rel_limit=0.02)
    assert "every candidate was rejected by a wide margin" in advice
    assert "Dropout" in advice and "--tolerance abs=" in advice


def test_xla_aot_is_a_family_of_its_own_apart_from_xla_jit():
    aot = row("runtime=xla-aot", "rejected", 1.0, 0.9, config={"runtime": "xla-aot"})
    jit = row("xla=jit", "measured", 5.0, 1e-7, config={"xla": "jit"})
    (advice,) = rejection_advice([aot, jit], rel_limit=0.02)
    assert advice.startswith("every XLA AOT candidate was rejected by a wide margin")
    assert "compiled ahead of time" in advice
