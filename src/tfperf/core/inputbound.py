"""The input-bound verdict: TensorFlow profiler's thresholds applied to a measured input share.

Contract: :func:`verdict` maps the share of step time spent waiting for input (0..1) to one of
``"highly_input_bound"`` (>= 20%), ``"moderately_input_bound"`` (>= 5%) or
``"not_input_bound"``; ``None`` when the share is unknown. The thresholds are those of
TensorFlow's input-pipeline analyser (``kHighlyInfeedBoundThresholdInPercent = 20`` and
``kModeratelyInfeedBoundThresholdInPercent = 5`` in
``tensorflow/core/profiler/convert/op_stats_to_input_pipeline_analysis.cc``). :func:`classify`
turns a mean GPU utilisation and that verdict into ``"gpu_bound"``, ``"cpu_bound"``,
``"mixed"`` or ``"input_bound"``. Shared by the pipeline's worker, its parent and the Keras
callback that runs in the user's process; no TensorFlow here.
"""

from __future__ import annotations

HIGHLY = 0.20
"""A share of step time waiting for input at or above this is highly input-bound."""
MODERATELY = 0.05
"""A share at or above this (and below :data:`HIGHLY`) is moderately input-bound."""
BUSY = 80.0
"""Mean utilisation (percent) at or above which the GPU sets the pace."""
IDLE = 50.0
"""Mean utilisation below which the GPU waits for the host."""

SENTENCES = {
    "highly_input_bound": "highly input-bound: fix the input pipeline first",
    "moderately_input_bound": "moderately input-bound: both the input pipeline and the step matter",
    "not_input_bound": "not input-bound: the training step itself sets the pace",
}


def verdict(input_share: float | None) -> str | None:
    """The verdict for ``input_share`` (a fraction of step time), ``None`` when unknown."""
    if input_share is None:
        return None
    if input_share >= HIGHLY:
        return "highly_input_bound"
    if input_share >= MODERATELY:
        return "moderately_input_bound"
    return "not_input_bound"


def input_share(step_s: float, compute_s: float) -> float:
    """Share of a real step (``step_s``) not explained by the compute-only step, in [0, 1]."""
    if step_s <= 0:
        return 0.0
    return min(1.0, max(0.0, 1.0 - compute_s / step_s))


def one_line(share: float | None, name: str | None) -> str:
    """One human sentence for a verdict, e.g. ``"38% of step time waits for input: ..."``."""
    if share is None or name is None:
        return "input share unknown: time a training step (return a model) to get a verdict"
    return f"{share:.0%} of step time waits for input: {SENTENCES[name]}"


def classify(mean_util: float | None, input_verdict: str | None) -> str | None:
    """``"input_bound"`` / ``"gpu_bound"`` / ``"cpu_bound"`` (host work other than input)."""
    if input_verdict == "highly_input_bound":
        return "input_bound"
    if mean_util is None:
        return None
    return "gpu_bound" if mean_util >= BUSY else "cpu_bound" if mean_util < IDLE else "mixed"
