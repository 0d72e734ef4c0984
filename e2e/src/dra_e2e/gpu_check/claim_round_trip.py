"""Step 3 of the check: one claim prepared and unprepared by the real plugin process over its
real gRPC socket, without a cluster (the directory claim source stands in for the API server);
its CDI spec and checkpoint entry must appear, then go."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
from dra_kubelet_core._proto import dra_v1_pb2, dra_v1_pb2_grpc
from dra_kubelet_core.sockets import SocketPaths

from .runner import StepFailed
from .target import CheckTarget, SliceDevice

DRIVER = "gpu.nvidia.com"
NAMESPACE = "gpu-check"


@dataclass(frozen=True)
class PreparedClaim:
    """A claim the plugin prepared: its CDI device ids and the spec files written for it."""

    uid: str
    cdi_device_ids: tuple[str, ...]
    spec_files: tuple[Path, ...]


def _claim_object(name: str, uid: str, pool: str, device: str) -> dict[str, object]:
    """A v1 ResourceClaim allocated to ``device``, as the API server would store it."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid, "resourceVersion": "1"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": 1}}]
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": DRIVER, "pool": pool, "device": device}
                    ]
                }
            }
        },
    }


class PluginRun:
    """The plugin as a process with its directories under ``root`` (CDI specs under
    ``cdi_root``), serving until :meth:`stop`."""

    def __init__(self, target: CheckTarget, root: Path, cdi_root: Path) -> None:
        self.target = target
        self.root = root
        self.cdi_root = cdi_root
        self.claims = root / "claims"
        self.plugins = root / "plugins"
        registrar = root / "registry"
        for path in (self.claims, self.plugins, registrar, cdi_root):
            path.mkdir(parents=True, exist_ok=True)
        boot_id = root / "boot_id"
        boot_id.write_text(str(uuid.uuid4()) + "\n")
        self.sockets = SocketPaths.build(
            driver_name=DRIVER, registrar_dir=registrar, plugins_dir=self.plugins, pod_uid=None
        )
        self.log = root / "plugin.log"
        self.command = [
            *target.plugin_command(),
            "--kubelet-registrar-directory-path",
            str(registrar),
            "--kubelet-plugins-directory-path",
            str(self.plugins),
            "--cdi-root",
            str(cdi_root),
            "--claims-directory",
            str(self.claims),
            "--boot-id-file",
            str(boot_id),
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def checkpoint(self) -> Path:
        """The plugin's checkpoint file."""
        return self.sockets.plugin_dir / "checkpoint.json"

    def logs(self) -> str:
        """The tail of what the plugin logged."""
        return self.log.read_text()[-2000:] if self.log.exists() else ""

    def start(self, timeout_s: float) -> None:
        """Start it and wait until its DRA socket answers."""
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NODE_NAME")}
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=log, env=env)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise StepFailed(f"plugin exited {self.proc.returncode}: {self.logs()}")
            if self.sockets.dra.exists():
                with (
                    grpc.insecure_channel(f"unix://{self.sockets.dra}") as channel,
                    contextlib.suppress(grpc.FutureTimeoutError),
                ):
                    grpc.channel_ready_future(channel).result(timeout=1)
                    return
            time.sleep(0.1)
        raise StepFailed(f"plugin's DRA socket not ready within {timeout_s:.0f}s: {self.logs()}")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL when it does not stop in time."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)

    def _stub(self, channel: grpc.Channel) -> dra_v1_pb2_grpc.DRAPluginStub:
        return dra_v1_pb2_grpc.DRAPluginStub(channel)  # type: ignore[no-untyped-call]

    def prepare(self, device: SliceDevice, timeout_s: float) -> PreparedClaim:
        """Store a claim allocated to ``device`` and NodePrepareResources it."""
        uid = str(uuid.uuid4())
        name = f"gpu-check-{uid[:8]}"
        path = self.claims / NAMESPACE / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        claim = _claim_object(name, uid, self.target.node_name, device.name)
        path.write_text(json.dumps(claim))
        before = set(self.cdi_root.iterdir())
        request = dra_v1_pb2.NodePrepareResourcesRequest(
            claims=[dra_v1_pb2.Claim(namespace=NAMESPACE, name=name, uid=uid)]
        )
        with grpc.insecure_channel(f"unix://{self.sockets.dra}") as channel:
            response = self._stub(channel).NodePrepareResources(request, timeout=timeout_s)
        result = response.claims[uid]
        if result.error:
            raise StepFailed(f"NodePrepareResources of claim {uid}: {result.error}")
        ids = tuple(i for d in result.devices for i in d.cdi_device_ids)
        if not ids:
            raise StepFailed(f"NodePrepareResources of claim {uid} returned no CDI device")
        spec_files = tuple(sorted(set(self.cdi_root.iterdir()) - before))
        if not spec_files:
            raise StepFailed(f"no CDI spec written under {self.cdi_root} for claim {uid}")
        if uid not in self.checkpoint.read_text():
            raise StepFailed(f"claim {uid} is not in the checkpoint {self.checkpoint}")
        return PreparedClaim(uid=uid, cdi_device_ids=ids, spec_files=spec_files)

    def unprepare(self, claim: PreparedClaim, timeout_s: float) -> None:
        """NodeUnprepareResources; its spec files and checkpoint entry must be gone."""
        name = f"gpu-check-{claim.uid[:8]}"
        request = dra_v1_pb2.NodeUnprepareResourcesRequest(
            claims=[dra_v1_pb2.Claim(namespace=NAMESPACE, name=name, uid=claim.uid)]
        )
        with grpc.insecure_channel(f"unix://{self.sockets.dra}") as channel:
            response = self._stub(channel).NodeUnprepareResources(request, timeout=timeout_s)
        error = response.claims[claim.uid].error
        if error:
            raise StepFailed(f"NodeUnprepareResources of claim {claim.uid}: {error}")
        left = [p for p in claim.spec_files if p.exists()]
        if left:
            raise StepFailed(f"CDI spec left after unprepare: {', '.join(map(str, left))}")
        if claim.uid in self.checkpoint.read_text():
            raise StepFailed(f"claim {claim.uid} still in the checkpoint after unprepare")
        (self.claims / NAMESPACE / f"{name}.json").unlink(missing_ok=True)


@contextlib.contextmanager
def running_plugin(target: CheckTarget, budget_s: float) -> Iterator[PluginRun]:
    """A started plugin with its directories (CDI root ``<root>/cdi``) in a short-named
    temporary directory, since the kubelet's socket paths must fit 107 bytes; stopped and
    removed on the way out whatever happened."""
    root = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    run = PluginRun(target, root, root / "cdi")
    try:
        run.start(timeout_s=budget_s / 2)
        yield run
    finally:
        run.stop()
        shutil.rmtree(root, ignore_errors=True)


def first_device(target: CheckTarget) -> SliceDevice:
    """The device the claim steps allocate: the first GPU the slices step found."""
    if not target.devices:
        raise StepFailed("no device to claim: the ResourceSlices step found none")
    return target.devices[0]


def prepare_unprepare(target: CheckTarget, budget_s: float) -> str:
    """Prepare and unprepare one claim on the first GPU; CDI spec and checkpoint checked."""
    device = first_device(target)
    with running_plugin(target, budget_s) as plugin:
        claim = plugin.prepare(device, timeout_s=budget_s / 4)
        plugin.unprepare(claim, timeout_s=budget_s / 4)
    return (
        f"claim {claim.uid} on {device.name}: prepared ({', '.join(claim.cdi_device_ids)}; "
        f"{len(claim.spec_files)} CDI spec), unprepared (spec and checkpoint entry gone)"
    )
