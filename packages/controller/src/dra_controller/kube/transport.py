"""Raw JSON requests and watch streams over the ``kubernetes`` client's transport.

Only the client's connection handling is used (kubeconfig or in-cluster loading, TLS,
bearer tokens): bodies stay plain JSON, read leniently by :mod:`dra_api_types`, because the
generated models reject fields newer than the client.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast
from urllib.parse import urlencode

if TYPE_CHECKING:
    from kubernetes import client as k8s_client


class ApiError(Exception):
    """A request failed: ``status`` is the HTTP status, 0 when the server was not reached."""

    def __init__(self, method: str, path: str, status: int, message: str) -> None:
        """Record what was asked and what came back."""
        super().__init__(
            f"{method} {path}: HTTP {status}: {message}"
            if status
            else f"{method} {path}: {message}"
        )
        self.method = method
        self.path = path
        self.status = status
        self.message = message


class ApiTransport(Protocol):
    """What the controller needs of an API server."""

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout_s: float = 30.0,
    ) -> dict[str, Any]:
        """Send one request and return the decoded answer; raise :class:`ApiError`."""
        ...

    def watch(
        self, path: str, *, query: Mapping[str, str], timeout_s: float
    ) -> Iterator[dict[str, Any]]:
        """Stream watch events (``{"type", "object"}``) until the server ends the watch."""
        ...


class KubeTransport:
    """:class:`ApiTransport` on one ``kubernetes.client.ApiClient``."""

    def __init__(self, api_client: k8s_client.ApiClient) -> None:
        """Use the client's configuration and connection pool."""
        self._api = api_client

    def _url(self, path: str, query: Mapping[str, str] | None) -> str:
        url = cast(str, self._api.configuration.host) + path
        return url + "?" + urlencode(query) if query else url

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        headers.update(self._api.default_headers)
        # Adds (and refreshes) the bearer token exactly as the generated clients do.
        self._api.update_params_for_auth(headers, [], ["BearerToken"], "", "GET", None)
        return headers

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout_s: float = 30.0,
    ) -> dict[str, Any]:
        """Send one request; a non-2xx answer or a transport failure is an :class:`ApiError`."""
        data = None if body is None else json.loads(json.dumps(body))
        try:
            response = self._api.call_api(
                method,
                self._url(path, query),
                header_params=self._headers(content_type if data is not None else None),
                body=data,
                _request_timeout=timeout_s,
            )
            raw = response.read()  # type: ignore[no-untyped-call]
        except Exception as exc:  # urllib3/socket errors: not reached
            raise ApiError(method, path, int(getattr(exc, "status", 0) or 0), str(exc)) from exc
        status = int(response.status)
        if not 200 <= status < 300:
            raise ApiError(method, path, status, status_message(raw))
        try:
            decoded = json.loads(raw) if raw else {}
        except ValueError as exc:
            raise ApiError(method, path, status, f"answer is not JSON: {exc}") from exc
        if not isinstance(decoded, dict):
            raise ApiError(method, path, status, "answer is not a JSON object")
        return decoded

    def watch(
        self, path: str, *, query: Mapping[str, str], timeout_s: float
    ) -> Iterator[dict[str, Any]]:
        """Stream watch events; the server closes the stream after ``timeout_s``."""
        params = {**query, "watch": "true", "timeoutSeconds": str(int(timeout_s))}
        try:
            response = self._api.call_api(
                "GET",
                self._url(path, params),
                header_params=self._headers(None),
                _request_timeout=timeout_s + 15,
            )
        except Exception as exc:
            raise ApiError("WATCH", path, 0, str(exc)) from exc
        if int(response.status) != 200:
            raw = response.read()  # type: ignore[no-untyped-call]
            raise ApiError("WATCH", path, int(response.status), status_message(raw))
        buffer = b""
        try:
            for chunk in response.response.stream(amt=None, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        event = json.loads(line)
                        if isinstance(event, dict):
                            yield event
        except ValueError as exc:
            raise ApiError("WATCH", path, 0, f"event is not JSON: {exc}") from exc
        except Exception as exc:
            raise ApiError("WATCH", path, 0, str(exc)) from exc
        finally:
            response.response.release_conn()


def status_message(raw: bytes | None) -> str:
    """The ``message`` of a Status body, else the start of the body."""
    if not raw:
        return ""
    try:
        decoded = json.loads(raw)
    except ValueError:
        return raw[:200].decode(errors="replace")
    if isinstance(decoded, dict) and isinstance(decoded.get("message"), str):
        return cast(str, decoded["message"])
    return raw[:200].decode(errors="replace")


def load_transport(
    *, kubeconfig: str | None = None, context: str | None = None, in_cluster: bool = True
) -> KubeTransport:
    """The transport for ``kubeconfig`` (and ``context``); without either, the in-cluster
    service account when ``in_cluster`` (falling back to the default kubeconfig).

    Raises:
        ApiError: the configuration cannot be loaded (status 0).
    """
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

    configuration = k8s_client.Configuration()
    try:
        if kubeconfig is not None or context is not None or not in_cluster:
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
        else:
            try:
                k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                    client_configuration=configuration
                )
            except k8s_config.ConfigException:
                k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                    client_configuration=configuration
                )
    except Exception as exc:  # the loaders raise several unrelated types
        raise ApiError("CONFIG", kubeconfig or "in-cluster", 0, f"cannot load: {exc}") from exc
    return KubeTransport(k8s_client.ApiClient(configuration))
