"""Component command lines: loopback binding, DRA APIs and gates, no stray paths."""

from __future__ import annotations

from pathlib import Path

from dra_e2e import commands


def _cp(tmp_path: Path) -> commands.ControlPlane:
    return commands.ControlPlane(
        state_dir=tmp_path,
        pki_dir=tmp_path / "pki",
        kubeconfig_dir=tmp_path / "kubeconfigs",
        apiserver_ip="10.200.5.1",
        apiserver_port=40001,
        etcd_port=40002,
        etcd_peer_port=40003,
        controller_manager_port=40004,
        scheduler_port=40005,
        service_cidr="10.199.5.0/24",
        feature_gates={"DRADeviceTaintRules": True},
    )


def _flags(argv: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in argv[1:] if a.startswith("--") and "=" in a)


def test_etcd_listens_on_loopback_only(tmp_path: Path) -> None:
    flags = _flags(commands.etcd_argv(Path("/bin/etcd"), _cp(tmp_path)))
    assert flags["listen-client-urls"] == "http://127.0.0.1:40002"
    assert flags["listen-peer-urls"] == "http://127.0.0.1:40003"
    assert flags["data-dir"] == str(tmp_path / "etcd")


def test_apiserver_serves_dra_betas_on_the_node_address(tmp_path: Path) -> None:
    argv = commands.apiserver_argv(Path("/bin/kube-apiserver"), _cp(tmp_path))
    flags = _flags(argv)
    assert argv[0] == "/bin/kube-apiserver"
    assert flags["bind-address"] == "10.200.5.1"
    assert flags["etcd-servers"] == "http://127.0.0.1:40002"
    assert flags["runtime-config"] == "resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true"
    assert flags["feature-gates"] == "DRADeviceTaintRules=true"
    assert flags["authorization-mode"] == "Node,RBAC"
    assert flags["service-cluster-ip-range"] == "10.199.5.0/24"
    assert all(str(tmp_path) in v for k, v in flags.items() if k.endswith(("-file", "-key")))


def test_controllers_bind_loopback_with_their_own_identity(tmp_path: Path) -> None:
    cp = _cp(tmp_path)
    kcm = _flags(commands.controller_manager_argv(Path("/bin/kcm"), cp))
    sched = _flags(commands.scheduler_argv(Path("/bin/sched"), cp))
    assert kcm["bind-address"] == sched["bind-address"] == "127.0.0.1"
    assert kcm["secure-port"] == "40004"
    assert sched["secure-port"] == "40005"
    assert kcm["kubeconfig"].endswith("controller-manager.kubeconfig")
    assert sched["kubeconfig"].endswith("scheduler.kubeconfig")
    assert kcm["controllers"] == "*"
    assert kcm["feature-gates"] == sched["feature-gates"] == "DRADeviceTaintRules=true"


def test_kubelet_argv_names_node_and_dirs(tmp_path: Path) -> None:
    flags = _flags(
        commands.kubelet_argv(
            Path("/bin/kubelet"),
            config=tmp_path / "kubelet.yaml",
            kubeconfig=tmp_path / "kubelet.kubeconfig",
            root_dir=tmp_path / "kubelet",
            cert_dir=tmp_path / "pki",
            node_name="e2e-node-1",
            node_ip="10.201.5.1",
        )
    )
    assert flags["hostname-override"] == "e2e-node-1"
    assert flags["node-ip"] == "10.201.5.1"
    assert flags["root-dir"] == str(tmp_path / "kubelet")
