"""A local Kubernetes cluster from upstream components, run as plain processes.

``Cluster(state_dir).up(nodes=N)`` starts etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and N nodes (default 1: containerd + kubelet, each node in its own mount
namespace with the standard kubelet and CDI paths, see :mod:`dra_e2e.node_mounts`);
``add_node()`` adds another node; ``down()`` stops exactly the processes recorded in
``cluster.json`` (plus containerd's shims, the containers in this cluster's own cgroup
subtree and whatever else runs in its nodes' mount namespaces), removes the host network
pieces and deletes the state directory.

Everything lives under the state directory: certificates, kubeconfigs, etcd data,
each node's containerd root and kubelet root, and one log file per component.
"""

from __future__ import annotations

import calendar
import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from dra_e2e import (
    commands,
    configs,
    hostcleanup,
    hostnet,
    image_aliases,
    images,
    kwok_cluster,
    node_mounts,
    preflight,
    teardown,
)
from dra_e2e.build import ensure_binaries
from dra_e2e.cluster_view import (
    ClusterView,
    Progress,
    quiet,
)
from dra_e2e.configs import CDI_DIR, KUBELET_ROOT
from dra_e2e.errors import (
    ClusterStateError,
    ComponentError,
    KubectlError,
)
from dra_e2e.kubeconfig import write_kubeconfig
from dra_e2e.pki import CertificateAuthority, write_service_account_keys
from dra_e2e.prerequisites import Purpose
from dra_e2e.process import (
    ProcessRecord,
    signal_and_wait,
    spawn,
)
from dra_e2e.readiness import free_port, http_ok, tls_context, wait_for
from dra_e2e.state import STATE_FILE, ClusterState, NodeState
from dra_e2e.versions import PAUSE_IMAGE, TEST_IMAGE


class Cluster(ClusterView):
    """A cluster rooted at one state directory; see the module docstring."""

    def _spawn(self, name: str, argv: Sequence[str]) -> ProcessRecord:
        return self._record(spawn(name, argv, log=self.logs_dir / f"{name}.log"))

    def start_daemon(self, name: str, argv: Sequence[str]) -> ProcessRecord:
        """Start one more daemon of this cluster (logging to ``logs/<name>.log``); ``down``
        stops it with the rest."""
        return self._spawn(name, argv)

    # ----- up ----------------------------------------------------------------------
    def up(
        self,
        *,
        progress: Progress = quiet,
        build: bool = True,
        nodes: int = 1,
        kwok_nodes: int = 0,
    ) -> None:
        """Start the control plane and ``nodes`` nodes, plus ``kwok_nodes`` simulated GPU nodes
        (kwok, :mod:`dra_e2e.kwok_cluster`); on failure print logs and tear down."""
        if not 1 <= nodes <= hostnet.MAX_NODES:
            raise ClusterStateError(
                self.state_dir, f"nodes: {nodes} is not between 1 and {hostnet.MAX_NODES}"
            )
        preflight.check(Purpose.CLUSTER)
        if self.exists():
            raise ClusterStateError(self.state_dir, "a cluster is already up here (run down first)")
        version = self.kube_version
        if build:
            self._bins = ensure_binaries(progress=progress, kube_version=version)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        slot = hostnet.allocate_slot(self.state_dir)
        self._state = ClusterState(
            state_dir=str(self.state_dir), slot=slot, kubernetes_version=version
        )
        self._save()
        try:
            self._up(progress, nodes=nodes)
            if kwok_nodes:
                kwok_cluster.add_kwok_nodes(self, kwok_nodes, progress=progress)
        except BaseException:
            progress(self.failure_report())
            kept = self.save_logs()
            if kept is not None:
                progress(f"[dra-e2e] component logs kept in {kept}")
            self.down(progress=progress)
            raise

    def _up(self, progress: Progress, *, nodes: int) -> None:
        started = time.monotonic()
        state = self.state
        node0 = self.net.node(0)
        progress(f"[dra-e2e] state directory {self.state_dir} (network slot {state.slot})")
        hostnet.create_bridge(node0)
        state.etcd_port, state.etcd_peer_port = free_port(), free_port()
        state.apiserver_port = free_port(node0.node_ip)
        state.controller_manager_port, state.scheduler_port = free_port(), free_port()
        state.feature_gates = self._feature_gates()
        self._save()
        self._write_pki()
        self._start_etcd()
        progress("[dra-e2e] etcd ready")
        self._start_apiserver()
        progress(f"[dra-e2e] kube-apiserver ready at {self.apiserver_url}")
        hostnet.install_service_dnat(
            self.net, apiserver_ip=self.apiserver_ip, apiserver_port=state.apiserver_port
        )
        self._start_controller_manager()
        self._start_scheduler()
        progress("[dra-e2e] kube-controller-manager and kube-scheduler ready")
        self.add_nodes(nodes, progress=progress)
        wait_for(
            "the default service account",
            lambda: self._kubectl_ok("get", "serviceaccount", "default", "-n", "default"),
            timeout=60,
        )
        elapsed = time.monotonic() - started
        progress(f"[dra-e2e] cluster up in {elapsed:.0f}s; KUBECONFIG={self.kubeconfig}")

    def _write_pki(self) -> None:
        net, pki = self.net, self.pki_dir
        ca = CertificateAuthority.create(pki)
        write_service_account_keys(pki)
        ca.issue(
            pki,
            "apiserver",
            common_name="kube-apiserver",
            server=True,
            dns_names=(
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ),
            ip_addresses=(self.apiserver_ip, "127.0.0.1", net.kubernetes_service_ip),
        )
        ca.issue(
            pki,
            "apiserver-kubelet-client",
            common_name="kube-apiserver-kubelet-client",
            organizations=("system:masters",),
            client=True,
        )
        users = {
            "admin": ("kubernetes-admin", ("system:masters",)),
            "controller-manager": ("system:kube-controller-manager", ()),
            "scheduler": ("system:kube-scheduler", ()),
        }
        for stem, (cn, orgs) in users.items():
            pair = ca.issue(pki, stem, common_name=cn, organizations=orgs, client=True)
            write_kubeconfig(
                self.state_dir / "kubeconfigs" / f"{stem}.kubeconfig",
                server=self.apiserver_url,
                ca_cert=ca.pair.cert,
                client=pair,
                user=cn,
            )

    def _feature_gates(self) -> dict[str, bool]:
        proc = subprocess.run(
            [str(self.bins.kube("kube-apiserver")), "--help"],
            capture_output=True,
            text=True,
            check=False,
        )
        gates = configs.parse_beta_gates(proc.stdout + proc.stderr)
        if not gates:
            # A changed --help format would otherwise silently turn the betas off.
            raise ComponentError(
                "kube-apiserver", "no BETA DRA feature gates found in --help output"
            )
        extra = os.environ.get("DRA_E2E_FEATURE_GATES", "")
        for item in filter(None, (s.strip() for s in extra.split(","))):
            name, _, value = item.partition("=")
            gates[name] = value.lower() != "false"
        return gates

    @property
    def control_plane(self) -> commands.ControlPlane:
        """Addresses and files of the control plane, for the command-line builders."""
        s = self.state
        return commands.ControlPlane(
            state_dir=self.state_dir,
            pki_dir=self.pki_dir,
            kubeconfig_dir=self.state_dir / "kubeconfigs",
            apiserver_ip=self.apiserver_ip,
            apiserver_port=s.apiserver_port,
            etcd_port=s.etcd_port,
            etcd_peer_port=s.etcd_peer_port,
            controller_manager_port=s.controller_manager_port,
            scheduler_port=s.scheduler_port,
            service_cidr=self.net.service_cidr,
            feature_gates=s.feature_gates,
        )

    def _start_etcd(self) -> None:
        cp = self.control_plane
        record = self._spawn("etcd", commands.etcd_argv(self.bins.etcd, cp))
        wait_for(
            "etcd /health",
            lambda: http_ok(f"{cp.etcd_url}/health", expect="true"),
            process=record,
        )

    def _start_apiserver(self) -> None:
        pki = self.pki_dir
        argv = commands.apiserver_argv(self.bins.kube("kube-apiserver"), self.control_plane)
        record = self._spawn("kube-apiserver", argv)
        ctx = tls_context(ca=pki / "ca.crt", cert=pki / "admin.crt", key=pki / "admin.key")
        wait_for(
            "kube-apiserver /readyz",
            lambda: http_ok(f"{self.apiserver_url}/readyz", context=ctx),
            process=record,
            timeout=120,
        )

    def _start_controller_manager(self) -> None:
        binary = self.bins.kube("kube-controller-manager")
        record = self._spawn(
            "kube-controller-manager", commands.controller_manager_argv(binary, self.control_plane)
        )
        url = f"https://127.0.0.1:{self.state.controller_manager_port}/healthz"
        wait_for(
            "kube-controller-manager /healthz",
            lambda: http_ok(url, context=tls_context(ca=None)),
            process=record,
        )

    def _start_scheduler(self) -> None:
        binary = self.bins.kube("kube-scheduler")
        record = self._spawn("kube-scheduler", commands.scheduler_argv(binary, self.control_plane))
        url = f"https://127.0.0.1:{self.state.scheduler_port}/healthz"
        wait_for(
            "kube-scheduler /healthz",
            lambda: http_ok(url, context=tls_context(ca=None)),
            process=record,
        )

    # ----- nodes -------------------------------------------------------------------
    def add_node(self, *, progress: Progress = quiet) -> NodeState:
        """Start another node (containerd + kubelet) and wait until it is Ready."""
        s = self.state
        index = len(s.nodes)
        net = self.net.node(index)
        name = f"e2e-node-{index}"
        node = NodeState(
            name=name,
            index=index,
            root=str(self.state_dir / "nodes" / name),
            kubelet_port=free_port(),
            healthz_port=free_port(),
            cgroup_root=f"/drae2e{s.slot}n{index}",
            mount_ns=str(self.mount_ns_dir / name),
        )
        s.nodes.append(node)
        self._save()
        hostnet.create_bridge(net)
        paths = node.paths
        for directory in (
            paths.cni_conf_dir,
            paths.cni_ipam_dir,
            paths.cdi_dir,
            paths.kubelet_root,
        ):
            directory.mkdir(parents=True, exist_ok=True)
        (paths.cni_conf_dir / "10-dra-e2e.conflist").write_text(
            json.dumps(configs.cni_config(net, paths), indent=2)
        )
        node.mount_ns_inode = node_mounts.create(node.mounts)
        self._save()
        self._start_containerd(node)
        self._import_base_images(node)
        progress(
            f"[dra-e2e] {name}: containerd ready, images {PAUSE_IMAGE} and {TEST_IMAGE} imported"
        )
        self._start_kubelet(node)
        progress(
            f"[dra-e2e] {name}: Ready ({KUBELET_ROOT} is {paths.kubelet_root}, {CDI_DIR} is "
            f"{paths.cdi_dir} in its mount namespace)"
        )
        return node

    def add_nodes(self, count: int, *, progress: Progress = quiet) -> list[NodeState]:
        """Start ``count`` more nodes, one after the other (each Ready before the next)."""
        return [self.add_node(progress=progress) for _ in range(count)]

    def _start_containerd(self, node: NodeState) -> None:
        paths = node.paths
        paths.containerd_config.parent.mkdir(parents=True, exist_ok=True)
        paths.containerd_config.write_text(
            configs.containerd_config(paths, runc=preflight.require("runc"))
        )
        env = dict(os.environ)
        # containerd finds its shim on PATH.
        env["PATH"] = (
            f"{self.bins.containerd_dir}:{env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
        )
        record = self._record(
            spawn(
                f"containerd-{node.name}",
                node.mounts.enter(
                    [str(self.bins.containerd), f"--config={paths.containerd_config}"]
                ),
                log=self.logs_dir / f"containerd-{node.name}.log",
                env=env,
            )
        )
        wait_for(
            f"containerd socket of {node.name}",
            lambda: paths.containerd_socket.exists() and self._ctr_ok(node),
            process=record,
        )

    def _import_base_images(self, node: NodeState) -> None:
        cache = self.state_dir / "images"
        pause = cache / "pause.oci.tar"
        test = cache / "busybox.oci.tar"
        if not pause.exists():
            layer = images.busybox_layer()
            images.write_oci_archive(
                pause,
                images.ImageSpec(reference=PAUSE_IMAGE, cmd=images.PAUSE_COMMAND),
                layer=layer,
            )
            images.write_oci_archive(test, images.ImageSpec(reference=TEST_IMAGE), layer=layer)
        for archive in (pause, test):
            self.import_image(archive, node=node.name)

    def import_image(self, archive: Path, *, node: str | None = None) -> list[str]:
        """Import an image archive into one node (by name) or, by default, every node."""
        refs: list[str] = []
        targets = [n for n in self.state.nodes if node is None or n.name == node]
        if not targets:
            raise ClusterStateError(self.state_dir, f"no node named {node!r}")
        for target in targets:
            socket = target.paths.containerd_socket
            imported = images.import_image(archive, ctr=self.bins.ctr, containerd_socket=socket)
            imported += image_aliases.tag_aliases(
                archive, ctr=self.bins.ctr, containerd_socket=socket
            )
            refs += [ref for ref in imported if ref not in refs]
        return refs

    def _start_kubelet(self, node: NodeState) -> None:
        paths, net = node.paths, self.net.node(node.index)
        ca = CertificateAuthority.load(self.pki_dir)
        node_pki = Path(node.root) / "pki"
        client = ca.issue(
            node_pki,
            "kubelet-client",
            common_name=f"system:node:{node.name}",
            organizations=("system:nodes",),
            client=True,
        )
        serving = ca.issue(
            node_pki,
            "kubelet-serving",
            common_name=node.name,
            server=True,
            dns_names=(node.name, "localhost"),
            ip_addresses=(net.node_ip, "127.0.0.1"),
        )
        kubeconfig = write_kubeconfig(
            Path(node.root) / "kubelet.kubeconfig",
            server=self.apiserver_url,
            ca_cert=ca.pair.cert,
            client=client,
            user=f"system:node:{node.name}",
        )
        _prepare_cgroup_root(node.cgroup_root)
        paths.kubelet_config.write_text(
            configs.kubelet_config(
                paths=paths,
                node=net,
                ca_cert=ca.pair.cert,
                serving_cert=serving.cert,
                serving_key=serving.key,
                port=node.kubelet_port,
                healthz_port=node.healthz_port,
                cgroup_root=node.cgroup_root,
                feature_gates=self.state.feature_gates,
            )
        )
        record = self._spawn(
            f"kubelet-{node.name}",
            node.mounts.enter(
                commands.kubelet_argv(
                    self.bins.kube("kubelet"),
                    config=paths.kubelet_config,
                    kubeconfig=kubeconfig,
                    root_dir=KUBELET_ROOT,
                    cert_dir=node_pki,
                    node_name=node.name,
                    node_ip=net.node_ip,
                )
            ),
        )
        wait_for(
            f"node {node.name} Ready",
            lambda: self.node_ready(node.name),
            process=record,
            timeout=120,
            interval=1.0,
        )

    def respawn(self, name: str, *, sig: signal.Signals = signal.SIGKILL) -> ProcessRecord:
        """Stop the recorded daemon ``name`` with ``sig`` and start it again, same command line.

        The new process appends to the same log and replaces the old record in ``cluster.json``
        (so ``down`` stops the new one). Nothing else is touched: a kubelet's pods keep running
        in containerd, as on a real node whose kubelet crashed.
        """
        records = [ProcessRecord.from_json(p) for p in self.state.processes]
        index = next((i for i, r in enumerate(records) if r.name == name), None)
        if index is None:
            raise ClusterStateError(self.state_dir, f"no process named {name!r}")
        old = records[index]
        signal_and_wait(old, sig)
        env = None
        if name.startswith("containerd-"):
            env = dict(os.environ)
            env["PATH"] = (
                f"{self.bins.containerd_dir}:{env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
            )
        new = spawn(name, old.argv, log=Path(old.log), env=env)
        self.state.processes[index] = new.to_json()
        self._save()
        return new

    def restart_kubelet(
        self,
        node: str,
        *,
        sig: signal.Signals = signal.SIGKILL,
        timeout: float = 120.0,
        progress: Progress = quiet,
    ) -> ProcessRecord:
        """Kill a node's kubelet (SIGKILL by default: a crash) and start it again.

        Returns once the new kubelet answers ``/healthz`` and has posted a Ready node status
        after the restart, so callers see the restarted kubelet, not the stale Ready condition
        the old one left behind (the API server keeps it until the node lease expires).
        """
        target = next((n for n in self.state.nodes if n.name == node), None)
        if target is None:
            raise ClusterStateError(self.state_dir, f"no node named {node!r}")
        restarted_at = time.time()
        record = self.respawn(f"kubelet-{node}", sig=sig)
        progress(f"[dra-e2e] {node}: kubelet killed with {sig.name}, restarted (pid {record.pid})")
        wait_for(
            f"kubelet /healthz of {node}",
            lambda: http_ok(f"http://127.0.0.1:{target.healthz_port}/healthz"),
            process=record,
            timeout=timeout,
        )
        wait_for(
            f"node {node} Ready after the kubelet restart",
            lambda: self._ready_since(node, restarted_at),
            process=record,
            timeout=timeout,
            interval=1.0,
        )
        progress(f"[dra-e2e] {node}: Ready again")
        return record

    def restart_apiserver(self, *, timeout: float = 120.0) -> ProcessRecord:
        """Stop kube-apiserver (SIGTERM, as a control-plane upgrade does) and start it again
        with the same command line; returns once ``/readyz`` answers again."""
        record = self.respawn("kube-apiserver", sig=signal.SIGTERM)
        pki = self.pki_dir
        ctx = tls_context(ca=pki / "ca.crt", cert=pki / "admin.crt", key=pki / "admin.key")
        wait_for(
            "kube-apiserver /readyz after the restart",
            lambda: http_ok(f"{self.apiserver_url}/readyz", context=ctx),
            process=record,
            timeout=timeout,
        )
        return record

    def _ready_since(self, name: str, since: float) -> bool:
        """Whether node ``name`` is Ready with a heartbeat at or after ``since`` (epoch s)."""
        try:
            data = json.loads(self.kubectl("get", "node", name, "-o", "json", timeout=15))
        except (KubectlError, subprocess.TimeoutExpired, json.JSONDecodeError):
            return False
        for cond in data.get("status", {}).get("conditions", []):
            if cond.get("type") == "Ready":
                beat = _epoch(cond.get("lastHeartbeatTime", ""))
                # Timestamps have whole seconds: a beat in the restart's second counts.
                return cond.get("status") == "True" and beat >= int(since)
        return False

    # ----- down --------------------------------------------------------------------
    def down(self, *, progress: Progress = quiet) -> list[str]:
        """Stop everything this cluster started and delete its state; return leftovers."""
        if not self.exists():
            raise ClusterStateError(self.state_dir, f"no {STATE_FILE}: nothing to tear down")
        leftovers = teardown.teardown(self, progress=progress)
        self._state = None
        return leftovers


def _epoch(timestamp: str) -> float:
    """Seconds since the epoch of an RFC 3339 ``...Z`` timestamp; 0 if unparsable."""
    try:
        parsed = time.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return 0.0
    return float(calendar.timegm(parsed))


def _prepare_cgroup_root(name: str) -> None:
    """Create the kubelet's cgroupRoot in every hierarchy (the kubelet requires it).

    A stale subtree from a crashed run of the same slot is swept first.
    """
    hostcleanup.kill_cgroup_tree(name, timeout=5)
    hostcleanup.remove_cgroup_tree(name)
    for hierarchy in hostcleanup.cgroup_hierarchies():
        (hierarchy / name.strip("/")).mkdir(exist_ok=True)
