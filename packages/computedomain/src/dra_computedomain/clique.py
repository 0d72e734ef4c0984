"""Clique registration of a domain daemon (pure): the lowest free index, its IP and readiness.

Each daemon of a clique owns one entry of ``ComputeDomainClique.daemons``, keyed by node
name. Its ``index`` is the DNS-name slot (``compute-domain-daemon-<index>``) the IMEX nodes
config lists, so it must be unique in the clique and stay put while the daemon lives.
"""

from __future__ import annotations

from collections.abc import Sequence

from dra_api_types import ComputeDomainDaemonInfo

from .errors import CliqueFullError
from .names import dns_name

__all__ = ["deregister", "dns_mapping", "register"]


def register(
    daemons: Sequence[ComputeDomainDaemonInfo],
    *,
    clique: str,
    node_name: str,
    ip_address: str,
    clique_id: str,
    ready: bool,
    max_nodes: int,
) -> list[ComputeDomainDaemonInfo]:
    """The clique's daemons with this node's entry added or refreshed.

    An existing entry keeps its index (its IP and status are updated); a new one takes the
    lowest index no other daemon holds, or :class:`CliqueFullError` if all ``max_nodes``
    are taken.
    """
    status = "Ready" if ready else "NotReady"
    out: list[ComputeDomainDaemonInfo] = []
    mine: ComputeDomainDaemonInfo | None = None
    for daemon in daemons:
        if daemon.node_name == node_name:
            mine = daemon.model_copy(
                update={"ip_address": ip_address, "clique_id": clique_id, "status": status}
            )
            out.append(mine)
        else:
            out.append(daemon)
    if mine is None:
        taken = {d.index for d in daemons}
        free = next((i for i in range(max_nodes) if i not in taken), None)
        if free is None:
            raise CliqueFullError(clique, node_name, max_nodes)
        out.append(
            ComputeDomainDaemonInfo(
                node_name=node_name,
                ip_address=ip_address,
                clique_id=clique_id,
                index=free,
                status=status,
            )
        )
    return sorted(out, key=lambda d: d.index)


def deregister(
    daemons: Sequence[ComputeDomainDaemonInfo], node_name: str
) -> list[ComputeDomainDaemonInfo]:
    """The clique's daemons without this node's entry (its index becomes free)."""
    return [d for d in daemons if d.node_name != node_name]


def dns_mapping(daemons: Sequence[ComputeDomainDaemonInfo]) -> dict[str, str]:
    """DNS name -> IP of every registered daemon that has an IP."""
    return {dns_name(d.index): d.ip_address for d in daemons if d.ip_address}
