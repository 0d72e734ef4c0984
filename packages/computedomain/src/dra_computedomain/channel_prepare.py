"""What preparing a ``compute-domain.nvidia.com`` claim takes, decided without I/O.

A **channel** claim (a workload's) may be prepared on a node when its ComputeDomain exists and
is not being deleted, lives in the claim's namespace, the node belongs to no other domain (the
node label), and this domain's daemon on the node is Ready. (That no other claim still holds
the node's channel, NVIDIA #641, is the plugin core's double-preparation guard.) The node
label is set before the readiness check: it is what brings the domain's daemon to the node.

A **daemon** claim (the domain daemon pod's) must live in the driver namespace, where the
controller creates the daemons and their claim template (a claim in any other namespace is
refused: it would mount the domain's IMEX config into a foreign pod); it gets the domain's
identity and the node's clique ID as environment variables and the per-domain config directory
at ``/imexd``.

Two domains in one clique (NVIDIA #892) stay apart: readiness is read from the clique object
of *this* domain (``<domainUID>.<cliqueID>``), never from another domain's daemons.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dra_api_types import ComputeDomain, ComputeDomainClique
from dra_kubelet_core.cdi import ContainerEdits, Mount
from dra_kubelet_core.host_devices import HostDevices

from .channel_nodes import CHANNEL_DIR, channel_minors, channel_path
from .errors import (
    DaemonNamespaceError,
    DaemonNotReadyError,
    DomainDeletingError,
    DomainNotFoundError,
    NamespaceMismatchError,
    NodeTakenError,
    PrepareError,
)
from .names import COMPUTE_DOMAIN_LABEL, clique_object_name

__all__ = [
    "CHANNEL_DIR",
    "IMEX_CONFIG_MOUNT",
    "ChannelClaim",
    "ChannelDecision",
    "NodeView",
    "channel_edits",
    "daemon_edits",
    "daemon_ready_on",
    "decide_channel",
    "decide_daemon",
]

IMEX_CONFIG_MOUNT = "/imexd"


@dataclass(frozen=True)
class ChannelClaim:
    """The parts of a channel claim that prepare looks at."""

    uid: str
    namespace: str
    name: str
    domain_uid: str
    allocation_mode: str = "Single"

    @property
    def ref(self) -> str:
        """``namespace/name`` for messages."""
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class NodeView:
    """What this node looks like to the plugin."""

    name: str
    clique_id: str
    #: the domain UID of the node's label, None without one
    label: str | None


@dataclass(frozen=True)
class ChannelDecision:
    """Whether to label the node first, and the error that stops the prepare (None: go)."""

    label_node: bool
    error: PrepareError | None


def daemon_ready_on(
    node: NodeView, domain: ComputeDomain, cliques: Iterable[ComputeDomainClique]
) -> bool:
    """Whether ``domain``'s daemon on ``node`` reports Ready.

    With a clique ID the entry of this node in this domain's clique counts; without fabric,
    the node's entry in the domain's status (the controller's view of the daemon pod).
    """
    uid = domain.metadata.uid or ""
    if node.clique_id:
        wanted = clique_object_name(uid, node.clique_id)
        for clique in cliques:
            if clique.metadata.name != wanted:
                continue
            if (clique.metadata.labels or {}).get(COMPUTE_DOMAIN_LABEL) not in (None, uid):
                continue
            return any(
                d.node_name == node.name and d.status == "Ready" for d in clique.daemons or []
            )
        return False
    return any(n.name == node.name and n.status == "Ready" for n in domain.status.nodes or [])


def decide_channel(
    claim: ChannelClaim,
    domain: ComputeDomain | None,
    node: NodeView,
    *,
    daemon_ready: bool,
) -> ChannelDecision:
    """The checks of a channel prepare, in NVIDIA's order."""
    if domain is None:
        return ChannelDecision(
            False, DomainNotFoundError(claim.ref, f"no ComputeDomain with UID {claim.domain_uid}")
        )
    domain_ref = f"{domain.metadata.namespace}/{domain.metadata.name}"
    if domain.metadata.deletion_timestamp:
        return ChannelDecision(
            False, DomainDeletingError(claim.ref, f"ComputeDomain {domain_ref} is being deleted")
        )
    if claim.namespace != domain.metadata.namespace:
        return ChannelDecision(
            False,
            NamespaceMismatchError(
                claim.ref,
                f"namespace {claim.namespace!r} differs from ComputeDomain {domain_ref}'s "
                f"namespace {domain.metadata.namespace!r}",
            ),
        )
    if node.label is not None and node.label != claim.domain_uid:
        return ChannelDecision(
            False,
            NodeTakenError(
                claim.ref,
                f"node {node.name} belongs to ComputeDomain {node.label} "
                f"(label {COMPUTE_DOMAIN_LABEL}); one ComputeDomain per node",
            ),
        )
    label = node.label is None
    if not daemon_ready:
        return ChannelDecision(
            label,
            DaemonNotReadyError(
                claim.ref, f"ComputeDomain {domain_ref}: daemon on node {node.name} not Ready"
            ),
        )
    return ChannelDecision(label, None)


def decide_daemon(
    claim_ref: str, *, namespace: str, driver_namespace: str, domain_uid: str
) -> PrepareError | None:
    """The check of a daemon prepare, before the domain is looked up (a foreign namespace
    learns nothing about the domain): the claim must be in the driver namespace."""
    if namespace != driver_namespace:
        return DaemonNamespaceError(
            claim_ref, namespace=namespace, driver_namespace=driver_namespace, domain=domain_uid
        )
    return None


def channel_edits(mode: str, clique_id: str, *, host: HostDevices) -> ContainerEdits:
    """The channel device nodes a workload container gets: channel 0, or all with ``All``.

    Nodes without a clique ID get none (no fabric, no IMEX). ``host`` backs them: on real
    nodes the host's own, which :class:`~dra_computedomain.channel_nodes.ChannelNodes` has
    made first; on fake nodes stand-ins, as the fake GPU backend has for ``/dev/nvidiaN``.
    """
    if not clique_id:
        return ContainerEdits()
    nodes = tuple(host.node(channel_path(n), permissions="rw") for n in channel_minors(mode))
    return ContainerEdits(device_nodes=nodes)


def daemon_edits(domain: ComputeDomain, clique_id: str, domain_dir: str) -> ContainerEdits:
    """The daemon container's environment and its ``/imexd`` config directory."""
    env = (
        f"COMPUTE_DOMAIN_UUID={domain.metadata.uid}",
        f"COMPUTE_DOMAIN_NAME={domain.metadata.name}",
        f"COMPUTE_DOMAIN_NAMESPACE={domain.metadata.namespace}",
        f"CLIQUE_ID={clique_id}",
    )
    mount = Mount(
        host_path=domain_dir,
        container_path=IMEX_CONFIG_MOUNT,
        options=("rw", "nosuid", "nodev", "rbind"),
    )
    return ContainerEdits(env=env, mounts=(mount,))
