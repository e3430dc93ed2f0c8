"""Load measurement end to end: real worker instances of the tiny built-in MLP, real requests,
a real store. Nothing here asserts a timing: only accounting, shapes and what is recorded."""

from __future__ import annotations

import pytest

from tfperf.core.config import Config
from tfperf.core.errors import UserError
from tfperf.core.serving import ServingLayout
from tfperf.runner.recorder import RunRecorder
from tfperf.serving import LoadScenario, measure_load, pinned, search_slo
from tfperf.serving.levels import floor_note
from tfperf.store import Store

TINY_MLP = {"kind": "builtin", "name": "mlp", "size": "tiny", "batch": 1}
SHORT = {"requests": 100, "seconds": 0.3, "max_seconds": 5.0, "timeout_s": 10.0, "tail": 1,
         "precision": None}
"""Short levels: these tests check accounting, not figures (a percentile stands on one request
beyond it, so a level of 100 requests shows its p99 and stops at its minimums)."""


def _adds_up(result) -> None:
    for level in result.levels:
        assert level.sent == level.completed + level.failed + level.timed_out
        assert level.sent >= 1


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """Two pinned instances with a dynamic batcher, closed and open levels and an SLO,
    recorded in a real store."""
    path = tmp_path_factory.mktemp("load") / "store.sqlite"
    layout = pinned(ServingLayout(instances=2, max_batch=2, max_delay_ms=1.0))
    scenario = LoadScenario(concurrency=(1, 4), rates=(100.0,), slo_ms=1000.0, **SHORT)
    lines: list[str] = []
    with Store.open(path) as store:
        with RunRecorder(store, "load", "test", TINY_MLP, {}, {}) as run:
            result = measure_load(
                TINY_MLP, Config(), layout, scenario, progress=lines.append, recorder=run
            )
            run.finish("ok", result.to_dict())
        stored = store.load_run(run.run_id)
    return result, stored, lines


def test_closed_and_open_levels_are_measured_with_real_requests_and_add_up(swept):
    result, _, lines = swept
    assert [lv.scenario for lv in result.levels] == ["closed", "closed", "open"]
    assert [lv.concurrency for lv in result.levels[:2]] == [1, 4]
    assert result.levels[2].offered_qps == 100.0
    _adds_up(result)
    for level in result.levels:
        assert level.completed >= SHORT["requests"] and level.failed == level.timed_out == 0
        assert 0 < level.p50_ms <= level.p90_ms <= level.p99_ms
        # one request beyond: p99.9 needs 1000 of them
        assert (level.p999_ms is None) == (level.completed < 1000) == ("p99.9" in level.needs)
        assert level.p99_ci_ms[0] <= level.p99_ms <= level.p99_ci_ms[1]
        assert level.generator_cpu > 0
        # the model call each answer reports: inside the latency, never above it
        assert 0 < level.service_ms["p50"] < level.p50_ms
        assert level.client_queue_ms is None and level.reconnects is None
    levels = [line for line in lines if "load generator" not in line and "own floor" not in line]
    assert len(levels) == 3


def test_each_level_carries_the_harness_floor_of_its_load_and_a_note_where_it_is_large(swept):
    result, stored, lines = swept
    for level, block in zip(result.levels, stored["trials"][0]["blocks"], strict=False):
        floor = level.harness_floor  # null requests through the same instances, same load
        assert floor is not None and floor.requests >= 1
        assert floor.p50_ms > 0
        assert (floor.p99_ms is None) == (floor.requests < 1000)  # p99 where it stands
        assert floor.batch_delay_ms == 1.0  # the layout's batcher waits up to 1 ms
        assert block["info"]["harness_floor_ms"] == {"p50": floor.p50_ms, "p99": floor.p99_ms}
        note = floor_note(level)
        assert (note is not None) == (floor.p50_ms > 0.1 * level.p50_ms)
        assert note is None or (note in result.notes and note in lines)
    assert sum("harness floor p50" in line for line in lines) == len(result.levels)
    # the tiny MLP's call is a sliver of a request: the harness is a real share of its p50
    assert any(floor_note(level) for level in result.levels)


def test_the_slo_answer_is_the_achieved_rate_of_the_level_within_it(swept):
    result, _, _ = swept
    assert result.slo_ms == 1000.0
    assert result.max_qps_at_slo == result.levels[2].achieved_qps


def test_every_level_is_in_the_store_as_a_load_block_with_its_figures(swept):
    result, stored, _ = swept
    (trial,) = stored["trials"]
    blocks = [b for b in trial["blocks"] if b["phase"] == "load"]
    assert [b["info"] for b in blocks] == [lv.to_dict() for lv in result.levels]
    assert [len(b["samples_s"]) for b in blocks] == [lv.completed for lv in result.levels]
    assert trial["info"]["layout"] == result.layout.to_dict()
    assert trial["info"]["result"]["max_qps_at_slo"] == result.max_qps_at_slo
    assert trial["status"] == "ok"
    # each instance reported the CPUs it may run on: its own core set
    assert trial["info"]["instance_cpus"] == [list(c) for c in result.layout.cores]


def test_the_slo_search_probes_capacity_then_bisects_the_rate():
    result = search_slo(TINY_MLP, Config(), ServingLayout(), 1000.0, LoadScenario(**SHORT))
    _adds_up(result)
    assert result.levels[0].scenario == "closed" and result.capacity_qps > 0
    opened = result.levels[1:]
    assert len(opened) == 5 and all(lv.scenario == "open" for lv in opened)
    # a generous SLO: every level is within it, so each step raises the rate
    rates = [lv.offered_qps for lv in opened]
    assert rates == sorted(rates) and rates[0] == pytest.approx(result.capacity_qps / 2)
    assert result.max_qps_at_slo == opened[-1].achieved_qps


def test_a_crashing_instance_is_counted_as_failed_restarted_and_nothing_measured_is_lost(tmp_path):
    crash = Config(
        env={
            "TFPERF_INJECT_FAULT": "segfault-on-request",
            "TFPERF_INJECT_AT": "30",
            "TFPERF_INJECT_INSTANCE": "1",
        }
    )
    with Store.open(tmp_path / "s.sqlite") as store:
        with RunRecorder(store, "load", "test", TINY_MLP, {}, {}) as run:
            result = measure_load(
                TINY_MLP,
                crash,
                ServingLayout(instances=2),
                LoadScenario(concurrency=(4, 4), **SHORT),
                recorder=run,
            )
        stored = store.load_run(run.run_id)
    _adds_up(result)
    # Instance 1 crashes at its 30th request, and again at the 30th after each restart: how
    # many levels see a crash depends on how soon the restarted worker serves again (seconds
    # on a loaded machine), so the crash is asserted for the run, and a level that counts
    # failures names that crash and nothing else.
    assert sum(level.failed for level in result.levels) >= 1
    for level in result.levels:
        assert level.completed > level.failed
        crashed = ["instance 1: worker crashed with SIGSEGV"] if level.failed else []
        assert list(level.failures) == crashed
    assert any("instance 1 crashed with SIGSEGV" in note for note in result.notes)
    assert any("restarted" in note for note in result.notes)
    blocks = [b for b in stored["trials"][0]["blocks"] if b["phase"] == "load"]
    assert [b["info"]["failed"] for b in blocks] == [lv.failed for lv in result.levels]


def test_a_model_file_that_is_not_a_model_is_one_sentence(tmp_path):
    bad = tmp_path / "bad.keras"
    bad.write_text("not a model")
    workload = {"kind": "model", "path": str(bad), "format": "keras", "inputs": None,
                "unsafe": False, "batch": 1}
    with pytest.raises(UserError) as info:
        measure_load(workload, Config(), ServingLayout(), LoadScenario(concurrency=(1,), **SHORT))
    assert "\n" not in str(info.value)


def test_a_layout_s_memory_is_the_sum_over_its_instances(swept):
    import psutil

    from tfperf.serving import Harness

    result, stored, _ = swept
    assert result.memory is not None and result.memory.instances == 2
    assert not result.memory.projected
    assert result.to_dict()["memory"]["peak_rss_mb"] == result.memory.peak_rss_mb
    (trial,) = stored["trials"]  # the store keeps the sum with the layout's trial
    assert trial["info"]["memory"]["instances"] == 2
    with Harness(TINY_MLP, Config(), ServingLayout(instances=2)) as harness:
        resident = [psutil.Process(i.worker.pid).memory_info().rss / 2**20
                    for i in harness.instances]
        memory = harness.memory()
    assert memory.instances == 2
    assert abs(memory.steady_rss_mb - sum(resident)) <= 0.1 * sum(resident), (memory, resident)
    assert memory.peak_rss_mb >= max(resident)


def test_a_level_runs_until_its_p99_stands_within_a_short_cap():
    """The rule of the command line's levels, on real instances with a short cap: a level
    goes on past its minimums until its p99 stands on 1000 requests (and is precise), or its
    cap ends it; p99 is shown exactly where it stands."""
    scenario = LoadScenario(concurrency=(2,), requests=50, seconds=0.1, max_seconds=1.5)
    (level,) = measure_load(TINY_MLP, Config(), ServingLayout(), scenario).levels
    assert level.sent > 50 and level.duration_s < 1.5 + 1.0
    assert level.stopped in ("stable", "cap")
    assert (level.p99_ms is not None) == (level.completed + level.timed_out >= 1000)
    assert level.stopped == "cap" or level.p99_ms is not None


def test_a_level_its_cap_ends_short_of_the_requests_asked_for_says_so():
    # the cap bounds every level; a level it ends before --level-requests is told, not hidden
    scenario = LoadScenario(concurrency=(1,), requests=10**6, seconds=0.1, max_seconds=0.4)
    lines: list[str] = []
    result = measure_load(TINY_MLP, Config(), ServingLayout(), scenario, progress=lines.append)
    (level,) = result.levels
    assert level.stopped == "cap" and 0 < level.sent < 10**6
    said = [note for note in result.notes if "ended at its cap" in note]
    assert said == [
        f"concurrency 1: ended at its cap of 0.4 s after {level.sent} of the 1000000 requests "
        f"asked for (--level-requests); at this rate they take "
        f"{10**6 / level.achieved_qps:.3g} s: a longer --level-seconds raises the cap"
    ]
    assert said[0] in lines


class _Sweep:
    """A sweep whose levels at each rate are given, in order (the search's decisions alone)."""

    def __init__(self, p99s: dict[float, list[tuple[float, float]]]) -> None:
        from tfperf.serving.load import LoadScenario

        self.scenario = LoadScenario(slo_ms=10.0)
        self.p99s = {rate: list(levels) for rate, levels in p99s.items()}
        self.measured: list[float] = []

    def open(self, rate: float):
        from tfperf.serving import LoadLevel

        p99, high = self.p99s[rate].pop(0)
        self.measured.append(rate)
        return LoadLevel("open", None, rate, rate, 1.0, 2.0, p99, None, (p99 * 0.9, high),
                         1000, 1000, 0, 0, 1.0, 0.0)


@pytest.mark.parametrize(
    ("levels", "within", "measured"),
    [
        ([(5.0, 6.0)], True, 1),  # a sure pass (its interval below the SLO): once
        # a pass whose interval reaches past the SLO is re-measured as a miss is; two misses
        # then outvote it (it used to stand on its own, never measured again)
        ([(9.0, 12.0), (11.0, 13.0), (12.0, 14.0)], False, 3),
        ([(9.0, 12.0), (8.0, 9.0)], True, 2),  # the repeat agrees: decided
        ([(15.0, 16.0), (9.0, 9.5), (9.5, 9.8)], True, 3),  # a miss, then two passes
        ([(15.0, 16.0), (16.0, 17.0)], False, 2),  # a miss confirmed
    ],
)
def test_the_slo_search_re_measures_a_pass_at_the_boundary_as_it_does_a_miss(
    levels, within, measured
):
    from tfperf.serving.load import _decide

    sweep = _Sweep({100.0: levels})
    assert _decide(sweep, 100.0, 10.0) is within
    assert len(sweep.measured) == measured
