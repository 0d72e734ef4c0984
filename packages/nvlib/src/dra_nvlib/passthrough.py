"""Moving a GPU between ``nvidia`` and ``vfio-pci`` for passthrough to a VM.

:func:`group_refusal` is the pure IOMMU-group rule; :func:`bind_vfio`, :func:`bind_nvidia`
and :func:`repair_unbound` drive a :class:`~dra_nvlib.pci_bus.PciBus`. The invariant: a GPU is
never left bound to neither driver. A bind that does not take is rolled back to ``nvidia``;
a process that died between unbind and bind leaves a GPU without driver, which
:func:`repair_unbound` (run at start) gives back to ``nvidia``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping

from dra_nvlib.errors import (
    DriverBindError,
    InUseError,
    IommuGroupError,
    IommuUnavailableError,
    PassthroughError,
)
from dra_nvlib.pci_bus import PassthroughTarget, PciBus
from dra_nvlib.sysfs import PciFacts

__all__ = [
    "NVIDIA_DRIVER",
    "VFIO_DRIVER",
    "PassthroughTarget",
    "bind_nvidia",
    "bind_vfio",
    "group_refusal",
    "repair_unbound",
]

log = logging.getLogger(__name__)

VFIO_DRIVER = "vfio-pci"
NVIDIA_DRIVER = "nvidia"
#: Drivers that leave a group member harmless to the VM's isolation.
_RELEASED = frozenset({VFIO_DRIVER, "pci-stub"})


def group_refusal(
    target: str, members: Mapping[str, PciFacts | None], ours: Collection[str]
) -> str | None:
    """Why the IOMMU group of ``target`` cannot be passed through, or ``None`` when it can.

    The kernel hands a VM the whole group, so every other member must be a PCI bridge, or one
    of ``ours`` (this node's GPUs) already bound to ``vfio-pci``/``pci-stub`` or to nothing.
    """
    for bus_id, facts in sorted(members.items()):
        if bus_id == target or facts is None or facts.is_bridge:
            continue
        if bus_id not in ours:
            return (
                f"IOMMU group {facts.iommu_group} is shared with {bus_id} "
                f"(vendor {facts.vendor_id}, device {facts.device_id}), which is not ours"
            )
        if facts.driver is not None and facts.driver not in _RELEASED:
            return (
                f"IOMMU group {facts.iommu_group} is shared with GPU {bus_id}, still bound to "
                f"{facts.driver}; pass both through together"
            )
    return None


def _wait_idle(
    bus: PciBus,
    target: PassthroughTarget,
    *,
    timeout_s: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> None:
    deadline = clock() + timeout_s
    while True:
        pids = bus.users(target)
        if not pids:
            return
        if clock() >= deadline:
            shown = ", ".join(str(p) for p in pids[:8])
            raise InUseError(
                target.bus_id,
                "bind_vfio",
                f"GPU still in use by process(es) {shown} after {timeout_s:g}s",
            )
        sleep(min(0.5, max(deadline - clock(), 0.0)))


def _switch(bus: PciBus, bus_id: str, driver: str) -> PciFacts:
    """Unbind, override, probe; return the new facts (whatever the kernel did)."""
    bus.set_driver_override(bus_id, driver if driver != NVIDIA_DRIVER else None)
    bus.unbind(bus_id)
    bus.probe(bus_id)
    return bus.facts(bus_id)


def bind_vfio(
    bus: PciBus,
    target: PassthroughTarget,
    *,
    ours: Collection[str],
    wait_timeout_s: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> PciFacts:
    """Hand the GPU to ``vfio-pci`` and return its facts (idempotent).

    Checks, in order, before touching anything: an IOMMU exists, the GPU has a group, the
    group is viable (:func:`group_refusal`), no process uses the GPU (waiting up to
    ``wait_timeout_s``). Then unbinds ``nvidia`` and binds ``vfio-pci`` via driver_override.

    Raises:
        IommuUnavailableError, IommuGroupError, InUseError: nothing was changed.
        DriverBindError: the kernel did not bind ``vfio-pci``; the GPU was given back to
            ``nvidia`` (the message says whether that worked).
    """
    facts = bus.facts(target.bus_id)
    if facts.driver == VFIO_DRIVER:
        return facts
    if not bus.iommu_enabled() or facts.iommu_group is None:
        raise IommuUnavailableError(
            target.bus_id, "bind_vfio", "the node has no IOMMU (enable intel_iommu/amd_iommu)"
        )
    members = {m: bus.facts(m) if m != target.bus_id else facts for m in facts.group_members}
    refusal = group_refusal(target.bus_id, members, ours)
    if refusal is not None:
        raise IommuGroupError(target.bus_id, "bind_vfio", refusal)
    _wait_idle(bus, target, timeout_s=wait_timeout_s, sleep=sleep, clock=clock)
    after = _switch(bus, target.bus_id, VFIO_DRIVER)
    if after.driver == VFIO_DRIVER:
        log.info(
            "GPU bound to vfio-pci",
            extra={"event": "vfio_bound", "pci_bus_id": target.bus_id, "from": facts.driver},
        )
        return after
    restored = _restore(bus, target.bus_id)
    raise DriverBindError(
        target.bus_id,
        "bind_vfio",
        f"kernel bound {after.driver or 'no driver'} instead of vfio-pci; {restored}",
    )


def _restore(bus: PciBus, bus_id: str) -> str:
    try:
        back = _switch(bus, bus_id, NVIDIA_DRIVER)
    except PassthroughError as exc:
        return f"giving it back to nvidia failed too: {exc}"
    if back.driver == NVIDIA_DRIVER:
        return "it is bound to nvidia again"
    return f"giving it back to nvidia bound {back.driver or 'no driver'}"


def bind_nvidia(bus: PciBus, bus_id: str) -> PciFacts:
    """Give the GPU back to ``nvidia`` (idempotent; clears a leftover override).

    Raises:
        DriverBindError: the kernel did not bind ``nvidia``.
    """
    facts = bus.facts(bus_id)
    if facts.driver == NVIDIA_DRIVER:
        if facts.driver_override is not None:
            bus.set_driver_override(bus_id, None)
        return facts
    after = _switch(bus, bus_id, NVIDIA_DRIVER)
    if after.driver != NVIDIA_DRIVER:
        raise DriverBindError(
            bus_id, "bind_nvidia", f"kernel bound {after.driver or 'no driver'} instead of nvidia"
        )
    log.info(
        "GPU bound to nvidia",
        extra={"event": "nvidia_bound", "pci_bus_id": bus_id, "from": facts.driver},
    )
    return after


def repair_unbound(bus: PciBus, bus_ids: Collection[str]) -> list[str]:
    """Give every GPU of ``bus_ids`` that has no driver back to ``nvidia`` (run at start:
    a crash between unbind and bind leaves one so); returns the repaired ones."""
    repaired: list[str] = []
    for bus_id in sorted(bus_ids):
        try:
            facts = bus.facts(bus_id)
        except PassthroughError:
            continue
        if facts.driver is not None:
            continue
        bind_nvidia(bus, bus_id)
        log.warning(
            "GPU found bound to no driver; given back to nvidia",
            extra={"event": "vfio_unbound_repaired", "pci_bus_id": bus_id},
        )
        repaired.append(bus_id)
    return repaired
