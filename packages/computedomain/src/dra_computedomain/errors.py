"""Typed errors of the ComputeDomain components, each naming the object and field at fault."""

from __future__ import annotations

__all__ = [
    "ChannelDeviceError",
    "ClaimConfigError",
    "CliqueFullError",
    "CliqueIdError",
    "ComputeDomainError",
    "DaemonEnvironmentError",
    "DaemonNamespaceError",
    "DaemonNotReadyError",
    "DomainDeletingError",
    "DomainNotFoundError",
    "ImexConfigError",
    "NamespaceMismatchError",
    "NodeTakenError",
    "PrepareError",
    "SpecError",
]


class ComputeDomainError(Exception):
    """Base class of this package's errors."""


class SpecError(ComputeDomainError):
    """A ComputeDomain's spec cannot be reconciled (e.g. no workload template name)."""

    def __init__(self, domain: str, field: str, message: str) -> None:
        super().__init__(f"ComputeDomain {domain}: {field}: {message}")
        self.domain = domain
        self.field = field


class CliqueIdError(ComputeDomainError):
    """The GPUs of a node disagree about, or misreport, their NVLink clique."""

    def __init__(self, node: str, message: str) -> None:
        super().__init__(f"node {node}: clique ID: {message}")
        self.node = node


class CliqueFullError(ComputeDomainError):
    """Every DNS-name slot of a clique is taken (``maxNodesPerIMEXDomain`` reached)."""

    def __init__(self, clique: str, node: str, limit: int) -> None:
        super().__init__(
            f"ComputeDomainClique {clique}: daemons: no free index for node {node} "
            f"(all {limit} taken)"
        )
        self.clique = clique
        self.node = node
        self.limit = limit


class DaemonEnvironmentError(ComputeDomainError):
    """The domain daemon was started without an environment variable it needs."""

    def __init__(self, variable: str, message: str) -> None:
        super().__init__(f"environment {variable}: {message}")
        self.variable = variable


class ImexConfigError(ComputeDomainError):
    """An IMEX config file is malformed."""

    def __init__(self, path: str, field: str, message: str) -> None:
        super().__init__(f"{path}: {field}: {message}")
        self.path = path
        self.field = field


class PrepareError(ComputeDomainError):
    """A claim of ``compute-domain.nvidia.com`` cannot be prepared (yet).

    ``permanent`` errors are returned to the kubelet at once; the others are retried inside
    the kubelet's deadline first (the domain daemon may still be starting).
    """

    permanent = False
    #: the claim's field at fault, where one is (e.g. ``metadata.namespace``)
    field: str | None = None

    def __init__(self, claim: str, message: str) -> None:
        super().__init__(f"claim {claim}: {message}")
        self.claim = claim


class DomainNotFoundError(PrepareError):
    """No ComputeDomain has the UID the claim's config names (yet)."""


class DomainDeletingError(PrepareError):
    """The claim's ComputeDomain is being deleted."""

    permanent = True


class NamespaceMismatchError(PrepareError):
    """A channel claim lives in another namespace than its ComputeDomain."""

    permanent = True
    field = "metadata.namespace"


class DaemonNamespaceError(NamespaceMismatchError):
    """A daemon claim lives outside the driver namespace, where the controller creates every
    domain daemon and its claim: a claim elsewhere would mount the domain's IMEX config into
    another namespace's pod."""

    def __init__(self, claim: str, *, namespace: str, driver_namespace: str, domain: str) -> None:
        super().__init__(
            claim,
            f"namespace {namespace!r} is not the driver namespace "
            f"{driver_namespace!r}; only the driver's daemon pods may claim the IMEX daemon "
            f"of ComputeDomain {domain}",
        )
        self.namespace = namespace
        self.driver_namespace = driver_namespace


class NodeTakenError(PrepareError):
    """The node already belongs to another ComputeDomain (one domain per node)."""


class DaemonNotReadyError(PrepareError):
    """The domain daemon on this node is not Ready yet."""


class ClaimConfigError(PrepareError):
    """The claim's opaque config is missing or invalid."""

    permanent = True


class ChannelDeviceError(PrepareError):
    """An IMEX channel device node is missing and cannot be created on this node."""

    permanent = True

    def __init__(self, claim: str, node: str, reason: str) -> None:
        super().__init__(claim, f"IMEX channel device node {node}: {reason}")
        self.node = node
        self.reason = reason


class HostImexNotReadyError(PrepareError):
    """Host-managed IMEX: the host's ``nvidia-imex`` is not reachable or not READY yet."""
