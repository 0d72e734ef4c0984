"""The one interface every backend implements.

Callers get an instance from :func:`dra_nvlib.open_device_lib` and never import a backend
module directly; tests select the fake through :class:`dra_nvlib.DeviceLibConfig`.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from dra_nvlib.errors import GpuNotFoundError, NotSupportedError
from dra_nvlib.facts import (
    ComputeMode,
    DriverInfo,
    GpuInfo,
    HealthEvent,
    MigDevice,
    MigModeState,
    TimeSliceLevel,
)

if TYPE_CHECKING:
    from dra_nvlib.pci_bus import PciBus

log = logging.getLogger(__name__)


def log_unidentified_lost_gpu(index: int, error: str) -> None:
    """One warning line for a GPU left out of an enumeration because it is lost and was
    never seen healthy by this process (nothing names it but its index)."""
    log.warning(
        "GPU lost before it could be identified; left out, the others are listed",
        extra={"event": "gpu_lost_unidentified", "index": index, "error": error},
    )


class HealthWatch(abc.ABC):
    """A subscription to health events of some GPUs; close it (or use ``with``) when done."""

    @abc.abstractmethod
    def wait(self, timeout_s: float) -> HealthEvent | None:
        """Block up to ``timeout_s`` seconds for the next event; ``None`` on timeout."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the subscription (NVML event set / file watch). Idempotent."""

    def __enter__(self) -> HealthWatch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class DeviceLib(abc.ABC):
    """GPU discovery and control for one node.

    GPUs are addressed by UUID (``GPU-...``) everywhere; MIG devices by their ``MIG-...`` UUID.
    Every failure is a :class:`dra_nvlib.DeviceError` subclass naming the GPU and operation;
    :class:`dra_nvlib.NotSupportedError` means "this GPU cannot", which callers may act on.
    """

    #: "nvml" or "fake"
    backend: str

    @abc.abstractmethod
    def driver_info(self) -> DriverInfo:
        """Driver, CUDA driver and NVML versions of the node."""

    @abc.abstractmethod
    def gpus(self) -> tuple[GpuInfo, ...]:
        """Full enumeration of the node's GPUs, ordered by index.

        A GPU that fell off the bus never fails the whole enumeration: one this instance
        listed before is reported from its last facts with ``lost=True``; one lost before
        this instance first saw it is left out, as NVML gives no handle to identify it
        (logged by :func:`log_unidentified_lost_gpu`).
        """

    def gpu(self, uuid: str) -> GpuInfo:
        """Facts about one GPU by UUID; raises GpuNotFoundError when absent."""
        for info in self.gpus():
            if info.uuid == uuid:
                return info
        raise GpuNotFoundError(uuid, "gpu", "no such GPU on this node")

    @abc.abstractmethod
    def set_compute_mode(self, gpu_uuid: str, mode: ComputeMode) -> None:
        """Set the GPU's compute mode (needs root on real nodes)."""

    @abc.abstractmethod
    def set_time_slice(self, gpu_uuid: str, level: TimeSliceLevel) -> None:
        """Set the time-slice length (``nvidia-smi compute-policy --set-timeslice``)."""

    @abc.abstractmethod
    def set_mig_mode(self, gpu_uuid: str, *, enabled: bool) -> MigModeState:
        """Request MIG mode on or off and return the resulting (current, pending) state.

        Raises NotSupportedError on GPUs without MIG, InUseError while MIG devices exist.
        Where the architecture needs a reset, ``pending`` differs from ``current``.
        """

    @abc.abstractmethod
    def create_mig_device(
        self, gpu_uuid: str, *, profile_id: int, placement_start: int
    ) -> MigDevice:
        """Create a GPU instance of ``profile_id`` at ``placement_start`` plus its full-size
        compute instance; returns the new MIG device.

        Raises InvalidStateError when MIG mode is off, InvalidArgumentError for an unknown
        profile or a start not in its placements, InsufficientResourcesError (or its subclass
        PlacementConflictError) when the slices are taken or the profile's count is exhausted.
        """

    @abc.abstractmethod
    def destroy_mig_device(self, mig_uuid: str) -> None:
        """Destroy a MIG device's compute instance(s) and GPU instance."""

    @abc.abstractmethod
    def watch_health(self, gpu_uuids: Sequence[str] | None = None) -> HealthWatch:
        """Subscribe to XID/ECC/GPU-lost events of the given GPUs (all when ``None``).

        Watch each GPU on its own so one bad GPU cannot blind the others: as NVML, a lost
        GPU cannot be registered (GpuLostError), and once a watched GPU is lost its
        watch reports one GPU_LOST event and then every wait raises GpuLostError at once.
        """

    def persistence_mode(self, gpu_uuid: str) -> bool:
        """Whether the driver keeps the GPU initialised with no client (persistence mode).

        Raises:
            NotSupportedError: the backend or GPU cannot tell.
        """
        raise NotSupportedError(gpu_uuid, "persistence_mode", f"backend {self.backend}")

    def set_persistence_mode(self, gpu_uuid: str, *, enabled: bool) -> None:
        """Turn persistence mode on or off (restored after a GPU comes back from ``vfio-pci``).

        Raises:
            NotSupportedError: the backend or GPU cannot.
        """
        state = "on" if enabled else "off"
        raise NotSupportedError(
            gpu_uuid, "set_persistence_mode", f"{state}: backend {self.backend}"
        )

    def pci_bus(self) -> PciBus:
        """The node's PCI bus, for passthrough (``vfio-pci``) bindings.

        Raises:
            NotSupportedError: the backend cannot move GPUs between drivers.
        """
        raise NotSupportedError("*", "pci_bus", f"backend {self.backend} has no PCI bus")

    @abc.abstractmethod
    def close(self) -> None:
        """Release the backend (NVML shutdown). Idempotent."""

    def __enter__(self) -> DeviceLib:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
