"""The API-server edge: raw JSON requests and watches over the ``kubernetes`` client transport.

Only the client's transport (auth, TLS, kubeconfig/in-cluster loading) is used. Bodies are
plain JSON and DRA objects are parsed with :mod:`dra_api_types`, because the client's
generated models reject fields they do not know.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast
from urllib.parse import quote, urlencode

from dra_kubelet_plugin.core.errors import ConfigurationError, KubeApiError

if TYPE_CHECKING:
    # Imported lazily at run time: the client takes a second to import, and the plugin
    # does not need it with --claims-directory or --print-resource-slices.
    from kubernetes import client as k8s_client

__all__ = ["JsonTransport", "KubeTransport", "path_segment"]


class JsonTransport(Protocol):
    """What the plugin needs of an API server: JSON requests and watch streams."""

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
        """Send a request; raise :class:`KubeApiError` on failure."""
        ...

    def watch_lines(
        self, path: str, *, query: Mapping[str, str], timeout_s: float
    ) -> Iterator[dict[str, Any]]:
        """Stream watch events until the server ends the watch."""
        ...


class KubeTransport:
    """JSON requests against one API server."""

    def __init__(self, api_client: k8s_client.ApiClient) -> None:
        """Use ``api_client``'s configuration and connection pool."""
        self._api = api_client

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str | None) -> KubeTransport:
        """Load ``kubeconfig`` when given, else the in-cluster service account."""
        from kubernetes import client as k8s_client
        from kubernetes import config as k8s_config

        configuration = k8s_client.Configuration()
        try:
            if kubeconfig:
                k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                    config_file=kubeconfig, client_configuration=configuration
                )
            else:
                k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                    client_configuration=configuration
                )
        except Exception as exc:  # the loaders raise several unrelated types
            setting = "--kubeconfig" if kubeconfig else "in-cluster config"
            raise ConfigurationError(setting, f"cannot load: {exc}") from exc
        return cls(k8s_client.ApiClient(configuration))

    def close(self) -> None:
        """Release the connection pool."""
        self._api.close()  # type: ignore[no-untyped-call]

    def _url(self, path: str, query: Mapping[str, str] | None) -> str:
        host = cast(str, self._api.configuration.host)
        url = host + path
        if query:
            url += "?" + urlencode(query)
        return url

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers: dict[str, str] = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        headers.update(self._api.default_headers)
        # Fills in the bearer token (and refreshes exec/oidc credentials) as the client would.
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
        """Send one request and return the decoded JSON answer.

        Raises:
            KubeApiError: transport failure (status 0) or a non-2xx answer.
        """
        from kubernetes.client import ApiException

        # The REST client serializes JSON bodies itself (a pre-encoded body is rejected).
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
        except ApiException as exc:
            raise KubeApiError(method, path, int(exc.status or 0), str(exc.reason)) from exc
        except Exception as exc:  # urllib3 and socket errors: the API server is unreachable
            raise KubeApiError(method, path, 0, str(exc)) from exc
        status = int(response.status)
        if not 200 <= status < 300:
            raise KubeApiError(method, path, status, _status_message(raw))
        try:
            decoded = json.loads(raw) if raw else {}
        except ValueError as exc:
            raise KubeApiError(method, path, status, f"answer is not JSON: {exc}") from exc
        if not isinstance(decoded, dict):
            raise KubeApiError(method, path, status, "answer is not a JSON object")
        return decoded

    def watch_lines(
        self, path: str, *, query: Mapping[str, str], timeout_s: float
    ) -> Iterator[dict[str, Any]]:
        """Stream watch events (``{"type": ..., "object": ...}``) until the server ends it."""
        params = dict(query)
        params["watch"] = "true"
        params.setdefault("timeoutSeconds", str(int(timeout_s)))
        try:
            response = self._api.call_api(
                "GET",
                self._url(path, params),
                header_params=self._headers(None),
                _request_timeout=timeout_s + 10,
            )
        except Exception as exc:
            raise KubeApiError("WATCH", path, 0, str(exc)) from exc
        status = int(response.status)
        if status != 200:
            raw = response.read()  # type: ignore[no-untyped-call]
            raise KubeApiError("WATCH", path, status, _status_message(raw))
        buffer = b""
        try:
            for chunk in response.response.stream(amt=None, decode_content=False):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        event = json.loads(line)
                        if isinstance(event, dict):
                            yield event
        except Exception as exc:
            raise KubeApiError("WATCH", path, 0, str(exc)) from exc
        finally:
            response.response.release_conn()


def _status_message(raw: bytes | None) -> str:
    if not raw:
        return ""
    try:
        decoded = json.loads(raw)
    except ValueError:
        return raw[:200].decode(errors="replace")
    if isinstance(decoded, dict) and isinstance(decoded.get("message"), str):
        return cast(str, decoded["message"])
    return raw[:200].decode(errors="replace")


def path_segment(value: str) -> str:
    """Quote one path segment (names are DNS subdomains, but be safe)."""
    return quote(value, safe="")
