"""`tfperf builds compare` for real: this environment against tensorflow-cpu 2.20.0 from PyPI.

The candidate environment (about 250 MB) is cached under the platform cache dir, so it is
downloaded once per machine; the first run takes a minute or two longer.
"""

from __future__ import annotations

import json

import pytest

from helpers import require

pytestmark = [pytest.mark.slow, pytest.mark.tf]

CANDIDATE = "tensorflow-cpu==2.20.0"


@pytest.fixture(scope="module")
def keras_model(tmp_path_factory):
    """A small Keras 3 model file (the candidates receive it as a SavedModel)."""
    import subprocess
    import sys

    path = tmp_path_factory.mktemp("model") / "tiny.keras"
    code = (
        "import keras\n"
        "keras.utils.set_random_seed(7)\n"
        "m = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation='relu'),"
        " keras.layers.Dense(5)])\n"
        f"m.save({str(path)!r})\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    require(proc.returncode == 0, f"Keras cannot save a model here: {proc.stderr[-300:]}")
    return path


def test_compare_against_a_pypi_candidate_and_explain_quotes_it(cli, keras_model, store_path):
    res = cli(
        "builds",
        "compare",
        "--candidate",
        CANDIDATE,
        "--candidate",
        "tensorflow-cpu==0.0.1",
        str(keras_model),
        "--budget",
        "2",
        "--min-rounds",
        "4",
        "--store",
        str(store_path),
        "--json",
        timeout=900,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    context = json.dumps(doc, indent=1)[:4000] + "\n--- stderr ---\n" + res.stderr[-2000:]
    assert doc["workload"]["format"] == "savedmodel"
    base, cand = doc["results"]
    assert base["role"] == "baseline" and base["status"] == "ok", context
    assert cand["tf_version"] == "2.20.0" != base["tf_version"], context
    assert cand["status"] == "ok", cand["error"]
    sp = cand["speedup"]
    assert sp["n_pairs"] >= 4, context
    low, high = sp["ci95"]
    assert 0 < low <= sp["median"] <= high, context
    assert cand["accuracy"]["accepted"] is True, context
    assert cand["accuracy"]["max_rel_error"] < 1e-3, context
    (failed,) = doc["failed_candidates"]
    assert failed["spec"] == "tensorflow-cpu==0.0.1"
    assert "no such version" in failed["reason"], context
    assert res.stderr.count("tensorflow-cpu==0.0.1: no such version") == 1, context

    explained = cli("builds", "explain", "--store", str(store_path), "--json")
    assert explained.returncode == 0, explained.stderr
    figures = json.loads(explained.stdout)["figures"]["build"]
    assert [f["run_id"] for f in figures] == [doc["run_id"]]
    assert figures[0]["speedup"] == pytest.approx(sp["median"])
    assert figures[0]["candidate"] == "tensorflow-cpu 2.20.0"


def test_only_uninstallable_candidates_is_a_user_error(cli, store_path):
    res = cli(
        "builds",
        "compare",
        "--candidate",
        "tensorflow-cpu==0.0.1",
        "--workload",
        "mlp",
        "--size",
        "tiny",
        "--store",
        str(store_path),
    )
    assert res.returncode == 2
    assert "no candidate could be installed" in res.stderr
    assert res.stderr.count("tensorflow-cpu==0.0.1:") == 1  # one line, not said twice
    assert "Traceback" not in res.stderr
