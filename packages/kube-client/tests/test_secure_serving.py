"""Secure serving of /metrics: HTTPS, 401 without or with a bad token, 403 when not allowed,
served when allowed; reviews cached for their TTL; plain HTTP only when asked for."""

from __future__ import annotations

import http.client
import ssl
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from dra_kube_client import (
    DelegatedAuth,
    ServingSecurity,
    TlsFilesError,
    admit,
    start_http_server,
)
from dra_kube_client.delegated_auth import bearer_token
from dra_kube_client.testing import Reviews

PROMETHEUS, INTRUDER = "system:serviceaccount:monitoring:prometheus", "system:anonymous-ish"


class FakeClock:
    """Monotonic time moved by the test."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _reviews() -> Reviews:
    return Reviews(
        tokens={"good": PROMETHEUS, "other": INTRUDER},
        allowed={(PROMETHEUS, "/metrics", "get")},
    )


def _serve(auth: DelegatedAuth | None, security: ServingSecurity) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if not admit(self, auth):
                return
            body = b"secret_claims_total 3\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    return start_http_server(("127.0.0.1", 0), Handler, tls=security.tls_context("127.0.0.1"))


@pytest.fixture
def secure() -> Iterator[tuple[ThreadingHTTPServer, Reviews]]:
    reviews = _reviews()
    server = _serve(DelegatedAuth(reviews.transport()), ServingSecurity())
    yield server, reviews
    server.shutdown()
    server.server_close()


def _get(server: ThreadingHTTPServer, token: str | None, *, tls: bool = True) -> tuple[int, str]:
    host, port = server.server_address[:2]
    conn: http.client.HTTPConnection
    if tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # self-signed, as a scraper with insecureSkipVerify
        conn = http.client.HTTPSConnection(str(host), int(port), context=context, timeout=10)
    else:
        conn = http.client.HTTPConnection(str(host), int(port), timeout=10)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    conn.request("GET", "/metrics?x=1", headers=headers)
    resp = conn.getresponse()
    body = resp.read().decode()
    conn.close()
    return resp.status, body


def test_no_token_is_401_a_bad_token_is_401_and_no_metric_leaks(
    secure: tuple[ThreadingHTTPServer, Reviews],
) -> None:
    server, _ = secure
    for token in (None, "forged"):
        status, body = _get(server, token)
        assert status == HTTPStatus.UNAUTHORIZED
        assert "secret_claims_total" not in body


def test_a_valid_user_without_the_permission_is_403(
    secure: tuple[ThreadingHTTPServer, Reviews],
) -> None:
    status, body = _get(secure[0], "other")
    assert status == HTTPStatus.FORBIDDEN
    assert f'user "{INTRUDER}" cannot get path "/metrics"' in body


def test_an_allowed_scraper_gets_the_metrics_over_https(
    secure: tuple[ThreadingHTTPServer, Reviews],
) -> None:
    assert _get(secure[0], "good") == (200, "secret_claims_total 3\n")


def test_plain_http_to_the_secure_port_gets_nothing(
    secure: tuple[ThreadingHTTPServer, Reviews],
) -> None:
    with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
        _get(secure[0], "good", tls=False)
    assert _get(secure[0], "good")[0] == 200  # the server still serves TLS clients


def test_insecure_serving_is_plain_http_without_checks_only_when_asked() -> None:
    server = _serve(None, ServingSecurity(insecure=True))
    try:
        assert _get(server, None, tls=False) == (200, "secret_claims_total 3\n")
    finally:
        server.shutdown()
        server.server_close()


def test_reviews_are_cached_for_their_ttl_and_asked_again_after() -> None:
    reviews, clock = _reviews(), FakeClock()
    auth = DelegatedAuth(reviews.transport(), ttl_s=10, clock=clock)
    for _ in range(5):
        assert auth.check("Bearer good", path="/metrics").allowed
        assert not auth.check("Bearer forged", path="/metrics").allowed
    assert (reviews.token_reviews, reviews.access_reviews) == (2, 1)
    clock.now += 10.5
    assert auth.check("Bearer good", path="/metrics").allowed
    assert (reviews.token_reviews, reviews.access_reviews) == (3, 2)


def test_a_denial_is_cached_too_and_a_new_permission_shows_after_the_ttl() -> None:
    reviews, clock = _reviews(), FakeClock()
    auth = DelegatedAuth(reviews.transport(), ttl_s=10, clock=clock)
    assert auth.check("Bearer other", path="/metrics").status == HTTPStatus.FORBIDDEN
    reviews.allowed.add((INTRUDER, "/metrics", "get"))
    assert auth.check("Bearer other", path="/metrics").status == HTTPStatus.FORBIDDEN
    clock.now += 11
    assert auth.check("Bearer other", path="/metrics").allowed


def test_failed_reviews_are_not_cached() -> None:
    reviews, clock = _reviews(), FakeClock()
    auth = DelegatedAuth(reviews.transport(), ttl_s=10, clock=clock)
    reviews.down = True
    assert auth.check("Bearer good", path="/metrics").status == HTTPStatus.UNAUTHORIZED
    reviews.down = False
    assert auth.check("Bearer good", path="/metrics").allowed


def test_the_access_review_names_the_user_path_and_verb() -> None:
    reviews = _reviews()
    transport = reviews.transport()
    DelegatedAuth(transport).check("Bearer good", path="/metrics")
    sar = transport.calls[-1]
    assert sar.body == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": PROMETHEUS,
            "uid": f"uid-{PROMETHEUS}",
            "groups": ["system:authenticated"],
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
        },
    }


@pytest.mark.parametrize(
    ("header", "token"),
    [(None, None), ("", None), ("Basic abc", None), ("Bearer ", None), ("bearer t1", "t1")],
)
def test_bearer_token_parsing(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


def test_a_certificate_without_its_key_is_refused() -> None:
    with pytest.raises(TlsFilesError, match="give both or neither"):
        ServingSecurity(cert_file="/tls/tls.crt")


def test_unloadable_certificate_files_name_both_paths(tmp_path: Any) -> None:
    (tmp_path / "c").write_text("not pem")
    (tmp_path / "k").write_text("not pem")
    security = ServingSecurity(cert_file=str(tmp_path / "c"), key_file=str(tmp_path / "k"))
    with pytest.raises(TlsFilesError) as err:
        security.tls_context("0.0.0.0")
    assert str(tmp_path / "c") in str(err.value)
    assert str(tmp_path / "k") in str(err.value)
