"""CEL ``kubernetes.URL`` values of the Kubernetes URL library.

Parsing follows Go's ``url.ParseRequestURI`` (an absolute URI or an absolute path; no
fragment handling), which the Kubernetes library uses.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final
from urllib.parse import quote, unquote

from .errors import CelRuntimeError

URL_TYPE: Final = "kubernetes.URL"

_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
_HOST_CHARS: Final = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=%]*")
_ESCAPE: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")
_PATH_SAFE: Final = "/:@!$&'()*+,;=-._~"


class URL:
    """A ``kubernetes.URL`` value."""

    __slots__ = ("host", "opaque", "path", "raw_query", "scheme")

    def __init__(self, *, scheme: str, host: str, path: str, raw_query: str, opaque: str) -> None:
        self.scheme = scheme
        self.host = host
        self.path = path
        self.raw_query = raw_query
        self.opaque = opaque

    def __eq__(self, other: object) -> bool:
        return isinstance(other, URL) and str(other) == str(self)

    def __hash__(self) -> int:
        return hash(str(self))

    def __str__(self) -> str:
        if self.opaque:
            text = f"{self.scheme}:{self.opaque}"
        else:
            text = f"{self.scheme}://{self.host}" if self.scheme else ""
            text += self.path
        return f"{text}?{self.raw_query}" if self.raw_query else text

    def hostname(self) -> str:
        """The host without port and without IPv6 brackets."""
        host = self.host
        if host.startswith("["):
            return host[1 : host.find("]")]
        return host.rsplit(":", 1)[0] if ":" in host else host

    def port(self) -> str:
        """The port, or "" when none is given."""
        host = self.host
        if host.startswith("["):
            rest = host[host.find("]") + 1 :]
            return rest[1:] if rest.startswith(":") else ""
        return host.rsplit(":", 1)[1] if ":" in host else ""

    def escaped_path(self) -> str:
        """Go's ``EscapedPath``: the path as written when valid, else re-escaped."""
        if _valid_escaping(self.path):
            return self.path
        return quote(unquote(self.path), safe=_PATH_SAFE)

    def query(self) -> dict[str, list[str]]:
        """Go's ``Query()``: values per key, in order; malformed pairs are skipped."""
        result: dict[str, list[str]] = {}
        for pair in self.raw_query.split("&"):
            if not pair or ";" in pair:
                continue
            key, _, value = pair.partition("=")
            try:
                key = unquote(key.replace("+", " "), errors="strict")
                value = unquote(value.replace("+", " "), errors="strict")
            except UnicodeDecodeError:
                continue
            result.setdefault(key, []).append(value)
        return result


def _valid_escaping(text: str) -> bool:
    return _ESCAPE.search(text) is None and " " not in text


def parse_url(text: str) -> URL:
    """Parse as Go's ``url.ParseRequestURI``; raise :class:`CelRuntimeError` if invalid."""

    def fail(reason: str) -> CelRuntimeError:
        return CelRuntimeError(f"URL parse error during conversion from string: {text!r}: {reason}")

    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise fail("invalid control character in URL")
    if not text:
        raise fail("empty url")
    scheme = ""
    rest = text
    m = _SCHEME.match(text)
    if m and text[m.end() : m.end() + 1] == ":":
        scheme = m.group(0).lower()
        rest = text[m.end() + 1 :]
    elif text.startswith(":"):
        raise fail("missing protocol scheme")
    rest, _, raw_query = rest.partition("?")
    if scheme and not rest.startswith("/"):
        return URL(scheme=scheme, host="", path="", raw_query=raw_query, opaque=rest)
    if not rest.startswith("/"):
        raise fail("invalid URI for request")
    host = ""
    if rest.startswith("//") and (scheme or not rest.startswith("///")):
        authority, slash, path = rest[2:].partition("/")
        rest = slash + path
        host = authority.rpartition("@")[2]
        _check_host(host, fail)
    if _ESCAPE.search(rest):
        raise fail("invalid URL escape")
    return URL(scheme=scheme, host=host, path=rest, raw_query=raw_query, opaque="")


def _check_host(host: str, fail: Callable[[str], CelRuntimeError]) -> None:
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            raise fail("missing ']' in host")
        port = host[end + 1 :]
        if port and (not port.startswith(":") or not port[1:].isdigit()):
            raise fail(f"invalid port {port!r} after host")
        return
    name, colon, port = host.rpartition(":") if ":" in host else (host, "", "")
    if colon and port and not port.isdigit():
        raise fail(f"invalid port {':' + port!r} after host")
    if not _HOST_CHARS.fullmatch(name):
        raise fail("invalid character in host name")
