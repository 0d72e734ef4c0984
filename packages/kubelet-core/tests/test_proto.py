"""Our .proto files against the upstream reference: same packages, services, methods,
messages, field names, numbers, types and labels; and the committed stubs are current."""

from __future__ import annotations

import filecmp
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2
from kubelet_core_support import ReferenceProtos

PACKAGE = Path(__file__).resolve().parents[1]
OURS = {
    "pluginregistration-v1.proto": "pluginregistration_v1.proto",
    "dra-v1.proto": "dra_v1.proto",
    "dra-v1beta1.proto": "dra_v1beta1.proto",
    "dra-health-v1alpha1.proto": "dra_health_v1alpha1.proto",
    "dra-health-v1.proto": "dra_health_v1.proto",
}


def compile_set(include: Path, files: list[str], out: Path) -> descriptor_pb2.FileDescriptorSet:
    from grpc_tools import protoc  # type: ignore[import-untyped]

    rc = protoc.main(["protoc", f"-I{include}", f"--descriptor_set_out={out}", *files])
    assert rc == 0
    return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


def shape(f: descriptor_pb2.FileDescriptorProto) -> dict[str, object]:
    messages = {
        m.name: sorted((x.name, x.number, x.type, x.label, x.type_name) for x in m.field)
        for m in f.message_type
    }
    nested = {
        f"{m.name}.{n.name}": sorted((x.name, x.number, x.type) for x in n.field)
        for m in f.message_type
        for n in m.nested_type
    }
    services = {
        s.name: sorted((m.name, m.input_type, m.output_type, m.server_streaming) for m in s.method)
        for s in f.service
    }
    enums = {e.name: sorted((v.name, v.number) for v in e.value) for e in f.enum_type}
    return {
        "package": f.package,
        "messages": messages,
        "nested": nested,
        "services": services,
        "enums": enums,
    }


@pytest.mark.parametrize("reference_file", sorted(OURS))
def test_our_proto_matches_the_upstream_reference(reference_file: str, tmp_path: Path) -> None:
    from kubelet_core_support import REFERENCE_DIR

    (theirs,) = compile_set(REFERENCE_DIR, [reference_file], tmp_path / "theirs.pb").file
    ours_dir = PACKAGE / "proto"
    (ours,) = compile_set(
        ours_dir, [f"dra_kubelet_core/_proto/{OURS[reference_file]}"], tmp_path / "ours.pb"
    ).file
    assert shape(ours) == shape(theirs)


def test_committed_stubs_are_generated_from_the_current_protos(tmp_path: Path) -> None:
    from grpc_tools import protoc

    protos = sorted((PACKAGE / "proto" / "dra_kubelet_core" / "_proto").glob("*.proto"))
    rc = protoc.main(
        [
            "protoc",
            f"-I{PACKAGE / 'proto'}",
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            *(str(p) for p in protos),
        ]
    )
    assert rc == 0
    generated = tmp_path / "dra_kubelet_core" / "_proto"
    committed = PACKAGE / "src" / "dra_kubelet_core" / "_proto"
    names = sorted(p.name for p in generated.iterdir())
    match, mismatch, errors = filecmp.cmpfiles(generated, committed, names, shallow=False)
    assert (mismatch, errors) == ([], []), "run `make proto` and commit the result"
    assert len(match) == 3 * len(protos)


def test_reference_client_fixture_loads_every_service(reference: ReferenceProtos) -> None:
    for service in (
        "pluginregistration.Registration",
        "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin",
        "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin",
        "v1alpha1.DRAResourceHealth",
    ):
        assert reference.pool.FindServiceByName(service).methods
