"""Host networking of a cluster: per-node bridges and the API service DNAT.

Each cluster holds a slot N (0-199) allocated under /run/dra-e2e, so several
clusters (CI and developers) coexist on one machine. Node k of cluster N owns the
bridge ``drae2e<N>n<k>`` with gateway 10.<200+k>.<N>.1/24; that address is also
the node's IP. Pod traffic never leaves the host: no masquerading, no routes out.

There is no kube-proxy: two kube-proxies on one host would rewrite each other's
iptables chains. Pods reach the API server through the ``kubernetes`` service
ClusterIP, which one DNAT rule per cluster (chain DRAE2E-<N>) maps to the API
server's address.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dra_e2e.errors import ClusterStateError, ComponentError

SLOT_DIR = Path("/run/dra-e2e")
MAX_SLOTS = 200
MAX_NODES = 8


@dataclass(frozen=True)
class NodeNet:
    """Addresses of one node's bridge network."""

    bridge: str
    node_ip: str
    pod_cidr: str
    range_start: str
    range_end: str


@dataclass(frozen=True)
class ClusterNet:
    """Addresses shared by a cluster."""

    slot: int
    service_cidr: str
    kubernetes_service_ip: str

    @property
    def chain(self) -> str:
        """The iptables nat chain holding this cluster's DNAT rule."""
        return f"DRAE2E-{self.slot}"

    def node(self, index: int) -> NodeNet:
        """Network of node ``index`` (0-based)."""
        if not 0 <= index < MAX_NODES:
            raise ValueError(f"node index {index} out of range 0..{MAX_NODES - 1}")
        prefix = f"10.{200 + index}.{self.slot}"
        return NodeNet(
            bridge=f"drae2e{self.slot}n{index}",
            node_ip=f"{prefix}.1",
            pod_cidr=f"{prefix}.0/24",
            range_start=f"{prefix}.10",
            range_end=f"{prefix}.250",
        )


def cluster_net(slot: int) -> ClusterNet:
    """The fixed address plan of slot ``slot``."""
    return ClusterNet(
        slot=slot,
        service_cidr=f"10.199.{slot}.0/24",
        kubernetes_service_ip=f"10.199.{slot}.1",
    )


@contextmanager
def _slot_lock() -> Iterator[None]:
    SLOT_DIR.mkdir(parents=True, exist_ok=True)
    with (SLOT_DIR / "slots.lock").open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def allocate_slot(state_dir: Path) -> int:
    """Claim a free slot for ``state_dir``; a slot whose owner directory is gone is free."""
    with _slot_lock():
        for slot in range(MAX_SLOTS):
            marker = SLOT_DIR / f"slot-{slot}"
            if marker.exists():
                owner = Path(json.loads(marker.read_text())["state_dir"])
                if owner == state_dir or not owner.exists():
                    marker.unlink()
                else:
                    continue
            marker.write_text(json.dumps({"state_dir": str(state_dir)}))
            return slot
    raise ClusterStateError(state_dir, f"all {MAX_SLOTS} network slots in {SLOT_DIR} are taken")


def slot_owners() -> dict[int, Path]:
    """Every allocated slot and the state directory that holds it."""
    owners: dict[int, Path] = {}
    for marker in sorted(SLOT_DIR.glob("slot-*")):
        try:
            owners[int(marker.name.split("-", 1)[1])] = Path(
                json.loads(marker.read_text())["state_dir"]
            )
        except (ValueError, KeyError, OSError):
            continue
    return owners


def release_slot(slot: int, state_dir: Path) -> None:
    """Give the slot back if ``state_dir`` still owns it."""
    with _slot_lock():
        marker = SLOT_DIR / f"slot-{slot}"
        if marker.exists() and Path(json.loads(marker.read_text())["state_dir"]) == state_dir:
            marker.unlink()


def _run(args: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise ComponentError("host network", f"{' '.join(args)} failed: {proc.stderr.strip()}")
    return proc


def create_bridge(node: NodeNet) -> None:
    """Create the node's bridge with its gateway address (idempotent).

    The CNI bridge plugin later attaches pods to this existing bridge; creating
    it up front gives the node (and the API server) a stable address to bind.
    """
    if _run(["ip", "link", "show", node.bridge], check=False).returncode != 0:
        _run(["ip", "link", "add", node.bridge, "type", "bridge"])
    prefix = node.pod_cidr.split("/")[1]
    addrs = _run(["ip", "-o", "addr", "show", "dev", node.bridge]).stdout
    if f"{node.node_ip}/{prefix}" not in addrs:
        _run(["ip", "addr", "add", f"{node.node_ip}/{prefix}", "dev", node.bridge])
    _run(["ip", "link", "set", node.bridge, "up"])


def delete_bridge(node: NodeNet) -> None:
    """Delete the node's bridge (and thereby its veths' bridge ports) if present."""
    if _run(["ip", "link", "show", node.bridge], check=False).returncode == 0:
        _run(["ip", "link", "del", node.bridge], check=False)


def install_service_dnat(net: ClusterNet, *, apiserver_ip: str, apiserver_port: int) -> None:
    """Map ``kubernetes`` service IP:443 to the API server, for pods and host processes."""
    remove_service_dnat(net)
    _run(["iptables", "-w", "-t", "nat", "-N", net.chain])
    _run(
        [
            "iptables", "-w", "-t", "nat", "-A", net.chain,
            "-d", f"{net.kubernetes_service_ip}/32", "-p", "tcp", "--dport", "443",
            "-j", "DNAT", "--to-destination", f"{apiserver_ip}:{apiserver_port}",
        ]
    )  # fmt: skip
    for hook in ("PREROUTING", "OUTPUT"):
        _run(["iptables", "-w", "-t", "nat", "-I", hook, "-j", net.chain])


def remove_service_dnat(net: ClusterNet) -> None:
    """Remove the cluster's DNAT chain and the jumps to it (idempotent)."""
    for hook in ("PREROUTING", "OUTPUT"):
        while (
            _run(
                ["iptables", "-w", "-t", "nat", "-D", hook, "-j", net.chain], check=False
            ).returncode
            == 0
        ):
            pass
    _run(["iptables", "-w", "-t", "nat", "-F", net.chain], check=False)
    _run(["iptables", "-w", "-t", "nat", "-X", net.chain], check=False)
