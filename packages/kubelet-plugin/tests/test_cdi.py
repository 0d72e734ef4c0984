"""CDI specs: minimum cdiVersion, naming, schema validity, atomic files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from dra_kubelet_core.cdi import (
    CDISpec,
    ContainerEdits,
    DeviceNode,
    Mount,
    SpecDevice,
    minimum_cdi_version,
)
from dra_kubelet_core.cdi_store import CDIStore
from dra_kubelet_plugin.cdi import (
    CDI_KIND,
    GPU_CDI,
    cdi_device_id,
    claim_uid_from_spec_file_name,
    render_claim_spec,
)
from referencing import Registry, Resource

REFERENCE = Path("/work/shared/reference")


def cdi_validator() -> jsonschema.Draft7Validator:
    schema = json.loads((REFERENCE / "cdi-schema.json").read_text())
    defs = json.loads((REFERENCE / "cdi-defs.json").read_text())
    registry: Registry[Any] = Registry().with_resource(
        "defs.json", Resource.from_contents(defs, default_specification=_draft7())
    )
    return jsonschema.Draft7Validator(schema, registry=registry)


def _draft7() -> Any:
    from referencing.jsonschema import DRAFT7

    return DRAFT7


def test_version_is_the_minimum_the_content_needs() -> None:
    plain = ContainerEdits(env=("A=1",))
    assert (
        minimum_cdi_version(CDISpec(kind=CDI_KIND, devices=(SpecDevice("abc", plain),))) == "0.3.0"
    )
    typed = ContainerEdits(mounts=(Mount("/a", "/b", type="bind"),))
    assert (
        minimum_cdi_version(CDISpec(kind=CDI_KIND, devices=(SpecDevice("abc", typed),))) == "0.4.0"
    )
    digit = CDISpec(kind=CDI_KIND, devices=(SpecDevice("0abc", plain),))
    assert minimum_cdi_version(digit) == "0.5.0"
    host = ContainerEdits(device_nodes=(DeviceNode("/dev/x", host_path="/dev/null"),))
    assert minimum_cdi_version(CDISpec(kind=CDI_KIND, devices=(SpecDevice("a", host),))) == "0.5.0"
    annotated = CDISpec(kind=CDI_KIND, devices=(SpecDevice("a", plain),), annotations={"k": "v"})
    assert minimum_cdi_version(annotated) == "0.6.0"


def test_claim_spec_names_devices_by_claim_uid_and_device() -> None:
    spec = render_claim_spec(
        claim_uid="9f1c",
        devices=[("gpu-0", ContainerEdits(env=("X=1",)))],
        common=[ContainerEdits(env=("Y=2",)), ContainerEdits(env=("Y=2",))],
    ).to_json()
    assert spec["kind"] == "k8s.gpu.nvidia.com/claim"
    assert spec["devices"] == [{"name": "9f1c-gpu-0", "containerEdits": {"env": ["X=1"]}}]
    assert spec["containerEdits"] == {"env": ["Y=2"]}
    assert spec["cdiVersion"] == "0.5.0"  # the name starts with a digit
    assert cdi_device_id("9f1c", "gpu-0") == "k8s.gpu.nvidia.com/claim=9f1c-gpu-0"


@pytest.mark.parametrize("uid", ["0b6f3d2e-4a8c-4e4e-9b1a-1d2f3c4b5a6e", "abc-def"])
def test_rendered_specs_validate_against_the_cdi_schema(uid: str) -> None:
    spec = render_claim_spec(
        claim_uid=uid,
        devices=[
            (
                "gpu-0",
                ContainerEdits(
                    env=("NVIDIA_FAKE_GPU_0_UUID=GPU-1",),
                    device_nodes=(DeviceNode("/dev/nvidia0", host_path="/dev/null"),),
                ),
            )
        ],
        common=[ContainerEdits(mounts=(Mount("/host/smi", "/usr/bin/nvidia-smi"),))],
    )
    cdi_validator().validate(spec.to_json())


def test_store_writes_atomically_lists_and_removes_leftovers(tmp_path: Path) -> None:
    store = CDIStore(tmp_path, kind=GPU_CDI)
    spec = render_claim_spec(claim_uid="u1", devices=[("gpu-0", ContainerEdits(env=("A=1",)))])
    path = store.write("u1", spec)
    assert path.name == "k8s.gpu.nvidia.com-claim_u1.json"
    assert claim_uid_from_spec_file_name(path.name) == "u1"
    store.write("u2", spec)
    (tmp_path / "other-vendor.json").write_text("{}")
    assert store.claim_uids() == {"u1", "u2"}
    assert store.remove_stale({"u1"}) == ["u2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "k8s.gpu.nvidia.com-claim_u1.json",
        "other-vendor.json",
    ]
    assert store.remove("u1") is True
    assert store.remove("u1") is False
