"""The serving layout record: round trip, labels, and the sentences for bad values."""

import pytest

from tfperf.core.errors import UserError
from tfperf.core.serving import DEFAULT_LAYOUT, ServingLayout


def test_a_layout_survives_its_json_form():
    layout = ServingLayout(
        instances=2, threads=1, cores=((0,), (1,)), max_batch=8, max_delay_ms=2.5
    )
    assert ServingLayout.from_dict(layout.to_dict()) == layout
    served = ServingLayout(instances=2, streams=2, hint="THROUGHPUT")
    assert ServingLayout.from_dict(served.to_dict()) == served
    assert served.label() == "2x streams=2 hint=THROUGHPUT" and served.asynchronous


def test_the_default_is_one_unpinned_instance_without_batching():
    assert DEFAULT_LAYOUT.label() == "1x"
    assert not DEFAULT_LAYOUT.pinned and not DEFAULT_LAYOUT.batching


def test_the_label_names_threads_pinning_and_the_batcher():
    layout = ServingLayout(instances=2, threads=1, cores=((0,), (1,)), max_batch=8, max_delay_ms=2)
    assert layout.label() == "2x1t pinned batch=8/2ms"


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"instances": 0}, "at least one instance"),
        ({"instances": 2, "cores": ((0,),)}, "one core set per instance"),
        ({"max_batch": 1, "max_delay_ms": 3.0}, "0 when the batch is 1"),
        ({"threads": 0}, "at least 1"),
        ({"hint": "FAST"}, "THROUGHPUT, LATENCY"),
        ({"hint": "THROUGHPUT", "max_batch": 4}, "leave --max-batch at 1"),
    ],
)
def test_a_bad_layout_is_one_sentence_saying_what_is_allowed(kwargs, words):
    with pytest.raises(UserError, match=words):
        ServingLayout(**kwargs)
