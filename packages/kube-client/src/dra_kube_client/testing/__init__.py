"""Test doubles of the API server (for unit tests only).

:class:`MemoryApi` implements :class:`dra_kube_client.JsonTransport` in process over a dict
of objects; :func:`serve_http` puts it behind a real HTTP server for a process that is given
a kubeconfig. :class:`ScriptedServer` answers each HTTP request with a test's own function;
:class:`MockTransport` does so one level up, for each ``request``/``watch_lines`` call;
:class:`Reviews` answers the token and access reviews of secure serving; :class:`TestCa`
issues certificates for HTTPS tests; :func:`free_port` picks a loopback port for a server
process a test starts.
"""

from dra_kube_client.testing.http_front import HttpFront, serve_http, status_body
from dra_kube_client.testing.local_server import free_port, write_kubeconfig
from dra_kube_client.testing.memory import Hold, MemoryApi
from dra_kube_client.testing.mock_transport import Answer, Call, MockTransport
from dra_kube_client.testing.pki import Issued, TestCa
from dra_kube_client.testing.reviews import Reviews
from dra_kube_client.testing.scripted_http import Reply, Request, ScriptedServer
from dra_kube_client.testing.selectors import SelectorError, matches, parse_selector

__all__ = [
    "Answer",
    "Call",
    "Hold",
    "HttpFront",
    "Issued",
    "MemoryApi",
    "MockTransport",
    "Reply",
    "Request",
    "Reviews",
    "ScriptedServer",
    "SelectorError",
    "TestCa",
    "free_port",
    "matches",
    "parse_selector",
    "serve_http",
    "status_body",
    "write_kubeconfig",
]
