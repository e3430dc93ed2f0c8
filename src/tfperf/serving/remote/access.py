"""What a server asks of its clients before it answers: headers (a bearer token, an API key)
and, over TLS, a certificate signed by a CA the client trusts.

Contract:

- :func:`parse_access` reads ``--header 'NAME: VALUE'`` (repeatable) and ``--cacert FILE``
  into a frozen :class:`Access`; a header without ``NAME:``, a name that is not an HTTP token,
  a CA file that cannot be read or holds no PEM certificate, or ``--cacert`` for a URL without
  TLS is a :class:`~tfperf.core.errors.UserError`, one sentence.
- The CA certificates a TLS connection trusts are read explicitly (the clients never read the
  environment, so no proxy is taken from it either): ``--cacert`` when given, else the file in
  ``SSL_CERT_FILE`` (and the folder in ``SSL_CERT_DIR``) when set, else certifi's bundle (REST,
  as httpx trusts by default) or gRPC's own roots. :meth:`Access.ssl_context` is REST's,
  :meth:`Access.root_certificates` gRPC's.
- A header's value is a secret: :class:`Access` never prints it (its ``repr`` and
  :meth:`Access.to_dict` name the headers only) and :func:`redact_command` blanks every
  ``--header`` value of a command line before it is stored, and every value of a URL's query
  string (``?api_key=...``), which :func:`redact_url` blanks wherever the URL is kept.
"""

from __future__ import annotations

import os
import re
import shlex
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from tfperf.core.errors import UserError

REDACTED = "<redacted>"
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_VALUE = re.compile(r"[\t\x20-\x7e]*")
_PEM = b"-----BEGIN CERTIFICATE-----"


@dataclass(frozen=True)
class Access:
    """Headers sent with every request and the CA file a TLS connection trusts."""

    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    cacert: str | None = None

    def __repr__(self) -> str:
        return f"Access(headers={self.names()}, cacert={self.cacert!r})"

    def names(self) -> list[str]:
        return [name for name, _ in self.headers]

    def to_dict(self) -> dict[str, Any]:
        """What is recorded: the header names, each value redacted, and the CA file."""
        return {"headers": {name: REDACTED for name in self.names()}, "cacert": self.cacert}

    def grpc_metadata(self) -> tuple[tuple[str, str], ...]:
        """The headers as gRPC metadata (whose keys are lower case)."""
        return tuple((name.lower(), value) for name, value in self.headers)

    def _trusted(self) -> tuple[str | None, str | None]:
        """The CA file and folder to trust (module docstring)."""
        if self.cacert:
            return self.cacert, None
        return os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None

    def ssl_context(self) -> ssl.SSLContext:
        """REST's TLS context (module docstring)."""
        cafile, capath = self._trusted()
        if cafile is None and capath is None:
            import certifi

            cafile = certifi.where()
        try:
            return ssl.create_default_context(cafile=cafile, capath=capath)
        except (OSError, ssl.SSLError) as exc:
            raise UserError(_unreadable(cafile or capath, exc)) from None

    def root_certificates(self) -> bytes | None:
        """gRPC's trusted roots: the PEM file's bytes, or ``None`` for gRPC's own."""
        cafile, _ = self._trusted()
        return None if cafile is None else read_pem(cafile)


def _unreadable(path: str | None, exc: Exception) -> str:
    given = "" if path is None or path != os.environ.get("SSL_CERT_FILE") else " (SSL_CERT_FILE)"
    return (
        f"the CA certificate file {path!r}{given} cannot be read ({exc}): give --cacert a PEM "
        "file holding the certificate of the CA that signed the server's."
    )


def read_pem(path: str) -> bytes:
    """The bytes of a PEM certificate file; anything else is one sentence."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise UserError(_unreadable(path, exc)) from None
    if _PEM not in data:
        raise UserError(_unreadable(path, ValueError("no BEGIN CERTIFICATE block")))
    return data


def parse_header(text: str) -> tuple[str, str]:
    """``'NAME: VALUE'`` as ``(NAME, VALUE)``; anything else is one sentence that does not
    repeat the value."""
    name, colon, value = text.partition(":")
    name = name.strip()
    if not colon or not _TOKEN.match(name):
        raise UserError(
            "--header takes 'NAME: VALUE' (such as 'Authorization: Bearer TOKEN'); the one "
            f"given {'has no NAME: before its value' if not colon else f'names {name!r}'}."
        )
    if not _VALUE.fullmatch(value):
        raise UserError(
            f"--header {name}'s value holds characters a header cannot carry (a line break, "
            "a control character or one beyond ASCII): give it as printable ASCII."
        )
    return name, value.strip()


def parse_access(headers: Sequence[str], cacert: str | None, secure: bool, url: str) -> Access:
    """The :class:`Access` of ``--header`` and ``--cacert`` (module docstring)."""
    if cacert and not secure:
        raise UserError(
            f"--cacert is for a server spoken to over TLS (https:// or grpcs://), not {url!r}."
        )
    if cacert:
        read_pem(cacert)
    return Access(headers=tuple(parse_header(h) for h in headers), cacert=cacert)


def redact_url(url: str) -> str:
    """``url`` with each value of its query string :data:`REDACTED` (the names kept)."""
    parts = urlsplit(url)
    if not parts.query:
        return url
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    query = urlencode([(k, REDACTED) for k, _ in pairs], safe="<>")
    return urlunsplit(parts._replace(query=query or REDACTED))


def redact_command(command: str) -> str:
    """``command`` with the value of each ``--header`` replaced by :data:`REDACTED` (the
    name is kept), and each URL's query values too."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command if "--header" not in command and "?" not in command else REDACTED
    out: list[str] = []
    follows = False
    for word in words:
        if follows:
            word = _redacted(word)
        elif word.startswith("--header="):
            word = "--header=" + _redacted(word[len("--header=") :])
        elif "://" in word and "?" in word:
            flag, _, url = word.partition("=") if word.startswith("--") else ("", "", word)
            word = (flag + "=" if flag else "") + redact_url(url)
        follows = word == "--header"
        out.append(word)
    return shlex.join(out)


def _redacted(header: str) -> str:
    name, colon, _ = header.partition(":")
    return f"{name.strip()}: {REDACTED}" if colon else REDACTED
