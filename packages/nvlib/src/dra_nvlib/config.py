"""How to reach the node's GPUs: :class:`DeviceLibConfig`, opened by :mod:`dra_nvlib.backends`.

Every setting has an environment twin (see :meth:`DeviceLibConfig.from_env`) so the kubelet
plugin's flags and Helm values map onto it one to one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dra_nvlib.errors import ConfigError

BackendName = Literal["nvml", "fake"]
BACKENDS: tuple[BackendName, ...] = ("nvml", "fake")
FakeStateStoreKind = Literal["file", "memory"]
FAKE_STATE_STORES: tuple[FakeStateStoreKind, ...] = ("file", "memory")

ENV_BACKEND = "DRA_NVLIB_BACKEND"
ENV_DRIVER_ROOT = "NVIDIA_DRIVER_ROOT"
ENV_SYSFS_ROOT = "DRA_NVLIB_SYSFS_ROOT"
ENV_PROC_ROOT = "DRA_NVLIB_PROC_ROOT"
ENV_NODE_NAME = "NODE_NAME"
ENV_FAKE_FLEET = "DRA_NVLIB_FAKE_FLEET"
ENV_FAKE_STATE = "DRA_NVLIB_FAKE_STATE"
ENV_NVIDIA_SMI = "DRA_NVLIB_NVIDIA_SMI"


@dataclass(frozen=True)
class DeviceLibConfig:
    """How to reach the node's GPUs.

    - ``backend``: ``"nvml"`` (real driver) or ``"fake"`` (simulated fleet).
    - ``driver_root``: where the driver is mounted; NVML is loaded from
      ``<driver_root>/usr/lib64/libnvidia-ml.so.1`` or the other standard library dirs
      (``/run/nvidia/driver`` on GPU Operator nodes, ``/`` on hosts with the driver installed).
    - ``sysfs_root``: where PCIe roots and PCI facts are read, GPUs bound to drivers (``/sys``).
    - ``proc_root``: where processes holding a GPU open are looked for (``/proc``).
    - ``nvml_library``: explicit path to ``libnvidia-ml.so.1`` (overrides the search).
    - ``nvidia_smi``: explicit ``nvidia-smi`` for time-slice changes (default: under driver_root).
    - ``node_name``: seeds the fake's UUIDs and PCI addresses.
    - ``fake_fleet``: fleet spec string or profile YAML path (fake backend only).
    - ``fake_state_path``: JSON state file shared by every process of one fake node.
    - ``fake_state_store``: ``file`` (``fake_state_path``) or ``memory``: the fake node
      lives in this process only, built from ``fake_fleet``, and no state file is read or
      written (a one-shot look at a fleet).
    """

    backend: BackendName = "nvml"
    driver_root: Path = Path("/")
    sysfs_root: Path = Path("/sys")
    proc_root: Path = Path("/proc")
    nvml_library: Path | None = None
    nvidia_smi: Path | None = None
    node_name: str = ""
    fake_fleet: str | None = None
    fake_state_path: Path | None = None
    fake_state_store: FakeStateStoreKind = "file"

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError("backend", f"{self.backend!r} is not one of {', '.join(BACKENDS)}")
        if not self.driver_root.is_absolute():
            raise ConfigError("driver_root", f"{self.driver_root} must be an absolute path")
        if self.backend == "fake":
            if not self.node_name:
                raise ConfigError("node_name", "the fake backend needs a node name (seeds UUIDs)")
            if not self.fake_fleet and self.fake_state_path is None:
                raise ConfigError(
                    "fake_fleet", "the fake backend needs a fleet spec or an existing state file"
                )
            if self.fake_state_store not in FAKE_STATE_STORES:
                raise ConfigError(
                    "fake_state_store",
                    f"{self.fake_state_store!r} is not one of {', '.join(FAKE_STATE_STORES)}",
                )
            if self.fake_state_store == "memory" and (
                not self.fake_fleet or self.fake_state_path is not None
            ):
                raise ConfigError(
                    "fake_state_store",
                    "an in-memory fake node is built from a fleet spec, without a state file",
                )

    @property
    def state_path(self) -> Path:
        """The fake state file actually used (default: per node under the temp dir)."""
        if self.fake_state_path is not None:
            return self.fake_state_path
        return Path(tempfile.gettempdir()) / f"dra-nvlib-fake-{self.node_name}.json"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DeviceLibConfig:
        """Build from environment variables (``DRA_NVLIB_BACKEND``, ``NVIDIA_DRIVER_ROOT``,
        ``DRA_NVLIB_SYSFS_ROOT``, ``DRA_NVLIB_PROC_ROOT``, ``NODE_NAME``, ``DRA_NVLIB_FAKE_FLEET``,
        ``DRA_NVLIB_FAKE_STATE``, ``DRA_NVLIB_NVIDIA_SMI``)."""
        env = os.environ if environ is None else environ
        backend = env.get(ENV_BACKEND, "nvml")
        if backend not in BACKENDS:
            raise ConfigError(ENV_BACKEND, f"{backend!r} is not one of {', '.join(BACKENDS)}")
        state = env.get(ENV_FAKE_STATE)
        smi = env.get(ENV_NVIDIA_SMI)
        return cls(
            backend=backend,
            driver_root=Path(env.get(ENV_DRIVER_ROOT, "/")),
            sysfs_root=Path(env.get(ENV_SYSFS_ROOT, "/sys")),
            proc_root=Path(env.get(ENV_PROC_ROOT, "/proc")),
            nvidia_smi=Path(smi) if smi else None,
            node_name=env.get(ENV_NODE_NAME, ""),
            fake_fleet=env.get(ENV_FAKE_FLEET) or None,
            fake_state_path=Path(state) if state else None,
        )
