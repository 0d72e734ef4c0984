""":class:`ClientLibraryTransport`: JSON requests and watch streams over the ``kubernetes``
client, for the kubeconfigs :class:`~dra_kube_client.http_transport.HttpTransport` does not
serve (``exec`` credential plugins, ``auth-provider``, proxies, several merged files).

Only the client's connection handling is used (kubeconfig loading, TLS, bearer tokens and
their refresh). Bodies stay plain JSON, read leniently by :mod:`dra_api_types`, because the
client's generated models reject fields they do not know.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlencode

from dra_kube_client.errors import KubeApiError, KubeConfigError, answer_error
from dra_kube_client.http_transport import WATCH_GRACE_S
from dra_kube_client.live_connections import LiveConnections
from dra_kube_client.wire import decode_answer, watch_events

if TYPE_CHECKING:
    # Imported lazily at run time: the client takes a second to import, and commands such as
    # the kubelet plugin's --print-resource-slices never talk to a server.
    from kubernetes import client as k8s_client

__all__ = ["ClientLibraryTransport"]


class ClientLibraryTransport:
    """:class:`~dra_kube_client.JsonTransport` on one ``kubernetes.client.ApiClient``."""

    def __init__(self, api_client: k8s_client.ApiClient) -> None:
        """Use ``api_client``'s configuration and connection pool."""
        self._api = api_client
        self._live = LiveConnections(str(api_client.configuration.host))
        self._live.install(api_client.rest_client.pool_manager)

    @classmethod
    def from_kubeconfig(
        cls, kubeconfig: str, *, context: str | None = None
    ) -> ClientLibraryTransport:
        """The transport for the kubeconfig file ``kubeconfig`` (several, joined by
        ``os.pathsep``, are merged as kubectl does) and ``context`` (default: its current one).

        Raises:
            KubeConfigError: the configuration cannot be loaded.
        """
        from kubernetes import client as k8s_client
        from kubernetes import config as k8s_config

        configuration = k8s_client.Configuration()
        try:
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
        except Exception as exc:  # the loader raises several unrelated types
            raise KubeConfigError(kubeconfig, f"cannot load: {exc}") from exc
        return cls(k8s_client.ApiClient(configuration))

    def close(self) -> None:
        """Close every connection, those in use too (see :class:`LiveConnections`; behind
        a SOCKS proxy, requests in flight end by their timeouts)."""
        self._live.abort()
        self._api.close()  # type: ignore[no-untyped-call]

    @property
    def server(self) -> str:
        """The API server's address, as the configuration names it (for error messages)."""
        return cast(str, self._api.configuration.host)

    def _url(self, path: str, query: Mapping[str, str] | None) -> str:
        url = cast(str, self._api.configuration.host) + path
        return url + "?" + urlencode(query) if query else url

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers: dict[str, str] = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        headers.update(self._api.default_headers)
        # Fills in the bearer token (and refreshes exec/oidc credentials) as the generated
        # clients do.
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
        """Send one request and return the decoded JSON object.

        Raises:
            KubeApiError: a transport failure (status 0) or a non-2xx answer.
        """
        from kubernetes.client import ApiException

        # The REST client serializes JSON bodies itself (a pre-encoded body is rejected); the
        # round trip turns tuples and other JSON-able values into plain lists and dicts.
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
        except ApiException as exc:  # status 0 (a request it cannot build, TLS) or a retry cap
            raise KubeApiError(method, path, int(exc.status or 0), str(exc.reason)) from exc
        except Exception as exc:  # urllib3 and socket errors: the API server is unreachable
            raise KubeApiError(method, path, 0, str(exc)) from exc
        return decode_answer(method, path, int(response.status), raw)

    def watch_lines(
        self, path: str, *, query: Mapping[str, str], timeout_s: float
    ) -> Iterator[dict[str, Any]]:
        """Stream watch events (``{"type": ..., "object": ...}``) until the server ends it.

        The server closes the stream after ``timeoutSeconds`` (``timeout_s`` unless the query
        names it).

        Raises:
            KubeApiError: the watch could not be opened, broke, or sent a line that is not JSON
                (method ``WATCH``).
        """
        params = dict(query)
        params["watch"] = "true"
        params.setdefault("timeoutSeconds", str(int(timeout_s)))
        try:
            response = self._api.call_api(
                "GET",
                self._url(path, params),
                header_params=self._headers(None),
                _request_timeout=timeout_s + WATCH_GRACE_S,
            )
        except Exception as exc:
            raise KubeApiError("WATCH", path, 0, str(exc)) from exc
        status = int(response.status)
        if status != 200:
            raw = response.read()  # type: ignore[no-untyped-call]
            raise answer_error("WATCH", path, status, raw)
        try:
            # decode_content: a server (or proxy) that compresses the stream is read the same.
            yield from watch_events(response.response.stream(amt=None, decode_content=True))
        except ValueError as exc:
            raise KubeApiError("WATCH", path, 0, f"event is not JSON: {exc}") from exc
        except Exception as exc:
            raise KubeApiError("WATCH", path, 0, str(exc)) from exc
        finally:
            response.response.release_conn()
