"""What a load run against a server the user runs counts, against scripted servers on loopback
(``scripted.py``: no model, answers in milliseconds): a request the server dropped after
reading it fails, and is not sent again; a resend happens only where the server cannot have
read the request, and is counted; an answer that is not the protocol's fails with its first
bytes; a first request that fails says what failed."""

from __future__ import annotations

import csv
import json

import pytest

from helpers import run_cli
from serving.remote.scripted import KSERVE_500, Script, scripted, scripted_grpc
from tfperf.core.errors import UserError
from tfperf.serving.remote import parse_target, prepare

LEVEL = ("--level-requests", "30", "--level-seconds", "0.2")


def _bench(url: str, tmp_path, *args: str, env: dict | None = None):
    return run_cli("bench", "--url", url, *args, "--store", str(tmp_path / "s.sqlite"), env=env,
                   timeout=120)


def _run(url: str, tmp_path, *args: str) -> dict:
    res = _bench(url, tmp_path, "--concurrency", "2", *LEVEL, *args, "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    (level,) = doc["levels"]
    assert level["sent"] == level["completed"] + level["failed"] + level["timed_out"]
    return doc


def _level(url: str, tmp_path, *args: str) -> dict:
    return _run(url, tmp_path, *args)["levels"][0]


def test_a_request_dropped_after_it_was_written_fails_and_is_not_sent_again(tmp_path):
    """Every 3rd request is read whole, then its connection closed without an answer: the
    server may have run it, so it is a failure with its cause, never a second send. The
    warm-up's requests (one on every connection, before the level) fail the same way: each
    is kept in the document's warm-up, not dropped."""
    script = Script(answer=lambda n: "drop" if n % 3 == 0 else "ok")
    with scripted(script) as port:
        doc = _run(f"http://127.0.0.1:{port}/v2/models/m", tmp_path)
    (level,), warmup = doc["levels"], doc["warmup"]
    assert script.done["drop"] >= 10
    assert script.done["posts"] == warmup["requests"] + level["sent"]
    retried = warmup["retries"]
    assert retried and all(r["status"] == "connection" for r in retried)
    assert level["failed"] == script.done["drop"] - len(retried) and level["retried"] == 0
    assert level["completed"] == script.done["ok"] - (warmup["requests"] - len(retried))
    (key,) = level["failures"]
    assert key.startswith("connection: the connection failed after the request was sent")


def test_a_refused_connection_is_sent_again_once_and_counted(tmp_path):
    """The server stops listening after 11 answers: each later request cannot connect, is
    sent once more (nothing can have read it), and fails; each resend is counted."""
    script = Script(stop_after=11)
    exported = tmp_path / "levels.csv"
    with scripted(script) as port:  # one request at a time: none is in flight at the stop
        res = _bench(f"http://127.0.0.1:{port}/v2/models/m", tmp_path, "--concurrency", "1",
                     "--connections", "1", *LEVEL, "--json", "--export", str(exported))
    assert res.returncode == 0, res.stderr[-3000:]
    (level,) = json.loads(res.stdout)["levels"]
    assert level["completed"] == script.done["ok"] - 1 and level["completed"] < level["sent"]
    assert level["failures"] == {"connection: cannot connect: connection refused": level["failed"]}
    assert level["retried"] == level["failed"]
    assert f"{level['failed']} retried" in res.stderr  # printed with the level
    (row,) = csv.DictReader(exported.open())  # and exported with it
    assert int(row["retried"]) == level["retried"] and int(row["failed"]) == level["failed"]


@pytest.mark.parametrize("protocol", ["v2-rest", "v2-grpc"])
def test_an_answer_that_is_not_the_protocol_s_fails_with_its_first_bytes(protocol, tmp_path):
    bad = "not-an-answer" if protocol == "v2-rest" else "empty"
    script = Script(answer=lambda n: bad if n % 4 == 0 else "ok")
    serve = scripted if protocol == "v2-rest" else scripted_grpc
    with serve(script) as port:
        url = (f"http://127.0.0.1:{port}/v2/models/m" if protocol == "v2-rest"
               else f"grpc://127.0.0.1:{port}")
        doc = _run(url, tmp_path, "--model-name", "m")
    (level,), retried = doc["levels"], doc["warmup"]["retries"]
    assert all(r["status"] == "bad answer" for r in retried)  # kept: the warm-up's failures
    assert level["failed"] == script.done[bad] - len(retried) >= 7
    (key,) = level["failures"]
    if protocol == "v2-rest":
        assert key == ("bad answer: HTTP 200 whose body is not a v2-rest answer (JSON with "
                       "'outputs'): b'<html><body>Welcome to the proxy</body></html>'")
    else:
        assert key == "bad answer: a ModelInferResponse without outputs: b''"


@pytest.mark.parametrize(
    ("answer", "args", "said", "not_said"),
    [
        ("error", (), ["failed the first request with a server error 3 time(s)",
                       KSERVE_500["error"], "the server's own code failed"], "--inputs"),
        ("stall", ("--request-timeout", "0.3"),
         ["gave no answer to the first request", "no answer within 0.3 s"], "--inputs"),
        ("drop", (), ["the first request to", "failed on its connection",
                      "after the request was sent, before its answer"], "--inputs"),
        ("invalid", (), ["refused the request built from generated", "HTTP 400",
                         "give --inputs that fit"], "server error"),
    ],
)
def test_a_first_request_that_fails_says_what_failed(answer, args, said, not_said, tmp_path):
    script = Script(answer=lambda n: answer, stall_s=2.0)
    with scripted(script) as port:
        res = _bench(f"http://127.0.0.1:{port}/v2/models/m", tmp_path, "--rate", "10", *args)
    assert res.returncode == 2, res.stderr[-3000:]
    assert all(part in res.stderr for part in said), res.stderr
    assert not_said not in res.stderr and "Traceback" not in res.stderr
    assert script.done[answer] == {"error": 3, "stall": 1, "drop": 6, "invalid": 1}[answer]


@pytest.mark.parametrize(
    ("metadata", "said"),
    [
        (json.dumps({"inputs": [{"name": "x", "shape": [-1, 4]}]}).encode(),
         "gives an input without a name or a datatype"),
        (json.dumps({"inputs": [{"name": "x", "datatype": "BF16", "shape": [4]}]}).encode(),
         "is of datatype BF16, which tfperf cannot send"),
    ],
)
def test_metadata_without_a_datatype_tfperf_sends_is_one_sentence(metadata, said):
    with scripted(Script(metadata=metadata)) as port, pytest.raises(UserError, match=said):
        prepare(parse_target(f"http://127.0.0.1:{port}/v2/models/m"), None)


def test_metadata_that_is_not_json_is_one_sentence_and_exit_2(tmp_path):
    with scripted(Script(metadata=b"<html>not json</html>")) as port:
        res = _bench(f"http://127.0.0.1:{port}/v2/models/m", tmp_path, "--rate", "10",
                     "--protocol", "v2-rest")
    assert res.returncode == 2, res.stderr[-3000:]
    assert "answered metadata that is not JSON (b'<html>not json</html>')" in res.stderr
    assert "Traceback" not in res.stderr and res.stderr.strip().count("\n") == 0


def test_one_request_held_10_s_leaves_the_rate_of_the_window_and_is_named(tmp_path):
    """A 3-second level at 100/s on a server that holds one request of 300 for 10 s: the rate
    is taken over the window in which requests were offered (within 5% of what was offered;
    over the whole wait it read about 23/s), and the drain names the straggler."""
    script = Script(answer=lambda n: "stall" if n == 100 else "ok", stall_s=10.0)
    with scripted(script) as port:
        res = _bench(f"http://127.0.0.1:{port}/v2/models/m", tmp_path, "--rate", "100",
                     "--level-requests", "300", "--level-seconds", "0.75",
                     "--request-timeout", "20", "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    (level,) = doc["levels"]
    assert level["completed"] == level["sent"] >= 250 and script.done["stall"] == 1
    assert level["window_s"] == pytest.approx(3.0, abs=0.1)
    assert level["achieved_qps"] == pytest.approx(level["arrival_qps"], rel=0.05)
    assert level["drain_s"] > 6.0 and level["open_at_close"] >= 1
    straggler = level["straggler"]
    assert straggler["ended"] == "completed" and straggler["latency_ms"] >= 9900
    (note,) = [n for n in doc["notes"] if "still open when the arrivals ended" in n]
    assert f"arrived {straggler['arrived_s']:.3g} s into the level" in note
