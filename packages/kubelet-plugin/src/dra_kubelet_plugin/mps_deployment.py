"""MPS control daemons as Deployments of their own (:class:`DeploymentMpsLauncher`).

A process the plugin starts dies with the plugin container (its PID namespace and cgroup), so
each daemon runs in a one-replica Deployment pinned to the node instead, as NVIDIA's driver
does (``packages/sharing/README.md``, "Where the daemon runs"): the driver image, privileged,
the daemon's pipe, shm and log directories as hostPaths at the same paths, and for real GPUs
the driver root for ``nvidia-cuda-mps-control``. Its lifetime is the claim's: created at
prepare, deleted at unprepare; a restarted plugin finds the Deployment and adopts it.

What runs in the container is the :class:`DaemonCommand` the backend chose (the real control
daemon, or :mod:`dra_sharing.fake_mps_daemon` through the image's python), and whether the
daemon answers is asked through the pipe directory (the liveness check of that backend), so
the harness exercises the same path as real GPUs.

A Deployment whose claim is no longer prepared (the plugin died between creating it and
recording the claim, or the checkpoint that named it was lost) is found by its labels and
deleted by :meth:`DeploymentMpsLauncher.orphans`, which the plugin's start-up recovery calls
(:meth:`dra_kubelet_plugin.gpu_sharing.GpuSharing.recover`) and retries while serving until
every such Deployment is gone.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dra_kube_client import JsonTransport, KubeApiError, path_segment
from dra_kubelet_core.errors import PluginError
from dra_sharing import SharingApplyError
from dra_sharing.fake_mps_daemon import query
from dra_sharing.mps_spec import MpsDaemonSpec, MpsDirs

__all__ = [
    "DaemonCommand",
    "DaemonListError",
    "DeploymentMpsLauncher",
    "MpsDeploymentConfig",
    "MpsDeploymentConfigError",
    "OrphanDaemon",
    "PipeCheck",
    "deployment_name",
    "fake_daemon_command",
    "fake_pipe_answers",
    "mps_deployment",
    "nvidia_daemon_command",
]

#: The container command of one daemon (argv), from what to start and where.
DaemonCommand = Callable[[MpsDaemonSpec, MpsDirs], list[str]]

#: Whether the daemon answers through its pipe directory (never raises).
PipeCheck = Callable[[MpsDirs], bool]

#: Label keys (below the driver's name) that find a daemon's Deployment and pod.
DAEMON_LABEL = "mps-daemon"
CLAIM_LABEL = "claim-uid"

_MAX_NAME = 63


class MpsDeploymentConfigError(ValueError):
    """A setting the Deployment launcher needs is missing or invalid (names the setting)."""

    def __init__(self, setting: str, message: str) -> None:
        """Name the setting and why it is refused."""
        super().__init__(f"MPS daemon Deployment: {setting}: {message}")
        self.setting = setting


class DaemonListError(PluginError):
    """The daemon Deployments of a node could not be listed (names namespace and node)."""

    def __init__(self, *, namespace: str, node: str, message: str) -> None:
        """Name where the list was asked and why it failed."""
        super().__init__(
            f"MPS daemon Deployments of node {node} in namespace {namespace}: list: {message}"
        )
        self.namespace = namespace
        self.node = node


@dataclass(frozen=True)
class OrphanDaemon:
    """A daemon Deployment of this node whose claim is no longer prepared."""

    #: the Deployment's name
    name: str
    #: the claim it was created for (its ``claim-uid`` label; empty when it has none)
    claim_uid: str
    #: why the delete failed (``None``: deleted, or already gone)
    error: str | None = None


@dataclass(frozen=True)
class MpsDeploymentConfig:
    """Where and how daemon Deployments run (from the plugin's settings)."""

    #: the driver's name: the prefix of every label
    driver: str
    #: the namespace of the Deployments (the plugin's own)
    namespace: str
    #: the node the daemons run on (``nodeName``)
    node_name: str
    #: the driver image (the plugin's own)
    image: str
    #: extra host directories as ``(host path, container path)`` (the driver root for real
    #: GPUs, seen where the plugin sees it so the command's paths hold in both)
    host_dirs: tuple[tuple[Path, Path], ...] = ()
    #: environment of the daemon container besides the MPS directories
    env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for setting, value in (
            ("image (--mps-daemon-image)", self.image),
            ("namespace (--namespace)", self.namespace),
            ("node name (--node-name)", self.node_name),
        ):
            if not value.strip():
                raise MpsDeploymentConfigError(setting, "empty; the launcher needs it")


def deployment_name(daemon_id: str) -> str:
    """``mps-<daemon id>``, made a DNS-1123 label of at most 63 characters (pure): lower
    case, other characters as ``-``, and a long ID cut and suffixed with its hash so two
    daemons never share a name."""
    name = re.sub(r"[^a-z0-9-]", "-", f"mps-{daemon_id}".lower()).strip("-")
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(daemon_id.encode()).hexdigest()[:8]
    return f"{name[: _MAX_NAME - 9].rstrip('-')}-{digest}"


def _claim_uid(daemon_id: str) -> str:
    # The daemon ID is ``<claim UID>-<5 hex of the devices>`` (mps_daemon_id).
    return daemon_id.rsplit("-", 1)[0]


def _labels(config: MpsDeploymentConfig, daemon_id: str) -> dict[str, str]:
    name = deployment_name(daemon_id)
    return {
        f"{config.driver}/{DAEMON_LABEL}": name,
        f"{config.driver}/{CLAIM_LABEL}": _claim_uid(daemon_id)[:_MAX_NAME],
    }


def daemon_selector(config: MpsDeploymentConfig, daemon_id: str) -> str:
    """The label selector of a daemon's pods (pure)."""
    return f"{config.driver}/{DAEMON_LABEL}={deployment_name(daemon_id)}"


def mps_deployment(
    config: MpsDeploymentConfig, spec: MpsDaemonSpec, dirs: MpsDirs, command: Sequence[str]
) -> dict[str, Any]:
    """The Deployment that runs ``command`` as the daemon of ``spec`` (pure)."""
    labels = _labels(config, spec.daemon_id)
    mounts = [(d, d) for d in (dirs.pipe, dirs.log, dirs.shm)] + list(config.host_dirs)
    volumes = [
        {"name": f"dir-{i}", "hostPath": {"path": str(host), "type": "Directory"}}
        for i, (host, _) in enumerate(mounts)
    ]
    env = {
        **config.env,
        "CUDA_MPS_PIPE_DIRECTORY": str(dirs.pipe),
        "CUDA_MPS_LOG_DIRECTORY": str(dirs.log),
        "CUDA_VISIBLE_DEVICES": ",".join(spec.device_uuids),
    }
    container = {
        "name": "mps-control-daemon",
        "image": config.image,
        # The plugin runs this image, so the node has it: no pull (air-gapped nodes too).
        "imagePullPolicy": "IfNotPresent",
        "command": list(command),
        "env": [{"name": k, "value": v} for k, v in sorted(env.items())],
        "securityContext": {"privileged": True},
        "volumeMounts": [
            {"name": f"dir-{i}", "mountPath": str(inside)} for i, (_, inside) in enumerate(mounts)
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": deployment_name(spec.daemon_id),
            "namespace": config.namespace,
            "labels": labels,
        },
        "spec": {
            "replicas": 1,
            # Never two daemons on one pipe directory: the old pod goes before a new one.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeName": config.node_name,
                    "terminationGracePeriodSeconds": 10,
                    # The daemon is node infrastructure: tainted nodes must not evict it.
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def fake_daemon_command(python: str, daemon: Path) -> DaemonCommand:
    """The fake daemon (:mod:`dra_sharing.fake_mps_daemon`, the file ``daemon``) in the
    foreground, run by the image's ``python``."""

    def command(spec: MpsDaemonSpec, dirs: MpsDirs) -> list[str]:
        argv = [python, str(daemon), "--pipe-dir", str(dirs.pipe), "--log-dir", str(dirs.log)]
        argv += ["--devices", ",".join(spec.device_uuids)]
        pct = spec.settings.active_thread_percentage
        if pct is not None:
            argv += ["--active-thread-percentage", str(pct)]
        for uuid, limit in sorted(spec.settings.pinned_memory_limits.items()):
            argv += ["--pinned-mem-limit", f"{uuid}={limit}"]
        if spec.settings.multi_user:
            argv.append("--multi-user")
        return argv

    return command


def nvidia_daemon_command(control: Path, *, shm_size: str = "65536k") -> DaemonCommand:
    """``nvidia-cuda-mps-control`` (the driver's, at ``control``) in the foreground after a
    tmpfs on the shm directory; the settings are sent once it answers."""

    def command(spec: MpsDaemonSpec, dirs: MpsDirs) -> list[str]:
        ctl = shlex.quote(str(control))
        sends = []
        pct = spec.settings.active_thread_percentage
        if pct is not None:
            sends.append(f"set_default_active_thread_percentage {pct}")
        for uuid, limit in sorted(spec.settings.pinned_memory_limits.items()):
            sends.append(f"set_default_device_pinned_mem_limit {uuid} {limit}")
        settle = "".join(f" && echo {shlex.quote(s)} | {ctl}" for s in sends)
        # The shell is PID 1, which ignores SIGTERM: tell the daemon to quit instead, so a
        # deleted Deployment's pod goes at once rather than after its grace period.
        script = (
            f"trap 'echo quit | {ctl}' TERM; "
            f"mountpoint -q {shlex.quote(str(dirs.shm))} || mount -t tmpfs -o "
            f"rw,nosuid,nodev,size={shm_size} tmpfs {shlex.quote(str(dirs.shm))}; "
            f"{ctl} -f {'-M ' if spec.settings.multi_user else ''}& daemon=$!; "
            f"until echo get_default_active_thread_percentage | {ctl} >/dev/null 2>&1; "
            "do sleep 0.2; done"
            f"{settle}; wait $daemon"
        )
        return ["sh", "-c", script]

    return command


def fake_pipe_answers(dirs: MpsDirs) -> bool:
    """The fake daemon answers ``get_server_list`` on its socket. Not its pid file: the daemon
    runs in another pod's PID namespace, where its pid means nothing to the plugin."""
    try:
        return bool(query(dirs.pipe, "get_server_list", timeout_s=2.0))
    except OSError:
        return False


class DeploymentMpsLauncher:
    """Runs each daemon as a Deployment pinned to the node (see the module docstring)."""

    def __init__(
        self,
        transport: JsonTransport,
        config: MpsDeploymentConfig,
        *,
        command: DaemonCommand,
        pipe_check: PipeCheck,
        provides_client: bool,
        poll_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``command`` is what the container runs; ``pipe_check`` asks the daemon through its
        pipe directory; ``provides_client``: containers get the fake control client."""
        self._api = transport
        self._config = config
        self._command = command
        self._check = pipe_check
        self._poll = poll_s
        self._sleep = sleep
        self._clock = clock
        self.provides_client = provides_client

    # Paths are spelled out at each request: the chart's RBAC test reads them from here.
    @property
    def _ns(self) -> str:
        return path_segment(self._config.namespace)

    def _get(self, daemon_id: str) -> dict[str, Any] | None:
        try:
            name = path_segment(deployment_name(daemon_id))
            return self._api.request(
                "GET", f"/apis/apps/v1/namespaces/{self._ns}/deployments/{name}"
            )
        except KubeApiError as exc:
            if exc.status == 404:
                return None
            raise

    def start(self, spec: MpsDaemonSpec, dirs: MpsDirs, *, timeout_s: float) -> None:
        """Create the daemon's Deployment (adopt the one already there) and wait until the
        pipe answers.

        Raises:
            SharingApplyError: the API refused, or the daemon did not answer in time.
        """
        op = "start_mps_daemon"
        wanted = mps_deployment(self._config, spec, dirs, self._command(spec, dirs))
        try:
            if self._get(spec.daemon_id) is None:
                try:
                    self._api.request(
                        "POST", f"/apis/apps/v1/namespaces/{self._ns}/deployments", body=wanted
                    )
                except KubeApiError as exc:
                    if exc.reason != "AlreadyExists":
                        raise
        except KubeApiError as exc:
            raise SharingApplyError(
                gpu=spec.daemon_id, operation=op, message=f"Deployment: {exc}"
            ) from exc
        deadline = self._clock() + timeout_s
        while not self._check(dirs):
            if self._clock() > deadline:
                raise SharingApplyError(
                    gpu=spec.daemon_id,
                    operation=op,
                    message=f"Deployment {wanted['metadata']['name']} in namespace "
                    f"{self._config.namespace}: daemon not answering after {timeout_s:.0f}s",
                )
            self._sleep(self._poll)

    def alive(self, dirs: MpsDirs) -> bool:
        """The daemon answers on its control pipe (the backend's check, unchanged)."""
        return self._check(dirs)

    def stop(self, dirs: MpsDirs, *, timeout_s: float) -> None:
        """Delete the daemon's Deployment and wait until its pods are gone (idempotent).

        Raises:
            SharingApplyError: the API refused the delete, or a pod outlived ``timeout_s``.
        """
        daemon_id = dirs.root.name
        op = "stop_mps_daemon"
        try:
            self._api.request(
                "DELETE",
                f"/apis/apps/v1/namespaces/{self._ns}/deployments/{deployment_name(daemon_id)}",
                body={"propagationPolicy": "Foreground"},
            )
        except KubeApiError as exc:
            if exc.status != 404:
                raise SharingApplyError(gpu=daemon_id, operation=op, message=f"{exc}") from exc
        pods = f"/api/v1/namespaces/{self._ns}/pods"
        query = {"labelSelector": daemon_selector(self._config, daemon_id)}
        deadline = self._clock() + timeout_s
        while self._api.request("GET", pods, query=query).get("items"):
            if self._clock() > deadline:
                raise SharingApplyError(
                    gpu=daemon_id,
                    operation=op,
                    message=f"pods of Deployment {deployment_name(daemon_id)} still running "
                    f"after {timeout_s:.0f}s",
                )
            self._sleep(self._poll)

    def orphans(self, live_claim_uids: set[str]) -> list[OrphanDaemon]:
        """Delete the daemon Deployments of this node whose claim is not in
        ``live_claim_uids`` (left by a plugin that died between prepare and unprepare, or
        named by a checkpoint that was lost); return each, with the error of a delete that
        failed (every one is tried).

        Raises:
            DaemonListError: the Deployments could not be listed (nothing was deleted).
        """
        query = {"labelSelector": f"{self._config.driver}/{DAEMON_LABEL}"}
        try:
            items = self._api.request(
                "GET", f"/apis/apps/v1/namespaces/{self._ns}/deployments", query=query
            )
        except KubeApiError as exc:
            raise DaemonListError(
                namespace=self._config.namespace, node=self._config.node_name, message=str(exc)
            ) from exc
        found = []
        for item in items.get("items") or []:
            meta = item.get("metadata") or {}
            template = ((item.get("spec") or {}).get("template") or {}).get("spec") or {}
            if template.get("nodeName") != self._config.node_name:
                continue
            claim = str((meta.get("labels") or {}).get(f"{self._config.driver}/{CLAIM_LABEL}", ""))
            if claim in live_claim_uids:
                continue
            name = str(meta.get("name", ""))
            error: str | None = None
            try:
                self._api.request(
                    "DELETE",
                    f"/apis/apps/v1/namespaces/{self._ns}/deployments/{path_segment(name)}",
                )
            except KubeApiError as exc:
                if exc.status != 404:
                    error = str(exc)
            found.append(OrphanDaemon(name=name, claim_uid=claim, error=error))
        return found
