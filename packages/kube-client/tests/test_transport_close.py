"""Closing a transport ends its requests and watches in flight, on both connection codes:
a thread blocked on an API server that does not answer fails at once (status 0) instead of
waiting for its read timeout, and nothing reaches the server afterwards."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dra_kube_client import ClientLibraryTransport, KubeApiError, KubeTransport
from dra_kube_client.testing import HttpFront, MemoryApi, serve_http

SLICES = "/apis/resource.k8s.io/v1/resourceslices"
#: A test timeout only: how long a thread may take to notice its transport closed before the
#: test fails (it takes milliseconds; the transport's own read timeouts are 30 s and more).
THREAD_END_S = 20.0

Connect = Callable[[HttpFront, Path], KubeTransport]


def _urllib3(front: HttpFront, tmp_path: Path) -> KubeTransport:
    return KubeTransport.from_kubeconfig(str(front.write_kubeconfig(tmp_path / "kubeconfig")))


def _client_library(front: HttpFront, tmp_path: Path) -> KubeTransport:
    config = str(front.write_kubeconfig(tmp_path / "kubeconfig"))
    return KubeTransport(ClientLibraryTransport.from_kubeconfig(config))


@pytest.fixture(params=[_urllib3, _client_library], ids=["urllib3", "client-library"])
def connect(request: pytest.FixtureRequest) -> Connect:
    connect: Connect = request.param
    return connect


@pytest.fixture
def front() -> Iterator[HttpFront]:
    with serve_http(MemoryApi(watch_wait_s=300.0)) as served:
        yield served


class Caller:
    """Runs ``call`` on a thread of its own and keeps the error it ended with."""

    def __init__(self, call: Callable[[], object]) -> None:
        """Start ``call``."""
        self.error: BaseException | None = None
        self._call = call
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self._call()
        except BaseException as exc:
            self.error = exc

    def ended(self) -> BaseException | None:
        """Wait for the call to end (failing the test if it does not); its error."""
        self.thread.join(THREAD_END_S)
        assert not self.thread.is_alive(), "the call still waits for the API server"
        return self.error

    def ended_with_transport_error(self) -> KubeApiError:
        """The status-0 error the call failed with once it ended."""
        error = self.ended()
        assert isinstance(error, KubeApiError), error
        assert error.status == 0
        return error


def _wait_asked(api: MemoryApi, method: str, path: str) -> None:
    """Wait until ``api`` has received a ``method`` request of ``path``."""
    deadline = time.monotonic() + THREAD_END_S
    while (method, path) not in api.requests:
        assert time.monotonic() < deadline, f"{method} {path} never reached the server"
        time.sleep(0.01)


def test_close_ends_a_request_the_server_holds(
    front: HttpFront, tmp_path: Path, connect: Connect
) -> None:
    transport = connect(front, tmp_path)
    held = front.api.hold("POST", SLICES)
    caller = Caller(lambda: transport.request("POST", SLICES, body={"metadata": {"name": "s"}}))
    assert held.entered.wait(THREAD_END_S)
    transport.close()
    error = caller.ended_with_transport_error()
    assert error.method == "POST"
    held.release()
    # Nothing reaches the server once closed: not a retry, not a new request.
    with pytest.raises(KubeApiError) as later:
        transport.request("GET", SLICES)
    assert later.value.status == 0
    assert ("GET", SLICES) not in front.api.requests


def test_close_ends_a_watch_waiting_for_events(
    front: HttpFront, tmp_path: Path, connect: Connect
) -> None:
    transport = connect(front, tmp_path)
    query = {"resourceVersion": "0"}
    # A silent watch: the server streams nothing for minutes.
    caller = Caller(lambda: list(transport.watch_lines(SLICES, query=query, timeout_s=300)))
    _wait_asked(front.api, "WATCH", SLICES)
    transport.close()
    # The stream is cut: over HTTP/1.0 that reads as its end, else as a broken watch.
    error = caller.ended()
    assert error is None or (isinstance(error, KubeApiError) and error.status == 0), error
    front.api.requests.clear()
    with pytest.raises(KubeApiError) as again:
        list(transport.watch_lines(SLICES, query=query, timeout_s=300))
    assert (again.value.method, again.value.status) == ("WATCH", 0)
    assert front.api.requests == []


def test_close_ends_a_watch_the_server_has_not_answered(
    front: HttpFront, tmp_path: Path, connect: Connect
) -> None:
    transport = connect(front, tmp_path)
    held = front.api.hold("WATCH", SLICES)
    caller = Caller(
        lambda: list(transport.watch_lines(SLICES, query={"resourceVersion": "0"}, timeout_s=300))
    )
    assert held.entered.wait(THREAD_END_S)
    transport.close()
    assert caller.ended_with_transport_error().method == "WATCH"
