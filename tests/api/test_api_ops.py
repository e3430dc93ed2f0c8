"""``tfperf.bench(..., ops=True)``: the library's bench carries each config's op profile."""

from __future__ import annotations

import tfperf
from helpers import require_package

require_package("xprof", "pip install 'tfperf[ops]'")


def test_bench_with_ops_carries_each_configs_profile(tmp_path, monkeypatch):
    monkeypatch.setenv("TFPERF_CACHE_DIR", str(tmp_path / "cache"))
    result = tfperf.bench(workload="mlp", size="tiny", set={"runtime": "openvino-f32"},
                          budget=1, processes=1, no_peak=True, store=tmp_path / "s.sqlite",
                          progress=False, ops=True)
    doc = result.to_dict()
    sources = [r["ops"]["source"].split(" ")[0] for r in doc["results"]]
    assert sources == ["tensorflow-profiler", "openvino-perf-counters"]
    assert "most of the" in doc["comparisons"][0]["ops"]["moved"]
