"""Every runtime's timed call does the same work (docs/timed-call.md): it takes the inputs as
host arrays and hands back every output as a host array. A runtime that copied its inputs in
once when prepared, or left its outputs unread, would give the old outputs after the host
arrays change: this test changes them in place between two timed calls and checks each
runtime's answer against TensorFlow's on the new values."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from helpers import require

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from tfperf.modelref import resolve_model  # noqa: E402
from tfperf.worker.convert import cpu_has_bf16, openvino_available  # noqa: E402
from tfperf.worker.prepare import prepare  # noqa: E402
from tfperf.worker.workload import TimedCall  # noqa: E402

CONFIGS = {
    "tf": {},
    "tf-xla-jit": {"xla": "jit"},
    "tf-bf16": {"precision": "bf16"},
    "litert": {"runtime": "litert"},
    "litert-fp16": {"runtime": "litert-fp16"},
    "litert-dynint8": {"runtime": "litert-dynint8"},
    "litert-int8": {"runtime": "litert-int8"},
    "openvino-f32": {"runtime": "openvino-f32"},
    "openvino-bf16": {"runtime": "openvino-bf16"},
    "xla-aot": {"runtime": "xla-aot"},
}
"""Every runtime and precision a trial can run; a tolerance for each follows."""

TOLERANCE = {
    "tf-bf16": 0.1, "openvino-bf16": 0.1, "litert-fp16": 0.01, "litert-int8": 0.25,
    "litert-dynint8": 0.1,
}


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    """Two inputs of different dtypes, two outputs; a file of the model and of its inputs."""
    root = tmp_path_factory.mktemp("timed")
    keras.utils.set_random_seed(3)
    ids = keras.Input((4,), dtype="int32", name="ids")
    x = keras.Input((6,), name="x")
    emb = keras.layers.Flatten()(keras.layers.Embedding(9, 3)(ids))
    hidden = keras.layers.Dense(16, activation="tanh")(keras.layers.Concatenate()([emb, x]))
    model = keras.Model([ids, x], [keras.layers.Dense(3)(hidden), keras.layers.Dense(1)(hidden)])
    model.save(root / "m.keras")
    rng = np.random.default_rng(0)
    np.savez(
        root / "in.npz",
        ids=rng.integers(0, 9, (2, 4)).astype(np.int32),
        x=rng.uniform(-1, 1, (2, 6)).astype(np.float32),
    )
    return root, model


def _available(name: str, request) -> None:
    if name.startswith("openvino"):
        require(openvino_available(), "OpenVINO is not installed")
    if name.endswith("bf16") and not cpu_has_bf16():
        # a CPU feature, not a prerequisite CI can install: tune offers no bf16 runtime here
        pytest.skip("this CPU has no bf16 instructions (AVX512_BF16 or AMX)")
    if name == "xla-aot":
        request.getfixturevalue("aot_runtime")  # built once, apart from the call timed here


def _changed_in_place(arrays: list) -> None:
    """New values in the very arrays the timed call holds (ids stay inside the vocabulary)."""
    for array in arrays:
        if array.dtype.kind in "iu":
            array[...] = (array + 4) % 9
        else:
            array[...] = 0.5 - array


@pytest.mark.timeout(2400)  # xla-aot's runtime archive may be built first
@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_runtime_times_inputs_in_and_outputs_out(model_file, name, request):
    _available(name, request)
    root, model = model_file
    prepared = prepare(resolve_model(str(root / "m.keras"), inputs=str(root / "in.npz")),
                       CONFIGS[name])
    call = prepared.call
    assert isinstance(call, TimedCall), f"{name}'s timed call is {type(call).__name__}"
    first = call()
    assert all(isinstance(a, np.ndarray) for a in first) and len(first) == 2, first
    _changed_in_place(call.inputs)
    second = call()
    expected = [t.numpy() for t in model(call.inputs)]
    tolerance = TOLERANCE.get(name, 1e-4)
    for got, before, want in zip(second, first, expected, strict=True):
        got = np.asarray(got, np.float32).reshape(want.shape)
        assert not np.allclose(got, before), f"{name} gave the old outputs for new inputs"
        np.testing.assert_allclose(got, want, atol=tolerance, rtol=tolerance)
