"""The API-server edge: raw JSON requests and watch streams (:class:`JsonTransport`), and
:class:`KubeTransport`, which picks the connection code once, when it is built.

The common configurations (in-cluster service account; kubeconfig files with client
certificates, bearer tokens, CAs) go through :class:`HttpTransport` on ``urllib3``, so a
component never imports the ``kubernetes`` client (13 MB and half a second at start); a
kubeconfig that needs what only that client does (credential plugins, auth providers,
proxies, several merged files) goes through :class:`ClientLibraryTransport`. Bodies stay
plain JSON, read leniently by :mod:`dra_api_types`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from dra_kube_client.client_library import ClientLibraryTransport
from dra_kube_client.connection import (
    IN_CLUSTER_SOURCE,
    SERVICE_ACCOUNT_DIR,
    NeedsClientLibrary,
    connection_from_kubeconfig,
    in_cluster_connection,
)
from dra_kube_client.errors import KubeConfigError, status_fields
from dra_kube_client.http_transport import HttpTransport

__all__ = ["DEFAULT_KUBECONFIG", "JsonTransport", "KubeTransport", "status_fields"]

#: The kubeconfig read when neither ``--kubeconfig`` nor ``$KUBECONFIG`` names one.
DEFAULT_KUBECONFIG = "~/.kube/config"
_DEFAULT_SOURCE = "default kubeconfig"


class JsonTransport(Protocol):
    """What a component needs of an API server: JSON requests and watch streams."""

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
        """Send one request and return the decoded answer; raise :class:`KubeApiError`."""
        ...

    def watch_lines(
        self, path: str, *, query: Mapping[str, str], timeout_s: float
    ) -> Iterator[dict[str, Any]]:
        """Stream watch events (``{"type", "object"}``) until the server ends the watch."""
        ...


class KubeTransport:
    """:class:`JsonTransport` to one API server through the connection code chosen when it
    was built (:attr:`backend`): :class:`HttpTransport` or :class:`ClientLibraryTransport`."""

    def __init__(self, backend: HttpTransport | ClientLibraryTransport) -> None:
        """Send everything through ``backend``."""
        self.backend = backend

    @classmethod
    def from_kubeconfig(
        cls,
        kubeconfig: str | None = None,
        *,
        context: str | None = None,
        in_cluster: bool = True,
        fallback: bool = False,
    ) -> KubeTransport:
        """The transport for ``kubeconfig`` (and ``context``).

        Without either, the in-cluster service account when ``in_cluster`` (and, with
        ``fallback``, the default kubeconfig when not running in a pod); with ``in_cluster``
        False, the default kubeconfig (``$KUBECONFIG``, else ``~/.kube/config``).

        Raises:
            KubeConfigError: the configuration cannot be loaded.
        """
        if kubeconfig is None and context is None and in_cluster:
            try:
                return cls.in_cluster(os.environ)
            except KubeConfigError:
                if not fallback:
                    raise
        return cls.from_file(kubeconfig, context=context, env=os.environ)

    @classmethod
    def in_cluster(
        cls, env: Mapping[str, str], *, service_account_dir: str = SERVICE_ACCOUNT_DIR
    ) -> KubeTransport:
        """The pod's transport: the API service named by ``env``, the service account's token
        (read again whenever the kubelet rotates it) and CA in ``service_account_dir``.

        Raises:
            KubeConfigError: not in a pod, or the token or CA cannot be read.
        """
        connection = in_cluster_connection(env, service_account_dir=service_account_dir)
        return cls(HttpTransport(connection, source=IN_CLUSTER_SOURCE))

    @classmethod
    def from_file(
        cls, kubeconfig: str | None, *, context: str | None = None, env: Mapping[str, str]
    ) -> KubeTransport:
        """The transport for the kubeconfig file ``kubeconfig`` (``None``: ``$KUBECONFIG`` of
        ``env``, else ``~/.kube/config``) and ``context``: over ``urllib3`` unless the file
        needs the ``kubernetes`` client.

        Raises:
            KubeConfigError: the file cannot be read or lacks what its context names.
        """
        source = kubeconfig if kubeconfig is not None else _DEFAULT_SOURCE
        paths = kubeconfig if kubeconfig is not None else env.get("KUBECONFIG", "")
        paths = paths or DEFAULT_KUBECONFIG
        if os.pathsep in paths.strip(os.pathsep):  # several files, merged by the client
            return cls(ClientLibraryTransport.from_kubeconfig(paths, context=context))
        path = Path(paths.strip(os.pathsep)).expanduser()
        found = connection_from_kubeconfig(
            _read_config_file(path, source),
            source=source,
            base_dir=str(path.parent),
            context=context,
        )
        if isinstance(found, NeedsClientLibrary):
            return cls(ClientLibraryTransport.from_kubeconfig(str(path), context=context))
        return cls(HttpTransport(found, source=source))

    @property
    def server(self) -> str:
        """The API server's address, as the configuration names it (for error messages)."""
        return self.backend.server

    def close(self) -> None:
        """Release the connection pool."""
        self.backend.close()

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
        return self.backend.request(
            method, path, query=query, body=body, content_type=content_type, timeout_s=timeout_s
        )

    def watch_lines(
        self, path: str, *, query: Mapping[str, str], timeout_s: float
    ) -> Iterator[dict[str, Any]]:
        """Stream watch events (``{"type": ..., "object": ...}``) until the server ends it.

        Raises:
            KubeApiError: the watch could not be opened, broke, or sent a line that is not JSON
                (method ``WATCH``).
        """
        return self.backend.watch_lines(path, query=query, timeout_s=timeout_s)


def _read_config_file(path: Path, source: str) -> object:
    try:
        text = path.read_text()
    except OSError as exc:
        raise KubeConfigError(source, f"cannot read {path}: {exc.strerror or exc}") from exc
    if text.lstrip().startswith("{"):
        # A JSON kubeconfig (kubectl reads those too) needs no YAML parser.
        try:
            return json.loads(text)
        except ValueError:
            pass  # YAML's flow style also starts with "{": let the YAML parser judge it
    import yaml  # deferred import: a pod's in-cluster configuration reads no YAML

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise KubeConfigError(source, f"{path} is not YAML: {exc}") from exc
