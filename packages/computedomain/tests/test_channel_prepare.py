"""Channel and daemon prepare decisions: namespace, one domain per node, #641, #892, edits."""

from __future__ import annotations

from typing import Any

import pytest
from computedomain_support import domain_body
from dra_api_types import ComputeDomain, ComputeDomainClique
from dra_computedomain.channel_prepare import (
    ChannelClaim,
    NodeView,
    channel_edits,
    daemon_edits,
    daemon_ready_on,
    decide_channel,
    decide_daemon,
)
from dra_computedomain.errors import (
    DaemonNamespaceError,
    DaemonNotReadyError,
    DomainDeletingError,
    DomainNotFoundError,
    NamespaceMismatchError,
    NodeTakenError,
)
from dra_computedomain.names import COMPUTE_DOMAIN_LABEL
from dra_kubelet_core.host_devices import HostDeviceNodes, StandInDeviceNodes

CLIQUE = "cluster-uuid.1"


def _domain(uid: str = "cd-a", namespace: str = "team-a", **meta: Any) -> ComputeDomain:
    body = domain_body(namespace=namespace)
    body["metadata"].update(uid=uid, **meta)
    return ComputeDomain.from_dict(body)


def _claim(namespace: str = "team-a", uid: str = "claim-1", domain: str = "cd-a") -> ChannelClaim:
    return ChannelClaim(uid=uid, namespace=namespace, name="wl", domain_uid=domain)


def _node(label: str | None = None) -> NodeView:
    return NodeView(name="node-a", clique_id=CLIQUE, label=label)


def _clique(domain_uid: str, node: str, status: str) -> ComputeDomainClique:
    return ComputeDomainClique.from_dict(
        {
            "metadata": {
                "name": f"{domain_uid}.{CLIQUE}",
                "namespace": "drv",
                "labels": {COMPUTE_DOMAIN_LABEL: domain_uid},
            },
            "daemons": [
                {
                    "nodeName": node,
                    "ipAddress": "10.0.0.1",
                    "cliqueID": CLIQUE,
                    "index": 0,
                    "status": status,
                }
            ],
        }
    )


def test_ready_daemon_and_free_node_go_ahead_and_label_the_node() -> None:
    decision = decide_channel(_claim(), _domain(), _node(), daemon_ready=True)
    assert decision.label_node
    assert decision.error is None
    again = decide_channel(_claim(), _domain(), _node(label="cd-a"), daemon_ready=True)
    assert not again.label_node


def test_daemon_not_ready_is_retryable_but_the_label_goes_on_first() -> None:
    decision = decide_channel(_claim(), _domain(), _node(), daemon_ready=False)
    assert decision.label_node
    assert isinstance(decision.error, DaemonNotReadyError)
    assert not decision.error.permanent
    assert "node-a" in str(decision.error)


def test_namespace_mismatch_is_permanent_and_names_both() -> None:
    decision = decide_channel(_claim(namespace="team-b"), _domain(), _node(), daemon_ready=True)
    assert isinstance(decision.error, NamespaceMismatchError)
    assert decision.error.permanent
    assert "team-b" in str(decision.error)
    assert "team-a/cd1" in str(decision.error)
    assert not decision.label_node


def test_daemon_claim_in_the_driver_namespace_goes_ahead() -> None:
    assert decide_daemon("dra/d", namespace="dra", driver_namespace="dra", domain_uid="u") is None


@pytest.mark.parametrize("namespace", ["team-a", "team-b"], ids=["domains-own", "another"])
def test_daemon_claim_outside_the_driver_namespace_is_refused(namespace: str) -> None:
    # Even the domain's own namespace: the controller puts daemon claims in the driver's.
    error = decide_daemon(
        f"{namespace}/stolen", namespace=namespace, driver_namespace="dra", domain_uid="cd-a"
    )
    assert isinstance(error, DaemonNamespaceError)
    assert isinstance(error, NamespaceMismatchError)
    assert error.permanent
    assert (error.claim, error.field) == (f"{namespace}/stolen", "metadata.namespace")
    assert (error.namespace, error.driver_namespace) == (namespace, "dra")
    assert str(error) == (
        f"claim {namespace}/stolen: namespace {namespace!r} is not the driver namespace 'dra'; "
        "only the driver's daemon pods may claim the IMEX daemon of ComputeDomain cd-a"
    )


def test_second_domain_on_a_node_is_refused() -> None:
    decision = decide_channel(_claim(), _domain(), _node(label="cd-other"), daemon_ready=True)
    assert isinstance(decision.error, NodeTakenError)
    assert "cd-other" in str(decision.error)


@pytest.mark.parametrize(
    ("domain", "error"),
    [
        (None, DomainNotFoundError),
        (_domain(deletionTimestamp="2026-12-01T00:00:00Z"), DomainDeletingError),
    ],
)
def test_missing_or_deleting_domain(domain: ComputeDomain | None, error: type) -> None:
    decision = decide_channel(_claim(), domain, _node(), daemon_ready=True)
    assert isinstance(decision.error, error)


def test_two_domains_in_one_clique_read_only_their_own_daemons() -> None:
    # NVIDIA #892: domain B's daemon being Ready on this node says nothing about domain A.
    a, b = _domain("cd-a"), _domain("cd-b")
    cliques = [_clique("cd-b", "node-a", "Ready"), _clique("cd-a", "node-a", "NotReady")]
    assert not daemon_ready_on(_node(), a, cliques)
    assert daemon_ready_on(_node(), b, cliques)
    assert not daemon_ready_on(_node(), a, [_clique("cd-b", "node-a", "Ready")])


def test_non_fabric_node_readiness_comes_from_the_domain_status() -> None:
    node = NodeView(name="node-a", clique_id="", label=None)
    domain = _domain()
    assert not daemon_ready_on(node, domain, [])
    domain.status.nodes = []
    ready = ComputeDomain.from_dict(
        {
            **domain.to_dict(),
            "status": {
                "status": "Ready",
                "nodes": [{"name": "node-a", "ipAddress": "", "cliqueID": "", "status": "Ready"}],
            },
        }
    )
    assert daemon_ready_on(node, ready, [])


def test_channel_edits_single_all_and_no_fabric() -> None:
    single = channel_edits("Single", CLIQUE, host=StandInDeviceNodes())
    assert [(d.path, d.host_path) for d in single.device_nodes] == [
        ("/dev/nvidia-caps-imex-channels/channel0", "/dev/null")
    ]
    every = channel_edits("All", CLIQUE, host=HostDeviceNodes())
    assert len(every.device_nodes) == 2048
    assert every.device_nodes[-1].path == "/dev/nvidia-caps-imex-channels/channel2047"
    assert every.device_nodes[0].host_path is None
    assert channel_edits("Single", "", host=StandInDeviceNodes()).is_empty()


def test_daemon_edits_carry_identity_and_config_dir() -> None:
    edits = daemon_edits(_domain(), CLIQUE, "/var/lib/kubelet/plugins/cd/domains/cd-a")
    assert set(edits.env) == {
        "COMPUTE_DOMAIN_UUID=cd-a",
        "COMPUTE_DOMAIN_NAME=cd1",
        "COMPUTE_DOMAIN_NAMESPACE=team-a",
        f"CLIQUE_ID={CLIQUE}",
    }
    (mount,) = edits.mounts
    assert (mount.host_path, mount.container_path) == (
        "/var/lib/kubelet/plugins/cd/domains/cd-a",
        "/imexd",
    )
    assert "rw" in mount.options
