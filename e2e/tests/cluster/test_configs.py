"""Component configuration: address plan, CNI, containerd and kubelet settings."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
import yaml
from dra_e2e import configs, hostnet
from dra_e2e.build import COMPONENTS, KUBE, GoComponent, kube_component
from dra_e2e.cluster import Cluster
from dra_e2e.errors import UnknownVersionError
from dra_e2e.state import STATE_FILE, ClusterState
from dra_e2e.versions import KUBERNETES_VERSION, KUBERNETES_VERSIONS, resolve_kube_version

HELP_SNIPPET = """
      --feature-gates mapStringBool
                 AllAlpha=true|false (ALPHA - default=false)
                 DRAAdminAccess=true|false (BETA - default=true)
                 DRAConsumableCapacity=true|false (ALPHA - default=false)
                 kube:DRADeviceTaintRules=true|false (BETA - default=false)
                 kube:ResourceHealthStatus=true|false (BETA - default=true)
                 kube:DRAWorkloadResourceClaims=true|false (ALPHA - default=false)
                 InPlacePodVerticalScaling=true|false (BETA - default=true)
"""


def test_beta_dra_gates_are_enabled_and_alpha_ones_not() -> None:
    assert configs.parse_beta_gates(HELP_SNIPPET) == {
        "DRAAdminAccess": True,
        "DRADeviceTaintRules": True,
        "ResourceHealthStatus": True,
    }


def test_beta_gate_whose_dependency_is_off_is_left_off() -> None:
    # Kubernetes 1.37: DRAWorkloadResourceClaims is BETA but needs GenericWorkload.
    help_137 = HELP_SNIPPET.replace(
        "kube:DRAWorkloadResourceClaims=true|false (ALPHA - default=false)",
        "kube:DRAWorkloadResourceClaims=true|false (BETA - default=false)\n"
        "                 kube:GenericWorkload=true|false (BETA - default=false)",
    )
    gates = configs.parse_beta_gates(help_137)
    assert "DRAWorkloadResourceClaims" not in gates
    assert "DRAAdminAccess" in gates


def test_feature_gate_arg_is_sorted() -> None:
    assert configs.feature_gate_arg({"B": True, "A": False}) == "A=false,B=true"


def test_address_plan_is_private_and_distinct_per_node_and_slot() -> None:
    a, b = hostnet.cluster_net(3), hostnet.cluster_net(4)
    assert a.node(0).node_ip == "10.200.3.1"
    assert a.node(1).pod_cidr == "10.201.3.0/24"
    assert a.kubernetes_service_ip == "10.199.3.1"
    assert len({a.node(0).bridge, a.node(1).bridge, b.node(0).bridge}) == 3
    assert all(len(a.node(i).bridge) <= 15 for i in range(hostnet.MAX_NODES))
    with pytest.raises(ValueError, match="node index"):
        a.node(hostnet.MAX_NODES)


def test_cni_config_uses_existing_bridge_without_masquerade(tmp_path: Path) -> None:
    node = hostnet.cluster_net(7).node(1)
    cni = configs.cni_config(node, configs.NodePaths(tmp_path))
    assert cni["name"] == node.bridge
    bridge = cni["plugins"][0]
    assert bridge["bridge"] == node.bridge
    assert bridge["ipMasq"] is False
    assert bridge["ipam"]["ranges"][0][0]["gateway"] == node.node_ip
    assert bridge["ipam"]["dataDir"].startswith(str(tmp_path))


def test_containerd_config_enables_cdi_and_runc_cgroupfs(tmp_path: Path) -> None:
    paths = configs.NodePaths(tmp_path)
    config = tomllib.loads(configs.containerd_config(paths, runc="/usr/sbin/runc"))
    assert config["version"] == 4
    assert config["plugins"]["io.containerd.nri.v1.nri"]["disable"] is True
    runtime = config["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["enable_cdi"] is True
    # The node's own CDI dir is bound there in its mount namespace (dra_e2e.node_mounts).
    assert runtime["cdi_spec_dirs"] == ["/var/run/cdi"]
    runc = runtime["containerd"]["runtimes"]["runc"]
    assert runc["options"] == {
        "BinaryName": "/usr/sbin/runc",
        "Root": str(tmp_path / "containerd" / "runc"),
        "SystemdCgroup": False,
    }
    grpc = config["plugins"]["io.containerd.server.v1.grpc"]
    assert grpc["address"] == str(paths.containerd_socket)
    images = config["plugins"]["io.containerd.cri.v1.images"]
    assert images["pinned_images"]["sandbox"].startswith("registry.k8s.io/pause:")


def test_kubelet_config_allows_cgroup_v1_and_binds_the_node_ip(tmp_path: Path) -> None:
    net = hostnet.cluster_net(2)
    text = configs.kubelet_config(
        paths=configs.NodePaths(tmp_path),
        node=net.node(0),
        ca_cert=tmp_path / "ca.crt",
        serving_cert=tmp_path / "s.crt",
        serving_key=tmp_path / "s.key",
        port=41000,
        healthz_port=41001,
        cgroup_root="/drae2e2n0",
        feature_gates={"DRAAdminAccess": True},
    )
    config = yaml.safe_load(text)
    assert config["failCgroupV1"] is False
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["address"] == "10.200.2.1"
    assert config["readOnlyPort"] == 0
    assert config["authentication"]["anonymous"]["enabled"] is False
    assert config["featureGates"] == {"DRAAdminAccess": True}
    assert config["podLogsDir"] == str(tmp_path / "pod-logs")


def test_cache_key_tracks_version_and_flags() -> None:
    keys = {c.cache_key() for c in COMPONENTS}
    assert len(keys) == 3
    bumped = GoComponent(
        name=KUBE.name,
        version="v1.36.99",
        packages=KUBE.packages,
        outputs=KUBE.outputs,
        ldflags=KUBE.ldflags,
        aliases=KUBE.aliases,
    )
    assert bumped.cache_key() != KUBE.cache_key()
    assert bumped.cache_key().startswith("kube-v1.36.99-")


def test_every_pinned_kube_version_has_its_own_module_file_and_key() -> None:
    keys = set()
    for version in KUBERNETES_VERSIONS:
        component = kube_component(version)
        for path in component.input_files():
            assert path.is_file(), path
        keys.add(component.cache_key())
        if version != KUBERNETES_VERSION:
            assert component.go_flags() == [f"-modfile={component.modfile}"]
            # The alternate go.mod really pins that version of k8s.io/kubernetes.
            assert f"k8s.io/kubernetes {version}" in component.input_files()[-2].read_text()
    assert len(keys) == len(KUBERNETES_VERSIONS)
    assert kube_component().go_flags() == []


def test_unpinned_kube_version_is_a_clear_error() -> None:
    with pytest.raises(UnknownVersionError, match=r"v1\.30\.0 is not pinned.*v1\.37\.2"):
        kube_component("v1.30.0")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.36", "v1.36.5"),
        ("v1.36", "v1.36.5"),
        ("1.37.2", "v1.37.2"),
        ("v1.34.4", "v1.34.4"),
        ("1.3", "v1.3"),  # no prefix match on "1.3" -> v1.34/v1.35: minor numbers are whole
        ("1.99", "v1.99"),
    ],
)
def test_kube_version_shorthands(text: str, expected: str) -> None:
    assert resolve_kube_version(text) == expected


def test_cluster_version_asked_else_state_else_default(tmp_path: Path) -> None:
    assert Cluster(tmp_path).kube_version == KUBERNETES_VERSION
    assert Cluster(tmp_path, kube_version="v1.35.4").kube_version == "v1.35.4"
    state = ClusterState(state_dir=str(tmp_path), slot=0, kubernetes_version="v1.34.4")
    (tmp_path / STATE_FILE).write_text(json.dumps(state.to_json()))
    assert Cluster(tmp_path).kube_version == "v1.34.4"
    assert "kube-v1.34.4-" in str(Cluster(tmp_path).bins.kube_dir)
