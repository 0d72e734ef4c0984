"""The workspace's one Kubernetes JSON client.

:class:`KubeTransport` sends JSON requests and streams watches; built from the in-cluster
service account or a kubeconfig, it picks its connection code once: ``urllib3`` directly
(:mod:`.http_transport`, for what :mod:`.connection` reads: tokens, client certificates, CAs)
or, for a kubeconfig that needs more (credential plugins, auth providers), the ``kubernetes``
client (:mod:`.client_library`). Components depend on the :class:`JsonTransport` protocol,
which the in-memory API server of :mod:`dra_kube_client.testing` also implements. The
plumbing every component shares lives here too: :class:`Backoff` (:mod:`.backoff`, the one
retry rule) and :class:`LeaderElector` (:mod:`.leader`, Lease leader election with client-go's
three timings), and secure serving of ``/metrics`` (:mod:`.secure_serving`: HTTPS,
TokenReview and SubjectAccessReview through :class:`DelegatedAuth`, :mod:`.delegated_auth`).
"""

from dra_kube_client.backoff import Backoff
from dra_kube_client.client_library import ClientLibraryTransport
from dra_kube_client.delegated_auth import Decision, DelegatedAuth
from dra_kube_client.errors import KubeApiError, KubeClientError, KubeConfigError
from dra_kube_client.http_transport import HttpTransport
from dra_kube_client.leader import LeaderElector, LeaseTimings
from dra_kube_client.paths import path_segment
from dra_kube_client.secure_serving import (
    ServingSecurity,
    TlsFilesError,
    admit,
    start_http_server,
)
from dra_kube_client.transport import JsonTransport, KubeTransport, status_fields

__all__ = [
    "Backoff",
    "ClientLibraryTransport",
    "Decision",
    "DelegatedAuth",
    "HttpTransport",
    "JsonTransport",
    "KubeApiError",
    "KubeClientError",
    "KubeConfigError",
    "KubeTransport",
    "LeaderElector",
    "LeaseTimings",
    "ServingSecurity",
    "TlsFilesError",
    "admit",
    "path_segment",
    "start_http_server",
    "status_fields",
]
