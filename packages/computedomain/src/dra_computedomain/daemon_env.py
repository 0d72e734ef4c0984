"""The domain daemon's settings, all from its environment (light: the readiness probe,
``dra-compute-domain-daemon check``, runs every second and imports only this)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .errors import DaemonEnvironmentError
from .names import MAX_NODES_PER_IMEX_DOMAIN, clique_object_name

__all__ = ["DaemonEnv"]

#: Set by the kubelet plugin's daemon prepare (through CDI).
_CDI_VARIABLES = ("COMPUTE_DOMAIN_UUID", "COMPUTE_DOMAIN_NAME", "COMPUTE_DOMAIN_NAMESPACE")


@dataclass(frozen=True)
class DaemonEnv:
    """The daemon's settings, all from its environment."""

    domain_uid: str
    domain_name: str
    domain_namespace: str
    clique_id: str
    node_name: str
    pod_ip: str
    pod_name: str
    pod_namespace: str
    pod_uid: str
    max_nodes: int
    imex_backend: str
    config_dir: Path
    hosts_file: Path
    command_port: int = 50005

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> DaemonEnv:
        """Read ``env``; a missing variable is a :class:`DaemonEnvironmentError` naming it."""
        for name in _CDI_VARIABLES:
            if not env.get(name):
                raise DaemonEnvironmentError(
                    name, "not set by the kubelet plugin's daemon prepare (is CDI enabled?)"
                )
        if "CLIQUE_ID" not in env:
            raise DaemonEnvironmentError("CLIQUE_ID", "not set (is CDI enabled?)")
        for name in ("NODE_NAME", "POD_NAME", "POD_NAMESPACE"):
            if not env.get(name):
                raise DaemonEnvironmentError(name, "required (downward API)")
        raw_max = env.get("MAX_NODES_PER_IMEX_DOMAIN", str(MAX_NODES_PER_IMEX_DOMAIN))
        if not raw_max.isdigit() or int(raw_max) < 1:
            raise DaemonEnvironmentError("MAX_NODES_PER_IMEX_DOMAIN", f"not a count: {raw_max!r}")
        return cls(
            domain_uid=env["COMPUTE_DOMAIN_UUID"],
            domain_name=env["COMPUTE_DOMAIN_NAME"],
            domain_namespace=env["COMPUTE_DOMAIN_NAMESPACE"],
            clique_id=env["CLIQUE_ID"],
            node_name=env["NODE_NAME"],
            pod_ip=env.get("POD_IP", ""),
            pod_name=env["POD_NAME"],
            pod_namespace=env["POD_NAMESPACE"],
            pod_uid=env.get("POD_UID", ""),
            max_nodes=int(raw_max),
            imex_backend=env.get("IMEX_BACKEND", "real"),
            config_dir=Path(env.get("IMEX_CONFIG_DIR", "/imexd")),
            hosts_file=Path(env.get("HOSTS_FILE", "/etc/hosts")),
            command_port=int(env.get("IMEX_CMD_PORT", "50005")),
        )

    @property
    def config_path(self) -> Path:
        """``imexd.cfg`` in the mounted domain directory."""
        return self.config_dir / "imexd.cfg"

    @property
    def clique_name(self) -> str:
        """Name of this daemon's ComputeDomainClique."""
        return clique_object_name(self.domain_uid, self.clique_id)
