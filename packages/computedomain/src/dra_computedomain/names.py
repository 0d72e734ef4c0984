"""Names, labels and finalizers shared by the ComputeDomain controller, plugin and daemon.

They are NVIDIA's, so objects made by NVIDIA's driver and by this one are recognised by both.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CLIQUE_ID_POD_LABEL",
    "COMPUTE_DOMAIN_LABEL",
    "DAEMON_CLASS",
    "DAEMON_SERVICE_ACCOUNT",
    "DEFAULT_CHANNEL_CLASS",
    "FINALIZER",
    "GPU_CLIQUE_LABEL",
    "LEASE_NAME",
    "MAX_CHANNELS",
    "MAX_NODES_PER_IMEX_DOMAIN",
    "TARGET_DAEMON",
    "TARGET_LABEL",
    "TARGET_WORKLOAD",
    "clique_object_name",
    "daemon_object_name",
    "dns_name",
]

#: On nodes, DaemonSets, templates and cliques: the UID of the domain they belong to.
COMPUTE_DOMAIN_LABEL: Final = "resource.nvidia.com/computeDomain"
#: On the two ResourceClaimTemplates: which of them it is.
TARGET_LABEL: Final = "resource.nvidia.com/computeDomainTarget"
TARGET_DAEMON: Final = "Daemon"
TARGET_WORKLOAD: Final = "Workload"
#: On daemon pods: the node's clique ID ("" on nodes without NVLink fabric).
CLIQUE_ID_POD_LABEL: Final = "resource.nvidia.com/computeDomain.cliqueID"
#: On nodes, with --gpu-clique-label-enabled: the node's clique ID (NVIDIA's, in place of GFD's).
GPU_CLIQUE_LABEL: Final = "nvidia.com/gpu.clique"
#: On ComputeDomains and every object the controller makes for one.
FINALIZER: Final = "resource.nvidia.com/computeDomain"

DAEMON_CLASS: Final = "compute-domain-daemon.nvidia.com"
DEFAULT_CHANNEL_CLASS: Final = "compute-domain-default-channel.nvidia.com"
DAEMON_SERVICE_ACCOUNT: Final = "compute-domain-daemon-service-account"
LEASE_NAME: Final = "nvidia-compute-domain-controller"

#: IMEX channels a node has (NVIDIA hard-codes it too); channel 0 is the one published.
MAX_CHANNELS: Final = 2048
#: Daemons one IMEX domain (clique) holds: the DNS-name slots of nodes.cfg.
MAX_NODES_PER_IMEX_DOMAIN: Final = 18


def daemon_object_name(domain_uid: str) -> str:
    """The DaemonSet and daemon ResourceClaimTemplate of a domain (driver namespace)."""
    return f"computedomain-daemon-{domain_uid}"


def clique_object_name(domain_uid: str, clique_id: str) -> str:
    """The ComputeDomainClique holding the daemons of one clique of a domain."""
    return f"{domain_uid}.{clique_id}"


def dns_name(index: int) -> str:
    """The stable DNS name of the daemon at ``index`` of a clique (nodes.cfg lists them)."""
    return f"compute-domain-daemon-{index:04d}"
