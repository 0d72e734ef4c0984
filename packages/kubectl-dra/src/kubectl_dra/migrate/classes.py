"""Classic ResourceClass (+ NvidiaGPUConfig) to a ``resource.k8s.io/v1`` DeviceClass (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from dra_api_types.legacy import LEGACY_GPU_CONFIG_GROUP, LegacyResourceClass, NvidiaGpuConfig
from dra_api_types.nvidia_v1beta1 import GPU_DRIVER
from dra_api_types.resource_v1 import ObjectMeta

from .errors import MigrationError, MissingConfigError
from .gpu_config import GpuRequirements, device_type_selector, gpu_requirements

V1: Final = "resource.k8s.io/v1"
CONFIG_KIND: Final = "NvidiaGPUConfig"
#: Metadata a migrated object keeps; the rest (uid, resourceVersion...) belongs to the old one.
KEPT_METADATA: Final = ("name", "namespace", "labels", "annotations")


def kept_metadata(meta: ObjectMeta, *, namespaced: bool) -> dict[str, Any]:
    """The identity fields of an object's metadata that its migrated form keeps."""
    plain = meta.to_dict()
    return {
        key: plain[key]
        for key in KEPT_METADATA
        if key in plain and (namespaced or key != "namespace")
    }


@dataclass(frozen=True, slots=True)
class ConvertedClass:
    """A DeviceClass and the notes explaining it."""

    device_class: dict[str, Any]
    notes: list[str]


def config_key(name: str, namespace: str | None) -> tuple[str, str]:
    """How NvidiaGPUConfigs are looked up: (namespace or "", name)."""
    return (namespace or "", name)


def device_class_object(meta: dict[str, Any], req: GpuRequirements) -> dict[str, Any]:
    """The v1 DeviceClass for requirements (selectors in order, opaque config if any)."""
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in req.selectors]}
    if req.opaque_parameters is not None:
        spec["config"] = [{"opaque": {"driver": GPU_DRIVER, "parameters": req.opaque_parameters}}]
    return {"apiVersion": V1, "kind": "DeviceClass", "metadata": meta, "spec": spec}


def resolve_parameters(
    ref_model: Any,
    configs: Mapping[tuple[str, str], NvidiaGpuConfig],
    *,
    ref: str,
    path: str,
    namespace: str | None,
) -> tuple[NvidiaGpuConfig, list[str]]:
    """The NvidiaGPUConfig a ``parametersRef`` names, or a MigrationError naming the field."""
    notes: list[str] = []
    group = ref_model.api_group or ""
    group_name, _, version = group.partition("/")
    if group_name != LEGACY_GPU_CONFIG_GROUP:
        raise MigrationError(
            f"parameters of group {group!r} cannot be migrated (only "
            f"{LEGACY_GPU_CONFIG_GROUP} {CONFIG_KIND})",
            object_ref=ref,
            field=f"{path}.apiGroup",
        )
    if version:
        notes.append(f"{path}.apiGroup {group!r} includes a version; read as {group_name}")
    if ref_model.kind != CONFIG_KIND:
        raise MigrationError(
            f"kind {ref_model.kind!r} cannot be migrated (only {CONFIG_KIND})",
            object_ref=ref,
            field=f"{path}.kind",
        )
    key = config_key(ref_model.name, ref_model.namespace or namespace)
    config = configs.get(key) or configs.get(config_key(ref_model.name, None))
    if config is None:
        raise MissingConfigError(
            f"{CONFIG_KIND} {ref_model.name!r} is not in the input (pass its file with -f)",
            object_ref=ref,
            field=f"{path}.name",
            key=key,
        )
    return config, notes


def convert_class(
    rc: LegacyResourceClass, configs: Mapping[tuple[str, str], NvidiaGpuConfig], *, ref: str
) -> ConvertedClass:
    """A classic ResourceClass as a DeviceClass of the same name."""
    if rc.driver_name != GPU_DRIVER:
        raise MigrationError(
            f"driver {rc.driver_name!r} is not this driver ({GPU_DRIVER}); its DeviceClasses "
            "come from that driver's own chart",
            object_ref=ref,
            field="driverName",
        )
    if rc.suitable_nodes is not None:
        raise MigrationError(
            "v1 DeviceClasses select devices, not nodes: put node affinity on the pods and "
            "remove this field",
            object_ref=ref,
            field="suitableNodes",
        )
    notes = [f"ResourceClass -> {V1} DeviceClass {rc.metadata.name}"]
    if rc.structured_parameters is not None:
        notes.append("structuredParameters dropped: v1 allocation is always structured")
    if rc.parameters_ref is None:
        req = GpuRequirements(selectors=[device_type_selector(None)])
        notes.append("no parametersRef: every full GPU of the driver")
    else:
        config, ref_notes = resolve_parameters(
            rc.parameters_ref, configs, ref=ref, path="parametersRef", namespace=None
        )
        notes.extend(ref_notes)
        req = gpu_requirements(
            config.spec, ref=f"NvidiaGPUConfig {config.metadata.name}", path="spec"
        )
        notes.extend(f"from NvidiaGPUConfig {config.metadata.name}: {n}" for n in req.notes)
    meta = kept_metadata(rc.metadata, namespaced=False)
    return ConvertedClass(device_class_object(meta, req), notes)


def convert_unreferenced_config(config: NvidiaGpuConfig, *, ref: str) -> ConvertedClass:
    """An NvidiaGPUConfig no ResourceClass uses, as a DeviceClass named after it."""
    req = gpu_requirements(config.spec, ref=ref, path="spec")
    name = config.metadata.name
    notes = [
        f"no ResourceClass or claim in the input uses it: -> {V1} DeviceClass {name} "
        f"(claims select it with deviceClassName: {name})",
        *req.notes,
    ]
    meta = kept_metadata(config.metadata, namespaced=False)
    return ConvertedClass(device_class_object(meta, req), notes)
