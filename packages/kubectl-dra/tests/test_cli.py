"""``kubectl-dra`` run as the installed console script on fixture manifests."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

FIXTURES = Path(__file__).parent / "fixtures" / "cli"
SCRIPT = Path(sys.executable).with_name("kubectl-dra")


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the console script with the fixture directory as working directory."""
    assert SCRIPT.exists(), f"console script missing: {SCRIPT} (uv sync --all-packages)"
    return subprocess.run(
        [str(SCRIPT), *args],
        cwd=FIXTURES,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
        check=False,
    )


def pinned(node: str) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]
    }


CLASS_CONFIG = {
    "source": "FromClass",
    "opaque": {
        "driver": "gpu.nvidia.com",
        "parameters": {
            "apiVersion": "resource.nvidia.com/v1beta1",
            "kind": "GpuConfig",
            "sharing": {"strategy": "TimeSlicing"},
        },
    },
}


def test_allocate_json_exact_shape_claims_allocated_together() -> None:
    # "h100" only fits on node-b, so both claims (one pod) land there, although
    # "single" alone would fit on node-a, the first node by name.
    proc = run("allocate", "-f", "cluster.yaml", "claims.yaml", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "claims": {
            "team-a/single": {
                "allocated": True,
                "node": "node-b",
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "request": "gpu",
                                "driver": "gpu.nvidia.com",
                                "pool": "node-b",
                                "device": "gpu-0",
                            }
                        ],
                        "config": [CLASS_CONFIG],
                    },
                    "nodeSelector": pinned("node-b"),
                },
            },
            "team-a/h100": {
                "allocated": True,
                "node": "node-b",
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "request": "gpu",
                                "driver": "gpu.nvidia.com",
                                "pool": "node-b",
                                "device": "gpu-1",
                            }
                        ],
                        "config": [CLASS_CONFIG],
                    },
                    "nodeSelector": pinned("node-b"),
                },
            },
        }
    }


def test_allocate_kube_version_selects_release_behaviour() -> None:
    # 1.36 keeps the request list of a class config that covers every request; 1.37 drops it.
    new = run("allocate", "-f", "cluster.yaml", "-f", "claims.yaml", "-o", "json")
    old = run(
        "allocate",
        "-f",
        "cluster.yaml",
        "-f",
        "claims.yaml",
        "-o",
        "json",
        "--kube-version",
        "1.36",
    )
    assert new.returncode == old.returncode == 0, (new.stderr, old.stderr)
    new_config = json.loads(new.stdout)["claims"]["team-a/single"]["allocation"]["devices"]
    old_config = json.loads(old.stdout)["claims"]["team-a/single"]["allocation"]["devices"]
    assert new_config["config"] == [CLASS_CONFIG]
    assert old_config["config"] == [{**CLASS_CONFIG, "requests": ["gpu"]}]
    refused = run("allocate", "-f", "cluster.yaml", "--kube-version", "1.30")
    assert refused.returncode == 2
    assert "--kube-version: the allocator of Kubernetes 1.30 is not modelled" in refused.stderr
    # 1.34's allocator differs too much (counters per slice, invalid pools fail the claim,
    # no tolerations in results): refused, naming what is modelled.
    older = run("allocate", "-f", "cluster.yaml", "--kube-version", "1.34")
    assert older.returncode == 2
    assert "Kubernetes 1.34 is not modelled (known: 1.35, 1.36, 1.37)" in older.stderr


def test_allocate_single_claim_takes_first_node_by_name() -> None:
    proc = run(
        "allocate", "-f", "cluster.yaml", "claims.yaml", "--claim", "team-a/single", "-o", "json"
    )
    assert proc.returncode == 0, proc.stderr
    entry = json.loads(proc.stdout)["claims"]["team-a/single"]
    assert entry["node"] == "node-a"
    assert entry["allocation"]["devices"]["results"][0]["device"] == "gpu-0"


def test_allocate_on_named_node() -> None:
    proc = run(
        "allocate",
        "-f",
        "cluster.yaml",
        "claims.yaml",
        "--claim",
        "team-a/single",
        "--node",
        "node-b",
        "-o",
        "json",
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["claims"]["team-a/single"]["node"] == "node-b"


def test_allocate_directory_input_and_yaml_output(tmp_path: Path) -> None:
    nested = tmp_path / "manifests" / "claims"
    nested.mkdir(parents=True)
    shutil.copy(FIXTURES / "cluster.yaml", tmp_path / "manifests" / "cluster.yaml")
    shutil.copy(FIXTURES / "claims.yaml", nested / "claims.yml")
    (nested / "notes.txt").write_text("not a manifest", encoding="utf-8")
    proc = run("allocate", "-f", str(tmp_path / "manifests"))
    assert proc.returncode == 0, proc.stderr
    report = yaml.safe_load(proc.stdout)
    assert set(report["claims"]) == {"team-a/single", "team-a/h100"}
    assert all(c["allocated"] for c in report["claims"].values())


def test_allocate_unsatisfiable_exit_1_with_reasons() -> None:
    proc = run("allocate", "-f", "cluster.yaml", "too-big.yaml", "-o", "json")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    entry = report["claims"]["team-a/three-gpus"]
    assert set(entry) == {"allocated", "reasons"}
    assert entry["allocated"] is False
    assert entry["reasons"] == [
        "nodes node-a, node-b: request gpus: needs 3 device(s) of class gpu.nvidia.com, 2 usable"
    ]


def test_allocate_reasons_name_the_holding_claims() -> None:
    proc = run("allocate", "-f", "cluster.yaml", "held.yaml", "-o", "json")
    assert proc.returncode == 1
    reasons = json.loads(proc.stdout)["claims"]["team-a/waiting"]["reasons"]
    assert any("held by claim(s) team-b/holder-1 on 2 devices" in r for r in reasons)
    assert any("held by claim(s) team-b/holder-2 on 2 devices" in r for r in reasons)


def test_allocate_default_claims_skip_allocated_ones() -> None:
    proc = run("allocate", "-f", "cluster.yaml", "held.yaml", "-o", "json")
    assert set(json.loads(proc.stdout)["claims"]) == {"team-a/waiting"}


def test_allocate_unknown_class_exit_2_names_object_and_field() -> None:
    proc = run("allocate", "-f", "cluster.yaml", "unknown-class.yaml", "-o", "json")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "ResourceClaim team-a/typo" in proc.stderr
    assert "spec.devices.requests[0].exactly.deviceClassName" in proc.stderr
    assert "gpu.nvidia.con" in proc.stderr


def test_allocate_unknown_claim_and_bad_feature_exit_2() -> None:
    proc = run("allocate", "-f", "cluster.yaml", "--claim", "team-a/nope")
    assert proc.returncode == 2
    assert "team-a/nope" in proc.stderr
    proc = run("allocate", "-f", "cluster.yaml", "claims.yaml", "--features", "DRANope")
    assert proc.returncode == 2
    assert "DRANope" in proc.stderr


def test_allocate_unparsable_input_exit_2() -> None:
    proc = run("allocate", "-f", "-", stdin="kind: [unclosed\n")
    assert proc.returncode == 2
    assert "error:" in proc.stderr
    proc = run("allocate", "-f", "no-such-file.yaml")
    assert proc.returncode == 2
    assert "no-such-file.yaml" in proc.stderr


def test_allocate_reads_beta_claims_as_v1_and_refuses_other_versions() -> None:
    # v1beta1 keeps request fields at the top level; the apiserver serves it as v1.
    beta = """
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {name: h100, namespace: team-a}
spec:
  devices:
    requests:
    - name: gpu
      deviceClassName: gpu.nvidia.com
      selectors:
      - cel:
          expression: "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"
"""
    v1 = run(
        "allocate",
        "-f",
        "cluster.yaml",
        "-f",
        "claims.yaml",
        "--claim",
        "team-a/h100",
        "-o",
        "json",
    )
    old = run("allocate", "-f", "cluster.yaml", "-f", "-", "-o", "json", stdin=beta)
    assert old.returncode == v1.returncode == 0, old.stderr
    assert json.loads(old.stdout) == json.loads(v1.stdout)
    alpha = beta.replace("v1beta1", "v1alpha3")
    refused = run("allocate", "-f", "cluster.yaml", "-f", "-", stdin=alpha)
    assert refused.returncode == 2
    assert "ResourceClaim" in refused.stderr
    assert "apiVersion" in refused.stderr
    assert "resource.k8s.io/v1alpha3 is not a version this tool reads" in refused.stderr


def test_allocate_features_switch_changes_outcome() -> None:
    claim = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: either, namespace: team-a}
spec:
  devices:
    requests:
    - name: gpu
      firstAvailable:
      - {name: one, deviceClassName: gpu.nvidia.com}
"""
    proc = run("allocate", "-f", "cluster.yaml", "-", "-o", "json", stdin=claim)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)["claims"]["team-a/either"]["allocation"]
    assert result["devices"]["results"][0]["request"] == "gpu/one"
    proc = run("allocate", "-f", "cluster.yaml", "-", "--features", "DRAAdminAccess", stdin=claim)
    assert proc.returncode == 2
    assert "DRAPrioritizedList" in proc.stderr


def test_explain_pod_offline_names_holders() -> None:
    proc = run("explain", "pod/trainer", "-n", "team-a", "-f", "cluster.yaml", "held.yaml")
    assert proc.returncode == 1, proc.stderr
    assert "ResourceClaim team-a/waiting: pending" in proc.stdout
    assert "fits on no node" in proc.stdout
    assert "held by claim(s) team-b/holder-1 on 2 devices" in proc.stdout


def test_explain_claim_offline_shows_pick() -> None:
    proc = run("explain", "resourceclaim/h100", "-n", "team-a", "-f", "cluster.yaml", "claims.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "fits on node node-b" in proc.stdout
    assert "gpu: gpu.nvidia.com/node-b/gpu-0" in proc.stdout
    # On node-a the selector is false, with the failing sub-expression.
    assert "request selector #0 is false on 2 devices" in proc.stdout


def test_explain_pod_rules_out_the_nodes_its_own_constraints_exclude() -> None:
    # The h100 claim fits only on node-b; the pod is pinned to node-a.
    pod = """
apiVersion: v1
kind: Pod
metadata: {name: pinned, namespace: team-a}
spec:
  nodeSelector: {kubernetes.io/hostname: node-a}
  containers: [{name: main, image: busybox}]
  resourceClaims: [{name: gpu, resourceClaimName: h100}]
"""
    proc = run(
        "explain", "pod/pinned", "-n", "team-a", "-f", "cluster.yaml", "claims.yaml", "-",
        stdin=pod,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert "Pod team-a/pinned: its own constraints rule out 1 node(s):" in lines
    assert (
        "  does not fit on node node-b: node(s) didn't match Pod's node affinity/selector" in lines
    )
    assert "  fits on no node" in lines
    assert "does not fit on 1 node(s) (node-a):" in proc.stdout


def test_explain_pod_rules_out_the_nodes_its_allocated_claim_excludes() -> None:
    # A claim the pod shares with a pod on node-a keeps it there; h100 fits only on node-b.
    shared = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "on-a", "namespace": "team-a"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": "gpu.nvidia.com",
                            "pool": "node-a",
                            "device": "gpu-0",
                        }
                    ]
                },
                "nodeSelector": pinned("node-a"),
            }
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "second", "namespace": "team-a"},
        "spec": {
            "containers": [{"name": "main", "image": "busybox"}],
            "resourceClaims": [
                {"name": "a", "resourceClaimName": "h100"},
                {"name": "b", "resourceClaimName": "on-a"},
            ],
        },
    }
    objects = json.dumps({"apiVersion": "v1", "kind": "List", "items": [shared, pod]})
    proc = run(
        "explain", "pod/second", "-n", "team-a", "-f", "cluster.yaml", "claims.yaml", "-",
        stdin=objects,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert "ResourceClaim team-a/on-a: allocated (gpu: gpu.nvidia.com/node-a/gpu-0)" in lines
    assert (
        "  does not fit on node node-b: resourceclaim not available on the node "
        "(team-a/on-a is allocated for other nodes)" in lines
    )
    assert "  fits on no node" in lines
    assert "does not fit on 1 node(s) (node-a):" in proc.stdout


def test_explain_missing_claim_exit_2() -> None:
    proc = run("explain", "resourceclaim/nope", "-n", "team-a", "-f", "cluster.yaml")
    assert proc.returncode == 2
    assert "ResourceClaim team-a/nope" in proc.stderr


def test_validate_reports_field_paths() -> None:
    proc = run("validate", "-f", "invalid.yaml")
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert any(
        "DeviceClass broken-cel: spec.selectors[0].cel.expression: Invalid value: " in line
        and "compilation failed: ERROR: <input>:" in line
        for line in lines
    )
    assert any(
        "ResourceClaim team-a/bad-count: spec.devices.requests[0].exactly.count" in line
        for line in lines
    )
    assert any(
        "spec.devices.config[0].opaque.parameters.sharing.strategy" in line for line in lines
    )


def test_validate_refuses_a_selector_over_the_api_servers_cost_limit() -> None:
    proc = run("validate", "-f", "invalid.yaml")
    lines = [line for line in proc.stdout.splitlines() if "too-expensive" in line]
    assert lines == [
        "invalid.yaml:41: DeviceClass too-expensive: spec.selectors[1].cel.expression: "
        "Forbidden: too complex, exceeds cost limit "
        "(estimated worst case 23337219, limit 1000000)"
    ], proc.stdout


@pytest.mark.parametrize(
    ("flags", "refused"),
    [
        # The release's defaults: DRAConsumableCapacity (beta) on, DRAListTypeAttributes off.
        ((), ["list-attributes"]),
        (("--kube-version", "1.36"), ["list-attributes"]),
        # 1.35: DRAConsumableCapacity is alpha (off), DRAListTypeAttributes does not exist.
        (("--kube-version", "1.35"), ["shared-gpus", "list-attributes"]),
        (("--kube-version", "1.35", "--features", "DRAConsumableCapacity"), ["list-attributes"]),
        (("--kube-version", "1.35", "--features", "all"), ["list-attributes"]),
        (("--features", "DRAConsumableCapacity=false"), ["shared-gpus", "list-attributes"]),
        (("--features", "DRAConsumableCapacity,DRAListTypeAttributes"), []),
        (("--features", "DRAListTypeAttributes"), ["shared-gpus"]),
        (("--features", "all"), []),
        (("--features", "none"), ["shared-gpus", "list-attributes"]),
    ],
)
def test_validate_declares_what_the_gates_enable(
    flags: tuple[str, ...], refused: list[str]
) -> None:
    proc = run("validate", "-f", "gated.yaml", *flags)
    named = [name for name in ("shared-gpus", "list-attributes") if name in proc.stdout]
    assert named == refused, proc.stdout
    assert proc.returncode == (1 if refused else 0)
    if "shared-gpus" in refused:
        assert "undefined field 'allowMultipleAllocations'" in proc.stdout
    if "list-attributes" in refused:
        assert "undeclared reference to 'includes'" in proc.stdout


def test_validate_refuses_an_unmodelled_release_or_gate() -> None:
    assert run("validate", "-f", "gated.yaml", "--kube-version", "1.33").returncode == 2
    assert run("validate", "-f", "gated.yaml", "--features", "DRANope").returncode == 2
    flags = ("--kube-version", "1.35", "--features", "DRAListTypeAttributes")
    unknown = run("validate", "-f", "gated.yaml", *flags)
    assert unknown.returncode == 2
    assert "DRAListTypeAttributes does not exist in Kubernetes 1.35" in unknown.stderr


def test_validate_clean_files_exit_0() -> None:
    proc = run("validate", "-f", "cluster.yaml", "claims.yaml", "held.yaml")
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.splitlines()[-1].startswith("9 object(s) valid"), proc.stdout


def test_allocate_with_an_already_allocated_claim_of_the_pod() -> None:
    # holder-1 is allocated on node-a, so the pod can only run there; node-a is full.
    proc = run(
        "allocate",
        "-f",
        "cluster.yaml",
        "held.yaml",
        "--claim",
        "team-b/holder-1",
        "team-a/waiting",
        "-o",
        "json",
    )
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)["claims"]
    assert report["team-b/holder-1"]["allocated"] is True
    assert report["team-b/holder-1"]["node"] == "node-a"
    assert report["team-a/waiting"]["allocated"] is False
    assert all(r.startswith("node node-a:") for r in report["team-a/waiting"]["reasons"])


def test_allocate_applies_device_taint_rules() -> None:
    # The kube-scheduler honours DeviceTaintRules (found by the e2e differential test).
    objects = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "x"},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "x.example.com"'}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "s"},
            "spec": {
                "driver": "x.example.com",
                "nodeName": "n1",
                "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "d0"}, {"name": "d1"}],
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1beta2",
            "kind": "DeviceTaintRule",
            "metadata": {"name": "maint-d0"},
            "spec": {
                "deviceSelector": {"driver": "x.example.com", "device": "d0"},
                "taint": {"key": "maint", "effect": "NoSchedule"},
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "x"}}]}},
        },
    ]
    stdin = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    proc = run("allocate", "-f", "-", "-o", "json", stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["claims"]["ns/c"]["allocation"]["devices"]["results"]
    assert [r["device"] for r in results] == ["d1"]
