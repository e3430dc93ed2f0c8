"""The worker's request server (queue, dynamic batcher, executors) with calls the test controls:
no TensorFlow, and nothing timed beyond "eventually"."""

from __future__ import annotations

import queue
import threading

from tfperf.worker.requests import Batching, RequestServer


def _collect(answers: queue.Queue, n_ids: int) -> list[dict]:
    got, seen = [], 0
    while seen < n_ids:
        msg = answers.get(timeout=10)
        got.append(msg)
        seen += len(msg["ids"])
    return got


def test_waiting_requests_are_served_together_up_to_the_batch_and_each_answered_once():
    answers: queue.Queue = queue.Queue()
    gate = threading.Event()
    sizes: list[int] = []

    def call(size: int):
        def run() -> None:
            gate.wait(10)  # the first call holds the executor while the rest queue up
            sizes.append(size)

        return run

    calls = {1: lambda: call(1), 4: lambda: call(4)}
    server = RequestServer(calls, Batching(max_batch=4, max_delay_s=0.0), answers.put)
    for rid in range(9):
        server.submit(rid)
    gate.set()
    got = _collect(answers, 9)
    assert sorted(i for m in got for i in m["ids"]) == list(range(9))
    # whatever the first call took (1 to 4), the 5 to 8 left waited and went 4 at a time
    assert len(got) == 3 and all(1 <= len(m["ids"]) <= 4 for m in got)
    assert sizes == [1 if len(m["ids"]) == 1 else 4 for m in got]  # a batch runs padded to 4
    assert all(m["error"] is None for m in got)


def test_each_executor_gets_a_call_of_its_own_and_they_serve_at_once():
    answers: queue.Queue = queue.Queue()
    made: list[int] = []
    both = threading.Barrier(2, timeout=10)

    def make() -> object:
        made.append(1)
        return both.wait  # returns only when two calls run at the same time

    server = RequestServer({1: make}, Batching(executors=2), answers.put)
    server.submit(0)
    server.submit(1)
    got = _collect(answers, 2)
    assert len(made) == 2 and all(m["error"] is None for m in got)


def test_a_call_that_raises_answers_its_requests_with_the_error_and_serving_goes_on():
    answers: queue.Queue = queue.Queue()
    count = [0]

    def flaky() -> None:
        count[0] += 1
        if count[0] == 1:
            raise RuntimeError("inputs do not fit\nsecond line")

    server = RequestServer({1: lambda: flaky}, Batching(), answers.put)
    server.submit(0)
    server.submit(1)
    first, second = _collect(answers, 2)
    assert first["ids"] == [0] and first["error"] == "RuntimeError: inputs do not fit"
    assert second["ids"] == [1] and second["error"] is None


def test_null_requests_are_answered_the_same_way_without_the_model_call():
    answers: queue.Queue = queue.Queue()
    calls: list[int] = []
    started, gate = threading.Event(), threading.Event()

    def run() -> None:
        calls.append(1)
        started.set()
        gate.wait(10)  # holds the executor while the rest queue up behind it

    server = RequestServer({1: lambda: run, 2: lambda: run}, Batching(max_batch=2), answers.put)
    server.submit(0)  # a real request: the executor calls the model, held at the gate
    assert started.wait(10)
    server.submit(1, null=True)
    server.submit(2, null=True)  # 1 and 2 wait together: a batch of nulls, no call
    server.submit(3, null=True)
    server.submit(4)  # 3 and 4: a batch with one real request calls the model
    gate.set()
    got = _collect(answers, 5)
    assert [m["ids"] for m in got] == [[0], [1, 2], [3, 4]]
    assert len(calls) == 2 and all(m["error"] is None for m in got)


def test_a_traced_answer_stamps_each_request_in_order_on_the_generator_s_clock():
    import time

    answers: queue.Queue = queue.Queue()
    server = RequestServer({1: lambda: lambda: None}, Batching(trace=True), answers.put)
    read = time.monotonic()
    server.submit(7, null=False, read_at=read)
    (msg,) = _collect(answers, 1)
    trace = msg["trace"]
    assert trace["read"] == [read]
    assert read <= trace["taken"] <= trace["call"][0] <= trace["call"][1] <= time.monotonic()



def test_openvino_s_asynchronous_server_answers_a_null_request_without_an_infer_request():
    from tfperf.worker.requests import AsyncServer

    class Queue:
        """Stands for OpenVINO's AsyncInferQueue: one infer request, done at once."""

        def __init__(self) -> None:
            self.started: list[int] = []

        def __len__(self) -> int:
            return 1

        def set_callback(self, callback) -> None:
            self.callback = callback

        def start_async(self, inputs, userdata) -> None:
            self.started.append(userdata[0][0])

            class Done:
                model_outputs = ()

            self.callback(Done(), userdata)

    fake = Queue()
    answers: queue.Queue = queue.Queue()
    server = AsyncServer(lambda: (fake, []), answers.put, trace=True)
    server.submit(0, null=True, read_at=1.0)
    server.submit(1, read_at=2.0)
    got = _collect(answers, 2)
    assert [m["ids"] for m in got] == [[0], [1]] and fake.started == [1]
    assert [m["trace"]["read"] for m in got] == [[1.0], [2.0]]
    assert all(m["error"] is None for m in got)
