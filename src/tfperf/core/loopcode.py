"""What adopting a custom loop's answer takes: a diff against a step written the usual way.

Contract: :func:`loop_code_lines` ``(config, baseline) -> list[str]`` gives the lines of code a
training tune's answer changes in a custom loop (``baseline["step"] == "loop"``, what the
default's worker read back: whether the step was a ``tf.function``, with ``jit_compile``, and
whether it takes a batch's parts as arguments). Each line is a line of a unified diff: ``"+ "``
added, ``"- "`` removed, ``"  "`` context, against the loop the TensorFlow guide writes
(``@tf.function def train_step(x, y)`` called ``for x, y in dataset``). The steps-per-call
wrapper is printed whole (:data:`STEPS_LOOP`, the code the worker runs). Knobs set from outside
(threads, oneDNN, the allocator) are not lines here: ``tfperf run`` sets them.
:func:`is_diff` says whether a profile's code lines are such a diff.
:func:`describe_baseline` is the one line that says what the user's setup is (a tune's first
line, ``train.baseline`` in words).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

STEPS_LOOP = """\
@tf.function
def train_steps(iterator):  # {steps} steps in one call
    for _ in tf.range({steps} - 1):
        train_step({arg})
    return train_step({arg})
"""
"""The steps-per-call wrapper as the answer prints it; the worker runs the same loop
(:func:`tfperf.worker.loopstep.timed_function`)."""
MARKS = ("+ ", "- ", "  ")


def _decorator(graph: bool, jit: bool) -> str | None:
    if jit:
        return "@tf.function(jit_compile=True)"
    return "@tf.function" if graph else None


def loop_code_lines(config: Mapping[str, Any], baseline: Mapping[str, Any]) -> list[str]:
    """The diff lines of ``config``'s model-level knobs (module docstring)."""
    lines: list[str] = []
    precision = config.get("precision")
    policy = {"bf16": "mixed_bfloat16", "mixed_float16": "mixed_float16",
              "float32": "float32"}.get(str(precision))
    if policy == "float32":
        lines.append(f'- keras.mixed_precision.set_global_policy("{baseline.get("policy")}")')
    if policy:
        lines += [f'+ keras.mixed_precision.set_global_policy("{policy}")  # before building '
                  "the model", "  model = build_model()"]
    lines += _decorator_lines(config, baseline)
    steps = int(config.get("steps_per_execution") or 1)
    if steps > 1:
        lines += _steps_lines(steps, bool(baseline.get("unpacks", True)))
    if config.get("batch"):
        lines.append(f"+ dataset = dataset.rebatch({config['batch']})  # the learning rate may "
                     "need tuning for it")
    if config.get("input_pipeline") == "tuned":
        lines.append("+ dataset = dataset.prefetch(tf.data.AUTOTUNE)  # and num_parallel_calls="
                     "tf.data.AUTOTUNE on each map and interleave")
    return lines


def _decorator_lines(config: Mapping[str, Any], baseline: Mapping[str, Any]) -> list[str]:
    """The step's decorator, where the answer changes it."""
    graph, jit = bool(baseline.get("graph", True)), bool(baseline.get("jit_compile"))
    xla, steps = config.get("xla"), int(config.get("steps_per_execution") or 1)
    new_jit = jit if xla is None else xla == "jit"
    asked = config.get("graph")
    new_graph = (graph if asked is None else bool(asked)) or new_jit or steps > 1
    old, new = _decorator(graph, jit), _decorator(new_graph, new_jit)
    if old == new:
        return []
    signature = "  def train_step(x, y):" if baseline.get("unpacks", True) else \
        "  def train_step(batch):"
    return ([f"- {old}"] if old else []) + ([f"+ {new}"] if new else []) + [signature]


def _steps_lines(steps: int, unpacks: bool) -> list[str]:
    """The wrapper of ``steps`` steps a call, and the loop that calls it."""
    arg = "*next(iterator)" if unpacks else "next(iterator)"
    wrapper = STEPS_LOOP.format(steps=steps, arg=arg).splitlines()
    old_call = "train_step(x, y)" if unpacks else "train_step(batch)"
    old_for = "for x, y in dataset:" if unpacks else "for batch in dataset:"
    return [*(f"+ {line}".rstrip() for line in wrapper), "+",
            "+ iterator = iter(dataset.repeat())",
            f"- {old_for}", f"-     loss = {old_call}",
            f"+ for _ in range(steps // {steps}):", "+     loss = train_steps(iterator)"]


def is_diff(code: list[str]) -> bool:
    """Whether a profile's code lines are a diff (a custom loop's answer)."""
    return bool(code) and all(line[:2] in MARKS or line in ("+", "-") for line in code)


def describe_baseline(baseline: Mapping[str, Any]) -> str:
    """``jit_compile=True, steps_per_execution=8, float32`` for a Keras model (``run_eagerly``
    where it is); ``a plain Python step (eager), jit_compile=False, float32`` for a custom
    loop; the strategy after either."""
    policy = baseline.get("policy") or "float32"
    if baseline.get("step") == "loop":
        how = "a tf.function step" if baseline.get("graph", True) else \
            "a plain Python step (eager)"
        text = f"{how}, jit_compile={bool(baseline.get('jit_compile'))}, {policy}"
    else:
        eager = "" if baseline.get("graph", True) else "run_eagerly=True, "
        text = (f"{eager}jit_compile={baseline.get('jit_compile')}, steps_per_execution="
                f"{baseline.get('steps_per_execution')}, {policy}")
    strategy = baseline.get("strategy")
    return f"{text}, under {strategy}" if strategy else text
