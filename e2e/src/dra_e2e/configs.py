"""Configuration files and command lines of the cluster components (pure functions).

Design notes for this machine (Firecracker VM, hybrid cgroup v1, no
CAP_SYS_RESOURCE in the bounding set): runc (not crun) runs containers with the
cgroupfs driver; the kubelet is told ``failCgroupV1: false``; no container is
privileged by default. containerd's default OCI spec sets RLIMIT_NOFILE to
1024/1024, below the host's hard limit, so runc only ever lowers rlimits
(raising one needs CAP_SYS_RESOURCE).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dra_e2e.hostnet import NodeNet
from dra_e2e.versions import PAUSE_IMAGE

CNI_BIN_DIRS = ("/usr/lib/cni", "/opt/cni/bin")
#: Where every node keeps its kubelet root and CDI specs, as on a real node (the chart's
#: defaults); each node's own directories are bind-mounted there in its mount namespace
#: (:mod:`dra_e2e.node_mounts`).
KUBELET_ROOT = Path("/var/lib/kubelet")
CDI_DIR = Path("/var/run/cdi")


@dataclass(frozen=True)
class NodePaths:
    """Filesystem layout of one node under the cluster state directory.

    ``kubelet_root`` and ``cdi_dir`` are where this host keeps them; inside the node they are
    :data:`KUBELET_ROOT` and :data:`CDI_DIR`.
    """

    root: Path

    @property
    def containerd_root(self) -> Path:
        """containerd's persistent root (content store, snapshots)."""
        return self.root / "containerd" / "root"

    @property
    def containerd_state(self) -> Path:
        """containerd's runtime state (sockets of tasks, network namespaces)."""
        return self.root / "containerd" / "state"

    @property
    def containerd_socket(self) -> Path:
        """containerd's gRPC socket (the kubelet's CRI endpoint)."""
        return self.root / "containerd" / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        """containerd's config.toml."""
        return self.root / "containerd" / "config.toml"

    @property
    def cni_conf_dir(self) -> Path:
        """The node's CNI network configuration directory."""
        return self.root / "cni" / "net.d"

    @property
    def cni_ipam_dir(self) -> Path:
        """host-local IPAM's allocation records."""
        return self.root / "cni" / "ipam"

    @property
    def cdi_dir(self) -> Path:
        """The node's CDI spec directory (the node's :data:`CDI_DIR`, which containerd reads)."""
        return self.root / "cdi"

    @property
    def kubelet_root(self) -> Path:
        """The node's kubelet root (plugins/, plugins_registry/, pods/): its KUBELET_ROOT."""
        return self.root / "kubelet"

    @property
    def kubelet_config(self) -> Path:
        """The kubelet's KubeletConfiguration file."""
        return self.root / "kubelet.yaml"


def containerd_config(paths: NodePaths, *, runc: str) -> str:
    """containerd 2.x config (version 4) with CRI, CDI and runc via cgroupfs.

    Every path containerd would otherwise share host-wide (sockets, NRI, /opt)
    points into the node's directory, so several nodes and clusters coexist.
    """
    q = json.dumps  # TOML basic strings escape like JSON strings for our paths
    cni_bins = ", ".join(q(d) for d in CNI_BIN_DIRS)
    base = paths.root / "containerd"
    return f"""version = 4
root = {q(str(paths.containerd_root))}
state = {q(str(paths.containerd_state))}

[plugins]
  [plugins."io.containerd.server.v1.grpc"]
    address = {q(str(paths.containerd_socket))}

  [plugins."io.containerd.server.v1.ttrpc"]
    address = {q(str(paths.containerd_socket) + ".ttrpc")}

  [plugins."io.containerd.internal.v1.opt"]
    path = {q(str(base / "opt"))}

  [plugins."io.containerd.nri.v1.nri"]
    disable = true

  [plugins."io.containerd.grpc.v1.cri"]
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"

  [plugins."io.containerd.cri.v1.images"]
    snapshotter = "overlayfs"
    [plugins."io.containerd.cri.v1.images".pinned_images]
      sandbox = {q(PAUSE_IMAGE)}

  [plugins."io.containerd.cri.v1.runtime"]
    enable_cdi = true
    cdi_spec_dirs = [{q(str(CDI_DIR))}]
    enable_selinux = false
    netns_mounts_under_state_dir = true
    # Lowering oom_score_adj (the kubelet asks -998 for sandboxes) needs
    # CAP_SYS_RESOURCE, which this VM's bounding set lacks: clamp at ours.
    restrict_oom_score_adj = true
    [plugins."io.containerd.cri.v1.runtime".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
          BinaryName = {q(runc)}
          Root = {q(str(base / "runc"))}
          SystemdCgroup = false
    [plugins."io.containerd.cri.v1.runtime".cni]
      bin_dirs = [{cni_bins}]
      conf_dir = {q(str(paths.cni_conf_dir))}
      max_conf_num = 1
"""


def cni_config(node: NodeNet, paths: NodePaths) -> dict[str, Any]:
    """A bridge + host-local network on the node's private /24; nothing leaves the host."""
    return {
        "cniVersion": "1.0.0",
        # The network name prefixes libcni's host-wide result cache files
        # (/var/lib/cni/results/<name>-<container>-<ifname>); unique per node.
        "name": node.bridge,
        "plugins": [
            {
                "type": "bridge",
                "bridge": node.bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(paths.cni_ipam_dir),
                    "ranges": [
                        [
                            {
                                "subnet": node.pod_cidr,
                                "rangeStart": node.range_start,
                                "rangeEnd": node.range_end,
                                "gateway": node.node_ip,
                            }
                        ]
                    ],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}, "snat": False},
        ],
    }


def kubelet_config(
    *,
    paths: NodePaths,
    node: NodeNet,
    ca_cert: Path,
    serving_cert: Path,
    serving_key: Path,
    port: int,
    healthz_port: int,
    cgroup_root: str,
    feature_gates: dict[str, bool],
) -> str:
    """KubeletConfiguration for one node (YAML)."""
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": node.node_ip,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "tlsCertFile": str(serving_cert),
        "tlsPrivateKeyFile": str(serving_key),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_cert)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{paths.containerd_socket}",
        "imageServiceEndpoint": f"unix://{paths.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        "cgroupsPerQOS": True,
        "failCgroupV1": False,
        "failSwapOn": False,
        "enforceNodeAllocatable": ["pods"],
        "protectKernelDefaults": False,
        "clusterDomain": "cluster.local",
        "clusterDNS": [],
        "resolvConf": "",
        "podPidsLimit": -1,
        "maxPods": 110,
        "serializeImagePulls": False,
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "registerNode": True,
        "localStorageCapacityIsolation": True,
        # The shared disk fills and empties with other work; never evict test pods.
        "evictionHard": {
            "memory.available": "1Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "syncFrequency": "10s",
        "nodeStatusUpdateFrequency": "5s",
        "shutdownGracePeriod": "0s",
        # Default /var/log/pods is shared host-wide; keep this node's logs in its state.
        "podLogsDir": str(paths.root / "pod-logs"),
        "featureGates": feature_gates,
    }
    return yaml.safe_dump(config, sort_keys=False)


def feature_gate_arg(gates: dict[str, bool]) -> str:
    """``--feature-gates`` value for the control-plane components."""
    return ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted(gates.items()))


# Gates that only start together with others outside the DRA prefixes (1.37: workload
# claims need the GenericWorkload API, which the harness does not serve).
GATE_DEPENDENCIES: dict[str, tuple[str, ...]] = {"DRAWorkloadResourceClaims": ("GenericWorkload",)}


def parse_beta_gates(
    help_text: str, *, prefixes: tuple[str, ...] = ("DRA", "ResourceHealthStatus")
) -> dict[str, bool]:
    """Feature gates listed as BETA in a component's ``--help`` whose names match a prefix.

    Lines look like ``kube:DRADeviceTaintRules=true|false (BETA - default=false)``;
    the ``kube:`` component prefix (absent before 1.35) is dropped, because the
    flag and the kubelet's ``featureGates`` take bare names.
    """
    gates: dict[str, bool] = {}
    for raw in help_text.splitlines():
        line = raw.strip()
        name, sep, rest = line.partition("=true|false (")
        name = name.rpartition(":")[2]
        if not sep or not name.startswith(prefixes) or " " in name:
            continue
        if rest.startswith("BETA"):
            gates[name] = True
    for gate, needs in GATE_DEPENDENCIES.items():
        if gate in gates and not all(gates.get(dep) for dep in needs):
            # The apiserver refuses to start with a gate whose dependencies are off.
            del gates[gate]
    return gates
