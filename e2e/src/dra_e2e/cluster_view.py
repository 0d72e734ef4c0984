"""What a local cluster is and what can be asked of it, without starting anything.

:class:`ClusterView` knows the state directory's layout, the persisted ``cluster.json``, the
recorded processes and how to query the running cluster (kubectl, readiness, status, logs).
:class:`~dra_e2e.cluster.Cluster` adds bringing it up and changing it;
:mod:`dra_e2e.teardown` needs only this view to take it down.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dra_e2e import (
    hostnet,
)
from dra_e2e.build import Binaries, binaries
from dra_e2e.configs import CDI_DIR, KUBELET_ROOT
from dra_e2e.errors import (
    ClusterStateError,
    KubectlError,
)
from dra_e2e.kubectl import Kubectl
from dra_e2e.process import (
    ProcessRecord,
    is_running,
    pids_referencing,
    tail,
)
from dra_e2e.readiness import http_ok, tls_context
from dra_e2e.state import STATE_FILE, ClusterState, NodeState
from dra_e2e.versions import KUBERNETES_VERSION

Progress = Callable[[str], None]
DEFAULT_STATE_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / "dra-e2e-cluster"
# Taints the node lifecycle controller keeps on a node that is not (yet) Ready.
NODE_CONDITION_TAINTS = frozenset(
    {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
)


def has_condition_taint(node: Mapping[str, Any]) -> bool:
    """Whether a Node object still carries a not-ready or unreachable taint."""
    taints = node.get("spec", {}).get("taints") or []
    return any(t.get("key") in NODE_CONDITION_TAINTS for t in taints)


def quiet(_: str) -> None:
    """The default progress callback: report nothing."""
    return


class ClusterView:
    """A cluster rooted at one state directory, as far as reading and querying it goes."""

    def __init__(
        self,
        state_dir: Path = DEFAULT_STATE_DIR,
        *,
        bins: Binaries | None = None,
        kube_version: str | None = None,
    ) -> None:
        self.state_dir = state_dir.resolve()
        self._bins = bins
        self._state: ClusterState | None = None
        self._kube_version = kube_version

    @property
    def kube_version(self) -> str:
        """The Kubernetes version: as asked, else the running cluster's, else the default."""
        if self._kube_version is not None:
            return self._kube_version
        if self.exists():
            return self.state.kubernetes_version
        return KUBERNETES_VERSION

    # ----- paths -----------------------------------------------------------------
    @property
    def bins(self) -> Binaries:
        """Binary paths (from the cache)."""
        if self._bins is None:
            self._bins = binaries(kube_version=self.kube_version)
        return self._bins

    @property
    def pki_dir(self) -> Path:
        """Certificates and keys."""
        return self.state_dir / "pki"

    @property
    def logs_dir(self) -> Path:
        """One log file per component."""
        return self.state_dir / "logs"

    @property
    def mount_ns_dir(self) -> Path:
        """The files the nodes' mount namespaces are bound to (a private bind mount)."""
        return self.state_dir / "mntns"

    @property
    def kubeconfig(self) -> Path:
        """The cluster-admin kubeconfig."""
        return self.state_dir / "kubeconfigs" / "admin.kubeconfig"

    @property
    def state(self) -> ClusterState:
        """The persisted state (loaded from ``cluster.json`` on first use)."""
        if self._state is None:
            path = self.state_dir / STATE_FILE
            if not path.is_file():
                raise ClusterStateError(self.state_dir, f"no {STATE_FILE}: no cluster here")
            self._state = ClusterState.from_json(json.loads(path.read_text()))
        return self._state

    def exists(self) -> bool:
        """Whether a cluster state file exists in the state directory."""
        return (self.state_dir / STATE_FILE).is_file()

    @property
    def net(self) -> hostnet.ClusterNet:
        """The cluster's address plan."""
        return hostnet.cluster_net(self.state.slot)

    @property
    def apiserver_ip(self) -> str:
        """The API server's address: node 0's bridge address (reachable from pods)."""
        return self.net.node(0).node_ip

    @property
    def apiserver_url(self) -> str:
        """HTTPS URL of the API server."""
        return f"https://{self.apiserver_ip}:{self.state.apiserver_port}"

    def processes(self) -> list[ProcessRecord]:
        """Every daemon this cluster started, in start order."""
        return [ProcessRecord.from_json(p) for p in self.state.processes]

    def _save(self) -> None:
        path = self.state_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state.to_json(), indent=2))
        tmp.replace(path)

    def _record(self, record: ProcessRecord) -> ProcessRecord:
        self.state.processes.append(record.to_json())
        self._save()
        return record

    def container_ids(self, node: NodeState) -> list[str]:
        """Ids of the node's containers (sandboxes included); [] if containerd is gone."""
        if not node.paths.containerd_socket.exists():
            return []
        try:
            proc = subprocess.run(
                [str(self.bins.ctr), "--address", str(node.paths.containerd_socket),
                 "--namespace", "k8s.io", "containers", "list", "--quiet"],
                capture_output=True, text=True, timeout=30, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return []
        return proc.stdout.split() if proc.returncode == 0 else []

    def _ctr_ok(self, node: NodeState) -> bool:
        try:
            proc = subprocess.run(
                [str(self.bins.ctr), "--address", str(node.paths.containerd_socket), "version"],
                capture_output=True,
                timeout=10,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return False
        return proc.returncode == 0

    # ----- queries -----------------------------------------------------------------
    def kubectl(self, *args: str, input_text: str | None = None, timeout: float = 60) -> str:
        """Run kubectl against this cluster as cluster-admin; return stdout."""
        return Kubectl(self.bins.kubectl, self.kubeconfig).run(
            *args, input_text=input_text, timeout=timeout
        )

    def _kubectl_ok(self, *args: str) -> bool:
        try:
            self.kubectl(*args, timeout=15)
        except (KubectlError, subprocess.TimeoutExpired):
            return False
        return True

    def node_ready(self, name: str) -> bool:
        """Whether node ``name`` exists, reports Ready=True and has lost its not-ready taint.

        The node lifecycle controller removes ``node.kubernetes.io/not-ready`` a few seconds
        after the kubelet reports Ready; until then the scheduler (and any tool reading the
        node) treats the node as unschedulable, so a node is only "up" once the taint is gone.
        """
        try:
            data = json.loads(self.kubectl("get", "node", name, "-o", "json", timeout=15))
        except (KubectlError, subprocess.TimeoutExpired, json.JSONDecodeError):
            return False
        if has_condition_taint(data):
            return False
        for cond in data.get("status", {}).get("conditions", []):
            if cond.get("type") == "Ready":
                return bool(cond.get("status") == "True")
        return False

    def status(self) -> dict[str, Any]:
        """Process liveness, API readiness and node readiness, as plain data."""
        procs = {p.name: {"pid": p.pid, "running": is_running(p)} for p in self.processes()}
        pki = self.pki_dir
        api_ready = http_ok(
            f"{self.apiserver_url}/readyz",
            context=tls_context(ca=pki / "ca.crt", cert=pki / "admin.crt", key=pki / "admin.key"),
        )
        nodes = {
            n.name: {
                "ready": api_ready and self.node_ready(n.name),
                # The node's paths (the same on every node), and where this host sees them.
                "kubelet_root": str(KUBELET_ROOT),
                "cdi_dir": str(CDI_DIR),
                "kubelet_root_on_host": str(n.paths.kubelet_root),
                "cdi_dir_on_host": str(n.paths.cdi_dir),
                "mount_namespace": n.mount_ns,
                "containerd_socket": str(n.paths.containerd_socket),
                "node_ip": self.net.node(n.index).node_ip,
            }
            for n in self.state.nodes
        }
        return {
            "state_dir": str(self.state_dir),
            "kubernetes_version": self.state.kubernetes_version,
            "apiserver": self.apiserver_url,
            "apiserver_ready": api_ready,
            "kubeconfig": str(self.kubeconfig),
            "feature_gates": self.state.feature_gates,
            "processes": procs,
            "nodes": nodes,
        }

    def log_files(self) -> list[Path]:
        """Every component log file, in start order."""
        return [Path(p.log) for p in self.processes()]

    def save_logs(self, *, target_root: Path | None = None) -> Path | None:
        """Copy every component log out of the state directory (which ``down`` deletes).

        The copy goes to ``$DRA_E2E_LOGS_DIR`` (default: the temp directory) under a
        timestamped name; returns it, or None when there are no logs yet.
        """
        if not self.logs_dir.is_dir():
            return None
        root = target_root or Path(os.environ.get("DRA_E2E_LOGS_DIR", tempfile.gettempdir()))
        target = root / f"dra-e2e-logs-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        shutil.copytree(self.logs_dir, target, dirs_exist_ok=True)
        return target

    def failure_report(self, *, lines: int = 30) -> str:
        """The tail of every component's log, for printing when something failed."""
        parts = [f"[dra-e2e] component logs under {self.logs_dir}:"]
        if self._state is None and not self.exists():
            return parts[0] + " (none)"
        for record in self.processes():
            alive = "running" if is_running(record) else "NOT running"
            parts.append(f"----- {record.name} ({alive}) {record.log} -----")
            parts.append(tail(record.log, lines=lines).rstrip())
        return "\n".join(parts)

    def own_pids(self) -> list[int]:
        """Live processes of this cluster: our binaries naming our state directory."""
        dirs = [self.bins.kube_dir, self.bins.etcd_dir, self.bins.containerd_dir]
        return pids_referencing(str(self.state_dir), executables_under=dirs)
