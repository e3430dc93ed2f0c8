"""The tfserving-grpc client against a loopback PredictionService built from
tensorflow-serving-api's own definitions (TensorFlow Serving itself is not installed here),
answering Predict by running the Keras model."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import run_cli

pytestmark = [pytest.mark.tf, pytest.mark.slow]


def _bench(port: int, model: str, tmp_path, *args: str):
    url = f"grpc://127.0.0.1:{port}"
    return run_cli("bench", "--url", url, "--protocol", "tfserving-grpc", "--model-name", model,
                   *args, "--store", str(tmp_path / "s.sqlite"))


def test_predict_under_load_with_inputs_from_the_signature(tfserving_grpc, tmp_path):
    res = _bench(tfserving_grpc, "two", tmp_path, "--concurrency", "1,3", "--level-requests",
                 "50", "--level-seconds", "0.5", "--request-timeout", "60", "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert "guessed" not in res.stderr
    assert doc["inputs"]["source"] == "generated to the shapes and dtypes of GetModelMetadata"
    assert sorted(doc["inputs"]["inputs"]) == ["features float32[Nx8]", "ids int32[Nx3]"]
    for level in doc["levels"]:
        # every request sent was answered; a level its 2-s cap ended before its 50 requests
        # (a loaded machine) says so
        assert level["sent"] == level["completed"] > 0
        assert level["failed"] == level["timed_out"] == 0
        capped = level["stopped"] == "cap" and level["sent"] < 50
        said = f"concurrency {level['concurrency']}: ended at its cap"
        assert capped == any(note.startswith(said) for note in doc["notes"])


def test_an_unknown_model_is_one_sentence_and_exit_2(tfserving_grpc, tmp_path):
    res = _bench(tfserving_grpc, "other", tmp_path, "--concurrency", "1")
    assert res.returncode == 2 and "no model 'other'" in res.stderr


def test_the_serving_api_loads_without_tensorflow_s_runtime():
    pytest.importorskip("tensorflow_serving")
    code = (
        "import sys\n"
        "from tfperf.serving.remote.grpc_wire import serving_api\n"
        "predict_pb2, _, _, _ = serving_api()\n"
        "predict_pb2.PredictRequest().inputs['x'].tensor_content = b'1234'\n"
        "assert 'tensorflow' not in sys.modules, 'the stand-in package was left behind'\n"
        "assert not [m for m in sys.modules if m.startswith('tensorflow.python')]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_predict_with_a_string_input(tfserving_grpc, tmp_path):
    """``text`` takes DT_STRING: its inputs generated from the signature, two rows of two."""
    res = _bench(tfserving_grpc, "text", tmp_path, "--concurrency", "1", "--batch", "2",
                 "--level-requests", "20", "--level-seconds", "0.2", "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert doc["inputs"]["inputs"] == ["text object[Nx2]"]
    (level,) = doc["levels"]
    assert level["sent"] == level["completed"] > 0 and level["failed"] == 0
    # its 0.8-s cap may end the level short of its 20 requests on a loaded machine: said then
    capped = level["sent"] < 20
    assert capped == any("ended at its cap" in note for note in doc["notes"])
