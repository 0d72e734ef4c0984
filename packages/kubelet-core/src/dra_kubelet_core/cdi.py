"""CDI spec model and rendering (pure: no file I/O here; see :mod:`.cdi_store`).

One transient spec per claim, kind ``<vendor>/<class>`` (a driver's :class:`CDIKind`, e.g.
``k8s.gpu.nvidia.com/claim``), file ``<vendor>-<class>_<claimUID>.json``, device names
``<claimUID>-<deviceName>``, so the fully qualified CDI device ID the kubelet hands to the
runtime is ``<vendor>/<class>=<claimUID>-<deviceName>``.

``cdiVersion`` is the minimum version the content needs, computed with the rules of the CDI
specification's version history, so that older consumers (podman 4.3 reads up to 0.5.0)
accept the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "CDIKind",
    "CDISpec",
    "ContainerEdits",
    "DeviceNode",
    "Hook",
    "Mount",
    "SpecDevice",
    "cdi_device_name",
    "minimum_cdi_version",
]


@dataclass(frozen=True)
class CDIKind:
    """A driver's CDI vendor and class: names its spec files, its kind and its device IDs."""

    vendor: str
    class_: str = "claim"

    @property
    def kind(self) -> str:
        """The spec's ``kind``: ``<vendor>/<class>``."""
        return f"{self.vendor}/{self.class_}"

    @property
    def _prefix(self) -> str:
        return f"{self.vendor}-{self.class_}_"

    def device_id(self, claim_uid: str, device_name: str) -> str:
        """Return the fully qualified CDI device ID handed to the kubelet."""
        return f"{self.kind}={cdi_device_name(claim_uid, device_name)}"

    def spec_file_name(self, claim_uid: str) -> str:
        """Return the file name of a claim's transient spec."""
        return f"{self._prefix}{claim_uid}.json"

    def claim_uid_from_spec_file_name(self, name: str) -> str | None:
        """Return the claim UID of a spec file of this kind, else ``None``."""
        pattern = rf"^{re.escape(self._prefix)}(?P<uid>[0-9A-Za-z-]+)\.json$"
        match = re.match(pattern, name)
        return match.group("uid") if match else None

    def render_claim_spec(
        self,
        *,
        claim_uid: str,
        devices: Sequence[tuple[str, ContainerEdits]],
        common: Iterable[ContainerEdits] = (),
    ) -> CDISpec:
        """Build the spec of one claim.

        Args:
            claim_uid: the claim's UID.
            devices: ``(device name, edits)`` for every prepared device, in result order.
            common: edits every container that gets any of the claim's devices needs (merged).
        """
        env: list[str] = []
        nodes: list[DeviceNode] = []
        mounts: list[Mount] = []
        hooks: list[Hook] = []
        for edit in common:
            env.extend(e for e in edit.env if e not in env)
            nodes.extend(n for n in edit.device_nodes if n not in nodes)
            mounts.extend(m for m in edit.mounts if m not in mounts)
            hooks.extend(h for h in edit.hooks if h not in hooks)
        return CDISpec(
            kind=self.kind,
            devices=tuple(
                SpecDevice(name=cdi_device_name(claim_uid, name), edits=edits)
                for name, edits in devices
            ),
            edits=ContainerEdits(
                env=tuple(env), device_nodes=tuple(nodes), mounts=tuple(mounts), hooks=tuple(hooks)
            ),
        )


@dataclass(frozen=True)
class DeviceNode:
    """A device node to create in the container (``hostPath`` when it differs from ``path``)."""

    path: str
    host_path: str | None = None
    permissions: str | None = None

    def to_json(self) -> dict[str, object]:
        """Return the CDI JSON form."""
        out: dict[str, object] = {"path": self.path}
        if self.host_path is not None:
            out["hostPath"] = self.host_path
        if self.permissions is not None:
            out["permissions"] = self.permissions
        return out


@dataclass(frozen=True)
class Mount:
    """A bind mount from the host into the container."""

    host_path: str
    container_path: str
    options: tuple[str, ...] = ("ro", "nosuid", "nodev", "bind")
    type: str | None = None

    def to_json(self) -> dict[str, object]:
        """Return the CDI JSON form."""
        out: dict[str, object] = {
            "hostPath": self.host_path,
            "containerPath": self.container_path,
            "options": list(self.options),
        }
        if self.type is not None:
            out["type"] = self.type
        return out


@dataclass(frozen=True)
class Hook:
    """An OCI hook the runtime runs for the container (``args[0]`` is the program's name)."""

    path: str
    args: tuple[str, ...]
    hook_name: str = "createContainer"
    env: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """Return the CDI JSON form."""
        out: dict[str, object] = {"hookName": self.hook_name, "path": self.path}
        if self.args:
            out["args"] = list(self.args)
        if self.env:
            out["env"] = list(self.env)
        return out


@dataclass(frozen=True)
class ContainerEdits:
    """Edits applied to a container's OCI spec: env (``KEY=value``), device nodes, mounts,
    hooks."""

    env: tuple[str, ...] = ()
    device_nodes: tuple[DeviceNode, ...] = ()
    mounts: tuple[Mount, ...] = ()
    hooks: tuple[Hook, ...] = ()

    def is_empty(self) -> bool:
        """Whether these edits change nothing."""
        return not (self.env or self.device_nodes or self.mounts or self.hooks)

    def to_json(self) -> dict[str, object]:
        """Return the CDI JSON form (empty lists omitted)."""
        out: dict[str, object] = {}
        if self.env:
            out["env"] = list(self.env)
        if self.device_nodes:
            out["deviceNodes"] = [d.to_json() for d in self.device_nodes]
        if self.mounts:
            out["mounts"] = [m.to_json() for m in self.mounts]
        if self.hooks:
            out["hooks"] = [h.to_json() for h in self.hooks]
        return out


@dataclass(frozen=True)
class SpecDevice:
    """One named CDI device of a spec."""

    name: str
    edits: ContainerEdits


@dataclass(frozen=True)
class CDISpec:
    """A CDI spec document."""

    kind: str
    devices: tuple[SpecDevice, ...]
    edits: ContainerEdits = field(default_factory=ContainerEdits)
    annotations: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """Return the JSON document with the minimum ``cdiVersion`` its content needs."""
        out: dict[str, object] = {"cdiVersion": minimum_cdi_version(self), "kind": self.kind}
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        out["devices"] = [
            {"name": d.name, "containerEdits": d.edits.to_json()} for d in self.devices
        ]
        if not self.edits.is_empty():
            out["containerEdits"] = self.edits.to_json()
        return out

    def to_bytes(self) -> bytes:
        """Serialize as indented JSON."""
        return (json.dumps(self.to_json(), indent=2) + "\n").encode()


def minimum_cdi_version(spec: CDISpec) -> str:
    """Return the lowest CDI spec version that allows everything ``spec`` uses.

    0.3.0 is the earliest version consumers still accept. 0.4.0 added mount ``type``;
    0.5.0 added device node ``hostPath`` and device names starting with a non-letter;
    0.6.0 added annotations and dots in the kind's class.
    """
    all_edits = [spec.edits, *(d.edits for d in spec.devices)]
    if spec.annotations or "." in spec.kind.partition("/")[2]:
        return "0.6.0"
    if any(d.name and not d.name[0].isalpha() for d in spec.devices) or any(
        n.host_path is not None for e in all_edits for n in e.device_nodes
    ):
        return "0.5.0"
    if any(m.type is not None for e in all_edits for m in e.mounts):
        return "0.4.0"
    return "0.3.0"


def cdi_device_name(claim_uid: str, device_name: str) -> str:
    """Return the spec-local device name ``<claimUID>-<deviceName>``."""
    return f"{claim_uid}-{device_name}"
