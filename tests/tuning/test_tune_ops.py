"""``tfperf tune --ops``: the default and the answer are profiled op by op after the
confirmation, and the answer's text names the op types behind the difference."""

from __future__ import annotations

import math

from helpers import require_package, tune_json

require_package("xprof", "pip install 'tfperf[ops]'")


def test_the_answer_names_the_op_types_behind_the_difference(tmp_path):
    doc = tune_json(tmp_path, "--workload", "mlp", "--size", "tiny", "--knobs", "runtime",
                    "--runtimes", "tf,openvino-f32", "--max-trials", "2", "--confirm-rounds",
                    "6", "--ops", env={"TFPERF_CACHE_DIR": str(tmp_path / "cache")})
    recommendation = doc["recommendation"]
    ops = recommendation["ops"]
    assert ops["candidate"] == "runtime=openvino-f32"
    assert ops["default"]["source"].startswith("tensorflow-profiler")
    assert ops["answer"]["source"].startswith("openvino-perf-counters")
    for side in ("default", "answer"):
        shares = [t["self_share"] for t in ops[side]["op_types"]]
        assert math.isclose(sum(shares), 1.0, rel_tol=1e-9)
        # read against this machine's peak, as bench --ops reads its profiles
        roof = ops[side]["roofline"]
        assert roof["peak_gflops"] > 0 and roof["bandwidth_gbs"] > 0 and roof["ridge"] > 0
    families = {row["family"]: row for row in ops["families"]}
    assert "FullyConnected" in families["matmul"]["b_types"] and "overhead" in families
    assert ops["moved"] and ops["moved"] in recommendation["reason"]
