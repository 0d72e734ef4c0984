"""Parse a fake fleet spec: ``8xH100-80GB``, ``4xA100-40GB,4xL4``, ``2xA100-40GB:mig``,
``2xGH200-96GB:mig=7x1g.12gb`` or a profile YAML file.

Item grammar: ``[COUNT x]MODEL[:OPTION]...`` with options ``mig`` (start in MIG mode, no MIG
devices), ``mig=LAYOUT`` (start in MIG mode with these MIG devices already created on every GPU
of the item, as mig-parted leaves them: ``7x1g.12gb``, ``3g.48gb/2x1g.12gb``; see
:mod:`dra_nvlib.mig_layout`), ``clique=N`` and ``cluster=NAME`` (NVLink fabric, GB200 only).
The YAML form (``mig_devices`` is mig-parted's ``mig-devices``: profile -> count, and implies
``mig: true``)::

    gpus:
      - model: GB200
        count: 4
        mig: false
        clique: 1
        cluster: rack-a
      - model: GH200-96GB
        count: 2
        mig_devices: {1g.12gb: 7}

This module is pure: reading the YAML file is done by :func:`load_fleet_spec`, the only I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dra_nvlib.errors import FleetSpecError
from dra_nvlib.mig_layout import (
    MigLayoutError,
    MigLayoutItem,
    PlannedInstance,
    format_mig_layout,
    parse_mig_layout,
    plan_layout,
)
from dra_nvlib.profiles import GPU_MODELS, GpuModel, find_model

DEFAULT_CLUSTER = "fake-nvlink-domain"
DEFAULT_CLIQUE = 1
MAX_GPUS_PER_NODE = 64

_ITEM = re.compile(r"^(?:(?P<count>\d+)\s*[xX]\s*)?(?P<model>[A-Za-z0-9][A-Za-z0-9._-]*)$")


@dataclass(frozen=True)
class FleetEntry:
    """``count`` GPUs of one model with their initial MIG mode, the MIG devices each starts
    with (``mig_layout``, placed as ``mig_instances``) and fabric membership."""

    model: GpuModel
    count: int
    mig_enabled: bool = False
    clique_id: int = DEFAULT_CLIQUE
    cluster: str = DEFAULT_CLUSTER
    mig_layout: tuple[MigLayoutItem, ...] = ()
    mig_instances: tuple[PlannedInstance, ...] = ()


@dataclass(frozen=True)
class FleetSpec:
    """A fake node's GPUs in index order; ``source`` is the spec string or file path."""

    source: str
    entries: tuple[FleetEntry, ...]

    @property
    def gpu_count(self) -> int:
        """Number of GPUs on the node."""
        return sum(e.count for e in self.entries)

    def models(self) -> list[FleetEntry]:
        """One entry per GPU, in index order."""
        out: list[FleetEntry] = []
        for entry in self.entries:
            out.extend([entry] * entry.count)
        return out


def _model(spec: str, name: str) -> GpuModel:
    model = find_model(name)
    if model is None:
        known = ", ".join(GPU_MODELS)
        raise FleetSpecError(spec, f"unknown GPU model {name!r} (known: {known})")
    return model


def _entry(
    spec: str,
    model: GpuModel,
    *,
    count: int,
    mig: bool,
    clique: int,
    cluster: str,
    mig_layout: tuple[MigLayoutItem, ...] = (),
) -> FleetEntry:
    if count < 1:
        raise FleetSpecError(spec, f"{model.key}: count must be at least 1, got {count}")
    if (mig or mig_layout) and not model.mig_capable:
        raise FleetSpecError(spec, f"{model.key}: MIG mode requested but the part has no MIG")
    if clique < 0 or clique > 0xFFFFFFFF:
        raise FleetSpecError(spec, f"{model.key}: clique id {clique} out of range")
    try:
        instances = plan_layout(model, mig_layout)
    except MigLayoutError as exc:
        raise FleetSpecError(spec, str(exc)) from exc
    return FleetEntry(
        model=model,
        count=count,
        mig_enabled=mig or bool(mig_layout),
        clique_id=clique,
        cluster=cluster,
        mig_layout=mig_layout,
        mig_instances=instances,
    )


def parse_fleet_string(spec: str) -> FleetSpec:
    """Parse the compact string form; raises FleetSpecError naming the bad item."""
    items = [part.strip() for part in spec.split(",")]
    if not spec.strip() or any(not item for item in items):
        raise FleetSpecError(spec, "empty item; expected e.g. '8xH100-80GB' or '4xA100-40GB,4xL4'")
    entries: list[FleetEntry] = []
    for item in items:
        head, *options = item.split(":")
        match = _ITEM.match(head.strip())
        if match is None:
            raise FleetSpecError(spec, f"item {item!r} is not [COUNTx]MODEL[:option...]")
        model = _model(spec, match["model"])
        count = int(match["count"]) if match["count"] else 1
        mig = False
        layout: tuple[MigLayoutItem, ...] = ()
        clique = DEFAULT_CLIQUE
        cluster = DEFAULT_CLUSTER
        for option in options:
            key, _, value = option.strip().partition("=")
            if key == "mig" and not value:
                mig = True
            elif key == "mig":
                try:
                    layout = parse_mig_layout(value)
                except MigLayoutError as exc:
                    raise FleetSpecError(spec, f"item {item!r}: {exc}") from exc
            elif key == "clique" and value.isdigit():
                clique = int(value)
            elif key == "cluster" and value:
                cluster = value
            else:
                raise FleetSpecError(
                    spec,
                    f"item {item!r}: unknown option {option!r} "
                    "(mig, mig=LAYOUT, clique=N, cluster=NAME)",
                )
        entries.append(
            _entry(
                spec, model, count=count, mig=mig, clique=clique, cluster=cluster, mig_layout=layout
            )
        )
    return _checked(FleetSpec(source=canonical_spec(entries), entries=tuple(entries)))


def canonical_spec(entries: list[FleetEntry]) -> str:
    """The spec string in one spelling (``8xH100-80GB``), so the same fleet written as
    ``8xh100`` or ``8 x H100-80GB`` is recognised as the same node."""
    items = []
    for e in entries:
        options = ":mig" if e.mig_enabled else ""
        if e.mig_layout:
            options += "=" + format_mig_layout(e.mig_layout)
        if e.model.fabric_capable and (e.clique_id, e.cluster) != (DEFAULT_CLIQUE, DEFAULT_CLUSTER):
            options += f":clique={e.clique_id}:cluster={e.cluster}"
        items.append(f"{e.count}x{e.model.key}{options}")
    return ",".join(items)


def parse_fleet_yaml(text: str, *, source: str) -> FleetSpec:
    """Parse the YAML profile form (already read from ``source``)."""
    import yaml  # deferred import: the short fleet form and a real node read no YAML

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FleetSpecError(source, f"not valid YAML: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("gpus"), list) or not doc["gpus"]:
        raise FleetSpecError(source, "expected a mapping with a non-empty 'gpus' list")
    unknown_top = set(doc) - {"gpus"}
    if unknown_top:
        raise FleetSpecError(source, f"unknown top-level field(s) {sorted(unknown_top)}")
    entries: list[FleetEntry] = []
    for i, raw in enumerate(doc["gpus"]):
        where = f"gpus[{i}]"
        if not isinstance(raw, dict):
            raise FleetSpecError(source, f"{where} must be a mapping")
        unknown = set(raw) - {"model", "count", "mig", "mig_devices", "clique", "cluster"}
        if unknown:
            raise FleetSpecError(source, f"{where}: unknown field(s) {sorted(unknown)}")
        name = raw.get("model")
        if not isinstance(name, str):
            raise FleetSpecError(source, f"{where}.model must be a string")
        count = raw.get("count", 1)
        mig = raw.get("mig", False)
        clique = raw.get("clique", DEFAULT_CLIQUE)
        cluster = raw.get("cluster", DEFAULT_CLUSTER)
        if not isinstance(count, int) or isinstance(count, bool):
            raise FleetSpecError(source, f"{where}.count must be an integer")
        if not isinstance(mig, bool):
            raise FleetSpecError(source, f"{where}.mig must be true or false")
        if not isinstance(clique, int) or isinstance(clique, bool):
            raise FleetSpecError(source, f"{where}.clique must be an integer")
        if not isinstance(cluster, str) or not cluster:
            raise FleetSpecError(source, f"{where}.cluster must be a non-empty string")
        layout = _yaml_mig_devices(source, where, raw.get("mig_devices", {}))
        model = _model(source, name)
        entries.append(
            _entry(
                source,
                model,
                count=count,
                mig=mig,
                clique=clique,
                cluster=cluster,
                mig_layout=layout,
            )
        )
    return _checked(FleetSpec(source=source, entries=tuple(entries)))


def _yaml_mig_devices(source: str, where: str, raw: object) -> tuple[MigLayoutItem, ...]:
    """``mig_devices: {1g.12gb: 7}`` as a layout (the same rules as ``mig=7x1g.12gb``)."""
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
        for k, v in raw.items()
    ):
        raise FleetSpecError(source, f"{where}.mig_devices must map profile names to counts")
    items = tuple(MigLayoutItem(profile, count) for profile, count in raw.items())
    bad = [str(item) for item in items if item.count < 1]
    if bad:
        raise FleetSpecError(source, f"{where}.mig_devices: counts must be at least 1: {bad}")
    return items


def _checked(spec: FleetSpec) -> FleetSpec:
    if spec.gpu_count > MAX_GPUS_PER_NODE:
        raise FleetSpecError(
            spec.source, f"{spec.gpu_count} GPUs exceeds the limit of {MAX_GPUS_PER_NODE}"
        )
    return spec


def load_fleet_spec(spec: str) -> FleetSpec:
    """Parse ``spec``: a YAML file path (``.yaml``/``.yml`` or an existing file) or a string."""
    path = Path(spec)
    if spec.endswith((".yaml", ".yml")) or ("/" in spec and path.exists()):
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise FleetSpecError(spec, f"cannot read profile file: {exc.strerror}") from exc
        return parse_fleet_yaml(text, source=str(path.resolve()))
    return parse_fleet_string(spec)
