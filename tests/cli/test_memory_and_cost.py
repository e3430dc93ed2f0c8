"""What an answer costs, as a user asks for it: a tune under a memory ceiling set between the
default's peak and a candidate's, the cost of a million samples from a price, and bad values.
Real workers, the tiny built-in MLP."""

from __future__ import annotations

import json
import re

import pytest

from helpers import run_cli

pytestmark = pytest.mark.tf

TINY = ("--workload", "mlp", "--size", "tiny")


def _bench(tmp_path, *extra: str) -> dict:
    res = run_cli("bench", *TINY, "--budget", "1", "--processes", "1", "--no-peak", *extra,
                  "--json", "--store", str(tmp_path / "s.sqlite"))
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)


def test_a_candidate_over_the_ceiling_is_rejected_with_both_figures(tmp_path):
    # XLA's compiler grows the worker: a ceiling between its peak and the default's
    doc = _bench(tmp_path, "--set", "xla=jit")
    default, jit = (r["memory"]["peak_rss_mb"] for r in doc["results"])
    assert jit > default + 10, (default, jit)
    ceiling = round((default + jit) / 2)
    res = run_cli("tune", *TINY, "--knobs", "xla", "--max-memory-mb", str(ceiling),
                  "--max-trials", "2", "--confirm-rounds", "6", "--json",
                  "--store", str(tmp_path / "s.sqlite"))
    assert res.returncode == 0, res.stderr[-2000:]
    tuned = json.loads(res.stdout)
    row = next(c for c in tuned["candidates"] if c["label"] == "xla=jit")
    assert row["status"] == "rejected" and row["over_ceiling"] is True
    found = re.fullmatch(r"peak (\d+) MB > ceiling (\d+) MB", row["reason"])
    assert found and int(found.group(2)) == ceiling and int(found.group(1)) > ceiling
    assert row["memory"]["peak_rss_mb"] > ceiling
    assert tuned["max_memory_mb"] == ceiling
    assert tuned["default"]["memory"]["peak_rss_mb"] <= ceiling
    why = tuned["recommendation"]["keep_default_why"]
    if why is not None:  # kept the default: the rejection is counted as the ceiling's
        assert why["over_ceiling"] >= 1 and why["rejected"] == 0


def test_the_cost_of_a_million_samples_follows_from_throughput_and_price(tmp_path):
    doc = _bench(tmp_path, "--price-per-hour", "0.36")
    (result,) = doc["results"]
    expected = 0.36 / 3600 / result["throughput_per_s"] * 1e6
    assert result["cost"] == {"price_per_hour": 0.36, "per_million_samples": expected}
    assert doc["settings"]["price_per_hour"] == 0.36
    text = run_cli("bench", *TINY, "--budget", "1", "--processes", "1", "--no-peak",
                   "--price-per-hour", "0.36", "--store", str(tmp_path / "s.sqlite"))
    assert "per million samples at $0.36/h (one stream of calls)" in text.stdout
    assert re.search(r"default: peak \d+ MB, steady \d+ MB, model [\d.]+ MB", text.stdout)


@pytest.mark.parametrize(
    ("command", "flag"),
    [("bench", "--price-per-hour"), ("tune", "--price-per-hour"), ("tune", "--max-memory-mb")],
)
def test_a_value_that_is_not_positive_is_one_sentence_and_exit_2(tmp_path, command, flag):
    res = run_cli(command, *TINY, flag, "-5", "--store", str(tmp_path / "s.sqlite"))
    assert res.returncode == 2, res.stderr
    assert f"{flag} must be a positive number" in res.stderr
    assert res.stderr.count("\n") <= 2 and "Traceback" not in res.stderr


def _model(path, units: int) -> str:
    """A user's .keras model: ``units`` wide, so its weights take ``units`` squared floats."""
    import keras

    inputs = keras.Input((units,), name="features")
    keras.Model(inputs, keras.layers.Dense(units)(inputs)).save(path)
    return str(path)


def test_compare_reports_the_memory_change_and_gates_on_its_growth(tmp_path):
    store = str(tmp_path / "s.sqlite")
    ids = []
    for name, units in (("small", 64), ("large", 4096)):  # a new version, 64 MB of weights
        res = run_cli("bench", _model(tmp_path / f"{name}.keras", units),
                      "--budget", "1", "--processes", "1", "--no-peak", "--json",
                      "--store", store)
        assert res.returncode == 0, res.stderr[-2000:]
        ids.append(str(json.loads(res.stdout)["run_id"]))
    shown = run_cli("compare", *ids, "--store", store)
    assert shown.returncode == 0, shown.stderr[-2000:]
    moved = re.search(r"peak memory (\d+) -> (\d+) MB \(\+(\d+\.\d)%\)", shown.stdout)
    assert moved and int(moved.group(2)) - int(moved.group(1)) >= 50, shown.stdout
    gated = run_cli("compare", *ids, "--fail-on-memory-growth", "5", "--store", store)
    assert gated.returncode == 1, gated.stderr[-2000:]
    assert "memory grew over 5%: default +" in gated.stderr
    relaxed = run_cli("compare", *ids, "--fail-on-memory-growth", "500", "--store", store)
    assert relaxed.returncode == 0, relaxed.stderr[-2000:]
    # the library's compare gates the same runs the same way
    import tfperf

    with pytest.raises(tfperf.FailOnTriggered, match=r"memory grew over 5%: default \+") as gate:
        tfperf.compare(*ids, store=store, fail_on_memory_growth=5)
    assert gate.value.result.doc["comparisons"][0]["memory"]["growth"] > 0.05
    assert isinstance(tfperf.compare(*ids, store=store, fail_on_memory_growth=500),
                      tfperf.CompareResult)
    exported = tmp_path / "runs.csv"
    run_cli("history", "--store", store, "--export", str(exported))
    header = exported.read_text().splitlines()[0].split(",")
    assert "peak_rss_mb" in header
