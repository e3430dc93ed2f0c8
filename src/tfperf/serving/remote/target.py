"""Which server ``--url`` names, and over which protocol it is spoken to.

Contract:

- :func:`parse_target` reads a URL (and the optional ``--protocol``, ``--model-name``,
  ``--rest-format``) into a frozen :class:`RemoteTarget`: the protocol, the host and port (the
  only address that is ever contacted), the model's name and version, and whether the protocol
  was guessed, and what the server asks of a client (:class:`~tfperf.serving.remote.access.
  Access`: headers, the CA to trust). ``https://`` and ``grpcs://`` speak TLS. Guessing
  (:func:`guess_protocol`): ``grpc(s)://`` is ``v2-grpc``; an ``http(s)``
  path under ``/v2/`` is ``v2-rest``; one under ``/v1/`` is ``tfserving-rest``; anything else
  is refused, asking for ``--protocol``. ``tfserving-grpc`` is never guessed (its URL looks
  like ``v2-grpc``'s).
- Bad input (no model name, a scheme the protocol does not speak, a path that names no model,
  credentials in the URL, which would be stored with it, ``--rest-format`` for a protocol
  other than ``tfserving-rest``, which alone it shapes, a query string in a gRPC URL, which
  has none) raises :class:`~tfperf.core.errors.UserError` with one sentence saying what to
  write.
- A query string in a REST URL (``?api_key=...``, as some gateways take a key) is sent with
  every request, metadata included, and is a secret as a header's value is: ``url``, the
  record and the label carry it redacted (each value ``<redacted>``); the wire reads it from
  :attr:`RemoteTarget.query`, which is never printed.
- :attr:`RemoteTarget.warnings`: a ``--header`` (or a query string) sent without TLS to a host
  that is not loopback is said to go in the clear, where anyone on the way can read it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from tfperf.core.errors import UserError
from tfperf.serving.remote.access import Access, parse_access, redact_url

PROTOCOLS = ("tfserving-rest", "v2-rest", "v2-grpc", "tfserving-grpc")
REST_FORMATS = ("row", "columnar")
_GRPC = ("v2-grpc", "tfserving-grpc")
_GRPC_SCHEMES = ("grpc", "grpcs")
_TLS_SCHEMES = ("https", "grpcs")
_DEFAULT_PORTS = {"http": 80, "https": 443}
# /v1/models/NAME[/versions/N][:predict]  and  /v2/models/NAME[/versions/N][/infer]
_V1_PATH = re.compile(
    r"^/v1/models/(?P<model>[^/:]+)(?:/versions/(?P<version>[^/:]+))?(?::predict)?/?$"
)
_V2_PATH = re.compile(
    r"^/v2/models/(?P<model>[^/]+)(?:/versions/(?P<version>[^/]+))?(?:/infer)?/?$"
)


@dataclass(frozen=True)
class RemoteTarget:
    """A server the user runs, as ``tfperf bench --url`` speaks to it."""

    url: str
    protocol: str
    scheme: str
    host: str
    port: int
    model: str
    version: str | None = None
    guessed: bool = False
    """The protocol was guessed from the URL (and the guess is printed)."""
    rest_format: str = "row"
    """``tfserving-rest`` only: ``row`` (``instances``) or ``columnar`` (``inputs``)."""
    access: Access = field(default_factory=Access)
    query: str = field(default="", repr=False)
    """The URL's query string, sent with every REST request; a secret (module docstring)."""

    @property
    def tls(self) -> bool:
        """Spoken to over TLS (``https://``, ``grpcs://``)."""
        return self.scheme in _TLS_SCHEMES

    @property
    def origin(self) -> str:
        """``http://HOST:PORT`` (REST) or ``HOST:PORT`` (gRPC): all that is contacted."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        if self.protocol in _GRPC:
            return f"{host}:{self.port}"
        return f"{self.scheme}://{host}:{self.port}"

    def label(self) -> str:
        version = f" v{self.version}" if self.version else ""
        return f"{self.protocol} {self.origin} {self.model}{version}"

    @property
    def warnings(self) -> list[str]:
        """Secrets sent in the clear (module docstring)."""
        sent = [f"--header {name}" for name in self.access.names()]
        sent += ["the URL's query string"] if self.query else []
        if not sent or self.tls or _loopback(self.host):
            return []
        scheme = "grpcs://" if self.protocol in _GRPC else "https://"
        return [
            f"{' and '.join(sent)} go to {self.host} without TLS ({self.scheme}://), where "
            f"anyone on the way can read them: use {scheme} for a server beyond this machine"
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "remote",
            "name": self.label(),  # what reports and history call the workload
            "url": self.url,
            "protocol": self.protocol,
            "origin": self.origin,
            "model": self.model,
            "version": self.version,
            "protocol_guessed": self.guessed,
            "rest_format": self.rest_format if self.protocol == "tfserving-rest" else None,
            "tls": self.tls,
            **self.access.to_dict(),
        }


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def guess_protocol(scheme: str, path: str) -> str:
    """The protocol a URL's scheme and path point at (module docstring)."""
    if scheme in _GRPC_SCHEMES:
        return "v2-grpc"
    if scheme in _DEFAULT_PORTS and path.startswith("/v2/"):
        return "v2-rest"
    if scheme in _DEFAULT_PORTS and path.startswith("/v1/"):
        return "tfserving-rest"
    raise UserError(
        f"cannot tell the protocol of {scheme}://...{path or '/'}: give --protocol "
        f"({'|'.join(PROTOCOLS)}) or a URL like http://HOST:PORT/v1/models/NAME."
    )


def _model_from_path(protocol: str, path: str) -> tuple[str | None, str | None]:
    if protocol in _GRPC or path in ("", "/"):
        return None, None
    pattern = _V1_PATH if protocol == "tfserving-rest" else _V2_PATH
    found = pattern.match(path)
    if not found:
        example = "/v1/models/NAME" if protocol == "tfserving-rest" else "/v2/models/NAME/infer"
        raise UserError(
            f"the path {path!r} names no model for {protocol}: write the URL as "
            f"http://HOST:PORT{example} (or give --model-name with http://HOST:PORT)."
        )
    return found["model"], found["version"]


def _check_applies(url: str, protocol: str, rest_format: str | None) -> None:
    """Refuse ``--rest-format`` and a query string where ``protocol`` has no use for them."""
    if rest_format is not None and rest_format not in REST_FORMATS:
        raise UserError(f"--rest-format takes row or columnar, not {rest_format!r}.")
    if rest_format is not None and protocol != "tfserving-rest":
        raise UserError(
            f"--rest-format shapes TensorFlow Serving's REST body (tfserving-rest), and "
            f"{redact_url(url)!r} is spoken to over {protocol}: leave --rest-format out."
        )
    if urlsplit(url).query and protocol in _GRPC:
        raise UserError(
            f"a gRPC URL carries no query string, and {redact_url(url)!r} has one: give what "
            "it holds with --header 'NAME: VALUE' (sent as gRPC metadata)."
        )


def parse_target(
    url: str,
    protocol: str | None = None,
    model_name: str | None = None,
    rest_format: str | None = None,
    headers: Sequence[str] = (),
    cacert: str | None = None,
) -> RemoteTarget:
    """The :class:`RemoteTarget` of ``--url`` and its options (module docstring);
    ``rest_format`` ``None`` when not given."""
    parts = urlsplit(url)
    shown = redact_url(url)  # a query string's values are secrets, in sentences too
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https", *_GRPC_SCHEMES) or not parts.hostname:
        raise UserError(
            f"--url takes http(s)://HOST:PORT/... or grpc(s)://HOST:PORT, not {shown!r}."
        )
    if parts.username is not None or parts.password is not None:
        raise UserError(
            "--url names a user (USER:PASSWORD@HOST), which would be stored with the run: give "
            "the credentials with --header 'Authorization: ...' instead."
        )
    guessed = protocol is None
    chosen = protocol or guess_protocol(scheme, parts.path)
    if chosen not in PROTOCOLS:
        raise UserError(f"--protocol takes one of {', '.join(PROTOCOLS)}, not {chosen!r}.")
    if (chosen in _GRPC) != (scheme in _GRPC_SCHEMES):
        want = "grpc(s)://HOST:PORT" if chosen in _GRPC else "http(s)://HOST:PORT/..."
        raise UserError(f"--protocol {chosen} speaks to {want}, not {shown!r}.")
    _check_applies(url, chosen, rest_format)
    try:
        port = parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:
        raise UserError(f"the port of {shown!r} is not a number from 1 to 65535.") from None
    if port is None:
        raise UserError(f"a gRPC URL needs its port: {scheme}://HOST:PORT, not {shown!r}.")
    model, version = _model_from_path(chosen, parts.path)
    model = model_name or model
    if not model:
        raise UserError(
            f"name the model: --model-name NAME (or, over REST, a URL such as "
            f"http://HOST:PORT/v2/models/NAME/infer), as {shown!r} names none."
        )
    return RemoteTarget(
        url=redact_url(url),
        protocol=chosen,
        scheme=scheme,
        host=parts.hostname,
        port=port,
        model=model,
        version=version,
        guessed=guessed,
        rest_format=rest_format or "row",
        access=parse_access(headers, cacert, scheme in _TLS_SCHEMES, redact_url(url)),
        query=parts.query,
    )
