"""The answer of ``tfperf pipeline``: never "keep the pipeline" while a fix went unmeasured."""

from __future__ import annotations

from tfperf.input_pipeline.answer import best_fix, headline

STAGES = [
    {
        "stage": "from_tensor_slices",
        "batches_per_s": 900.0,
        "added_ms_per_batch": 1.1,
        "bounding": False,
        "python_code": False,
    },
    {
        "stage": "map(augment)",
        "batches_per_s": 30.0,
        "added_ms_per_batch": 32.2,
        "bounding": True,
        "python_code": True,
    },
]
SAME = {
    "name": "prefetch",
    "change": "ds = ds.prefetch(tf.data.AUTOTUNE)",
    "measured": True,
    "speedup": 1.01,
    "ci95": [0.97, 1.05],
    "verdict": "same",
}
ADVICE = [
    {
        "name": "batch_before_map",
        "change": "ds = ds.batch(n).map(...)",
        "reason": "runs Python",
        "stage": "map(augment)",
    },
    {
        "name": "parallel_map",
        "change": "num_parallel_calls",
        "reason": "the GIL",
        "stage": "map(augment)",
    },
]


def _doc(measured: list[dict], advice: list[dict], rounds: int = 6) -> dict:
    doc = {
        "verdict": "highly_input_bound",
        "input_share": 0.7,
        "stages": STAGES,
        "fixes": measured,
        "rounds": rounds,
        "best_fix": best_fix(measured, advice),
    }
    doc["best_fix"]["headline"] = headline(doc)
    return doc


def test_unmeasured_fixes_replace_keep_the_pipeline() -> None:
    best = _doc([SAME], ADVICE)["best_fix"]
    assert best["name"] is None
    assert "keep" not in best["change"].lower() and "keep" not in best["headline"].lower()
    assert best["unmeasured"] == [
        {
            "name": "batch_before_map",
            "change": "ds = ds.batch(n).map(...)",
            "why_not_measured": "runs Python",
            "stage": "map(augment)",
        },
        {
            "name": "parallel_map",
            "change": "num_parallel_calls",
            "why_not_measured": "the GIL",
            "stage": "map(augment)",
        },
    ]
    assert "batch_before_map" in best["change"] and "ds.batch(n)" in best["change"]
    text = best["headline"]
    assert "map(augment) bounds throughput: it adds 32.2 ms per batch, 97%" in text
    assert "runs Python" in text and "GIL" in text
    assert "prefetch 1.01x" in text and "none significantly faster" in text
    assert text.index("1. batch_before_map") < text.index("2. parallel_map")


def test_keep_only_when_nothing_went_unmeasured_and_rounds_suffice() -> None:
    assert "Keep the pipeline as it is" in _doc([SAME], [])["best_fix"]["headline"]
    few = _doc([SAME], [], rounds=2)["best_fix"]["headline"]
    assert "Keep the pipeline" not in few and "--rounds 6" in few


def test_a_measured_winner_is_named_with_what_went_unmeasured() -> None:
    win = {
        **SAME,
        "name": "cache",
        "change": "ds = ds.cache()",
        "speedup": 1.8,
        "ci95": [1.5, 2.1],
        "verdict": "faster",
    }
    best = _doc([SAME, win], ADVICE)["best_fix"]
    assert best["name"] == "cache" and best["change"] == "ds = ds.cache()"
    assert "best: cache, 1.80x (95% CI 1.50..2.10)" in best["headline"]
    assert [u["name"] for u in best["unmeasured"]] == ["batch_before_map", "parallel_map"]
