"""What the check runs against: the machine's GPUs through NVML, or (the check's own tests)
a fake fleet; and what the steps learn from each other (the devices the slices publish)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[4]
NODE_NAME = "gpu-check"


@dataclass(frozen=True)
class SliceDevice:
    """One device of the published slices: its name in the pool and its GPU UUID."""

    name: str
    uuid: str


@dataclass
class CheckTarget:
    """The backend under check and the scratch directory the steps write under."""

    backend: str
    workdir: Path
    fake_gpus: str = ""
    node_name: str = NODE_NAME
    python: str = sys.executable
    devices: list[SliceDevice] = field(default_factory=list)
    # nvidia-ctk and nvidia-cdi-hook, when found: the plugin's specs then name the hook.
    toolkit: tuple[Path, Path] | None = None

    def backend_args(self) -> list[str]:
        """The plugin's flags selecting this backend."""
        if self.backend == "fake":
            # A state file of its own: the fake's default is shared by every same-named node.
            state = self.workdir / "fake-gpus.json"
            return [
                "--device-backend",
                "fake",
                "--fake-gpus",
                self.fake_gpus,
                "--fake-gpu-state-file",
                str(state),
            ]
        hook = ["--nvidia-cdi-hook-path", str(self.toolkit[1])] if self.toolkit else []
        return ["--device-backend", "nvml", *hook]

    def plugin_command(self) -> list[str]:
        """``python -m dra_kubelet_plugin`` for this node and backend."""
        return [
            self.python,
            "-m",
            "dra_kubelet_plugin",
            "--node-name",
            self.node_name,
            *self.backend_args(),
        ]
