"""The plain line per short request (``dra_allocator.gaps``) and capacity shortfalls named."""

from __future__ import annotations

from typing import Any

from case_cluster import case_cluster
from dra_allocator.explain import ClaimDiagnosis, diagnose
from dra_allocator.gaps import request_summaries

MEM = "device.capacity['gpu.example.com'].memory.compareTo(quantity('{}')) >= 0"


def diagnosis(case: dict[str, Any], *, claim: str = "default/c") -> ClaimDiagnosis:
    cluster, claims = case_cluster(case)
    return diagnose(cluster, [c for c in claims if c.key == claim])[0]


def _gpu(name: str, memory: str) -> dict[str, Any]:
    return {"name": name, "capacity": {"memory": memory}}


def test_capacity_bound_names_the_nearest_device_across_nodes() -> None:
    diag = diagnosis(
        {
            "slices": [
                {"name": "a", "node": "n1", "devices": [_gpu("g0", "40Gi"), _gpu("g1", "81559Mi")]},
                {"name": "b", "node": "n2", "devices": [_gpu("g0", "79Gi")]},
            ],
            "claims": [
                {"name": "c", "requests": [{"name": "gpu", "selectors": [MEM.format("400Gi")]}]}
            ],
        }
    )
    assert request_summaries(diag) == [
        "request gpu: memory >= 400Gi: best device n1/g1 has 81559Mi"
    ]


def test_count_shortfall_names_the_node_with_most_usable_devices() -> None:
    diag = diagnosis(
        {
            "slices": [
                {"name": "a", "node": "n1", "devices": [{"name": "g0"}]},
                {"name": "b", "node": "n2", "devices": [{"name": "g0"}, {"name": "g1"}]},
            ],
            "claims": [{"name": "c", "requests": [{"name": "gpus", "count": 3}]}],
        }
    )
    assert request_summaries(diag) == [
        "request gpus: needs 3 device(s) of class gpu; best node n2 has 2 usable"
    ]


def test_no_summary_where_a_node_fits() -> None:
    diag = diagnosis(
        {
            "slices": [{"name": "a", "node": "n1", "devices": [{"name": "g0"}]}],
            "claims": [{"name": "c"}],
        }
    )
    assert request_summaries(diag) == []


def test_capacity_left_and_policy_named() -> None:
    shared = {
        "name": "g0",
        "allowMultipleAllocations": True,
        "capacity": {
            "memory": {
                "value": "80Gi",
                "requestPolicy": {"validRange": {"min": "10Gi", "step": "10Gi", "max": "40Gi"}},
            }
        },
    }
    holder = {
        "name": "holder",
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": "gpu.example.com",
                        "pool": "n1",
                        "device": "g0",
                        "shareID": "11111111-2222-3333-4444-555555555555",
                        "consumedCapacity": {"memory": "50Gi"},
                    }
                ]
            }
        },
    }
    short = {"name": "gpu", "capacity": {"requests": {"memory": "35Gi"}}}
    diag = diagnosis(
        {
            "slices": [{"name": "a", "node": "n1", "devices": [shared]}],
            "claims": [{"name": "c", "requests": [short]}, holder],
        }
    )
    assert diag.nodes[0].reasons[1].strip() == (
        "not enough memory left (requested 40Gi) on 1 device (e.g. gpu.example.com/n1/g0: "
        "30Gi of 80Gi left)"
    )
    too_big = {"name": "gpu", "capacity": {"requests": {"memory": "50Gi"}}}
    diag = diagnosis(
        {
            "slices": [{"name": "a", "node": "n1", "devices": [shared]}],
            "claims": [{"name": "c", "requests": [too_big]}],
        }
    )
    assert diag.nodes[0].reasons[1].strip() == (
        "capacity memory: request of 50Gi is outside the device's request policy on 1 device "
        "(e.g. gpu.example.com/n1/g0: 80Gi in all)"
    )
