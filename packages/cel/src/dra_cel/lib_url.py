"""The Kubernetes URL library: ``url()``, ``isURL()`` and the getters on ``kubernetes.URL``."""

from __future__ import annotations

from .errors import CelRuntimeError
from .overloads import define
from .urls import URL_TYPE, parse_url


def _is_url(text: str) -> bool:
    try:
        parse_url(text)
    except CelRuntimeError:
        return False
    return True


define("url", ("string",), URL_TYPE, parse_url, receiver=False)
define("isURL", ("string",), "bool", _is_url, receiver=False)
define("getScheme", (URL_TYPE,), "string", lambda u: u.scheme)
define("getHost", (URL_TYPE,), "string", lambda u: u.host)
define("getHostname", (URL_TYPE,), "string", lambda u: u.hostname())
define("getPort", (URL_TYPE,), "string", lambda u: u.port())
define("getEscapedPath", (URL_TYPE,), "string", lambda u: u.escaped_path())
define("getQuery", (URL_TYPE,), "map", lambda u: u.query())
