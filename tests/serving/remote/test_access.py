"""A server behind TLS with a self-signed certificate and a bearer token, as production servers
sit, on loopback: ``--cacert`` (or ``SSL_CERT_FILE``) is trusted over https:// and grpcs://,
``--header`` goes with every request (gRPC: as metadata), and the token is never written
anywhere: not in the stored command line, the report or the JSON."""

from __future__ import annotations

import json

import pytest

from helpers import run_cli
from serving.remote.scripted import Script, scripted, scripted_grpc, self_signed
from tfperf.core.errors import UserError
from tfperf.serving.remote.access import parse_header, redact_command

TOKEN = "s3cret-token-1f2e3d"
AUTH = f"Bearer {TOKEN}"
LEVEL = ("--concurrency", "1", "--level-requests", "5", "--level-seconds", "0.1")


@pytest.fixture(scope="module")
def cert(tmp_path_factory) -> tuple[str, str]:
    return self_signed(tmp_path_factory.mktemp("tls"))


def _bench(url: str, tmp_path, *args: str, env: dict | None = None):
    return run_cli("bench", "--url", url, "--model-name", "m", *LEVEL, *args,
                   "--store", str(tmp_path / "s.sqlite"), env=env, timeout=120)


@pytest.mark.parametrize("scheme", ["https", "grpcs"])
def test_tls_with_cacert_and_a_bearer_token_that_is_never_stored(scheme, cert, tmp_path):
    script = Script(require={"Authorization": AUTH})
    serve = scripted if scheme == "https" else scripted_grpc
    proxy = {"HTTPS_PROXY": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
             "GRPC_PROXY": "http://127.0.0.1:9", "grpc_proxy": "http://127.0.0.1:9"}
    with serve(script, tls=cert) as port:
        path = "/v2/models/m" if scheme == "https" else ""
        url = f"{scheme}://127.0.0.1:{port}{path}"
        res = _bench(url, tmp_path, "--header", f"Authorization: {AUTH}", "--header",
                     "X-Team: tfperf", "--cacert", cert[0], "--json", env=proxy)
        assert res.returncode == 0, res.stderr[-3000:]
        doc = json.loads(res.stdout)
        assert doc["levels"][0]["completed"] >= 5 and doc["levels"][0]["failed"] == 0
        assert doc["target"]["headers"] == {"Authorization": "<redacted>",
                                            "X-Team": "<redacted>"}
        assert doc["target"]["tls"] and doc["target"]["cacert"] == cert[0]
        # no --cacert: the certificate is not trusted; SSL_CERT_FILE is, when set
        untrusted = _bench(url, tmp_path, "--header", f"Authorization: {AUTH}")
        anonymous = _bench(url, tmp_path, env={"SSL_CERT_FILE": cert[0]})
    assert script.done["posts"] >= 6  # the proxies in the environment were not taken
    key = "Authorization" if scheme == "https" else "authorization"
    assert all(h.get(key) in (AUTH, None) for h in script.seen_headers)
    assert untrusted.returncode == 2, untrusted.stderr[-3000:]
    assert "error: TLS with " in untrusted.stderr and "give --cacert FILE" in untrusted.stderr
    assert anonymous.returncode == 2, anonymous.stderr[-3000:]
    assert "refused this client's credentials" in anonymous.stderr
    report = run_cli("report", str(doc["run_id"]), "--json", "--store", str(tmp_path / "s.sqlite"))
    assert report.returncode == 0 and "Authorization: <redacted>" in report.stdout
    everything = res.stdout + res.stderr + report.stdout + untrusted.stderr
    assert TOKEN not in everything
    assert TOKEN.encode() not in (tmp_path / "s.sqlite").read_bytes()


def test_a_header_is_name_colon_value_and_its_value_is_redacted():
    assert parse_header("Authorization:  Bearer a:b ") == ("Authorization", "Bearer a:b")
    for bad in ("Bearer abc", "Bad Name: x", ": x", "X-Key: abc\n", "X-Key: abcé"):
        with pytest.raises(UserError, match="--header") as caught:
            parse_header(bad)
        assert "abc" not in str(caught.value)
    command = "tfperf bench --url U --header 'Authorization: Bearer T' --header=X-Key:T2 -q"
    assert redact_command(command) == (
        "tfperf bench --url U --header 'Authorization: <redacted>' '--header=X-Key: <redacted>' -q"
    )


def test_cacert_without_tls_or_unreadable_is_one_sentence(tmp_path):
    res = run_cli("bench", "--url", "http://127.0.0.1:1/v2/models/m", "--rate", "1",
                  "--cacert", str(tmp_path / "missing.pem"))
    assert res.returncode == 2 and "--cacert is for a server spoken to over TLS" in res.stderr
    res = run_cli("bench", "--url", "https://127.0.0.1:1/v2/models/m", "--rate", "1",
                  "--cacert", str(tmp_path / "missing.pem"))
    assert res.returncode == 2 and "cannot be read" in res.stderr
    assert "Traceback" not in res.stderr
