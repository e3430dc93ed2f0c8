"""tfperf.runner.identity: two workers of one run must have loaded the same model and inputs."""

from __future__ import annotations

import pytest

from tfperf.core.errors import UserError
from tfperf.runner.identity import ModelDiffers, SameModel, differences, model_digests

INPUTS = {"digest": "a" * 64, "summary": [1.5, 2.25, 0.5], "count": 1}
WEIGHTS = {"digest": "b" * 64, "summary": [10.0, 40.0, -3.0, 0.0, 0.0, 0.0], "count": 2}


def ready(inputs=INPUTS, weights=WEIGHTS) -> dict:
    return {"op": "ready", "fingerprint": {"inputs": inputs, "weights": weights}}


def test_equal_digests_are_the_same_model():
    same = SameModel("m:make")
    same.check(ready())
    same.check(ready())


def test_weights_that_differ_in_their_last_bits_are_the_same_model():
    # another thread count can change a trained weight's last bits, not the model
    nudged = {**WEIGHTS, "digest": "c" * 64, "summary": [10.0000001, 40.0, -3.0, 0, 0, 0]}
    assert differences(ready()["fingerprint"], ready(weights=nudged)["fingerprint"]) == []


@pytest.mark.parametrize(
    ("inputs", "weights", "parts", "advice"),
    [
        ({**INPUTS, "digest": "d" * 64, "summary": [1.7, 2.9, 0.1]}, WEIGHTS, "inputs", "--inputs"),
        (INPUTS, {**WEIGHTS, "digest": "e" * 64, "summary": [9, 41, 2, 0, 0, 0]}, "weights",
         "model.save"),
    ],
)
def test_another_model_stops_the_run_naming_what_differs(inputs, weights, parts, advice):
    same = SameModel("m:make")
    same.check(ready())
    with pytest.raises(ModelDiffers) as caught:
        same.check(ready(inputs, weights))
    text = str(caught.value)
    assert isinstance(caught.value, UserError)
    assert f"m:make gives different {parts} in two fresh processes" in text
    assert advice in text and "np.random.default_rng()" in text
    assert "\n" not in text


def test_workers_without_a_fingerprint_or_of_another_interpreter_are_not_compared():
    same = SameModel("m:make")
    same.check(ready(), python="/venv-a/bin/python")
    same.check({"op": "ready"}, python="/venv-a/bin/python")  # a test hook's preparation
    other = {**WEIGHTS, "digest": "f" * 64, "summary": [1, 2, 3, 0, 0, 0]}
    same.check(ready(weights=other), python="/venv-b/bin/python")  # another Keras, own seed
    with pytest.raises(ModelDiffers):
        same.check(ready(weights=other), python="/venv-a/bin/python")


def test_a_model_without_variables_against_one_with_them_differs():
    assert differences(ready(weights=None)["fingerprint"], ready()["fingerprint"]) == ["weights"]


def test_digests_shown_in_results_are_short():
    assert model_digests(ready()["fingerprint"]) == {"inputs": "a" * 12, "weights": "b" * 12}
    no_weights = model_digests(ready(weights=None)["fingerprint"])
    assert no_weights == {"inputs": "a" * 12, "weights": None}
    assert model_digests(None) is None
