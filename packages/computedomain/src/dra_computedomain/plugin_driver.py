"""The ``compute-domain.nvidia.com`` kubelet plugin: a driver on the kubelet plugin core.

:class:`ComputeDomainDriver` implements the core's driver API for the node's two devices,
``daemon-0`` and ``channel-0`` (:mod:`.claim_devices`), and the core's claim hooks. It is
composed with the core's claim engine and the retry NVIDIA's plugin has (:data:`RETRY`): a
channel prepare waits for the node's domain daemon, so retryable claim errors are retried
(250 ms doubling to 3 s) within the kubelet's deadline, each attempt a separate commit, so
the node lock is free in between for the daemon's own prepare.

NVIDIA's bugs, fixed here:

* #641 (double channel prepare): the core refuses ``channel-0`` while another live claim
  holds it; the engine retries that (``retry_in_use``) until the old claim's unprepare comes;
* #1162 (stale prepare after unprepare): an unprepare bumps the claim's generation first; an
  attempt planned for an older generation fails before any side effect, and a retry loop
  started before stops;
* #892 (two domains in one clique): readiness is read from this domain's own clique object.

The node label is set (after recording it in the checkpoint) before the readiness check: it
is what brings the domain's daemon to the node. It stays while a channel claim of the domain
waits for its daemon or is prepared on the node, and goes with the last of them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dra_api_types import (
    COMPUTE_DOMAIN_DRIVER,
    ComputeDomain,
    ComputeDomainChannelConfig,
    ComputeDomainDaemonConfig,
    ResourceClaim,
    ValidationError,
    decode_opaque_config,
)
from dra_kubelet_core.allocated import AllocatedDevice
from dra_kubelet_core.allocation_info import DeviceIdentity
from dra_kubelet_core.cdi import CDIKind, ContainerEdits
from dra_kubelet_core.checkpoint import ClaimState, PreparedClaim, PreparedDevice
from dra_kubelet_core.driver import (
    ClaimEdits,
    ClaimPlan,
    DriverIdentity,
    PrepareContext,
    RetryPolicy,
)
from dra_kubelet_core.errors import (
    ClaimError,
    ClaimNotReadyError,
    ClaimRef,
    DeviceConfigError,
    StalePrepareError,
)

from .channel_nodes import ChannelNodes
from .channel_prepare import (
    ChannelClaim,
    NodeView,
    channel_edits,
    daemon_edits,
    daemon_ready_on,
    decide_channel,
    decide_daemon,
)
from .claim_devices import CHANNEL_DEVICE, DAEMON_DEVICE, slice_devices
from .errors import ChannelDeviceError, DomainNotFoundError, HostImexNotReadyError, PrepareError
from .host_imex import HostImex
from .node_api import NodeApi

__all__ = [
    "CDI_KIND",
    "NO_CLIQUE_REASON",
    "RETRY",
    "ComputeDomainDriver",
    "compute_domain_identity",
    "compute_domain_slices",
]

log = logging.getLogger(__name__)

CDI_KIND = CDIKind(f"k8s.{COMPUTE_DOMAIN_DRIVER}")
#: NVIDIA's retry: a waiting claim (daemon not ready, channel still held by a claim whose
#: unprepare is coming) is retried 250 ms doubling to 3 s, within the kubelet's 40 s.
RETRY = RetryPolicy(deadline_s=40.0, backoff_s=(0.25, 3.0), retry_in_use=True)
#: Reason of the Warning event on a channel claim prepared on a node without a clique.
NO_CLIQUE_REASON = "NoNVLinkClique"
_CHANNEL = "channel"
_DAEMON = "daemon"


def compute_domain_identity() -> DriverIdentity:
    """Driver name, plugin directory and CDI kind of the compute-domain plugin."""
    return DriverIdentity(name=COMPUTE_DOMAIN_DRIVER, cdi=CDI_KIND)


def compute_domain_slices(
    node_name: str, node_uid: str | None, generation: int, *, daemons: bool = True
) -> list[dict[str, Any]]:
    """The node's one ``compute-domain.nvidia.com`` ResourceSlice: ``daemon-0``, ``channel-0``
    (only ``channel-0`` with host-managed IMEX, ``daemons`` False)."""
    metadata: dict[str, Any] = {"generateName": f"{node_name}-{COMPUTE_DOMAIN_DRIVER}-"}
    if node_uid:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "name": node_name,
                "uid": node_uid,
                "controller": True,
            }
        ]
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": metadata,
            "spec": {
                "driver": COMPUTE_DOMAIN_DRIVER,
                "nodeName": node_name,
                "pool": {"name": node_name, "generation": generation, "resourceSliceCount": 1},
                "devices": slice_devices(daemons=daemons),
            },
        }
    ]


class _ClaimFailed(ClaimError):
    """A compute-domain claim error; ``reason`` is the underlying error's (e.g.
    ``NamespaceMismatch``)."""


class _ClaimWaiting(ClaimNotReadyError):
    """A retryable compute-domain claim error (e.g. ``DaemonNotReady``)."""


def _claim_error(ref: ClaimRef, exc: PrepareError) -> ClaimError:
    kind = _ClaimFailed if exc.permanent else _ClaimWaiting
    err: ClaimError = kind(ref, str(exc), field=exc.field)
    err.reason = type(exc).__name__.removesuffix("Error")
    return err


def _decode(device: AllocatedDevice, ref: ClaimRef) -> ComputeDomainChannelConfig | (
    ComputeDomainDaemonConfig
):
    expected: type[ComputeDomainChannelConfig] | type[ComputeDomainDaemonConfig]
    expected = (
        ComputeDomainChannelConfig
        if device.device_name == CHANNEL_DEVICE
        else (ComputeDomainDaemonConfig)
    )
    if not device.configs:
        raise DeviceConfigError(
            ref,
            f"no {expected.__name__} applies to device {device.device_name}",
            field=f"status.allocation.devices.results[{device.index}]",
        )
    chosen = device.configs[-1]
    try:
        config = decode_opaque_config(chosen.parameters)
    except ValidationError as exc:
        raise DeviceConfigError(ref, f"invalid {exc}", field=chosen.field) from exc
    if not isinstance(config, expected):
        raise DeviceConfigError(
            ref,
            f"{type(config).__name__} cannot configure {device.device_name} "
            f"(it takes {expected.__name__})",
            field=chosen.field,
        )
    return config.normalize()


class ComputeDomainDriver:
    """The core driver of ``compute-domain.nvidia.com`` on one node, and its claim hooks
    (its plan's detail is the claim's generation when planned)."""

    def __init__(
        self,
        api: NodeApi,
        *,
        clique_id: str,
        domains_dir: Path,
        channel_nodes: ChannelNodes,
        host_imex: HostImex | None = None,
    ) -> None:
        """``domains_dir``: the per-domain IMEX config directories (a host path, for CDI).

        ``channel_nodes``: the channel device nodes on the backend's host (real nodes are
        created when missing; fake nodes are stand-ins that always exist).
        ``host_imex``: host-managed IMEX (no daemons; channel prepares wait for the host's).
        """
        self.api = api
        self.host_imex = host_imex
        self._channel_nodes = channel_nodes
        self.clique_id = clique_id
        self._domains_dir = domains_dir
        self._generation: dict[str, int] = {}
        #: channel claims prepared on this node: claim UID -> domain UID
        self.prepared: dict[str, str] = {}
        #: channel claims whose prepare waits for the daemon (label kept): claim UID -> domain
        self.waiting: dict[str, str] = {}

    @property
    def identity(self) -> DriverIdentity:
        """The compute-domain driver's identity."""
        return compute_domain_identity()

    def generation(self, claim_uid: str) -> int:
        """How many unprepares this claim has seen (a prepare must not outlive one)."""
        return self._generation.get(claim_uid, 0)

    # ------------------------------------------------------------ plan (pure)
    def plan(
        self,
        ref: ClaimRef,
        claim: ResourceClaim,  # noqa: ARG002 -- the core's API; the results carry what counts
        allocated: Sequence[AllocatedDevice],
    ) -> ClaimPlan[int]:
        """One prepared device per result, its config's essentials as its driver state."""
        devices = []
        for device in allocated:
            if device.device_name not in (CHANNEL_DEVICE, DAEMON_DEVICE):
                raise DeviceConfigError(
                    ref,
                    f"unknown device {device.device_name!r}",
                    field=f"status.allocation.devices.results[{device.index}].device",
                )
            config = _decode(device, ref)
            state: dict[str, Any] = {"domainUID": config.domain_id}
            cdi_ids: tuple[str, ...] = (CDI_KIND.device_id(ref.uid, device.device_name),)
            if isinstance(config, ComputeDomainChannelConfig):
                state.update(kind=_CHANNEL, allocationMode=config.allocation_mode or "Single")
                if not self.clique_id:
                    # As NVIDIA's: no clique, no IMEX channel nodes, so nothing to inject; a
                    # CDI device without edits would make the runtime refuse the container.
                    cdi_ids = ()
            else:
                state["kind"] = _DAEMON
            devices.append(
                PreparedDevice(
                    request_names=(device.request,),
                    pool_name=device.pool_name,
                    device_name=device.device_name,
                    cdi_device_ids=cdi_ids,
                    admin_access=device.admin_access,
                    share_id=device.share_id,
                    driver_state=state,
                )
            )
        return ClaimPlan(devices=tuple(devices), detail=self.generation(ref.uid))

    # ------------------------------------------------------------ prepare
    def _check(self, ref: ClaimRef, generation: int) -> None:
        if self.generation(ref.uid) != generation:
            raise StalePrepareError(ref, "unprepared while the prepare was pending")

    async def _channel(
        self, ref: ClaimRef, state: Mapping[str, Any], generation: int, ctx: PrepareContext
    ) -> ContainerEdits:
        domain_uid = str(state["domainUID"])
        claim = ChannelClaim(
            uid=ref.uid,
            namespace=ref.namespace,
            name=ref.name,
            domain_uid=domain_uid,
            allocation_mode=str(state.get("allocationMode", "Single")),
        )
        domain = await asyncio.to_thread(self.api.domain, domain_uid)
        if self.host_imex is not None:
            return await self._host_channel(ref, claim, domain, generation)
        label, resource_version = await asyncio.to_thread(self.api.node_label)
        node = NodeView(name=self.api.node_name, clique_id=self.clique_id, label=label)
        cliques = (
            await asyncio.to_thread(self.api.cliques, domain_uid, self.clique_id)
            if domain is not None and self.clique_id
            else []
        )
        ready = domain is not None and daemon_ready_on(node, domain, cliques)
        decision = decide_channel(claim, domain, node, daemon_ready=ready)
        if decision.label_node:
            self._check(ref, generation)
            # Recorded first: after a crash, recover() knows whose label it is.
            await ctx.record(driver_state={"labelled": domain_uid})
            await asyncio.to_thread(self.api.set_label, domain_uid, resource_version)
        if decision.error is not None:
            ours = decision.label_node or label == domain_uid
            if ours and not decision.error.permanent:
                self.waiting[ref.uid] = domain_uid
            raise decision.error
        if self.clique_id:
            try:
                await asyncio.to_thread(
                    self._channel_nodes.ensure, claim.ref, claim.allocation_mode
                )
            except ChannelDeviceError:
                # Permanent: this claim will not hold the node, so its label must not stay.
                self.waiting.pop(ref.uid, None)
                await self._release(domain_uid)
                raise
        self._check(ref, generation)
        self.waiting.pop(ref.uid, None)
        self.prepared[ref.uid] = domain_uid
        if not self.clique_id:
            # The prepare succeeds as NVIDIA's does, so the kubelet posts nothing; the event
            # tells the pod's owner why the container has no /dev/nvidia-caps-imex-channels.
            await ctx.events.claim_warning(
                ref,
                reason=NO_CLIQUE_REASON,
                message=(
                    f"{ref}: node {self.api.node_name} has no NVLink clique (no multi-node "
                    "NVLink fabric), so the claim's IMEX channel gets no device; the "
                    "workload runs without cross-node memory sharing"
                ),
            )
        return channel_edits(claim.allocation_mode, self.clique_id, host=self._channel_nodes.host)

    async def _host_channel(
        self,
        ref: ClaimRef,
        claim: ChannelClaim,
        domain: ComputeDomain | None,
        generation: int,
    ) -> ContainerEdits:
        """Host-managed IMEX: no node label (the host's IMEX domain is every domain's), the
        host daemon READY instead of a domain daemon, then the same channel nodes."""
        assert self.host_imex is not None
        node = NodeView(name=self.api.node_name, clique_id=self.clique_id, label=None)
        host = self.host_imex
        ready = domain is not None and await asyncio.to_thread(host.ready)
        decision = decide_channel(claim, domain, node, daemon_ready=True)
        if decision.error is not None:
            raise decision.error
        if not ready:
            raise HostImexNotReadyError(
                claim.ref,
                f"host-managed IMEX on node {node.name}: nvidia-imex at {host.socket_path} "
                "is not reachable or not READY",
            )
        if self.clique_id:
            await asyncio.to_thread(self._channel_nodes.ensure, claim.ref, claim.allocation_mode)
        self._check(ref, generation)
        return channel_edits(claim.allocation_mode, self.clique_id, host=self._channel_nodes.host)

    async def _daemon(self, ref: ClaimRef, state: Mapping[str, Any]) -> ContainerEdits:
        domain_uid = str(state["domainUID"])
        refused = decide_daemon(
            f"{ref.namespace}/{ref.name}",
            namespace=ref.namespace,
            driver_namespace=self.api.driver_namespace,
            domain_uid=domain_uid,
        )
        if refused is not None:
            raise refused
        domain = await asyncio.to_thread(self.api.domain, domain_uid)
        if domain is None:
            raise DomainNotFoundError(str(ref), f"no ComputeDomain with UID {domain_uid}")
        directory = self._domains_dir / domain_uid
        await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
        return daemon_edits(domain, self.clique_id, str(directory))

    async def prepare(self, ref: ClaimRef, plan: ClaimPlan[int], ctx: PrepareContext) -> ClaimEdits:
        """Channel: label, wait for the daemon, inject the channel(s); daemon: its config."""
        self._check(ref, plan.detail)
        edits: list[tuple[str, ContainerEdits]] = []
        try:
            for device in plan.devices:
                if device.driver_state.get("kind") == _CHANNEL:
                    edit = await self._channel(ref, device.driver_state, plan.detail, ctx)
                else:
                    edit = await self._daemon(ref, device.driver_state)
                edits.append((device.device_name, edit))
        except PrepareError as exc:
            raise _claim_error(ref, exc) from exc
        return ClaimEdits(devices=tuple(edits))

    # ------------------------------------------------------------ unprepare
    def _users(self, domain_uid: str) -> bool:
        return domain_uid in self.prepared.values() or domain_uid in self.waiting.values()

    async def _release(self, domain_uid: str) -> None:
        # Host-managed IMEX labels no node: nothing to take off.
        if self.host_imex is None and not self._users(domain_uid):
            await asyncio.to_thread(self.api.remove_label, domain_uid)

    async def unprepare(self, entry: PreparedClaim, *, claims: Mapping[str, PreparedClaim]) -> None:
        """Forget a channel claim; the last one of its domain takes the node label off
        (``claims``, the checkpoint's, are not needed: the label's users are tracked here).

        A prepare that failed because the daemon is not ready is undone too, but its label
        stays (the daemon is on its way); :meth:`forget` takes it off if the claim goes.
        """
        del claims
        domains = {
            str(d.driver_state.get("domainUID"))
            for d in entry.devices
            if d.driver_state.get("kind") == _CHANNEL
        }
        if not domains:
            return
        if entry.uid in self.waiting and entry.state is ClaimState.PREPARE_STARTED:
            return
        self.prepared.pop(entry.uid, None)
        for domain_uid in domains:
            await self._release(domain_uid)

    def begin_unprepare(self, claim_uid: str) -> None:
        """The kubelet unprepares ``claim_uid``: prepares planned before now are stale."""
        self._generation[claim_uid] = self.generation(claim_uid) + 1

    async def forget(self, claim_uid: str) -> None:
        """After an unprepare: a claim still waiting for its daemon gives its label up."""
        domain_uid = self.waiting.pop(claim_uid, None)
        self.prepared.pop(claim_uid, None)
        if domain_uid is not None:
            await self._release(domain_uid)

    async def recover(self, entries: Mapping[str, PreparedClaim]) -> None:
        """Rebuild the channel bookkeeping; a label no checkpointed claim explains goes,
        unless an entry was rebuilt from its spec (its domain is unknown: the label stays)."""
        for uid, entry in entries.items():
            for device in entry.devices:
                if device.driver_state.get("kind") != _CHANNEL:
                    continue
                domain_uid = str(device.driver_state.get("domainUID"))
                if entry.state is ClaimState.PREPARE_COMPLETED:
                    self.prepared[uid] = domain_uid
                else:
                    self.waiting[uid] = domain_uid
        label, _ = await asyncio.to_thread(self.api.node_label)
        unknown = any(e.rebuilt for e in entries.values())
        if label is not None and not self._users(label) and not unknown:
            log.info(
                "removing a node label no claim holds",
                extra={"event": "stale_label", "domain_uid": label},
            )
            await asyncio.to_thread(self.api.remove_label, label)

    def device_type(self, device: PreparedDevice) -> str:
        """``channel`` or ``daemon`` (the metrics label)."""
        return str(device.driver_state.get("kind", "unknown"))

    def device_identity(
        self,
        claim: PreparedClaim,  # noqa: ARG002 -- the core's API
        device: PreparedDevice,  # noqa: ARG002
    ) -> DeviceIdentity | None:
        """None: channels and daemons are no GPUs (no per-pod GPU series)."""
        return None
