"""The library API, used the way a notebook user would: through ``import tfperf`` only.

Real workers, real stores, models built in the test's own memory (unseeded, as users write
them). Each result must be the command's ``--json`` document and must say its answer.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import tfperf
from helpers import run_cli

pytestmark = [pytest.mark.tf, pytest.mark.slow]

FAST = {"budget": 1.5, "no_peak": True, "processes": 1, "progress": False}


def test_import_tfperf_is_cheap_and_names_the_api():
    code = (
        "import sys, tfperf; "
        "heavy = [m for m in ('numpy', 'scipy', 'rich', 'tensorflow', 'plotly') "
        "if m in sys.modules]; print(heavy, sorted(tfperf.__all__))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    heavy, names = out.stdout.split("] ")
    assert heavy == "["
    for name in ("doctor", "bench", "tune", "compare", "pipeline", "history", "report", "apply",
                 "TuneResult", "LoadResult"):
        assert name in names
    from tfperf import api

    assert sorted(tfperf.API_NAMES) == sorted(api.__all__)


def test_bench_returns_the_commands_document_and_stays_callable(tmp_path):
    store = tmp_path / "s.sqlite"
    first = tfperf.bench(workload="mlp", size="tiny", set={"onednn": "off"}, store=store, **FAST)
    assert isinstance(first, tfperf.BenchResult)
    labels = [r.label for r in first.results]
    assert labels == ["default", "onednn=off"]
    assert all(r.status == "ok" and r.p50_ms > 0 for r in first.results)
    assert first.speedups[0]["candidate"] == "onednn=off"
    assert json.loads(first.to_json()) == json.loads(json.dumps(first.to_dict()))
    assert "p50" in repr(first) and "<table>" in first._repr_html_()
    # a second call, after the internal modules of the same names are loaded, works alike
    second = tfperf.bench(workload="mlp", size="tiny", store=store, **FAST)
    assert second.run_id == first.run_id + 1
    shown = run_cli("report", str(first.run_id), "--store", str(store), "--json")
    assert json.loads(shown.stdout)["run"]["id"] == first.run_id

    compared = tfperf.compare(first.run_id, second.run_id, store=store)
    assert isinstance(compared, tfperf.CompareResult)
    assert [c["label_b"] for c in compared.to_dict()["comparisons"]] == ["default"]
    assert compared.regressions == [] or compared.regressions == ["default"]


def _users_model():
    import numpy as np
    import tensorflow as tf

    inp = tf.keras.Input((12,), name="features")
    x = tf.keras.layers.Dense(24, activation="relu")(inp)
    model = tf.keras.Model(inp, tf.keras.layers.Dense(3)(x))
    return model, np.random.rand(2, 12).astype("float32")


def test_tune_an_in_memory_keras_model_with_its_arrays(tmp_path):
    model, x = _users_model()
    result = tfperf.tune(
        model,
        inputs=x,
        knobs="runtime",
        runtimes=["tf", "litert"],
        max_trials=1,
        confirm_rounds=6,
        store=tmp_path / "s.sqlite",
        profile_out=tmp_path / "p.json",
        progress=False,
    )
    assert isinstance(result, tfperf.TuneResult)
    rec = result.recommendation
    doc = result.to_dict()
    assert doc["candidates"][0]["label"] == "runtime=litert"
    assert rec.keep_default == doc["recommendation"]["keep_default"]
    if not rec.keep_default:
        assert rec.speedup == doc["recommendation"]["speedup"]["median"]
        assert rec.ci95[0] <= rec.speedup <= rec.ci95[1]
        # the one knob is kept by the confirmation against the default, read the other way
        (kept,) = rec.kept
        assert kept.startswith("without runtime=litert (the default) the answer ran ")
        assert "in the confirmation against the default" in kept
    assert result.profile == str(tmp_path / "p.json")
    assert (tmp_path / "p.json").is_file()
    assert ("keep the default" in repr(result)) == rec.keep_default
    assert "tfperf run --profile" in result._repr_html_()


def test_bench_a_tf_module_and_a_multi_input_model_given_dict_inputs(tmp_path):
    import numpy as np
    import tensorflow as tf

    class Scale(tf.Module):
        def __init__(self):
            self.w = tf.Variable(tf.random.normal((5, 2)))

        @tf.function(input_signature=[tf.TensorSpec([None, 5], tf.float32)])
        def __call__(self, x):
            return tf.matmul(x, self.w)

    module = tfperf.bench(Scale(), store=tmp_path / "s.sqlite", **FAST)
    assert module.results[0].status == "ok"

    ids = tf.keras.Input((4,), dtype="int32", name="ids")
    # not named "dense": in a fresh process that is the name Keras gives the first Dense layer
    numeric = tf.keras.Input((3,), dtype="float32", name="numeric")
    emb = tf.keras.layers.Flatten()(tf.keras.layers.Embedding(10, 2)(ids))
    out = tf.keras.layers.Dense(1)(tf.keras.layers.Concatenate()([emb, numeric]))
    model = tf.keras.Model([ids, numeric], out)
    arrays = {
        "ids": np.random.randint(0, 10, (2, 4)).astype("int32"),
        "numeric": np.random.rand(2, 3).astype("float32"),
    }
    multi = tfperf.bench(model, inputs=arrays, store=tmp_path / "s.sqlite", **FAST)
    assert multi.results[0].status == "ok"
    assert multi.run_id == module.run_id + 1


def test_an_object_that_is_not_a_model_is_one_sentence(tmp_path):
    with pytest.raises(tfperf.UserError, match=r"pass a Keras model, a tf\.Module"):
        tfperf.bench(object(), store=tmp_path / "s.sqlite", **FAST)
    with pytest.raises(tfperf.UserError, match="name exactly one thing"):
        tfperf.bench(store=tmp_path / "s.sqlite", **FAST)


PIPELINE = """
import numpy as np
import tensorflow as tf


def make():
    import keras
    x = np.random.normal(size=(64, 4)).astype(np.float32)
    ds = tf.data.Dataset.from_tensor_slices((x, x.sum(axis=1))).map(lambda a, b: (a * 2, b))
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    return {"dataset": ds.batch(8), "model": model, "loss": "mse"}
"""


def test_doctor_and_pipeline_return_their_answers(tmp_path, monkeypatch):
    audit = tfperf.doctor(progress=False)
    assert isinstance(audit, tfperf.DoctorResult)
    assert audit.to_dict()["install"]["status"] == "ok"
    assert all({"id", "severity", "fix"} <= set(f) for f in audit.findings)
    assert "finding" in repr(audit)

    # A notebook's own pipeline (the built-in demo is the command's test: tests/input_pipeline)
    (tmp_path / "notebook_data.py").write_text(PIPELINE)
    monkeypatch.chdir(tmp_path)
    found = tfperf.pipeline("notebook_data:make", steps=3, rounds=2, stage_seconds=0.05,
                            min_block_seconds=0.05, store=tmp_path / "s.sqlite", progress=False)
    assert isinstance(found, tfperf.PipelineResult)
    assert found.to_dict()["verdict"] in repr(found)  # the model's steps: a verdict
    assert found.run_id is not None
