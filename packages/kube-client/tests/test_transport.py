"""KubeTransport against a local HTTP server: JSON requests, typed errors, watch streams."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from dra_kube_client import (
    KubeApiError,
    KubeConfigError,
    KubeTransport,
    path_segment,
    status_fields,
)

EVENTS = [
    {"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "2"}}},
    {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "3"}}},
]


@pytest.fixture
def server() -> Iterator[tuple[str, list[tuple[str, str, dict[str, str]]]]]:
    """A stand-in: a watch streamed in chunks split mid-line, a 410 Status, a POST echo."""
    seen: list[tuple[str, str, dict[str, str]]] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            seen.append(("GET", self.path, {k.lower(): v for k, v in self.headers.items()}))
            if "watch=true" in self.path and "resourceVersion=1" in self.path:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                data = "".join(json.dumps(e) + "\n" for e in EVENTS).encode()
                for part in (data[:17], data[17:]):
                    self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
            elif "watch=true" in self.path:
                status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
                self._json(410, status)
            elif self.path == "/list":
                self._json(200, ["not", "an", "object"])
            elif self.path == "/text":
                self._send(500, b"internal trouble", "text/plain")
            else:
                status = {"kind": "Status", "code": 404, "reason": "NotFound", "message": "nope"}
                self._json(404, status)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(("POST", self.path, {k.lower(): v for k, v in self.headers.items()}))
            self._json(201, json.loads(body))

        def _json(self, status: int, body: Any) -> None:
            self._send(status, json.dumps(body).encode(), "application/json")

        def _send(self, status: int, payload: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()
        httpd.server_close()


def kubeconfig(tmp_path: Path, url: str) -> Path:
    """A kubeconfig for ``url`` with a bearer token."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": url}}],
        "users": [{"name": "t", "user": {"token": "secret"}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_requests_send_json_with_the_bearer_token_and_raise_typed_errors(
    server: tuple[str, list[tuple[str, str, dict[str, str]]]], tmp_path: Path
) -> None:
    url, seen = server
    transport = KubeTransport.from_kubeconfig(str(kubeconfig(tmp_path, url)))
    # Tuples are JSON arrays on the wire.
    assert transport.request("POST", "/events", body={"x": (1, 2)}) == {"x": [1, 2]}
    method, path, headers = seen[-1]
    assert (method, path) == ("POST", "/events")
    assert headers["authorization"] == "Bearer secret"
    assert headers["content-type"] == "application/json"
    with pytest.raises(KubeApiError) as err:
        transport.request("GET", "/missing", query={"labelSelector": "a=b"})
    assert (err.value.status, err.value.reason, err.value.message) == (404, "NotFound", "nope")
    assert err.value.path == "/missing"
    assert seen[-1][1] == "/missing?labelSelector=a%3Db"
    with pytest.raises(KubeApiError, match="not a JSON object") as err:
        transport.request("GET", "/list")
    assert err.value.status == 200
    with pytest.raises(KubeApiError) as err:
        transport.request("GET", "/text")
    assert (err.value.status, err.value.reason, err.value.message) == (500, "", "internal trouble")
    transport.close()


def test_watch_reassembles_events_across_chunks_and_types_a_410(
    server: tuple[str, list[tuple[str, str, dict[str, str]]]], tmp_path: Path
) -> None:
    url, seen = server
    transport = KubeTransport.from_kubeconfig(str(kubeconfig(tmp_path, url)))
    events = list(transport.watch_lines("/items", query={"resourceVersion": "1"}, timeout_s=7))
    assert events == EVENTS
    assert "timeoutSeconds=7" in seen[-1][1]
    assert "watch=true" in seen[-1][1]
    # The caller's timeoutSeconds wins over the default from timeout_s.
    with pytest.raises(KubeApiError) as err:
        list(transport.watch_lines("/items", query={"timeoutSeconds": "3"}, timeout_s=7))
    assert (err.value.method, err.value.status, err.value.reason) == ("WATCH", 410, "Expired")
    assert "timeoutSeconds=3" in seen[-1][1]


def test_unreachable_server_is_status_0(tmp_path: Path) -> None:
    transport = KubeTransport.from_kubeconfig(str(kubeconfig(tmp_path, "http://127.0.0.1:9")))
    with pytest.raises(KubeApiError) as err:
        transport.request("GET", "/x", timeout_s=2)
    assert (err.value.status, err.value.reason) == (0, "")
    with pytest.raises(KubeApiError) as err:
        list(transport.watch_lines("/x", query={}, timeout_s=1))
    assert (err.value.method, err.value.status) == ("WATCH", 0)


def test_configuration_errors_name_their_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "absent"
    with pytest.raises(KubeConfigError) as err:
        KubeTransport.from_kubeconfig(str(missing))
    assert err.value.source == str(missing)
    # Not in a pod: no service account token, no service host.
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubeConfigError) as err:
        KubeTransport.from_kubeconfig()
    assert err.value.source == "in-cluster config"
    # The loader reads $KUBECONFIG once, at import: its default is patched instead.
    from kubernetes.config import kube_config

    monkeypatch.setattr(
        kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig(tmp_path, "http://127.0.0.1:9"))
    )
    fallen_back = KubeTransport.from_kubeconfig(fallback=True)
    with pytest.raises(KubeApiError):
        fallen_back.request("GET", "/x", timeout_s=1)
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(missing))
    with pytest.raises(KubeConfigError) as err:
        KubeTransport.from_kubeconfig(in_cluster=False)
    assert err.value.source == "default kubeconfig"


def test_status_fields_and_path_segments() -> None:
    body = b'{"kind": "Status", "reason": "Conflict", "message": "changed"}'
    assert status_fields(body) == ("Conflict", "changed")
    assert status_fields(b'{"message": "m"}') == ("", "m")
    assert status_fields(b"x" * 300) == ("", "x" * 200)
    assert status_fields(None) == ("", "")
    assert path_segment("a/b c") == "a%2Fb%20c"
