"""TensorFlow imported without jax where keras does not run on JAX, jax still importable after."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

from helpers import require
from tfperf.worker.tfimport import jax_is_needed

HIDDEN_IMPORT = textwrap.dedent(
    """
    import json, sys
    from tfperf.worker.tfimport import import_tensorflow
    tf, hidden = import_tensorflow(hide_jax=True)
    during = "jax" in sys.modules
    import jax  # a factory that uses jax still gets it
    print(json.dumps({"hidden": hidden, "jax_with_tf": during, "jit": hasattr(jax, "jit"),
                      "tf": hasattr(tf, "function")}))
    """
)


def test_tensorflow_is_imported_without_jax_and_jax_still_imports_after() -> None:
    require(importlib.util.find_spec("tensorflow") is not None, "TensorFlow is not installed")
    require(importlib.util.find_spec("jax") is not None, "jax is not installed")
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    done = subprocess.run([sys.executable, "-c", HIDDEN_IMPORT], env=env, capture_output=True,
                          text=True, timeout=300, check=True)
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert record == {"hidden": ["jax"], "jax_with_tf": False, "jit": True, "tf": True}


def test_jax_is_needed_only_where_keras_runs_on_jax(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    assert not jax_is_needed("tf") and not jax_is_needed("litert")
    assert jax_is_needed("keras-jax")
    (tmp_path / "keras.json").write_text('{"backend": "jax"}')  # the user's own backend
    assert jax_is_needed("tf")
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    assert not jax_is_needed("tf")
