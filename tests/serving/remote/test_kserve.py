"""``tfperf bench --url`` against a real KServe model server on loopback, serving an unseeded
two-input Keras model over v1 REST, v2 REST and v2 gRPC. Tiny levels: these tests check the
protocols, the accounting and what is recorded, never a timing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import run_cli

pytestmark = [pytest.mark.tf, pytest.mark.slow]
TINY = ("--level-requests", "50", "--level-seconds", "0.15", "--request-timeout", "60")


def bench_url(url: str, *args: str, store) -> tuple[dict, str]:
    res = run_cli("bench", "--url", url, *TINY, *args, "--json", "--store", str(store))
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout), res.stderr


def _adds_up(doc: dict) -> None:
    assert doc["levels"]
    for level in doc["levels"]:
        assert level["sent"] == level["completed"] + level["failed"] + level["timed_out"]
        assert level["failed"] == level["timed_out"] == 0, level["failures"]
        p99 = level["p99_ms"] if level["p99_ms"] is not None else level["rough_ms"]["p99"]
        assert level["completed"] >= 1 and level["p99_ci_ms"][0] <= p99
        assert level["generator_cpu"] >= 0


def test_v1_rest_guessed_from_the_path_with_inputs_generated_from_the_metadata(kserve, tmp_path):
    http, _ = kserve
    doc, err = bench_url(
        f"http://127.0.0.1:{http}/v1/models/two",
        "--concurrency",
        "1,2",
        "--rate",
        "40",
        store=tmp_path / "s.sqlite",
    )
    assert "protocol tfserving-rest (guessed" in err
    assert doc["target"]["protocol"] == "tfserving-rest" and doc["target"]["protocol_guessed"]
    # KServe's v1 protocol has no signature endpoint: the v2 metadata on the same address
    assert (
        doc["inputs"]["source"].startswith("generated")
        and "/v2/models/two" in doc["inputs"]["source"]
    )
    assert sorted(doc["inputs"]["inputs"]) == ["features float32[Nx8]", "ids int32[Nx3]"]
    assert [lv["scenario"] for lv in doc["levels"]] == ["closed", "closed", "open"]
    assert doc["levels"][0]["concurrency"] == 1 and doc["levels"][2]["offered_qps"] == 40.0
    _adds_up(doc)


def test_v2_rest_sends_the_given_inputs_and_the_run_is_stored(kserve, tmp_path):
    http, _ = kserve
    inputs = tmp_path / "in.npz"
    np.savez(inputs, features=np.ones((2, 8), np.float32), ids=np.array([[1, 2, 3]] * 2))
    store = tmp_path / "s.sqlite"
    doc, _ = bench_url(
        f"http://127.0.0.1:{http}/v2/models/two/infer",
        "--inputs",
        str(inputs),
        "--concurrency",
        "2",
        store=store,
    )
    assert doc["target"]["protocol"] == "v2-rest"
    assert doc["inputs"]["source"] == f"--inputs {inputs}"
    _adds_up(doc)
    # KServe keeps no statistics of its own time: said once, and no level has any
    assert doc["levels"][0]["server_ms"] is None
    assert any("no time of its own (GET /v2/models/two/stats answered HTTP 404)" in note
               for note in doc["notes"])
    report = run_cli("report", str(doc["run_id"]), "--json", "--store", str(store))
    assert report.returncode == 0, report.stderr
    (section,) = json.loads(report.stdout)["load"]
    assert section["target"]["protocol"] == "v2-rest"
    assert len(section["levels"]) == 1 and section["levels"][0]["sent"] == doc["levels"][0]["sent"]


def test_v2_grpc_slo_search_claims_no_rate_from_levels_too_short_for_p99(kserve, tmp_path):
    """The search probes and bisects as ever, but levels of a second at a few hundred
    requests a second hold too few requests for p99 to stand (1000): no rate is claimed,
    and the run says how long a level would need to be."""
    _, grpc = kserve
    out = tmp_path / "grpc.json"
    doc, err = bench_url(
        f"grpc://127.0.0.1:{grpc}",
        "--model-name",
        "two",
        "--slo-ms",
        "2000",
        "--level-seconds",
        "0.25",
        "--export",
        str(out),
        store=tmp_path / "s.sqlite",
    )
    assert "protocol v2-grpc (guessed" in err
    assert doc["levels"][0]["scenario"] == "closed"  # the capacity probe
    assert any("no time of its own (ModelStatistics answered gRPC UNIMPLEMENTED)" in note
               for note in doc["notes"])
    opened = [lv for lv in doc["levels"] if lv["scenario"] == "open"]
    assert len(opened) >= 5 and all(lv["p99_ms"] is None for lv in opened)
    assert doc["max_qps_at_slo"] is None
    assert any("too few for their p99 to stand" in note and "--level-seconds" in note
               for note in doc["notes"])
    _adds_up(doc)
    exported = json.loads(out.read_text())
    assert (
        exported["run"]["kind"] == "load"
        and exported["load"][0]["max_qps_at_slo"] == (doc["max_qps_at_slo"])
    )


def test_compare_lines_up_a_remote_run_with_itself_and_the_gate_passes(kserve, tmp_path):
    http, _ = kserve
    paths = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.json"
        bench_url(
            f"http://127.0.0.1:{http}/v2/models/two",
            "--rate",
            "20,40",
            "--slo-ms",
            "5000",
            "--export",
            str(path),
            store=tmp_path / "s.sqlite",
        )
        paths.append(path)
    res = run_cli("compare", *map(str, paths), "--json", "--fail-on-regression")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    (pair,) = doc["comparisons"]
    assert [row["load"] for row in pair["levels"]] == ["20/s", "40/s"]
    assert all(row["a"] and row["b"] for row in pair["levels"])
    assert doc["regressions"] == []


def test_a_url_with_no_model_behind_it_is_one_sentence_and_exit_2(kserve, tmp_path):
    http, grpc = kserve
    for url in (
        f"http://127.0.0.1:{http}/v2/models/nothing/infer",
        f"http://127.0.0.1:{http}/v1/models/nothing",
    ):
        res = run_cli("bench", "--url", url, "--concurrency", "1", "--store", str(tmp_path / "s"))
        assert res.returncode == 2
        assert "no model 'nothing'" in res.stderr and "Traceback" not in res.stderr
    res = run_cli(
        "bench",
        "--url",
        f"grpc://127.0.0.1:{grpc}",
        "--model-name",
        "nothing",
        "--concurrency",
        "1",
        "--store",
        str(tmp_path / "s"),
    )
    assert res.returncode == 2 and "no model 'nothing'" in res.stderr


def test_inputs_that_do_not_fit_the_signature_are_one_sentence_and_exit_2(kserve, tmp_path):
    http, _ = kserve
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, features=np.ones((1, 5), np.float32), ids=np.ones((1, 3), np.int32))
    res = run_cli(
        "bench",
        "--url",
        f"http://127.0.0.1:{http}/v2/models/two",
        "--inputs",
        str(wrong),
        "--concurrency",
        "1",
        "--store",
        str(tmp_path / "s"),
    )
    assert res.returncode == 2, res.stderr
    assert "'features' has shape [1, 5]" in res.stderr and "features float32[Nx8]" in res.stderr
    assert res.stderr.count("\n") <= 2 and "Traceback" not in res.stderr
    named = tmp_path / "named.npz"
    np.savez(named, x=np.ones((1, 8), np.float32))
    res = run_cli(
        "bench",
        "--url",
        f"http://127.0.0.1:{http}/v2/models/two",
        "--inputs",
        str(named),
        "--concurrency",
        "1",
        "--store",
        str(tmp_path / "s"),
    )
    assert res.returncode == 2 and "name the .npz arrays after its inputs" in res.stderr


def test_a_local_load_run_and_a_remote_one_compare_level_by_level(
    kserve, two_input_model, tmp_path
):
    http, _ = kserve
    store = str(tmp_path / "s.sqlite")
    local, remote = tmp_path / "local.csv", tmp_path / "remote.json"
    rates = ("--rate", "20,40", "--slo-ms", "5000", *TINY)
    res = run_cli(
        "bench",
        str(two_input_model),
        *rates,
        "--export",
        str(local.with_suffix(".json")),
        "--store",
        store,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    bench_url(
        f"http://127.0.0.1:{http}/v2/models/two",
        *rates[:4],
        "--export",
        str(remote),
        store=tmp_path / "s.sqlite",
    )
    res = run_cli(
        "compare", str(local.with_suffix(".json")), str(remote), "--json", "--export", str(local)
    )
    assert res.returncode == 0, res.stderr[-3000:]
    (pair,) = json.loads(res.stdout)["comparisons"]
    assert pair["label_a"] == "1x" and pair["label_b"].startswith("v2-rest http://127.0.0.1:")
    assert [row["load"] for row in pair["levels"]] == ["20/s", "40/s"]
    assert pair["slo_ms"] == 5000.0
    rows = local.read_text().splitlines()
    assert rows[0].startswith("server,server_a,load,") and len(rows) == 3


def test_ctrl_c_keeps_the_levels_measured_names_the_run_and_exits_130(kserve, tmp_path):
    """SIGINT once a level against the server is stored: one sentence, exit 130, the run stored
    as interrupted with that level."""
    from helpers import assert_load_interrupted

    http, _ = kserve
    url = f"http://127.0.0.1:{http}/v2/models/two"
    args = ["bench", "--url", url, "--concurrency", "1,1,1,1,1,1", *TINY]
    assert_load_interrupted(args, tmp_path / "s.sqlite", "concurrency 1:")


def test_string_inputs_on_every_protocol_row_and_columnar(kserve, tmp_path):
    """``text`` takes two strings a row (v2 BYTES): generated from its metadata over v1 REST,
    row and columnar (columnar keeps the batch's shape, or the model refuses it), and read
    from an .npz of text (not ASCII) over v2 REST and v2 gRPC."""
    http, grpc = kserve
    words = tmp_path / "words.npz"
    np.savez(words, text=np.array([["héllo", "wörld"], ["a", "b"]]))
    for url, args in (
        (f"http://127.0.0.1:{http}/v1/models/text", ("--batch", "2")),
        (f"http://127.0.0.1:{http}/v1/models/text", ("--batch", "2", "--rest-format", "columnar")),
        (f"http://127.0.0.1:{http}/v2/models/text", ("--inputs", str(words))),
        (f"grpc://127.0.0.1:{grpc}", ("--model-name", "text", "--inputs", str(words))),
    ):
        doc, _ = bench_url(url, "--concurrency", "1", *args, store=tmp_path / "s.sqlite")
        assert doc["inputs"]["inputs"] == ["text object[Nx2]"]
        _adds_up(doc)
