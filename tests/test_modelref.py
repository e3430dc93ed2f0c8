"""Parent-side recognition of the model argument: real files, corrupt files, factories."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest

from tfperf.core.errors import UserError
from tfperf.modelref import resolve_model


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A tiny real model in each format."""
    tf = pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    root = tmp_path_factory.mktemp("models")
    inp = keras.Input((4,), name="x")
    model = keras.Model(inp, keras.layers.Dense(2)(inp))
    model.save(root / "m.keras")
    model.export(str(root / "saved"), verbose=False)
    (root / "m.tflite").write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    return root


def test_each_format_is_recognised(models):
    keras_ref = resolve_model(str(models / "m.keras"), batch=4)
    assert keras_ref == {
        "kind": "model",
        "path": str((models / "m.keras").resolve()),
        "format": "keras",
        "inputs": None,
        "unsafe": False,
        "batch": 4,
    }
    assert resolve_model(str(models / "saved"))["format"] == "savedmodel"
    pb = resolve_model(str(models / "saved" / "saved_model.pb"))
    assert (pb["format"], pb["path"]) == ("savedmodel", str((models / "saved").resolve()))
    assert resolve_model(str(models / "m.tflite"), unsafe=True)["unsafe"] is True
    assert resolve_model(str(models / "m.tflite"))["format"] == "tflite"


def test_format_is_read_from_the_content_not_the_name(models, tmp_path):
    (tmp_path / "model.bin").write_bytes((models / "m.tflite").read_bytes())
    (tmp_path / "model.zip").write_bytes((models / "m.keras").read_bytes())
    assert resolve_model(str(tmp_path / "model.bin"))["format"] == "tflite"
    assert resolve_model(str(tmp_path / "model.zip"))["format"] == "keras"


def _one_sentence(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and text.endswith(".")
    return text


def test_corrupt_and_foreign_files(models, tmp_path):
    cases = {
        "trunc.keras": ((models / "m.keras").read_bytes()[:100], r"corrupt \.keras"),
        "text.keras": (b"hello", r"corrupt \.keras"),
        "trunc.tflite": (b"\x1c\x00\x00\x00XXXX" + b"\x00" * 40, r"corrupt \.tflite"),
        "model.h5": (b"\x89HDF\r\n\x1a\n" + b"\x00" * 32, "HDF5"),
        "notes.txt": (b"just words", "not a model"),
    }
    for name, (data, message) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(UserError, match=message) as err:
            resolve_model(str(tmp_path / name))
        _one_sentence(err)
    with zipfile.ZipFile(tmp_path / "other.keras", "w") as zf:
        zf.writestr("readme.txt", "no config here")
    with pytest.raises(UserError, match=r"no config\.json"):
        resolve_model(str(tmp_path / "other.keras"))
    with zipfile.ZipFile(tmp_path / "badjson.keras", "w") as zf:
        zf.writestr("config.json", "{not json")
    with pytest.raises(UserError, match=r"corrupt \.keras"):
        resolve_model(str(tmp_path / "badjson.keras"))


def test_missing_paths_and_plain_directories(tmp_path):
    with pytest.raises(UserError, match="not found") as err:
        resolve_model(str(tmp_path / "nothing.keras"))
    assert "SavedModel directory" in _one_sentence(err)
    with pytest.raises(UserError, match="not a SavedModel"):
        resolve_model(str(tmp_path))
    with pytest.raises(UserError, match="No model given"):
        resolve_model("")


def test_factory_is_located_without_importing_it(tmp_path, monkeypatch):
    marker = tmp_path / "imported"
    (tmp_path / "mymodels.py").write_text(
        f"open({str(marker)!r}, 'w').close()\ndef build():\n    raise RuntimeError\n"
    )
    monkeypatch.chdir(tmp_path)
    ref = resolve_model("mymodels:build", batch=2)
    assert ref["format"] == "factory" and ref["path"] == "mymodels:build"
    assert ref["search_path"] == str(tmp_path) and ref["batch"] == 2
    assert not marker.exists()
    with pytest.raises(UserError, match="cannot be found"):
        resolve_model("no_such_module_xyz:build")
    with pytest.raises(UserError, match="module:function"):
        resolve_model("mymodels:build:extra")


@pytest.mark.parametrize("batch", [0, -3, 1.5, "2", True])
def test_bad_batch(models, batch):
    with pytest.raises(UserError, match="Batch size"):
        resolve_model(str(models / "m.keras"), batch=batch)


def test_inputs_file_is_checked(models, tmp_path):
    import numpy as np

    np.savez(tmp_path / "in.npz", x=np.ones((3, 4), np.float32))
    ref = resolve_model(str(models / "m.keras"), inputs=str(tmp_path / "in.npz"))
    assert ref["inputs"] == str((tmp_path / "in.npz").resolve())
    with pytest.raises(UserError, match="not found"):
        resolve_model(str(models / "m.keras"), inputs=str(tmp_path / "missing.npz"))
    (tmp_path / "in.txt").write_text("1,2,3")
    with pytest.raises(UserError, match=r"not a \.npz"):
        resolve_model(str(models / "m.keras"), inputs=str(tmp_path / "in.txt"))


def test_parent_side_modules_do_not_import_tensorflow():
    code = (
        "import sys, tfperf.modelref, tfperf.core.workloads;"
        "tfperf.core.workloads.builtin_workload('lstm', 'tiny');"
        "bad = [m for m in ('tensorflow', 'keras', 'numpy') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
