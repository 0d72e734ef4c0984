"""The informers over the real transport (``dra_kube_client``) and a local HTTP server.

The transport itself is tested in ``packages/kube-client``; this checks the informer's use of
it: list, watch streamed in chunks, bookmarks, a 410 on watch as WatchExpiredError.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from dra_controller.informers import Informer, Resource
from dra_kube_client import KubeTransport

EVENTS = [
    {
        "type": "ADDED",
        "object": {"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "2"}},
    },
    {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "3"}}},
]


@pytest.fixture
def server() -> Iterator[tuple[str, list[str]]]:
    """An API server stand-in: a list, a watch streamed in chunks, a 410, a POST echo."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            seen.append(self.path)
            if "watch=true" in self.path and "resourceVersion=1" in self.path:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                data = "".join(json.dumps(e) + "\n" for e in EVENTS).encode()
                # Split mid-line: the transport must reassemble events across chunks.
                for part in (data[:17], data[17:]):
                    self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
            elif "watch=true" in self.path:
                self._json(
                    410, {"kind": "Status", "code": 410, "message": "too old resource version"}
                )
            elif self.path.startswith("/items"):
                self._json(200, {"items": [], "metadata": {"resourceVersion": "1"}})
            else:
                self._json(404, {"kind": "Status", "code": 404, "message": "nope"})

        def do_POST(self) -> None:
            seen.append(self.path)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            self._json(201, json.loads(body))

        def _json(self, status: int, body: Any) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
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


def _transport(tmp_path: Path, url: str) -> KubeTransport:
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
    return KubeTransport.from_kubeconfig(str(path))


def test_informer_lists_and_watches_through_the_transport(
    server: tuple[str, list[str]], tmp_path: Path
) -> None:
    url, seen = server
    transport = _transport(tmp_path, url)
    informer = Informer(transport, Resource("Thing", "v1", "/items"))
    assert informer.watch_once(informer.list_once()) == "3"
    assert list(informer.store.items()) == ["ns/a"]
    assert any("allowWatchBookmarks=true" in p for p in seen)
    assert transport.request("POST", "/events", body={"x": 1}) == {"x": 1}
    from dra_controller.informers import WatchExpiredError

    with pytest.raises(WatchExpiredError):
        informer.watch_once("999")
