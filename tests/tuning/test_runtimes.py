"""``tfperf tune --runtimes`` for real: a Keras model restricted to LiteRT measures plain LiteRT.

The default of a Keras model runs on TensorFlow; with ``--runtimes litert`` every candidate runs
on LiteRT, and the runtime alone (no other knob turned) must be one of them. No timing is
asserted: only which candidates were measured.
"""

from __future__ import annotations

import json

import pytest

from helpers import run_cli

pytestmark = [pytest.mark.tf, pytest.mark.slow]


@pytest.fixture(scope="module")
def keras_model(tmp_path_factory):
    """A small Keras model file."""
    keras = pytest.importorskip("keras")
    inp = keras.Input((16,))
    path = tmp_path_factory.mktemp("model") / "tiny.keras"
    keras.Model(inp, keras.layers.Dense(5)(keras.layers.Dense(32)(inp))).save(path)
    return path


def test_keras_model_tuned_on_litert_only_measures_plain_litert(tmp_path, keras_model):
    only_litert = ["--runtimes", "litert", "--knobs", "runtime", "--max-trials", "1"]
    files = ["--store", str(tmp_path / "store.sqlite"), "--profile-out", str(tmp_path / "p.json")]
    result = run_cli(
        "tune", str(keras_model), *only_litert, "--confirm-rounds", "6", "--json", *files
    )
    assert result.returncode == 0, result.stderr[-2000:]
    doc = json.loads(result.stdout)
    assert doc["trials"] == 1
    (candidate,) = doc["candidates"]
    assert candidate["label"] == "runtime=litert"
    assert candidate["status"] == "measured"
    assert candidate["config"]["runtime"] == "litert"
    assert candidate["config"]["runtime_threads"] is None
