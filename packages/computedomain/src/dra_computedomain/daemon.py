"""The domain daemon: runs IMEX, registers in the clique, keeps ``/etc/hosts`` current.

One daemon pod runs on every node of a domain (the controller's DaemonSet). The kubelet
plugin's daemon prepare injects the domain's identity and the node's clique ID as
environment variables and mounts the per-domain config directory at ``/imexd``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Final

from dra_api_types import ComputeDomainClique, ComputeDomainDaemonInfo
from dra_kube_client import Backoff, JsonTransport, KubeApiError

from .api_paths import Permission, collection_path, object_path
from .clique import deregister, dns_mapping, register
from .daemon_env import DaemonEnv
from .errors import CliqueFullError
from .hosts import render_hosts
from .imex_config import ImexSettings, render_config, render_nodes
from .imex_process import ImexProcess, imex_commands, query_ready
from .names import (
    CLIQUE_ID_POD_LABEL,
    COMPUTE_DOMAIN_LABEL,
)

__all__ = ["REQUESTS", "DaemonEnv", "DomainDaemon"]


log = logging.getLogger(__name__)

#: What a daemon asks of the API server, all in the driver namespace (the chart's Role).
REQUESTS: Final[frozenset[Permission]] = frozenset(
    {
        ("resource.nvidia.com", "computedomaincliques", "get"),
        ("resource.nvidia.com", "computedomaincliques", "create"),
        ("resource.nvidia.com", "computedomaincliques", "update"),
        ("", "pods", "patch"),
    }
)


class DomainDaemon:
    """One domain daemon; :meth:`step` does one round of supervision and registration."""

    def __init__(
        self, env: DaemonEnv, transport: JsonTransport, imex: ImexProcess | None = None
    ) -> None:
        """Use ``imex`` (default: the backend ``env`` names) and ``transport``."""
        self.env = env
        self._transport = transport
        self.imex = imex or ImexProcess(
            imex_commands(env.imex_backend, env.config_path, env.hosts_file)
        )
        self._hosts: dict[str, str] | None = None
        self._labelled = False

    # ------------------------------------------------------------ setup
    def write_config(self) -> None:
        """Render ``imexd.cfg`` and the DNS-name ``nodes.cfg`` into the config directory."""
        env = self.env
        env.config_dir.mkdir(parents=True, exist_ok=True)
        nodes = env.config_dir / "nodes.cfg"
        nodes.write_text(render_nodes(env.max_nodes))
        env.config_path.write_text(
            render_config(
                ImexSettings(
                    bind_address=env.pod_ip or "0.0.0.0",
                    nodes_config_path=str(nodes),
                    command_port=env.command_port,
                )
            )
        )

    def label_pod(self) -> None:
        """Put the clique ID on this daemon's pod (how the controller finds non-fabric nodes)."""
        patch = {"metadata": {"labels": {CLIQUE_ID_POD_LABEL: self.env.clique_id}}}
        self._transport.request(
            "PATCH",
            object_path("Pod", self.env.pod_namespace, self.env.pod_name),
            body=patch,
            content_type="application/merge-patch+json",
        )
        self._labelled = True

    # ------------------------------------------------------------ clique
    def _clique_path(self) -> str:
        return object_path("ComputeDomainClique", self.env.pod_namespace, self.env.clique_name)

    def _owner(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": self.env.pod_name,
            "uid": self.env.pod_uid,
        }

    def sync_clique(self, *, ready: bool) -> list[ComputeDomainDaemonInfo]:
        """Register or refresh this node's entry; the clique's daemons after the write.

        Raises KubeApiError (a 409 when another daemon wrote first: the caller retries).
        """
        env = self.env
        try:
            raw = self._transport.request("GET", self._clique_path())
        except KubeApiError as exc:
            if exc.status != 404:
                raise
            raw = None
        clique = ComputeDomainClique.from_dict(raw) if raw is not None else None
        daemons = register(
            (clique.daemons or []) if clique is not None else [],
            clique=env.clique_name,
            node_name=env.node_name,
            ip_address=env.pod_ip,
            clique_id=env.clique_id,
            ready=ready,
            max_nodes=env.max_nodes,
        )
        if raw is None:
            body: dict[str, Any] = {
                "apiVersion": "resource.nvidia.com/v1beta1",
                "kind": "ComputeDomainClique",
                "metadata": {
                    "name": env.clique_name,
                    "namespace": env.pod_namespace,
                    "labels": {COMPUTE_DOMAIN_LABEL: env.domain_uid},
                    "ownerReferences": [self._owner()] if env.pod_uid else [],
                },
                "daemons": [d.to_dict() for d in daemons],
            }
            self._transport.request(
                "POST", collection_path("ComputeDomainClique", env.pod_namespace), body=body
            )
            return daemons
        assert clique is not None
        owners = list(raw.get("metadata", {}).get("ownerReferences") or [])
        owner_missing = env.pod_uid and all(o.get("uid") != env.pod_uid for o in owners)
        if [d.to_dict() for d in daemons] != [d.to_dict() for d in clique.daemons or []] or (
            owner_missing
        ):
            raw["daemons"] = [d.to_dict() for d in daemons]
            if owner_missing:
                raw["metadata"]["ownerReferences"] = [*owners, self._owner()]
            self._transport.request("PUT", self._clique_path(), body=raw)
        return daemons

    def leave_clique(self) -> None:
        """Remove this node's entry (on shutdown), freeing its index."""
        for _ in range(5):
            try:
                raw = self._transport.request("GET", self._clique_path())
                clique = ComputeDomainClique.from_dict(raw)
                remaining = deregister(clique.daemons or [], self.env.node_name)
                if len(remaining) == len(clique.daemons or []):
                    return
                raw["daemons"] = [d.to_dict() for d in remaining]
                self._transport.request("PUT", self._clique_path(), body=raw)
                return
            except KubeApiError as exc:
                if exc.status == 404:
                    return
                if exc.status != 409:
                    log.warning(
                        "could not leave clique",
                        extra={"event": "clique_leave_failed", "error": str(exc)},
                    )
                    return

    # ------------------------------------------------------------ hosts
    def update_hosts(self, daemons: list[ComputeDomainDaemonInfo]) -> bool:
        """Write the DNS names of the clique's daemons; True (and SIGUSR1) on a change."""
        mapping = dns_mapping(daemons)
        if mapping == self._hosts:
            return False
        current = self.env.hosts_file.read_text() if self.env.hosts_file.exists() else ""
        # In place, not by rename: the kubelet bind-mounts /etc/hosts into the container.
        with self.env.hosts_file.open("w") as out:
            out.write(render_hosts(current, mapping))
        self._hosts = mapping
        log.info("hosts updated", extra={"event": "hosts_updated", "names": mapping})
        # Also after the first write: IMEX started before it and resolved nothing yet.
        self.imex.reload()
        return True

    # ------------------------------------------------------------ loop
    def step(self) -> bool:
        """One round: keep IMEX running, register with its readiness, refresh DNS names.

        Returns the readiness reported. API errors are logged; the next round retries.
        """
        if not self.env.clique_id:
            if not self._labelled:
                self.label_pod()
            return True
        if not self._labelled:
            self.label_pod()
        self.imex.ensure_running()
        ready = query_ready(self.imex.commands)
        try:
            daemons = self.sync_clique(ready=ready)
        except CliqueFullError as exc:
            log.error(str(exc), extra={"event": "clique_full"})
            return False
        except KubeApiError as exc:
            log.info("clique update deferred", extra={"event": "clique_retry", "error": str(exc)})
            return ready
        self.update_hosts(daemons)
        return ready

    def run(self, stop: threading.Event, *, interval_s: float = 1.0) -> None:
        """Run until ``stop``; then stop IMEX and leave the clique."""
        if self.env.clique_id:
            self.write_config()
        log.info(
            "domain daemon starting",
            extra={
                "event": "daemon_start",
                "domain_uid": self.env.domain_uid,
                "domain": f"{self.env.domain_namespace}/{self.env.domain_name}",
                "clique_id": self.env.clique_id,
                "node": self.env.node_name,
            },
        )
        # A failing API server is retried with the workspace's jittered backoff (from the
        # round interval up to 30 s), so a fleet of daemons does not hammer it in lockstep.
        backoff = Backoff(initial_s=interval_s, max_s=max(interval_s, 30.0))
        try:
            while not stop.is_set():
                try:
                    self.step()
                except KubeApiError as exc:
                    delay = backoff.next_delay()
                    log.warning(
                        "step failed",
                        extra={"event": "step_failed", "error": str(exc), "retry_in_s": delay},
                    )
                    stop.wait(delay)
                    continue
                backoff.reset()
                stop.wait(interval_s)
        finally:
            self.imex.stop()
            if self.env.clique_id:
                self.leave_clique()
