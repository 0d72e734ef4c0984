"""``allocate`` and ``explain`` on the inputs people write: pods and workloads whose claims
come from ResourceClaimTemplates (NVIDIA's demos, the seed walkthrough), the chart's
DeviceClasses offline, and ``kubectl dra classes``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from dra_api_types.driver_classes import driver_device_classes
from kubectl_dra.cli import main

TESTS = Path(__file__).parent
REPO = TESTS.parents[2]
DEMO_SPECS = REPO / "packages" / "api-types" / "tests" / "fixtures" / "nvidia-demo-specs"
SEED = REPO / "deployments" / "helm" / "dra-driver-nvidia-gpu" / "files" / "seed"
SLICES = TESTS / "fixtures" / "fake-slices" / "a100-h100-v100.yaml"
WORKLOADS = TESTS / "fixtures" / "workloads"
CHART_CLASS_NOTE = (
    "note: DeviceClass gpu.nvidia.com: not in the input; using the one this driver's chart "
    "installs (kubectl dra classes prints it)"
)


def _note(ns: str, pod: str, entry: str, template: str, name: str) -> str:
    return (
        f"note: ResourceClaim {ns}/{name}: made from ResourceClaimTemplate {ns}/{template} for "
        f"Pod {ns}/{pod} (spec.resourceClaims {entry}); the resourceclaim controller names it "
        f"{pod}-{entry}-<5 random characters>, here derived from the names"
    )


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, list[str]]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


def _one_gpu(node: str) -> dict[str, Any]:
    return {
        "devices": {
            "results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": "gpu-0"}
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }


def test_allocate_gpu_test1_makes_one_claim_per_pod_and_schedules_them_in_turn(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # One GPU per node: pod1 takes node-a100's, so pod2 goes to the next node.
    code, out, err = _run(
        capsys,
        "allocate",
        "-f",
        str(SLICES),
        str(DEMO_SPECS / "quickstart_v1_gpu-test1.yaml"),
        "-o",
        "json",
    )
    assert code == 0
    assert json.loads(out) == {
        "claims": {
            "gpu-test1/pod1-gpu-qlmnf": {
                "allocated": True,
                "node": "node-a100",
                "allocation": _one_gpu("node-a100"),
            },
            "gpu-test1/pod2-gpu-lq2f8": {
                "allocated": True,
                "node": "node-h100",
                "allocation": _one_gpu("node-h100"),
            },
        },
        "pods": {
            "gpu-test1/pod1": {
                "allocated": True,
                "node": "node-a100",
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "pod1-gpu-qlmnf"}],
            },
            "gpu-test1/pod2": {
                "allocated": True,
                "node": "node-h100",
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "pod2-gpu-lq2f8"}],
            },
        },
    }
    assert err == [
        _note("gpu-test1", "pod1", "gpu", "single-gpu", "pod1-gpu-qlmnf"),
        _note("gpu-test1", "pod2", "gpu", "single-gpu", "pod2-gpu-lq2f8"),
        CHART_CLASS_NOTE,
    ]


def test_explain_template_pod_of_gpu_test1_offline(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(
        capsys,
        "explain",
        "pod/pod1",
        "-n",
        "gpu-test1",
        "-f",
        str(SLICES),
        str(DEMO_SPECS / "quickstart_v1_gpu-test1.yaml"),
    )
    assert code == 0
    assert out.splitlines() == [
        "ResourceClaim gpu-test1/pod1-gpu-qlmnf: pending",
        "  fits on node node-a100 (also fits on 2 more node(s)); would pick:",
        "    gpu: gpu.nvidia.com/node-a100/gpu-0",
    ]
    assert CHART_CLASS_NOTE in err


def test_explain_the_seed_walkthrough_pod(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "explain", "pod/gpu-test-pod", "-f", str(SLICES), str(SEED))
    assert code == 0
    assert out.splitlines() == [
        "ResourceClaim default/gpu-test-pod-gpu-claim-f7xxn: pending",
        "  fits on node node-a100 (also fits on 2 more node(s)); would pick:",
        "    gpu: gpu.nvidia.com/node-a100/gpu-0",
    ]
    assert err == [
        _note("default", "gpu-test-pod", "gpu-claim", "single-gpu", "gpu-test-pod-gpu-claim-f7xxn"),
        CHART_CLASS_NOTE,
    ]


def test_allocate_workloads_one_claim_per_replica_until_the_gpus_run_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _run(capsys, "allocate", "-f", str(SLICES), str(WORKLOADS), "-o", "json")
    assert code == 1
    report = json.loads(out)
    assert {pod: (e["allocated"], e.get("node")) for pod, e in report["pods"].items()} == {
        "team-a/db-0": (True, "node-a100"),
        "team-a/db-1": (True, "node-h100"),
        "team-a/train-kbngq": (True, "node-v100"),
        "team-a/train-k2nrt": (False, None),
    }
    assert report["pods"]["team-a/db-0"]["resourceClaimStatuses"] == [
        {"name": "gpu", "resourceClaimName": "db-0-gpu-lzrk7"}
    ]
    last = report["claims"]["team-a/train-k2nrt-gpu-qz6wj"]
    assert last["allocated"] is False
    assert last["reasons"][:2] == [
        "node node-a100: request gpu: needs 1 device(s) of class gpu.nvidia.com, 0 usable",
        "node node-a100: held by claim(s) team-a/db-0-gpu-lzrk7 on 1 device "
        "(e.g. gpu.nvidia.com/node-a100/gpu-0)",
    ]


def test_higher_priority_pods_are_scheduled_first(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    docs = list(yaml.safe_load_all((DEMO_SPECS / "quickstart_v1_gpu-test1.yaml").read_text()))
    for doc in docs:
        if doc and doc["kind"] == "Pod" and doc["metadata"]["name"] == "pod2":
            doc["spec"]["priority"] = 1000
    (tmp_path / "demo.yaml").write_text(yaml.safe_dump_all(docs))
    code, out, _ = _run(capsys, "allocate", "-f", str(SLICES), str(tmp_path), "-o", "json")
    assert code == 0
    pods = json.loads(out)["pods"]
    assert list(pods) == ["gpu-test1/pod2", "gpu-test1/pod1"]
    assert pods["gpu-test1/pod2"]["node"] == "node-a100"


HIGH = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "high"},
    "value": 1000,
}


def _demo_with_class_name(tmp_path: Path, class_name: str) -> Path:
    """gpu-test1 with pod2 naming ``class_name`` (as users write it: no spec.priority)."""
    docs = list(yaml.safe_load_all((DEMO_SPECS / "quickstart_v1_gpu-test1.yaml").read_text()))
    for doc in docs:
        if doc and doc["kind"] == "Pod" and doc["metadata"]["name"] == "pod2":
            doc["spec"]["priorityClassName"] = class_name
    demo = tmp_path / "demo.yaml"
    demo.write_text(yaml.safe_dump_all(docs))
    return demo


def test_priority_class_name_orders_pods_by_the_input_class_value(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    demo = _demo_with_class_name(tmp_path, "high")
    (tmp_path / "classes.yaml").write_text(yaml.safe_dump(HIGH))
    code, out, err = _run(
        capsys, "allocate", "-f", str(SLICES), str(demo), str(tmp_path / "classes.yaml"),
        "-o", "json",
    )  # fmt: skip
    assert code == 0
    pods = json.loads(out)["pods"]
    assert list(pods) == ["gpu-test1/pod2", "gpu-test1/pod1"]
    assert pods["gpu-test1/pod2"]["node"] == "node-a100"
    assert not [line for line in err if "priorityClassName" in line]


def test_a_missing_priority_class_is_said_with_pod_and_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = (
        "note: Pod gpu-test1/pod2: spec.priorityClassName: PriorityClass high is not in the "
        "input (the API server refuses a pod naming a missing class); scheduled with "
        "priority 0, pass the PriorityClass with -f"
    )
    demo = _demo_with_class_name(tmp_path, "high")
    code, out, err = _run(capsys, "allocate", "-f", str(SLICES), str(demo), "-o", "json")
    assert code == 0
    assert missing in err
    # Priority 0 like pod1: input order decides.
    assert list(json.loads(out)["pods"]) == ["gpu-test1/pod1", "gpu-test1/pod2"]
    code, out, err = _run(
        capsys, "explain", "pod/pod2", "-n", "gpu-test1", "-f", str(SLICES), str(demo)
    )
    assert code == 0, out
    assert missing in err


def test_a_missing_template_is_an_error_naming_pod_and_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    docs = list(yaml.safe_load_all((DEMO_SPECS / "quickstart_v1_gpu-test1.yaml").read_text()))
    kept = [d for d in docs if d and d["kind"] != "ResourceClaimTemplate"]
    (tmp_path / "demo.yaml").write_text(yaml.safe_dump_all(kept))
    code, out, err = _run(capsys, "allocate", "-f", str(SLICES), str(tmp_path))
    assert code == 2
    assert out == ""
    assert err == [
        "error: Pod gpu-test1/pod1, spec.resourceClaims[0].resourceClaimTemplateName: "
        "ResourceClaimTemplate gpu-test1/single-gpu is not in the input"
    ]


def test_a_class_in_the_input_is_used_and_no_chart_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The input's own gpu.nvidia.com (here: only H100s) wins over the chart's.
    own = driver_device_classes()[0]
    own["spec"]["selectors"].append(
        {"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName.contains('H100')"}}
    )
    (tmp_path / "class.yaml").write_text(yaml.safe_dump(own))
    code, out, err = _run(
        capsys,
        "allocate",
        "-f",
        str(SLICES),
        str(tmp_path),
        str(DEMO_SPECS / "quickstart_v1_gpu-test1.yaml"),
        "-o",
        "json",
    )
    assert code == 1
    assert CHART_CLASS_NOTE not in err
    assert json.loads(out)["pods"]["gpu-test1/pod1"]["node"] == "node-h100"


def test_classes_prints_the_chart_classes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "classes")
    assert code == 0
    assert list(yaml.safe_load_all(out)) == driver_device_classes()
    assert [c["metadata"]["name"] for c in driver_device_classes()] == [
        "gpu.nvidia.com",
        "mig.nvidia.com",
        "vfio.gpu.nvidia.com",
        "compute-domain-daemon.nvidia.com",
        "compute-domain-default-channel.nvidia.com",
    ]
    code, out, _ = _run(capsys, "classes", "-o", "json")
    assert json.loads(out) == {"apiVersion": "v1", "kind": "List", "items": driver_device_classes()}
