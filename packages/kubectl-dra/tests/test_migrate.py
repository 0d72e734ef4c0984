"""``kubectl dra migrate``: the seed article's manifests, conversions, round trips, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from api_types_fixtures import DEMO_SPECS
from dra_allocator.inputs import Document, read_documents
from dra_api_types.codec import load_documents, parse_object, to_plain
from kubectl_dra.migrate import migrate_documents
from kubectl_dra.migrate.time_slicing import DurationError, nearest_interval, parse_duration_us

FIXTURES = Path(__file__).parent / "fixtures"
SEED = FIXTURES / "seed000"
SLICES = FIXTURES / "fake-slices"
SCRIPT = Path(sys.executable).with_name("kubectl-dra")


def kubectl_dra(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The installed console script."""
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, input=stdin, timeout=120, check=False
    )


def docs_of(*objects: dict[str, Any]) -> list[Document]:
    """Documents of in-memory objects."""
    return [Document(source="test", index=i, data=o) for i, o in enumerate(objects)]


def migrated(*objects: dict[str, Any], claims: bool = False) -> list[dict[str, Any]]:
    """The migrated objects, asserting there was no error."""
    result = migrate_documents(docs_of(*objects), claims=claims)
    assert not result.errors, [str(e) for _, e in result.errors]
    return result.objects


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The objects of one kind."""
    return [o for o in objects if o["kind"] == kind]


def test_seed_manifests_migrate_to_v1_with_a_note_per_decision() -> None:
    proc = kubectl_dra("migrate", "-f", str(SEED))
    assert proc.returncode == 0, proc.stderr
    objects = [o for o in yaml.safe_load_all(proc.stdout) if o]
    classes = {o["metadata"]["name"]: o for o in by_kind(objects, "DeviceClass")}
    assert classes["gpu-nvidia-a100"] == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu-nvidia-a100"},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": "device.driver == 'gpu.nvidia.com' && "
                        "device.attributes['gpu.nvidia.com'].type == 'gpu'"
                    }
                },
                {
                    "cel": {
                        "expression": "device.capacity['gpu.nvidia.com'].memory"
                        ".compareTo(quantity('40Gi')) >= 0"
                    }
                },
                {
                    "cel": {
                        "expression": "device.attributes['gpu.nvidia.com'].cudaComputeCapability"
                        ".compareTo(semver('8.0.0')) >= 0"
                    }
                },
            ]
        },
    }
    shared = classes["shared-gpu-config"]
    assert shared["spec"]["config"] == [
        {
            "opaque": {
                "driver": "gpu.nvidia.com",
                "parameters": {
                    "apiVersion": "resource.nvidia.com/v1beta1",
                    "kind": "GpuConfig",
                    "sharing": {
                        "strategy": "TimeSlicing",
                        "timeSlicingConfig": {"interval": "Medium"},
                    },
                },
            }
        }
    ]
    (claim,) = by_kind(objects, "ResourceClaim")
    assert claim == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "my-gpu-claim", "namespace": "ml-training"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu-nvidia-a100"}}]
            }
        },
    }
    legacy_pod, plugin_pod = by_kind(objects, "Pod")
    assert legacy_pod["spec"] == {
        "containers": [
            {
                "name": "trainer",
                "image": "pytorch/pytorch:2.3",
                "resources": {"claims": [{"name": "gpu-resource"}]},
            }
        ],
        "resourceClaims": [{"name": "gpu-resource", "resourceClaimName": "my-gpu-claim"}],
    }
    # The device-plugin pod is left to the scheduler's extended-resource mapping.
    assert plugin_pod["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "2"}}
    assert "NvidiaGPUConfig" not in {o["kind"] for o in objects}
    notes = [line for line in proc.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == len(proc.stderr.splitlines())
    text = proc.stderr
    assert "interval '5ms' -> Medium" in text
    assert "consumableShares=4" in text
    assert "allocationMode WaitForFirstConsumer dropped" in text
    assert "nvidia.com/gpu: 2 left unchanged" in text
    assert "--to-claims" in text
    assert "NvidiaGPUConfig a100-config: folded into" in text


def test_seed_migrated_validates_and_allocates_on_a100_and_h100_not_v100(tmp_path: Path) -> None:
    out = tmp_path / "migrated.yaml"
    proc = kubectl_dra("migrate", "-f", str(SEED))
    assert proc.returncode == 0, proc.stderr
    out.write_text(proc.stdout)
    valid = kubectl_dra("validate", "-f", str(out))
    assert valid.returncode == 0, valid.stdout
    assert valid.stdout.strip() == "4 object(s) valid, 1 not checked (Pod: nothing DRA to check)"
    results = {}
    for node in ("node-a100", "node-h100", "node-v100"):
        alloc = kubectl_dra(
            "allocate", "-f", str(out), str(SLICES), "--node", node,
            "--claim", "ml-training/my-gpu-claim", "-o", "json",
        )  # fmt: skip
        report = json.loads(alloc.stdout)["claims"]["ml-training/my-gpu-claim"]
        results[node] = (alloc.returncode, report["allocated"])
        if node == "node-v100":
            assert any("quantity('40Gi')" in r for r in report["reasons"]), report
    assert results == {"node-a100": (0, True), "node-h100": (0, True), "node-v100": (1, False)}


@pytest.mark.parametrize("to_claims", [False, True])
def test_migrating_migrated_output_changes_nothing(tmp_path: Path, to_claims: bool) -> None:
    flags = ["--to-claims"] if to_claims else []
    inputs = [str(SEED), str(DEMO_SPECS / "extended-resources_mig-1g-12gb.yaml")]
    first = kubectl_dra("migrate", "-f", *inputs, *flags)
    assert first.returncode == 0, first.stderr
    (tmp_path / "once.yaml").write_text(first.stdout)
    second = kubectl_dra("migrate", "-f", str(tmp_path / "once.yaml"), *flags)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    again = kubectl_dra("migrate", "-f", *inputs, *flags)
    assert again.stdout == first.stdout
    assert again.stderr == first.stderr


def test_json_output_is_a_list_that_migrates_to_itself() -> None:
    first = kubectl_dra("migrate", "-f", str(SEED), "-o", "json")
    assert first.returncode == 0, first.stderr
    listing = json.loads(first.stdout)
    assert listing["kind"] == "List"
    assert len(listing["items"]) == 5
    second = kubectl_dra("migrate", "-f", "-", "-o", "json", stdin=first.stdout)
    assert json.loads(second.stdout) == listing


def test_every_migrated_object_round_trips_through_the_strict_v1_models() -> None:
    result = migrate_documents(read_documents([str(SEED)]))
    for obj in result.objects:
        if obj["apiVersion"] == "resource.k8s.io/v1":
            assert to_plain(parse_object(obj, validate=True)) == obj


def _demo_files() -> list[Path]:
    files = sorted(DEMO_SPECS.glob("*.yaml"))
    assert files, DEMO_SPECS
    return files


@pytest.mark.parametrize("path", _demo_files(), ids=lambda p: p.name)
def test_nvidia_demo_specs_pass_through_unchanged(path: Path) -> None:
    docs = read_documents([str(path)])
    result = migrate_documents(docs)
    assert not result.errors
    for doc, obj in zip(docs, result.objects, strict=True):
        if doc.data.get("apiVersion") == "resource.k8s.io/v1beta1":
            assert obj["apiVersion"] == "resource.k8s.io/v1"
        else:
            assert obj == doc.data


@pytest.mark.parametrize("number", [1, 4, 5])
def test_v1beta1_quickstarts_migrate_to_their_v1_twins(number: int) -> None:
    beta = FIXTURES / "nvidia-v1beta1" / f"quickstart_v1beta1_gpu-test{number}.yaml"
    result = migrate_documents(read_documents([str(beta)]))
    v1 = read_documents([str(DEMO_SPECS / f"quickstart_v1_gpu-test{number}.yaml")])
    assert result.objects == [d.data for d in v1]
    assert migrate_documents(docs_of(*result.objects)).objects == result.objects


def test_beta_claims_templates_classes_and_slices_convert_to_v1() -> None:
    request = {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 2}
    alt = {"name": "alt", "firstAvailable": [{"name": "a", "deviceClassName": "mig.nvidia.com"}]}
    claim = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": [request, alt]}},
    }
    slice_ = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "n",
            "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "basic": {"capacity": {"memory": {"value": "1Gi"}}}}],
        },
    }
    dclass = {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceClass",
        "metadata": {"name": "x"},
        "spec": {"selectors": [{"cel": {"expression": "true"}}]},
    }
    out_claim, out_slice, out_class = migrated(claim, slice_, dclass)
    assert out_claim["spec"]["devices"]["requests"] == [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}},
        alt,
    ]
    assert out_slice["spec"]["devices"] == [
        {"name": "gpu-0", "capacity": {"memory": {"value": "1Gi"}}}
    ]
    assert out_class == {**dclass, "apiVersion": "resource.k8s.io/v1"}
    for obj in (out_claim, out_slice, out_class):
        assert to_plain(parse_object(obj, validate=True)) == obj
    assert migrated(out_claim, out_slice, out_class) == [out_claim, out_slice, out_class]


def test_to_claims_rewrites_device_plugin_pods_like_the_scheduler_names_requests() -> None:
    # Requests are named like the scheduler's: the index among the container's sorted
    # requests (cpu sorts before nvidia.com/gpu).
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "containers": [
                {"name": "a", "resources": {"limits": {"nvidia.com/gpu": 2, "cpu": "1"}}},
                {"name": "b", "resources": {"requests": {"nvidia.com/gpu": "1"}}},
            ]
        },
    }
    tmpl, out = migrated(pod, claims=True)
    assert tmpl == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "p-extended-resources", "namespace": "ns"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "container-0-request-1",
                            "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2},
                        },
                        {
                            "name": "container-1-request-0",
                            "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1},
                        },
                    ]
                }
            }
        },
    }
    assert out["spec"] == {
        "containers": [
            {
                "name": "a",
                "resources": {
                    "limits": {"cpu": "1"},
                    "claims": [{"name": "extended-resources", "request": "container-0-request-1"}],
                },
            },
            {
                "name": "b",
                "resources": {
                    "claims": [{"name": "extended-resources", "request": "container-1-request-0"}]
                },
            },
        ],
        "resourceClaims": [
            {"name": "extended-resources", "resourceClaimTemplateName": "p-extended-resources"}
        ],
    }
    assert to_plain(parse_object(tmpl, validate=True)) == tmpl
    assert migrated(tmpl, out, claims=True) == [tmpl, out]


def test_to_claims_uses_the_input_class_for_other_extended_resources() -> None:
    docs = read_documents([str(DEMO_SPECS / "extended-resources_mig-1g-12gb.yaml")])
    result = migrate_documents(docs, claims=True)
    (tmpl,) = by_kind(result.objects, "ResourceClaimTemplate")
    (req,) = tmpl["spec"]["spec"]["devices"]["requests"]
    assert req["exactly"] == {"deviceClassName": "mig-1g-12gb.gpu.nvidia.com", "count": 1}


def test_legacy_claim_template_and_claim_parameters() -> None:
    config = {
        "apiVersion": "gpu.nvidia.com/v1",
        "kind": "NvidiaGPUConfig",
        "metadata": {"name": "big", "namespace": "ns"},
        "spec": {"memory": "80Gi", "sharing": {"strategy": "MPS"}},
    }
    tmpl = {
        "apiVersion": "resource.k8s.io/v1alpha2",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "ns"},
        "spec": {
            "spec": {
                "resourceClassName": "gpu.nvidia.com",
                "parametersRef": {
                    "apiGroup": "gpu.nvidia.com",
                    "kind": "NvidiaGPUConfig",
                    "name": "big",
                },
            }
        },
    }
    (out,) = migrated(config, tmpl)
    assert out["spec"]["spec"]["devices"] == {
        "requests": [
            {
                "name": "gpu",
                "exactly": {
                    "deviceClassName": "gpu.nvidia.com",
                    "selectors": [
                        {
                            "cel": {
                                "expression": "device.capacity['gpu.nvidia.com'].memory"
                                ".compareTo(quantity('80Gi')) >= 0"
                            }
                        }
                    ],
                },
            }
        ],
        "config": [
            {
                "requests": ["gpu"],
                "opaque": {
                    "driver": "gpu.nvidia.com",
                    "parameters": {
                        "apiVersion": "resource.nvidia.com/v1beta1",
                        "kind": "GpuConfig",
                        "sharing": {"strategy": "MPS"},
                    },
                },
            }
        ],
    }
    assert to_plain(parse_object(out, validate=True)) == out
    assert migrated(out) == [out]


def test_mig_true_selects_mig_devices() -> None:
    config = {
        "apiVersion": "gpu.nvidia.com/v1",
        "kind": "NvidiaGPUConfig",
        "metadata": {"name": "mig"},
        "spec": {"mig": True, "computeCapability": 9},
    }
    (out,) = migrated(config)
    assert [s["cel"]["expression"] for s in out["spec"]["selectors"]] == [
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
        "device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('9.0.0')) >= 0",
    ]


BAD_INPUTS = [
    pytest.param(
        "apiVersion: gpu.nvidia.com/v1\nkind: NvidiaGPUConfig\nmetadata: {name: c}\n"
        "spec: {memory: 40Gi, eccRequired: true}\n",
        "NvidiaGPUConfig c: spec.eccRequired: unknown field 'eccRequired'",
        id="unknown-config-field",
    ),
    pytest.param(
        "apiVersion: resource.k8s.io/v1beta2\nkind: ResourceClass\nmetadata: {name: fpga}\n"
        "driverName: fpga.example.com\n",
        "ResourceClass fpga: driverName: driver 'fpga.example.com' is not this driver",
        id="other-driver",
    ),
    pytest.param(
        "apiVersion: resource.k8s.io/v1beta2\nkind: ResourceClass\nmetadata: {name: a}\n"
        "driverName: gpu.nvidia.com\nparametersRef: {apiGroup: gpu.nvidia.com, "
        "kind: NvidiaGPUConfig, name: missing}\n",
        "ResourceClass a: parametersRef.name: NvidiaGPUConfig 'missing' is not in the input",
        id="missing-config",
    ),
    pytest.param(
        "apiVersion: gpu.nvidia.com/v1\nkind: NvidiaGPUConfig\nmetadata: {name: c}\n"
        "spec: {sharing: {strategy: TimeSlicing, timeSlicingConfig: {interval: often}}}\n",
        "NvidiaGPUConfig c: spec.sharing.timeSlicingConfig.interval: 'often' is not a duration",
        id="bad-interval",
    ),
    pytest.param(
        "apiVersion: gpu.nvidia.com/v1\nkind: NvidiaGPUConfig\nmetadata: {name: c}\n"
        "spec: {sharing: {strategy: vGPU}}\n",
        "NvidiaGPUConfig c: spec.sharing.strategy: unsupported strategy 'vGPU'",
        id="bad-strategy",
    ),
    pytest.param(
        "apiVersion: resource.k8s.io/v1alpha2\nkind: ResourceClaim\nmetadata: {name: c}\n"
        "spec: {resourceClassName: gpu.nvidia.com, allocationMode: Sometimes}\n",
        "ResourceClaim c: spec.allocationMode: unknown value 'Sometimes'",
        id="bad-allocation-mode",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_INPUTS)
def test_unexpressible_legacy_objects_are_errors_and_nothing_is_written(
    tmp_path: Path, text: str, message: str
) -> None:
    good = (SEED / "claim-and-pod.yaml").read_text()
    path = tmp_path / "in.yaml"
    path.write_text(good + "---\n" + text)
    proc = kubectl_dra("migrate", "-f", str(path))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert message in proc.stderr, proc.stderr
    assert proc.stderr.count(message) == 1
    assert "1 object(s) cannot be migrated; nothing written" in proc.stderr


def test_unknown_kinds_pass_through_with_a_note() -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "x": [1]}
    result = migrate_documents(docs_of(obj))
    assert result.objects == [obj]
    (note,) = result.notes
    assert "passed through unchanged" in note.message
    assert note.object_ref == "Widget w"


@pytest.mark.parametrize(
    ("text", "name"),
    [("5ms", "Medium"), ("1ms", "Short"), ("1200us", "Short"), ("1500us", "Default"),
     ("2ms", "Default"), ("30ms", "Long"), ("Long", "Long"), ("1s", "Long")],
)  # fmt: skip
def test_time_slice_durations_map_to_the_nearest_level(text: str, name: str) -> None:
    assert nearest_interval(text)[0] == name


def test_durations_parse_like_go() -> None:
    assert parse_duration_us("1.5ms") == 1500
    assert parse_duration_us("1ms500us") == 1500
    for bad in ("", "5", "ms", "0ms", "-1ms"):
        with pytest.raises(DurationError):
            parse_duration_us(bad)


def test_loaded_documents_of_migrated_yaml_equal_the_objects() -> None:
    result = migrate_documents(read_documents([str(SEED)]))
    from dra_api_types.codec import dump_all

    assert load_documents(dump_all(result.objects)) == result.objects


def test_validate_calls_no_legacy_object_valid_and_points_at_migrate() -> None:
    proc = kubectl_dra("validate", "-f", str(SEED))
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    expected = {
        "ResourceClass gpu-nvidia-a100: kind:": "resource.k8s.io/v1 DeviceClass",
        "NvidiaGPUConfig a100-config: kind:": "GpuConfig",
        "NvidiaGPUConfig shared-gpu-config: kind:": "GpuConfig",
        "ResourceClaim ml-training/my-gpu-claim: spec.resourceClassName:": "spec.devices.requests",
        "Pod ?: spec.containers[0].resourceClaims:": "resources.claims",
    }
    for head, replaced in expected.items():
        (line,) = [x for x in lines if head in x]
        assert replaced in line
        assert "`kubectl dra migrate -f " in line
    assert lines[-1] == "5 problem(s) in 6 object(s), 1 not checked (Pod: nothing DRA to check)"
    assert "object(s) valid" not in proc.stdout


def test_validate_converts_beta_objects_and_checks_them_like_v1(tmp_path: Path) -> None:
    good = FIXTURES / "nvidia-v1beta1" / "quickstart_v1beta1_gpu-test1.yaml"
    proc = kubectl_dra("validate", "-f", str(good))
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.splitlines()[-1].startswith("3 object(s) valid, 1 not checked")
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata: {name: c}\n"
        "spec:\n  devices:\n    requests:\n    - {name: g, deviceClassName: gpu.nvidia.com,"
        " count: -1, selectors: [{cel: {expression: 'device.'}}]}\n"
    )
    proc = kubectl_dra("validate", "-f", str(bad))
    assert proc.returncode == 1
    assert "ResourceClaim c: spec.devices.requests[0].exactly.count" in proc.stdout
    assert "spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: " in (
        proc.stdout
    )
