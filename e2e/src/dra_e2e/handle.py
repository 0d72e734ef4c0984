"""What e2e tests hold: a cluster reachable through a kubeconfig.

Either the local cluster this harness started (``local`` is set and images can be
imported into its nodes) or an existing cluster asked for with ``--kubeconfig`` /
``$DRA_E2E_KUBECONFIG`` (for example a kind cluster), so the same tests run against both.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dra_e2e.cluster import Cluster
from dra_e2e.errors import ClusterStateError, E2EError, KubectlError
from dra_e2e.kubectl import Kubectl
from dra_e2e.process import ProcessRecord


@dataclass
class ClusterHandle:
    """A cluster under test: kubectl access plus, for the local cluster, node access."""

    kubeconfig: Path
    kubectl_path: Path
    local: Cluster | None = None

    @property
    def client(self) -> Kubectl:
        """kubectl bound to this cluster's kubeconfig."""
        return Kubectl(self.kubectl_path, self.kubeconfig)

    def kubectl(self, *args: str, input_text: str | None = None, timeout: float = 60) -> str:
        """Run kubectl against the cluster; return stdout, raise KubectlError on failure."""
        return self.client.run(*args, input_text=input_text, timeout=timeout)

    def kubectl_json(self, *args: str, timeout: float = 60) -> Any:
        """Run ``kubectl ... -o json`` and decode the output."""
        return self.client.json(*args, timeout=timeout)

    def exists(self, *args: str) -> bool:
        """Whether ``kubectl get ARGS`` finds the object."""
        return self.client.exists(*args)

    def apply(self, manifest: str, *, namespace: str | None = None) -> str:
        """``kubectl apply -f -`` of a YAML/JSON manifest string."""
        args = ["apply", "-f", "-"]
        if namespace:
            args += ["-n", namespace]
        return self.kubectl(*args, input_text=manifest)

    def wait_until(
        self,
        what: str,
        check: Callable[[], Any],
        *,
        timeout: float = 60.0,
        interval: float = 1.0,
    ) -> Any:
        """Poll ``check()`` until it returns a truthy value, which is returned.

        kubectl failures and timeouts inside ``check`` count as "not yet"; the last
        one is named in the error if the wait times out.
        """
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            result: Any = None
            try:
                result = check()
            except (KubectlError, subprocess.TimeoutExpired) as exc:
                last_error = exc
            if result:
                return result
            time.sleep(interval)
        detail = f" (last error: {last_error})" if last_error else ""
        raise E2EError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")

    def node_names(self) -> list[str]:
        """Names of the cluster's nodes: those matching the label selector
        ``$DRA_E2E_NODE_SELECTOR`` when set (kind/up.sh names the GPU nodes: a kind control
        plane is tainted and runs no plugin), otherwise all."""
        selector = os.environ.get("DRA_E2E_NODE_SELECTOR")
        data = self.kubectl_json("get", "nodes", *(("-l", selector) if selector else ()))
        return [item["metadata"]["name"] for item in data["items"]]

    def import_image(self, archive: Path, *, node: str | None = None) -> list[str]:
        """Import an OCI/Docker image archive into the local cluster's nodes.

        Only the local cluster accepts archives; for a kind cluster use
        ``kind load image-archive`` before running the tests.
        """
        if self.local is None:
            raise ClusterStateError(
                self.kubeconfig, "import_image needs the local e2e cluster (not --kubeconfig)"
            )
        return self.local.import_image(archive, node=node)

    def restart_kubelet(self, node: str, *, graceful: bool = False) -> ProcessRecord:
        """Kill a node's kubelet (SIGKILL, or SIGTERM when ``graceful``) and start it again.

        Returns once the node is Ready again with a status from the new kubelet. Only the
        local cluster's kubelets can be restarted from here.
        """
        if self.local is None:
            raise ClusterStateError(
                self.kubeconfig, "restart_kubelet needs the local e2e cluster (not --kubeconfig)"
            )
        sig = signal.SIGTERM if graceful else signal.SIGKILL
        return self.local.restart_kubelet(node, sig=sig)

    def restart_apiserver(self) -> ProcessRecord:
        """Stop kube-apiserver and start it again with the same arguments; returns once it is
        ready. Only the local cluster's API server can be restarted from here."""
        if self.local is None:
            raise ClusterStateError(
                self.kubeconfig, "restart_apiserver needs the local e2e cluster (not --kubeconfig)"
            )
        return self.local.restart_apiserver()
