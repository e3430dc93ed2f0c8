"""A custom training loop in the worker (``tfperf.worker.customloop``), in this process, with real
TensorFlow, on loops written as users write them (``tests/models/loop_factories.py``).

Each configuration runs the user's step in the form its knobs ask (eager, a graph, XLA, N steps
a call); the guard restarts from the same variables every time and records each step's own
losses; what the user got wrong is one sentence.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from tfperf.core.errors import UserError
from tfperf.core.loopcode import loop_code_lines
from tfperf.core.workloads import SEED
from tfperf.worker.fingerprint import seed_everything
from tfperf.worker.training import train_prepared

pytestmark = [pytest.mark.tf]

FACTORIES = str(Path(__file__).resolve().parent.parent / "models")


def loop(name: str, **extra) -> dict:
    return {"kind": "train", "path": f"loop_factories:{name}", "format": "factory",
            "search_path": FACTORIES, "guard_steps": 50, **extra}


_LEFT_FOR_EXIT: list[dict] = []
"""The module's prepared loops, never deleted before the test process ends (as the worker
leaves its session, ``tfperf.worker.serve``): deleting one waits for tf.data's autotune thread
to wake, whose period doubles up to 60 s, and held this module's teardown 41 to 84 s on CI;
at the process's exit nothing waits for it."""


def _kept(prepared: dict) -> dict:
    _LEFT_FOR_EXIT.append(prepared)
    return prepared


@pytest.fixture(scope="module")
def eager() -> dict:
    """The plain Python step as written, under tf.function, and 8 steps a call with XLA."""
    return _kept({"default": train_prepared(loop("eager_regression"), {}),
                  "graph": train_prepared(loop("eager_regression"), {"graph": True}),
                  "steps": train_prepared(loop("eager_regression"),
                                          {"steps_per_execution": 8, "xla": "jit"})})


def test_a_plain_python_step_runs_as_written_and_as_a_graph_and_learns_the_same(eager):
    default, graph, steps = eager["default"], eager["graph"], eager["steps"]
    assert default.train["baseline"]["step"] == "loop"
    assert default.train["baseline"]["graph"] is False  # read back: a plain Python function
    assert any("runs eagerly" in n for n in default.notes)
    assert any("under tf.function" in n for n in graph.notes)
    assert steps.train["steps_per_call"] == 8 and steps.batch == 8 * 32
    for _ in range(3):
        for prepared in eager.values():
            prepared.call()
    losses = {name: p.outputs()[0] for name, p in eager.items()}
    assert losses["default"].shape == (50, 1)
    assert losses["default"][-5:].mean() < 0.2 * losses["default"][:5].mean()
    # every form trains the same step from the same start: the same 50 losses
    np.testing.assert_allclose(losses["graph"], losses["default"], rtol=1e-4)
    np.testing.assert_allclose(losses["steps"], losses["default"], rtol=1e-3)
    assert default.fingerprint == graph.fingerprint == steps.fingerprint


def test_the_printed_steps_per_call_wrapper_runs_the_steps_the_worker_runs(eager, tmp_path):
    baseline = eager["default"].train["baseline"]
    lines = loop_code_lines({"steps_per_execution": 8}, baseline)
    wrapper = [line[2:] for line in lines if line.startswith("+ ")]
    wrapper = wrapper[:wrapper.index("iterator = iter(dataset.repeat())")]
    (tmp_path / "printed.py").write_text("import tensorflow as tf\n\n" + "\n".join(wrapper))
    spec = importlib.util.spec_from_file_location("printed", tmp_path / "printed.py")
    printed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(printed)
    sys.path.insert(0, FACTORIES)
    try:
        import loop_factories
    finally:
        sys.path.remove(FACTORIES)
    seed_everything(SEED)  # as the worker does before it calls the factory
    printed.train_step, dataset = loop_factories.eager_regression()
    iterator = iter(dataset.repeat())
    got = [float(printed.train_steps(iterator)) for _ in range(3)]
    guard = eager["steps"].outputs()[0][:, 0]  # the worker's 8-step calls, each step recorded
    np.testing.assert_allclose(got, guard[[7, 15, 23]], rtol=1e-4)


@pytest.fixture(scope="module")
def dcgan() -> dict:
    return _kept({"graph": train_prepared(loop("dcgan"), {}),
                  "steps": train_prepared(loop("dcgan"), {"steps_per_execution": 4})})


def test_a_dcgan_loop_restarts_both_models_and_optimizers_for_every_guard(dcgan):
    graph, steps = dcgan["graph"], dcgan["steps"]
    assert graph.train["loss_keys"] == ["d_loss", "g_loss"]
    assert graph.train["baseline"]["graph"] is True
    first = graph.outputs()
    for _ in range(5):  # steps that move both models and both Adam optimizers' slots
        graph.call()
    again = graph.outputs()
    assert first[0].shape == (50, 2) and list(first[3]) == ["d_loss", "g_loss"]
    np.testing.assert_array_equal(first[0], again[0])  # the same noise from the same start
    # 4 steps a call draw the same noise here (tf.random.normal seeded again for each guard)
    np.testing.assert_allclose(steps.outputs()[0], first[0], rtol=1e-3, atol=1e-4)
    d_loss = first[0][:, 0]
    assert d_loss[-10:].mean() < d_loss[:10].mean()  # the discriminator learns
    # the fingerprint is of the initial values of every variable the step trained: both
    # models' weights and both optimizers' state
    assert graph.fingerprint["weights"]["count"] >= 7 + 2 * 7
    assert graph.fingerprint == steps.fingerprint


def test_a_step_taking_x_y_and_sample_weight_gets_the_three_parts():
    prepared = train_prepared(loop("weighted_step"), {"xla": "jit"})
    assert prepared.train["baseline"]["unpacks"] is True
    losses = prepared.outputs()[0][:, 0]
    assert np.isfinite(losses).all() and losses[-5:].mean() < 0.1 * losses[:5].mean()


def test_a_contrastive_loop_is_guarded_on_its_loss_or_on_the_keys_named():
    # its dict holds a loss and the views' alignment, which rises as it learns: as with
    # fit's logs, the guard judges what is named a loss unless told otherwise
    own = train_prepared(loop("contrastive"), {})
    assert own.train["loss_keys"] == ["contrastive_loss"]
    named = train_prepared(loop("contrastive", loss_keys=["contrastive_loss", "alignment"]), {})
    assert named.train["loss_keys"] == ["contrastive_loss", "alignment"]
    assert named.outputs()[0].shape == (50, 2)
    # run eagerly, its noise is drawn from TensorFlow's seed set again for each guard
    eager = train_prepared(loop("contrastive"), {"graph": False})
    first = eager.outputs()[0]
    eager.call()
    np.testing.assert_array_equal(eager.outputs()[0], first)
    with pytest.raises(UserError, match=r"--loss-key accuracy is not among .*contrastive_loss"):
        train_prepared(loop("contrastive", loss_keys=["accuracy"]), {})


def test_an_unseeded_factory_is_made_the_same_by_the_defaults_initial_values(tmp_path):
    state = str(tmp_path / "initial.npz")
    default = train_prepared(loop("unseeded_weights", weights_out=state), {})
    alone = train_prepared(loop("unseeded_weights"), {"xla": "jit"})
    handed = train_prepared(loop("unseeded_weights", state_in=state), {"xla": "jit"})
    # a private np.random.default_rng() draws other weights in every call of the factory
    assert alone.fingerprint["weights"] != default.fingerprint["weights"]
    assert handed.fingerprint == default.fingerprint
    np.testing.assert_allclose(handed.outputs()[0], default.outputs()[0], rtol=1e-4)


def test_a_list_of_batches_is_read_as_a_dataset():
    prepared = train_prepared(loop("list_of_batches"), {})
    assert any("a list of 16 batches" in n for n in prepared.notes)
    assert prepared.outputs()[0].shape == (50, 1)


@pytest.mark.parametrize(("factory", "config", "sentence"), [
    ("returns_none", {}, r"^Your step returned None: return its loss \(a scalar tensor\)"),
    ("raises", {}, r"^Your step raised at loop_factories\.py:\d+: InvalidArgumentError: "
                   r".*Incompatible shapes"),
    ("not_iterable", {}, r"returned data of type int, which is not a dataset of batches"),
    ("generator_data", {}, r"data of type generator, which can be read once"),
    ("nan_loss", {}, r"^Your step's loss is nan at the first training step"),
    ("trains_nothing", {}, r"^Your step changed no variable tfperf saw created: .*third element"),
    ("bf16_subtract", {"precision": "bf16"},
     r"^not tried: under mixed_bfloat16 your step raised at loop_factories\.py:\d+ .*"
     r"tf\.cast\(model\(x\), tf\.float32\)"),
    ("unseeded_weights", {"precision": "bf16"}, r"^not tried: tfperf finds no Keras layer"),
    ("eager_regression", {"runtime": "keras-jax"}, r"^not tried: Keras on JAX runs Keras' own"),
    ("eager_regression", {"graph": False, "xla": "jit"}, r"^graph=off runs your step eagerly"),
])
def test_what_a_loop_gets_wrong_is_one_sentence(factory, config, sentence):
    with pytest.raises(UserError, match=sentence) as found:
        train_prepared(loop(factory), config)
    assert "\n" not in str(found.value)


def test_a_loop_under_mixed_bfloat16_runs_its_keras_layers_in_bf16():
    prepared = train_prepared(loop("eager_regression"), {"precision": "bf16", "graph": True})
    assert prepared.train["policy"] == "mixed_bfloat16"
    assert any("mixed_bfloat16 policy set before the factory" in n for n in prepared.notes)
    assert np.isfinite(prepared.outputs()[0]).all()


def test_tfperf_pipeline_takes_the_loop_factory_and_analyzes_its_dataset():
    from tfperf.worker.pipeline.target import unpack

    step = train_prepared  # any function that is not a Keras model
    import tensorflow as tf

    data = tf.data.Dataset.range(8).batch(2)
    assert unpack((step, data), "loops:make") == (data, None)
    assert unpack((step, data, []), "loops:make") == (data, None)


def test_variables_built_before_the_factory_are_named_or_taken_from_the_third_element():
    import keras

    keras.mixed_precision.set_global_policy("float32")  # as an earlier test may have left it
    sys.path.insert(0, FACTORIES)
    try:
        import prebuilt  # noqa: F401 (its model is built here, before any factory runs)
    finally:
        sys.path.remove(FACTORIES)
    with pytest.raises(UserError, match=r"^Your step trains variables tfperf did not see "
                                        r"created \(sequential.*dense.*kernel.*third element"):
        train_prepared(loop("prebuilt_loop"), {})
    given = train_prepared(loop("prebuilt_loop_with_variables"), {})
    first = given.outputs()[0]
    given.call()
    np.testing.assert_array_equal(given.outputs()[0], first)  # restored from its own start
    assert first[-5:].mean() < first[:5].mean()
