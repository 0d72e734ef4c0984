"""Command lines of the cluster components (pure: paths and ports in, argv out).

Everything listens on 127.0.0.1 except the API server and the kubelet, which
bind the node's bridge address so that pods (and the API server, for logs and
exec) can reach them; that address exists only on this host.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dra_e2e.configs import feature_gate_arg

# Served in addition to resource.k8s.io/v1 (the beta features' fields live there).
RESOURCE_API_VERSIONS = ("v1beta1", "v1beta2")
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"


@dataclass(frozen=True)
class ControlPlane:
    """Where the control plane's files are and which addresses it uses."""

    state_dir: Path
    pki_dir: Path
    kubeconfig_dir: Path
    apiserver_ip: str
    apiserver_port: int
    etcd_port: int
    etcd_peer_port: int
    controller_manager_port: int
    scheduler_port: int
    service_cidr: str
    feature_gates: dict[str, bool]

    @property
    def etcd_url(self) -> str:
        """etcd's client URL (loopback, plain HTTP: nothing else can reach it)."""
        return f"http://127.0.0.1:{self.etcd_port}"


def etcd_argv(etcd: Path, cp: ControlPlane) -> list[str]:
    """A single-member etcd on loopback."""
    peer = f"http://127.0.0.1:{cp.etcd_peer_port}"
    return [
        str(etcd),
        "--name=dra-e2e",
        f"--data-dir={cp.state_dir / 'etcd'}",
        f"--listen-client-urls={cp.etcd_url}",
        f"--advertise-client-urls={cp.etcd_url}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=dra-e2e={peer}",
        "--initial-cluster-state=new",
        # Throwaway data: skip fsync, which dominates etcd latency on shared disks.
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def apiserver_argv(binary: Path, cp: ControlPlane) -> list[str]:
    """kube-apiserver serving resource.k8s.io v1 plus the beta versions."""
    pki = cp.pki_dir
    runtime_config = ",".join(f"resource.k8s.io/{v}=true" for v in RESOURCE_API_VERSIONS)
    return [
        str(binary),
        f"--etcd-servers={cp.etcd_url}",
        f"--bind-address={cp.apiserver_ip}",
        f"--advertise-address={cp.apiserver_ip}",
        f"--secure-port={cp.apiserver_port}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        # Node names do not resolve; logs/exec go to the node IP.
        "--kubelet-preferred-address-types=InternalIP",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-cluster-ip-range={cp.service_cidr}",
        # No kube-proxy: a Service's ClusterIP has no data path, but pod IPs are reachable
        # from this host. Makes the API server call admission webhooks (and aggregated APIs)
        # at their Service's endpoint addresses instead of the ClusterIP.
        "--enable-aggregator-routing=true",
        "--authorization-mode=Node,RBAC",
        "--allow-privileged=true",
        f"--runtime-config={runtime_config}",
        f"--feature-gates={feature_gate_arg(cp.feature_gates)}",
        "--profiling=false",
        "--v=1",
    ]


def _controller_argv(binary: Path, kubeconfig: Path, port: int, cp: ControlPlane) -> list[str]:
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--leader-elect=false",
        f"--feature-gates={feature_gate_arg(cp.feature_gates)}",
        "--v=1",
    ]


def controller_manager_argv(binary: Path, cp: ControlPlane) -> list[str]:
    """kube-controller-manager with every default controller (resourceclaim included)."""
    pki = cp.pki_dir
    kubeconfig = cp.kubeconfig_dir / "controller-manager.kubeconfig"
    return [
        *_controller_argv(binary, kubeconfig, cp.controller_manager_port, cp),
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        f"--cluster-signing-cert-file={pki / 'ca.crt'}",
        f"--cluster-signing-key-file={pki / 'ca.key'}",
        f"--service-cluster-ip-range={cp.service_cidr}",
        "--allocate-node-cidrs=false",
        "--controllers=*",
    ]


def scheduler_argv(binary: Path, cp: ControlPlane) -> list[str]:
    """kube-scheduler (its DynamicResources plugin allocates claims)."""
    kubeconfig = cp.kubeconfig_dir / "scheduler.kubeconfig"
    return _controller_argv(binary, kubeconfig, cp.scheduler_port, cp)


def kubelet_argv(
    binary: Path,
    *,
    config: Path,
    kubeconfig: Path,
    root_dir: Path,
    cert_dir: Path,
    node_name: str,
    node_ip: str,
) -> list[str]:
    """The kubelet of one node; everything else is in its config file."""
    return [
        str(binary),
        f"--config={config}",
        f"--kubeconfig={kubeconfig}",
        f"--root-dir={root_dir}",
        f"--cert-dir={cert_dir}",
        f"--hostname-override={node_name}",
        f"--node-ip={node_ip}",
        "--v=2",
    ]
