"""What --url names, and the refusals that come before any request: no server needed except
the one address that refuses."""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import run_cli
from serving.remote.loopback import free_port
from tfperf.core.errors import UserError
from tfperf.serving.remote.access import redact_command
from tfperf.serving.remote.rest import RestWire, parse_metadata
from tfperf.serving.remote.target import parse_target
from tfperf.serving.remote.tensors import InputSpec, fit, generated


@pytest.mark.parametrize(
    ("url", "protocol", "origin", "model", "version"),
    [
        ("http://h:8501/v1/models/m", "tfserving-rest", "http://h:8501", "m", None),
        (
            "http://h:8501/v1/models/m/versions/3:predict",
            "tfserving-rest",
            "http://h:8501",
            "m",
            "3",
        ),
        ("https://h/v2/models/m/infer", "v2-rest", "https://h:443", "m", None),
        ("http://h:8000/v2/models/m/versions/2/infer", "v2-rest", "http://h:8000", "m", "2"),
    ],
)
def test_the_protocol_is_guessed_from_the_scheme_and_path(url, protocol, origin, model, version):
    target = parse_target(url)
    assert (target.protocol, target.origin, target.model, target.version) == (
        protocol,
        origin,
        model,
        version,
    )
    assert target.guessed


def test_grpc_takes_the_model_name_and_tfserving_grpc_is_never_guessed():
    assert parse_target("grpc://h:8001", model_name="m").protocol == "v2-grpc"
    given = parse_target("grpc://h:8500", "tfserving-grpc", "m")
    assert given.origin == "h:8500" and not given.guessed


@pytest.mark.parametrize(
    ("url", "protocol", "said"),
    [
        ("grpc://h:8001", None, "--model-name NAME"),
        ("http://h:8000/", None, "give --protocol"),
        ("http://h:8000/v2/models/m/infer", "v2-grpc", r"speaks to grpc\(s\)://HOST:PORT"),
        ("ftp://h/x", None, "--url takes"),
        ("http://h:8000/v2/other", "v2-rest", "names no model"),
        ("http://me:pw@h:8000/v2/models/m", None, "give the credentials with --header"),
        ("grpc://h:8001?key=s3cret", "v2-grpc", "a gRPC URL carries no query string"),
    ],
)
def test_urls_that_name_nothing_usable_are_refused(url, protocol, said):
    with pytest.raises(UserError, match=said) as refused:
        parse_target(url, protocol)
    assert "s3cret" not in str(refused.value)  # a query's value is a secret, in sentences too


@pytest.mark.parametrize(
    "url", ["http://h:8000/v2/models/m/infer", "grpc://h:8001"],
)
def test_rest_format_is_refused_where_it_shapes_nothing(url):
    """--rest-format shapes TensorFlow Serving's REST body alone: given for another protocol it
    would be ignored, so it is refused; not given, every protocol goes on."""
    for given in ("row", "columnar"):
        with pytest.raises(UserError, match=r"--rest-format shapes TensorFlow Serving's REST"):
            parse_target(url, model_name="m", rest_format=given)
    assert parse_target(url, model_name="m").rest_format == "row"
    assert parse_target("http://h:1/v1/models/m", rest_format="columnar").rest_format == (
        "columnar")


def test_a_query_string_is_sent_and_kept_redacted_where_headers_are():
    target = parse_target("http://h:1/v2/models/m/infer?api_key=s3cret&tenant=a",
                          headers=["Authorization: Bearer t0ken"])
    assert target.query == "api_key=s3cret&tenant=a"  # what the wire sends
    wire = RestWire(target)
    assert wire.predict_path == "/v2/models/m/infer?api_key=s3cret&tenant=a"
    assert wire.metadata_paths == ("/v2/models/m?api_key=s3cret&tenant=a",)
    shown = json.dumps(target.to_dict()) + repr(target) + target.label()
    assert "s3cret" not in shown and "t0ken" not in shown
    assert target.to_dict()["url"] == (
        "http://h:1/v2/models/m/infer?api_key=<redacted>&tenant=<redacted>")
    stored = redact_command("tfperf bench --url 'http://h:1/v2/models/m?api_key=s3cret' "
                            "--header 'Authorization: Bearer t0ken' --rate 5")
    assert "s3cret" not in stored and "t0ken" not in stored and "api_key=<redacted>" in stored


@pytest.mark.parametrize(
    ("url", "warned"),
    [
        ("http://10.1.2.3:8000/v2/models/m", True),
        ("grpc://models.example:8001", True),
        ("https://models.example/v2/models/m", False),
        ("http://127.0.0.1:8000/v2/models/m", False),
        ("http://localhost:8000/v2/models/m", False),
        ("http://[::1]:8000/v2/models/m", False),
    ],
)
def test_a_header_sent_in_the_clear_beyond_this_machine_is_warned_of(url, warned):
    with_header = parse_target(url, model_name="m", headers=["X-Api-Key: k"])
    assert bool(with_header.warnings) == warned
    if warned:
        (said,) = with_header.warnings
        assert said.startswith("--header X-Api-Key go to ") and "without TLS" in said
        assert "k" not in said.split("X-Api-Key")[1].split()[0]  # the name, never the value
    assert parse_target(url, model_name="m").warnings == []  # nothing secret to send


def test_generated_inputs_fit_the_published_shapes_and_dtypes():
    specs = [
        InputSpec("f", "float32", (-1, 8)),
        InputSpec("i", "int64", (-1, 3)),
        InputSpec("b", "bool", (2,)),
    ]
    arrays = generated(specs, batch=4)
    assert arrays["f"].shape == (4, 8) and arrays["f"].dtype == np.float32
    assert arrays["i"].shape == (4, 3) and set(np.unique(arrays["i"])) <= {0, 1}
    assert arrays["b"].shape == (2,) and arrays["b"].dtype == bool
    assert fit(arrays, specs).keys() == arrays.keys()
    with pytest.raises(UserError, match="has shape"):
        fit({**arrays, "f": np.ones((4, 7), np.float32)}, specs)


def test_tensorflow_serving_signature_metadata_is_read():
    doc = {
        "metadata": {
            "signature_def": {
                "signature_def": {
                    "serving_default": {
                        "inputs": {
                            "x": {
                                "dtype": "DT_FLOAT",
                                "tensor_shape": {"dim": [{"size": "-1"}, {"size": "4"}]},
                            },
                            "k": {"dtype": "DT_INT64", "tensor_shape": {"unknown_rank": True}},
                        }
                    }
                }
            }
        }
    }
    assert parse_metadata(doc) == [
        InputSpec("k", "int64", None),
        InputSpec("x", "float32", (-1, 4)),
    ]


def test_row_and_columnar_bodies_of_two_inputs():
    arrays = {"a": np.zeros((2, 3), np.float32), "b": np.ones((2, 1), np.int32)}
    row = RestWire(parse_target("http://h:1/v1/models/m"))
    assert row.encode(arrays).startswith(b'{"instances": [{"a": [0.0, 0.0, 0.0], "b": [1]}')
    columnar = RestWire(parse_target("http://h:1/v1/models/m", rest_format="columnar"))
    assert (
        columnar.encode(arrays)
        == b'{"inputs": {"a": [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], "b": [[1], [1]]}}'
    )


def test_a_refused_address_is_one_sentence_and_exit_2_before_any_level(tmp_path):
    port = free_port()  # nothing listens there
    res = run_cli(
        "bench",
        "--url",
        f"http://127.0.0.1:{port}/v2/models/m",
        "--rate",
        "10",
        "--store",
        str(tmp_path / "s.sqlite"),
    )
    assert res.returncode == 2
    assert f"nothing answers at http://127.0.0.1:{port} (connection refused)" in res.stderr
    assert "offered" not in res.stderr and "Traceback" not in res.stderr


def test_layout_and_model_options_are_refused_with_url(tmp_path):
    url = "http://127.0.0.1:1/v2/models/m"
    res = run_cli(
        "bench", "--url", url, "--instances", "2", "--pin", "--max-batch", "4", "--streams", "2"
    )
    assert res.returncode == 2
    assert (
        "--instances, --pin, --max-batch, --streams describe a server tfperf starts" in res.stderr
    )
    res = run_cli("bench", "--url", url, "--workload", "mlp")
    assert res.returncode == 2 and "leave out --workload" in res.stderr


def test_an_inputs_file_that_is_not_a_npz_is_one_sentence(tmp_path):
    from tfperf.serving.remote.tensors import from_npz

    for path in (tmp_path / "missing.npz", tmp_path / "plain.npy"):
        if path.suffix == ".npy":
            np.save(path, np.ones(3))
        with pytest.raises(UserError, match=r"is not a readable \.npz"):
            from_npz(str(path))
