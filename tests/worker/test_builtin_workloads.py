"""The built-in suite: registry errors, every tiny workload through prepare, fixed seeds."""

from __future__ import annotations

import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from tfperf.core.errors import UserError
from tfperf.core.workloads import BUILTINS, builtin_workload, get_builtin
from tfperf.modelref import workload_from_args

NAMES = sorted(name for name, info in BUILTINS.items() if info.task == "inference")
"""The built-ins this module builds: a training built-in is a factory (test_trainmodels.py)."""


def test_registry_lists_the_suite_and_rejects_unknown_names():
    assert set(BUILTINS) == {
        "lstm",
        "encoder",
        "mobilenetv2",
        "resnet50",
        "cnn-train",
        "gan-train",
        "mlp",
        "wide-deep",
    }
    assert set(BUILTINS) - set(NAMES) == {"cnn-train", "gan-train"}
    assert get_builtin("lstm").standard == {"units": 128, "steps": 50, "features": 64}
    with pytest.raises(UserError, match="Unknown workload 'bert'") as err:
        get_builtin("bert")
    assert all(name in str(err.value) for name in BUILTINS)
    with pytest.raises(UserError, match="size"):
        builtin_workload("mlp", size="huge")
    with pytest.raises(UserError, match="Batch size"):
        builtin_workload("mlp", batch=0)
    assert builtin_workload("mlp", "tiny", 8) == {
        "kind": "builtin",
        "name": "mlp",
        "size": "tiny",
        "batch": 8,
    }


def test_workload_from_args_names_exactly_one_thing(tmp_path):
    assert workload_from_args("lstm", None, size="tiny", batch=2) == builtin_workload(
        "lstm", "tiny", 2
    )
    with pytest.raises(UserError, match="exactly one"):
        workload_from_args(None, None)
    with pytest.raises(UserError, match="exactly one"):
        workload_from_args("lstm", "model.keras")
    with pytest.raises(UserError, match="--inputs applies to your own MODEL"):
        workload_from_args("lstm", None, inputs="x.npz")
    with pytest.raises(UserError, match=r"missing\.keras"):
        workload_from_args(None, str(tmp_path / "missing.keras"))


def _expected_shapes(name: str, batch: int) -> list[tuple[int, ...]]:
    p = get_builtin(name).tiny
    return {
        "lstm": [(batch, p.get("units", 0))],
        "encoder": [(batch, p.get("seq", 0), p.get("d_model", 0))],
        "mobilenetv2": [(batch, p.get("classes", 0))],
        "resnet50": [(batch, p.get("classes", 0))],
        "mlp": [(batch, p.get("classes", 0))],
        "wide-deep": [(batch, 1)],
    }[name]


@pytest.mark.parametrize("name", NAMES)
def test_tiny_builtin_runs_and_builds_identically(name):
    pytest.importorskip("tensorflow")
    from tfperf.worker.prepare import prepare

    workload = builtin_workload(name, "tiny", batch=2)
    first = prepare(workload, {})
    first.call()
    outputs = first.outputs()
    assert [o.shape for o in outputs] == _expected_shapes(name, 2)
    assert all(np.isfinite(o).all() for o in outputs)
    assert first.batch == 2 and first.flops_source == "analytic" and first.flops_per_call > 0
    assert "eager" in first.extra
    again = prepare(workload, {}).outputs()
    for a, b in zip(outputs, again, strict=True):
        np.testing.assert_array_equal(a, b)


def test_integer_inputs_stay_inside_the_embedding_table():
    pytest.importorskip("tensorflow")
    from tfperf.worker.prepare import load_workload

    params = get_builtin("wide-deep").tiny
    loaded = load_workload(builtin_workload("wide-deep", "tiny", batch=256))
    cats = loaded.inputs["categorical"]
    assert cats.shape == (256, params["categorical"]) and cats.dtype == np.int32
    assert cats.min() >= 0 and cats.max() < params["vocab"]
    assert len(np.unique(cats)) > params["vocab"] // 2  # spread over the table, not a constant


def test_xla_variant_computes_the_same_outputs():
    pytest.importorskip("tensorflow")
    from tfperf.worker.prepare import prepare

    workload = builtin_workload("encoder", "tiny", batch=1)
    base = prepare(workload, {"xla": "off"}).outputs()
    jit = prepare(workload, {"xla": "jit"})
    assert any("jit_compile" in n for n in jit.notes)
    np.testing.assert_allclose(base[0], jit.outputs()[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["encoder", "mobilenetv2"])
def test_weights_and_inputs_are_the_same_in_another_process(tmp_path, name):
    pytest.importorskip("tensorflow")
    from tfperf.worker.prepare import prepare

    out = tmp_path / "out.npy"
    code = (
        "import sys, numpy as np;"
        "from tfperf.worker.prepare import prepare;"
        "from tfperf.core.workloads import builtin_workload;"
        "np.save(sys.argv[1], prepare(builtin_workload(sys.argv[2], 'tiny'), {}).outputs()[0])"
    )
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(out), name], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    here = prepare(builtin_workload(name, "tiny"), {}).outputs()[0]
    np.testing.assert_array_equal(np.load(out), here)


def _coarse(weights: list[np.ndarray]) -> list[np.ndarray]:
    """Kernels rounded to 4 bits per tensor (a variant that really loses accuracy)."""
    out = []
    for w in weights:
        step = np.abs(w).max() / 7 if w.ndim >= 2 and np.abs(w).max() > 0 else 0
        out.append(np.round(w / step) * step if step else w)
    return out


@pytest.mark.parametrize("name", ["mobilenetv2", "resnet50"])
def test_image_classifiers_give_logits_that_let_the_guard_see_a_degraded_variant(name):
    """Random weights used to give MobileNetV2 logits of ~1e-11 under a softmax of exactly
    1/classes, which every variant matched. Logits with calibrated BatchNormalization spread,
    so the default tolerance accepts an exact rebuild and rejects 4-bit kernels."""
    pytest.importorskip("tensorflow")
    from tfperf.accuracy import DEFAULT_TOLERANCE, compare_outputs
    from tfperf.worker.models import build

    first, again = build(name, "tiny", 4), build(name, "tiny", 4)
    images = first.inputs
    reference = np.asarray(first.model(images, training=False))
    assert reference.shape == (4, get_builtin(name).tiny["classes"])
    assert reference.min() < 0 and not np.allclose(reference.sum(axis=1), 1)  # not a softmax
    assert reference.std(axis=1).min() > 0.1  # logits spread over the classes
    assert len(set(reference.argmax(axis=1))) > 1  # the top class depends on the input
    exact = compare_outputs([reference], [np.asarray(again.model(images, training=False))])
    assert exact["max_abs_error"] == 0 and DEFAULT_TOLERANCE.check(exact)[0]
    again.model.set_weights(_coarse(again.model.get_weights()))
    degraded = compare_outputs([reference], [np.asarray(again.model(images, training=False))])
    accepted, why = DEFAULT_TOLERANCE.check(degraded)
    assert not accepted and "error" in why, degraded


def test_resnet50_is_keras_applications_resnet50_layer_for_layer():
    keras = pytest.importorskip("keras")
    from tfperf.worker.flops import keras_layer_flops
    from tfperf.worker.models import build

    ours = build("resnet50", "standard", 1)
    reference = keras.applications.ResNet50(weights=None, classifier_activation=None)
    assert ours.model.count_params() == reference.count_params() == 25_636_712
    kinds = [type(layer).__name__ for layer in ours.model.layers]
    assert kinds == [type(layer).__name__ for layer in reference.layers]
    assert ours.flops_per_call == keras_layer_flops(reference, 1)[0]
    # ~3.9 GMACs as usually quoted for ResNet-50 at 224x224
    assert 7.5e9 < ours.flops_per_call < 8.3e9
    assert ours.model.layers[-1].get_config()["activation"] == "linear"  # logits
