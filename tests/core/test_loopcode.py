"""What a custom loop's answer asks the user to change: a diff against a step written the usual
way, in the tune's output, a profile's code and ``tfperf apply --format python`` (no TensorFlow;
``tests/worker/test_customloop.py`` runs the printed wrapper)."""

from __future__ import annotations

from tfperf.core.loopcode import describe_baseline, is_diff, loop_code_lines
from tfperf.profiles import render, train_code_lines

EAGER = {"step": "loop", "graph": False, "jit_compile": False, "policy": "float32",
         "unpacks": True}
GRAPH = {**EAGER, "graph": True}


def test_a_plain_python_step_gets_the_decorator_line():
    assert loop_code_lines({"graph": True}, EAGER) == ["+ @tf.function",
                                                       "  def train_step(x, y):"]


def test_xla_changes_the_decorator_the_user_wrote():
    assert loop_code_lines({"xla": "jit"}, GRAPH) == [
        "- @tf.function", "+ @tf.function(jit_compile=True)", "  def train_step(x, y):"]
    assert loop_code_lines({"xla": "off"}, {**GRAPH, "jit_compile": True}) == [
        "- @tf.function(jit_compile=True)", "+ @tf.function", "  def train_step(x, y):"]


def test_steps_per_call_print_the_whole_wrapper_and_the_loop_that_calls_it():
    lines = loop_code_lines({"steps_per_execution": 16}, GRAPH)
    assert lines[:5] == [
        "+ @tf.function",
        "+ def train_steps(iterator):  # 16 steps in one call",
        "+     for _ in tf.range(16 - 1):",
        "+         train_step(*next(iterator))",
        "+     return train_step(*next(iterator))",
    ]
    assert "- for x, y in dataset:" in lines and "+     loss = train_steps(iterator)" in lines
    whole = loop_code_lines({"steps_per_execution": 4}, {**GRAPH, "unpacks": False})
    assert "+         train_step(next(iterator))" in whole and "- for batch in dataset:" in whole


def test_precision_is_the_policy_line_before_the_model_is_built():
    assert loop_code_lines({"precision": "bf16"}, GRAPH)[0].startswith(
        '+ keras.mixed_precision.set_global_policy("mixed_bfloat16")')
    held = loop_code_lines({"precision": "float32"}, {**GRAPH, "policy": "mixed_bfloat16"})
    assert held[:2] == ['- keras.mixed_precision.set_global_policy("mixed_bfloat16")',
                        '+ keras.mixed_precision.set_global_policy("float32")  # before '
                        'building the model']


def test_a_profile_of_a_loop_prints_its_diff_as_comments_beside_its_environment():
    code = train_code_lines({"graph": True, "inter_threads": 1}, EAGER)
    assert is_diff(code) and not is_diff(train_code_lines({"steps_per_execution": 8}))
    profile = {"label": "graph=on,inter_threads=1", "config": {"graph": True, "inter_threads": 1},
               "code": code, "speedup": {"median": 16.0, "ci95": [15.0, 17.0]}}
    text = render(profile, "python")
    assert "os.environ['TF_NUM_INTEROP_THREADS'] = '1'" in text
    assert "# change your training loop (a diff against a step written the usual way):" in text
    assert "# + @tf.function" in text.splitlines()


def test_a_keras_model_left_eager_is_compiled_as_a_graph():
    assert train_code_lines({"steps_per_execution": 8}, {"graph": False}) == [
        "model.compile(..., run_eagerly=False, steps_per_execution=8)  # your optimizer and loss"]
    assert train_code_lines({"steps_per_execution": 8}, {"graph": True}) == [
        "model.compile(..., steps_per_execution=8)  # your optimizer and loss"]


def test_the_baseline_line_says_what_the_user_wrote():
    assert describe_baseline(EAGER) == "a plain Python step (eager), jit_compile=False, float32"
    assert describe_baseline({**GRAPH, "strategy": "MirroredStrategy (2 replicas)"}) == (
        "a tf.function step, jit_compile=False, float32, under MirroredStrategy (2 replicas)")
    assert describe_baseline({"jit_compile": True, "steps_per_execution": 8,
                              "policy": "float32"}) == (
        "jit_compile=True, steps_per_execution=8, float32")
