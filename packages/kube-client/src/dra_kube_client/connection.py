"""Where the API server is and how to authenticate to it, read from a kubeconfig document or
the in-cluster environment (pure: the caller reads the files).

The common cases are read here, so that a component can talk to the API server without the
``kubernetes`` client (13 MB and half a second of imports): a server URL, the cluster's CA
(file or data), ``insecure-skip-tls-verify``, ``tls-server-name``, a client certificate and
key (files or data), a bearer token (inline or ``tokenFile``), basic auth. A kubeconfig that
asks for more (``exec`` credential plugins, ``auth-provider``, ``proxy-url``) is answered
with :class:`NeedsClientLibrary`, and the caller uses the ``kubernetes`` client instead.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dra_kube_client.errors import KubeConfigError

__all__ = [
    "IN_CLUSTER_SOURCE",
    "SERVICE_ACCOUNT_DIR",
    "Connection",
    "NeedsClientLibrary",
    "connection_from_kubeconfig",
    "in_cluster_connection",
]

#: Where a pod's service account token and the cluster's CA are mounted.
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
#: The ``source`` of errors about the in-cluster configuration.
IN_CLUSTER_SOURCE = "in-cluster config"

# What only the kubernetes client does: credential plugins, OIDC/GCP/Azure auth providers and
# proxies. Keyed by the kubeconfig section they sit in.
_USER_NEEDS_LIBRARY = ("exec", "auth-provider")
_CLUSTER_NEEDS_LIBRARY = ("proxy-url",)


@dataclass(frozen=True, slots=True)
class Connection:
    """An API server address and the credentials to present to it.

    File fields are absolute paths (or relative to the working directory, as given); ``*_data``
    fields are the decoded PEM. ``token_file`` is re-read when it changes (a projected service
    account token is rotated in place); ``token`` is fixed.
    """

    server: str
    ca_file: str | None = None
    ca_data: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = None
    token: str | None = None
    token_file: str | None = None
    basic_auth: tuple[str, str] | None = None
    insecure: bool = False
    tls_server_name: str | None = None


@dataclass(frozen=True, slots=True)
class NeedsClientLibrary:
    """The kubeconfig needs what only the ``kubernetes`` client does; ``reason`` says what."""

    reason: str


def connection_from_kubeconfig(
    doc: object, *, source: str, base_dir: str, context: str | None = None
) -> Connection | NeedsClientLibrary:
    """The connection of ``context`` (default: ``current-context``) in the kubeconfig ``doc``.

    Relative file paths are taken from ``base_dir`` (the kubeconfig's directory), as kubectl
    does.

    Raises:
        KubeConfigError: the context, its cluster or user is missing or malformed (``source``
            names the file).
    """
    if not isinstance(doc, Mapping):
        raise KubeConfigError(source, "not a kubeconfig: the document is not a mapping")
    name = context or doc.get("current-context")
    if not name:
        raise KubeConfigError(source, "no context given and no current-context set")
    ctx = _named(doc, "contexts", "context", str(name), source)
    cluster = _named(
        doc, "clusters", "cluster", _field(ctx, "cluster", source, f"context {name!r}"), source
    )
    user_name = ctx.get("user")
    user = _named(doc, "users", "user", str(user_name), source) if user_name else {}
    for key in _USER_NEEDS_LIBRARY:
        if user.get(key):
            return NeedsClientLibrary(f"user {user_name!r} uses {key}")
    for key in _CLUSTER_NEEDS_LIBRARY:
        if cluster.get(key):
            return NeedsClientLibrary(f"cluster {ctx['cluster']!r} uses {key}")
    where_cluster = f"cluster {ctx['cluster']!r}"
    server = _field(cluster, "server", source, where_cluster).rstrip("/")
    where_user = f"user {user_name!r}"
    username, password = user.get("username"), user.get("password")
    return Connection(
        server=server,
        ca_file=_path(cluster.get("certificate-authority"), base_dir),
        ca_data=_pem_text(cluster, "certificate-authority-data", source, where_cluster),
        cert_file=_path(user.get("client-certificate"), base_dir),
        key_file=_path(user.get("client-key"), base_dir),
        cert_data=_pem(user, "client-certificate-data", source, where_user),
        key_data=_pem(user, "client-key-data", source, where_user),
        token=str(user["token"]) if user.get("token") else None,
        token_file=_path(user.get("tokenFile"), base_dir),
        basic_auth=(str(username), str(password)) if username and password else None,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        tls_server_name=str(cluster["tls-server-name"]) if cluster.get("tls-server-name") else None,
    )


def in_cluster_connection(
    env: Mapping[str, str], *, service_account_dir: str = SERVICE_ACCOUNT_DIR
) -> Connection:
    """The pod's connection: ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``,
    the service account token (re-read on rotation) and CA of ``service_account_dir``.

    Raises:
        KubeConfigError: the service variables are not set (not running in a pod).
    """
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise KubeConfigError(
            IN_CLUSTER_SOURCE,
            "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: not in a pod",
        )
    try:
        ipv6 = ipaddress.ip_address(host).version == 6
    except ValueError:
        ipv6 = False
    netloc = f"[{host}]:{port}" if ipv6 else f"{host}:{port}"
    return Connection(
        server=f"https://{netloc}",
        ca_file=posixpath.join(service_account_dir, "ca.crt"),
        token_file=posixpath.join(service_account_dir, "token"),
    )


def _named(
    doc: Mapping[str, Any], section: str, kind: str, name: str, source: str
) -> Mapping[str, Any]:
    """The ``kind`` body of the entry called ``name`` in the list ``doc[section]``."""
    entries = doc.get(section) or []
    if not isinstance(entries, list):
        raise KubeConfigError(source, f"{section}: not a list")
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            body = entry.get(kind) or {}
            if not isinstance(body, Mapping):
                raise KubeConfigError(source, f"{kind} {name!r}: {kind} is not a mapping")
            return body
    raise KubeConfigError(source, f"{kind} {name!r} not found in {section}")


def _field(body: Mapping[str, Any], key: str, source: str, where: object) -> str:
    value = body.get(key)
    if not value or not isinstance(value, str):
        raise KubeConfigError(source, f"{where}: {key} is not set")
    return value


def _path(value: object, base_dir: str) -> str | None:
    if not value:
        return None
    return posixpath.join(base_dir, str(value))  # an absolute value stays as it is


def _pem(body: Mapping[str, Any], key: str, source: str, where: str) -> bytes | None:
    value = body.get(key)
    if not value:
        return None
    try:
        return base64.b64decode(str(value))  # lenient, as kubectl: line breaks are dropped
    except (binascii.Error, ValueError) as exc:
        raise KubeConfigError(source, f"{where}: {key} is not base64: {exc}") from exc


def _pem_text(body: Mapping[str, Any], key: str, source: str, where: str) -> str | None:
    raw = _pem(body, key, source, where)
    if raw is None:
        return None
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError as exc:
        raise KubeConfigError(source, f"{where}: {key} is not PEM text") from exc
