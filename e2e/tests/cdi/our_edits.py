"""Our CDI edits for a go-nvml mock system, in a process of their own: ``python our_edits.py``.

The mock's MIG devices (``DRA_NVML_MOCK_MIG``) exist from the first ``nvmlInit`` of a
process on, so a test that compares them with ``nvidia-ctk``'s (another process with the same
environment) renders ours here rather than in the test process, whose mock has no MIG.

Arguments: the mock library, the driver root (also the dev root), the proc root, the sys
root and the hook path. Prints JSON: ``{"claim": <claim edits>, "devices": {<toolkit index
name>: <device edits>}}``, a full GPU named ``<minor>``, a MIG device ``<gpu>:<mig index>``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dra_kubelet_core.errors import ClaimRef
from dra_kubelet_plugin.container_edits import NvmlEdits
from dra_kubelet_plugin.inventory import NodeDevice, build_inventory
from dra_nvlib import DeviceLibConfig, open_device_lib

REF = ClaimRef(namespace="default", name="parity", uid="0b7c-parity")


def _toolkit_name(device: NodeDevice) -> str:
    if device.mig is not None:
        return f"{device.mig.parent_index}:{device.mig.index}"
    return str(device.gpu.minor)


def main(argv: list[str]) -> int:
    """Render and print (see the module docstring)."""
    library, root, proc, sys_root, hook = argv
    with open_device_lib(DeviceLibConfig(backend="nvml", nvml_library=Path(library))) as lib:
        devices = build_inventory(lib.gpus())
    edits = NvmlEdits(
        driver_root=Path(root),
        dev_root=Path(root),
        host_dev_root=Path(root),
        proc_root=Path(proc),
        sys_root=Path(sys_root),
        cdi_hook_path=hook,
    )
    out = {
        "claim": edits.claim_edits(REF, devices).to_json(),
        "devices": {_toolkit_name(d): edits.device_edits(REF, d).to_json() for d in devices},
    }
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
