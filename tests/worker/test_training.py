"""The worker's training step (``tfperf.worker.training``), in this process with real Keras.

The guard restarts from the same state every time (weights, every optimizer, dropout seeds),
runs the train function of the steps per call that is timed while recording each step's own
loss, and evaluates the validation data; the timed steps match the step counter (``outputs``
checks it first). The baseline is the model as the user compiled it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tfperf.core.protocol import OTHER_DRAWS_NOTE
from tfperf.worker.training import train_prepared

pytestmark = [pytest.mark.tf]

FACTORIES = str(Path(__file__).resolve().parent.parent / "models")


def workload(tmp_path: Path, **extra) -> dict:
    return {"kind": "train", "path": "train_factories:tabular_mlp", "format": "factory",
            "search_path": FACTORIES, "guard_steps": 50, **extra}


def test_the_guard_repeats_itself_and_records_every_step_of_a_multi_step_call(
    tmp_path, monkeypatch
):
    from tfperf.worker import trainstate

    x = np.random.default_rng(2).normal(size=(64, 10)).astype("float32")
    np.savez(tmp_path / "val.npz", x=x, y=x[:, :1])
    one = train_prepared(workload(tmp_path, validation=str(tmp_path / "val.npz")), {})
    first = one.outputs()
    many = train_prepared(workload(tmp_path), {"steps_per_execution": 4})
    for _ in range(3):
        many.call()
    per_call: list[int] = []  # the steps each call of the guard's train function recorded
    take = trainstate.LossRecorder.take

    def counted(recorder):
        rows = take(recorder)
        per_call.append(len(rows))
        return rows

    monkeypatch.setattr(trainstate.LossRecorder, "take", counted)
    again = many.outputs()
    assert many.batch == 4 * 32 and many.train["steps_per_call"] == 4
    # the guard's calls run the 4 steps a timed call runs (the last call the 2 left), and
    # each step's own loss is recorded: the same 50 as one step per call
    assert [n for n in per_call if n] == [4] * 12 + [2], per_call
    np.testing.assert_allclose(first[0], again[0], rtol=1e-5)
    assert first[0].shape == (50, 1) and first[0][-5:].mean() < first[0][:5].mean()
    assert list(first[2]) == ["loss"] and np.isfinite(first[1]).all()
    assert list(first[3]) == ["loss"]
    for _ in range(2):
        many.call()
    np.testing.assert_array_equal(many.outputs()[0], again[0])


def test_a_multi_step_guard_sees_a_step_that_diverges_inside_a_call(tmp_path):
    # a learning rate 1e4 times the user's blows up within the first calls of 8 steps: the
    # recorded steps show it where Keras' one loss per call would average it away
    broken = train_prepared(workload(tmp_path), {"steps_per_execution": 8,
                                                 "train_lr_scale": 1e4})
    losses = broken.outputs()[0][:, 0]
    assert losses.size == 50  # every step of the 7 calls (the last one runs 2)
    blown = ~np.isfinite(losses) | (losses > 1e3)
    assert blown.any() and not blown[0]  # it learns at step 1, then leaves


def test_the_baseline_is_what_the_user_compiled_and_a_knob_left_out_keeps_it(tmp_path):
    wl = workload(tmp_path, path="train_factories:compiled_by_user")
    own = train_prepared(wl, {})
    assert own.train["baseline"] == {"jit_compile": True, "steps_per_execution": 8,
                                     "policy": "float32", "policy_source": "tfperf",
                                     "data": "arrays", "notes": [], "step": "fit",
                                     "graph": True, "strategy": None, "unpacks": True}
    assert own.batch == 8 * 32 and any("as you compiled it" in n for n in own.notes)
    off = train_prepared(wl, {"xla": "off", "steps_per_execution": 1})
    assert off.batch == 32 and not any("XLA" in n for n in off.notes)
    assert off.train["baseline"]["jit_compile"] is True  # read before the knobs apply
    assert off.fingerprint == own.fingerprint


def test_arrays_run_on_the_pipeline_keras_fit_builds_and_a_dataset_as_the_user_wrote_it(
        tmp_path):
    arrays = train_prepared(workload(tmp_path), {})
    assert arrays.train["baseline"]["data"] == "arrays"
    assert any("prefetched as Keras' fit does" in n for n in arrays.notes)
    own = train_prepared(workload(tmp_path, path="train_factories:clipped_subclass"), {})
    assert own.train["baseline"]["data"] == "dataset"
    assert not any("prefetched" in n for n in own.notes)


def test_a_py_dataset_is_read_in_order_as_keras_fit_reads_it(tmp_path):
    prepared = train_prepared(workload(tmp_path, path="train_factories:py_dataset_mlp"), {})
    assert prepared.train["baseline"]["data"] == "pydataset" and prepared.batch == 32
    assert any(n.startswith("a keras.utils.PyDataset, read in order") for n in prepared.notes)
    # its 10 batches repeated for timing; the guard's 50 steps run on them from the start
    assert any("a finite dataset (10 batches) is repeated" in n for n in prepared.notes)
    prepared.call()
    losses = np.asarray(prepared.outputs()[0]).ravel()
    assert losses.size == 50 and np.isfinite(losses).all()
    assert np.array_equal(losses, np.asarray(prepared.outputs()[0]).ravel())


def test_a_factory_that_sets_its_own_policy_is_the_baseline_s_policy(tmp_path):
    own = train_prepared(workload(tmp_path, path="train_factories:own_policy"), {})
    assert own.train["baseline"]["policy"] == "mixed_bfloat16"
    assert own.train["baseline"]["policy_source"] == "factory"
    assert own.train["policy"] == "mixed_bfloat16"


def test_float32_holds_over_the_policy_a_factory_sets_itself(tmp_path):
    import keras

    held = train_prepared(workload(tmp_path, path="train_factories:own_policy"),
                          {"precision": "float32"})
    assert held.train["policy"] == "float32"
    assert any("mixed_bfloat16 held at float32" in note for note in held.notes)
    assert np.isfinite(np.asarray(held.outputs()[0])).all()
    # held only while the factory ran: the user's call acts again afterwards
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
    keras.mixed_precision.set_global_policy("float32")


def test_float32_is_not_tried_where_a_layer_sets_its_own_policy(tmp_path):
    from tfperf.core.errors import UserError

    with pytest.raises(UserError, match=r"not tried: .*\(mixed_bfloat16\) in their dtype="):
        train_prepared(workload(tmp_path, path="train_factories:own_layer_policy"),
                       {"precision": "float32"})


def test_a_gan_guards_its_own_keys_and_counts_steps_by_the_optimizer_named(tmp_path):
    from tfperf.core.errors import UserError

    wl = workload(tmp_path, path="train_factories:tiny_gan")
    with pytest.raises(UserError, match=r"--steps-counter .*d_optimizer\.iterations"):
        train_prepared(wl, {})
    gan = train_prepared({**wl, "steps_counter": "d_optimizer.iterations"},
                         {"steps_per_execution": 4})
    gan.call()
    first = gan.outputs()  # checks the 4 timed steps against d_optimizer's count
    assert list(first[3]) == ["d_loss", "g_loss"] and first[0].shape == (50, 2)
    gan.call()
    # both optimizers' state restored (and the seed generator): the guard repeats itself
    np.testing.assert_array_equal(gan.outputs()[0], first[0])
    with pytest.raises(UserError, match=r"--loss-key g_los is not among .*d_loss, g_loss"):
        train_prepared({**wl, "steps_counter": "d_optimizer.iterations",
                        "loss_keys": ["g_los"]}, {})



def test_a_batch_knob_recuts_the_same_samples_and_guards_them_at_equal_samples(tmp_path):
    default = train_prepared(workload(tmp_path, guard_steps=100), {})
    doubled = train_prepared(workload(tmp_path, guard_steps=100, tile_to=64), {})
    assert (default.batch, doubled.batch) == (32, 64)
    assert doubled.train["batch"] == 64
    assert doubled.fingerprint == default.fingerprint  # the batches as the user gave them
    assert any("re-cut to 64 rows" in note for note in doubled.notes)
    ours, theirs = default.outputs()[0], doubled.outputs()[0]
    assert (ours.size, theirs.size) == (100, 50)  # 3200 samples each
    assert np.isfinite(theirs).all() and theirs[-5:].mean() < theirs[:5].mean()


def test_a_keras_2_install_is_told_that_train_needs_keras_3():
    from tfperf.core.errors import UserError
    from tfperf.worker.training import require_keras3

    with pytest.raises(UserError, match=r"^--train needs Keras 3; this TensorFlow's Keras is 2\."):
        require_keras3("2.15.0")
    require_keras3("3.15.1")


def test_a_users_jit_compile_that_fails_at_the_first_step_leaves_a_baseline_without_xla(tmp_path):
    own = train_prepared(workload(tmp_path, path="train_factories:xla_fails_at_first_step"), {})
    baseline = own.train["baseline"]
    assert baseline["jit_compile"] is False
    assert "your jit_compile=True failed at the first step here" in baseline["notes"][0]
    own.call()
    assert np.isfinite(own.outputs()[0]).all()


def test_a_timed_fit_returns_its_time_to_the_end_of_training_within_the_whole_call(tmp_path):
    import time

    prepared = train_prepared(workload(tmp_path), {})
    fit = prepared.extra["fit"]
    for _ in range(3):
        started = time.perf_counter()
        trained_s = fit(16)
        call_s = time.perf_counter() - started
        # the steps end before fit returns: what is left is its iterator's deletion
        assert 0 < trained_s <= call_s


def test_a_tuned_pipeline_is_fingerprinted_by_the_batches_the_user_gave(tmp_path):
    # the map draws random numbers: made parallel, it may draw them in another order, and
    # the tuned batches are then other draws; the model's data is still the user's pipeline,
    # whose first batches (a 3-batch dataset repeated, as the default reads it) both report
    wl = workload(tmp_path, path="train_factories:augmented_mlp")
    default = train_prepared(wl, {})
    tuned = train_prepared(wl, {"input_pipeline": "tuned"})
    assert tuned.fingerprint == default.fingerprint
    assert default.fingerprint["inputs"]["count"] == 8  # 4 batches of (x, y)
    ours = default.outputs()[0]
    theirs = tuned.outputs()[0]
    differ = not np.array_equal(ours, theirs)
    noted = OTHER_DRAWS_NOTE in tuned.notes
    # the note is there exactly where the tuned batches are other draws than the user's
    assert noted == differ and np.isfinite(theirs).all()


def test_a_model_compiled_to_run_eagerly_is_read_back_so_and_graph_on_compiles_it(tmp_path):
    wl = workload(tmp_path, path="train_factories:eager_compiled")
    own = train_prepared(wl, {})
    assert own.train["baseline"]["graph"] is False
    assert any("run_eagerly = True" in n for n in own.notes)
    graph = train_prepared(wl, {"graph": True})
    steps = train_prepared(wl, {"steps_per_execution": 4})  # N steps a call run a graph
    assert not any("run_eagerly" in n for n in graph.notes + steps.notes)
    np.testing.assert_allclose(graph.outputs()[0], own.outputs()[0], rtol=1e-4)
