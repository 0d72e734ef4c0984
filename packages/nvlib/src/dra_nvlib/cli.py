"""``dra-nvlib``: inspect a node's GPUs and drive a fake node from outside its processes.

Wiring only; the work is in the backends. Examples::

    dra-nvlib gpus                                  # backend from DRA_NVLIB_* environment
    dra-nvlib --backend fake --node n1 --fleet 8xH100-80GB nvidia-smi -L
    dra-nvlib --backend fake --node n1 --state /tmp/n1.json inject-xid GPU-... 79
    dra-nvlib --backend fake --node n1 --state /tmp/n1.json lose-gpu GPU-...
    dra-nvlib --backend fake --node n1 --state /tmp/n1.json fail-next create_mig_device
    dra-nvlib --backend fake --node n1 --state /tmp/n1.json set-fabric GPU-... IN_PROGRESS
    dra-nvlib --backend fake --node n1 --state /tmp/n1.json fabric-manager partitions
    dra-nvlib --backend fake --node n1 --state /tmp/n1.json fabric-manager stop
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from dra_nvlib.backends import open_device_lib
from dra_nvlib.config import BACKENDS, DeviceLibConfig
from dra_nvlib.devicelib import DeviceLib
from dra_nvlib.errors import NvlibError
from dra_nvlib.fabric_partitions import FabricManager
from dra_nvlib.facts import FabricState
from dra_nvlib.fake_backend import FakeDeviceLib
from dra_nvlib.fake_fabric_manager import FakeFabricManager, fake_fabric_manager_path
from dra_nvlib.fake_node import OPERATIONS, FaultKind
from dra_nvlib.nvfm import fm_connection, open_nvfm
from dra_nvlib.nvidia_smi import render_nvidia_smi_list, render_nvidia_smi_script


def _jsonable(value: object) -> object:
    if isinstance(value, enum.Enum):
        return value.name
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dra-nvlib", description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=BACKENDS, help="default: $DRA_NVLIB_BACKEND")
    parser.add_argument("--driver-root", type=Path, help="default: $NVIDIA_DRIVER_ROOT or /")
    parser.add_argument("--node", help="node name (fake backend); default: $NODE_NAME")
    parser.add_argument("--fleet", help="fake fleet spec or YAML path; $DRA_NVLIB_FAKE_FLEET")
    parser.add_argument("--state", type=Path, help="fake state file; $DRA_NVLIB_FAKE_STATE")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("gpus", help="print every GPU's facts as JSON")
    smi = sub.add_parser("nvidia-smi", help="print what nvidia-smi -L prints")
    smi.add_argument("-L", "--list-gpus", action="store_true", required=True)
    smi.add_argument("--visible", nargs="*", help="GPU/MIG UUIDs the container sees")
    script = sub.add_parser("nvidia-smi-script", help="write the POSIX sh fake nvidia-smi")
    script.add_argument("--visible", nargs="*", help="GPU/MIG UUIDs the container sees")
    xid = sub.add_parser("inject-xid", help="fake: record an XID event")
    xid.add_argument("gpu")
    xid.add_argument("xid", type=int)
    ecc = sub.add_parser("inject-ecc", help="fake: record an ECC error event")
    ecc.add_argument("gpu")
    ecc.add_argument("--double-bit", action="store_true")
    lost = sub.add_parser("lose-gpu", help="fake: the GPU falls off the bus")
    lost.add_argument("gpu")
    fail = sub.add_parser("fail-next", help="fake: the next call of an operation fails")
    fail.add_argument("operation", choices=OPERATIONS)
    fail.add_argument("--error", choices=[k.value for k in FaultKind], default="unknown")
    fail.add_argument("--gpu")
    fail.add_argument("--times", type=int, default=1)
    fabric = sub.add_parser("set-fabric", help="fake: set a GPU's NVLink fabric registration")
    fabric.add_argument("gpu")
    fabric.add_argument("fabric_state", metavar="STATE", choices=[s.name for s in FabricState])
    fabric.add_argument("--status", type=int, default=0, help="NVML return code (COMPLETED)")
    fabric.add_argument("--cluster-uuid", help="e.g. all zeros: NVLink without multi-node")
    fm = sub.add_parser("fabric-manager", help="Fabric Manager partitions (NVSwitch)")
    fm.add_argument(
        "action",
        choices=["partitions", "stop", "start"],
        help="partitions: print them as JSON; fake: stop or start the node's Fabric Manager",
    )
    return parser


def _config(args: argparse.Namespace) -> DeviceLibConfig:
    base = DeviceLibConfig.from_env()
    return DeviceLibConfig(
        backend=args.backend or base.backend,
        driver_root=args.driver_root or base.driver_root,
        sysfs_root=base.sysfs_root,
        proc_root=base.proc_root,
        nvidia_smi=base.nvidia_smi,
        node_name=args.node or base.node_name,
        fake_fleet=args.fleet or base.fake_fleet,
        fake_state_path=args.state or base.fake_state_path,
    )


def _fake(lib: DeviceLib) -> FakeDeviceLib:
    if not isinstance(lib, FakeDeviceLib):
        raise SystemExit("this command needs the fake backend (--backend fake)")
    return lib


def _fabric_manager(lib: DeviceLib) -> FabricManager:
    """The node's Fabric Manager: a fake node's (kept next to its GPU state by the GPU
    plugin, which creates it), else the real one through libnvfm."""
    if isinstance(lib, FakeDeviceLib):
        return FakeFabricManager(fake_fabric_manager_path(lib.state_path), gpu_count=None)
    return open_nvfm(fm_connection(os.environ))


def _run_fabric_manager(lib: DeviceLib, action: str) -> None:
    if action == "partitions":
        print(json.dumps(_jsonable(_fabric_manager(lib).partitions()), indent=2))
        return
    fm = _fabric_manager(lib)
    if not isinstance(fm, FakeFabricManager):
        raise SystemExit("this command needs the fake backend (--backend fake)")
    fm.set_running(action == "start")


def run(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        with open_device_lib(_config(args)) as lib:
            if args.command == "gpus":
                print(json.dumps(_jsonable(lib.gpus()), indent=2))
            elif args.command == "nvidia-smi":
                visible = set(args.visible) if args.visible is not None else None
                for line in render_nvidia_smi_list(lib.gpus(), visible):
                    print(line)
            elif args.command == "nvidia-smi-script":
                visible = set(args.visible) if args.visible is not None else None
                lines = render_nvidia_smi_list(lib.gpus(), visible)
                sys.stdout.write(render_nvidia_smi_script(lines))
            elif args.command == "inject-xid":
                _fake(lib).inject_xid(args.gpu, args.xid)
            elif args.command == "inject-ecc":
                _fake(lib).inject_ecc_error(args.gpu, double_bit=args.double_bit)
            elif args.command == "lose-gpu":
                _fake(lib).mark_gpu_lost(args.gpu)
            elif args.command == "fail-next":
                _fake(lib).fail_next(
                    args.operation, error=FaultKind(args.error), gpu_uuid=args.gpu, times=args.times
                )
            elif args.command == "set-fabric":
                _fake(lib).set_fabric_state(
                    args.gpu,
                    FabricState[args.fabric_state],
                    status=args.status,
                    cluster_uuid=args.cluster_uuid,
                )
            elif args.command == "fabric-manager":
                _run_fabric_manager(lib, args.action)
    except NvlibError as exc:
        print(f"dra-nvlib: {exc}", file=sys.stderr)
        return 1
    return 0


def main() -> None:
    """Console-script entry point."""
    raise SystemExit(run())
