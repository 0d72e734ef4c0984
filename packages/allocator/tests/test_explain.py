"""Diagnostics: why a claim does not fit, grouped and counted, and what would be picked."""

from __future__ import annotations

from typing import Any

from case_cluster import case_cluster
from dra_allocator.explain import ClaimDiagnosis, diagnose
from dra_allocator.reasons import reasons_of


def diagnosis(case: dict[str, Any], *, claim: str = "default/c") -> ClaimDiagnosis:
    cluster, claims = case_cluster(case)
    target = [c for c in claims if c.key == claim]
    return diagnose(cluster, target)[0]


def only_node(diag: ClaimDiagnosis) -> list[str]:
    assert len(diag.nodes) == 1
    assert not diag.nodes[0].allocatable
    return diag.nodes[0].reasons


def test_fits_reports_the_pick() -> None:
    diag = diagnosis(
        {
            "slices": [{"name": "s", "node": "n1", "devices": [{"name": "g0"}]}],
            "claims": [{"name": "c"}],
        }
    )
    assert diag.nodes[0].allocatable
    assert diag.nodes[0].picks == ["gpu: gpu.example.com/n1/g0"]


def test_no_device_of_the_class() -> None:
    reasons = only_node(
        diagnosis(
            {
                "classes": [{"name": "gpu", "selectors": ['device.driver == "other.example.com"']}],
                "slices": [
                    {"name": "s", "node": "n1", "devices": [{"name": "g0"}, {"name": "g1"}]}
                ],
                "claims": [{"name": "c"}],
            }
        )
    )
    assert reasons[0] == "request gpu: needs 1 device(s) of class gpu, 0 usable"
    assert reasons[1].strip().startswith("class gpu selector #0 is false on 2 devices")
    assert "device.driver" in reasons[1]


def test_selector_false_counted_with_example_and_subexpression() -> None:
    reasons = only_node(
        diagnosis(
            {
                "slices": [
                    {
                        "name": "s",
                        "node": "n1",
                        "devices": [
                            {"name": "g0", "attributes": {"memory": 40}},
                            {"name": "g1", "attributes": {"memory": 40}},
                            {"name": "g2", "attributes": {"memory": 40}},
                        ],
                    }
                ],
                "claims": [
                    {
                        "name": "c",
                        "requests": [
                            {
                                "name": "gpu",
                                "selectors": [
                                    'device.driver == "gpu.example.com" && '
                                    'device.attributes["gpu.example.com"].memory >= 80'
                                ],
                            }
                        ],
                    }
                ],
            }
        )
    )
    line = reasons[1].strip()
    assert line.startswith("request selector #0 is false on 3 devices (e.g. gpu.example.com/n1/g0:")
    assert "memory >= 80" in line


def test_missing_attribute_is_reported() -> None:
    diag = diagnosis(
        {
            "slices": [{"name": "s", "node": "n1", "devices": [{"name": "g0"}]}],
            "claims": [
                {
                    "name": "c",
                    "requests": [
                        {
                            "name": "gpu",
                            "selectors": ['device.attributes["gpu.example.com"].model == "x"'],
                        }
                    ],
                }
            ],
        }
    )
    # The scheduler aborts with a CEL runtime error; the diagnosis says so and which device.
    error = diag.nodes[0].error or ""
    assert "CEL runtime error" in error
    assert "gpu.example.com/n1/g0" in error
    assert "request selector #0 fails:" in diag.nodes[0].reasons[1]
    assert "model" in diag.nodes[0].reasons[1]


def test_taints_and_holders_grouped() -> None:
    reasons = only_node(
        diagnosis(
            {
                "slices": [
                    {
                        "name": "s",
                        "node": "n1",
                        "devices": [
                            {
                                "name": "g0",
                                "taints": [{"key": "xid", "value": "79", "effect": "NoSchedule"}],
                            },
                            {
                                "name": "g1",
                                "taints": [{"key": "xid", "value": "79", "effect": "NoSchedule"}],
                            },
                            {"name": "g2"},
                        ],
                    }
                ],
                "claims": [
                    {"name": "c"},
                    {
                        "name": "other/holder",
                        "allocation": {
                            "devices": {
                                "results": [
                                    {
                                        "request": "gpu",
                                        "driver": "gpu.example.com",
                                        "pool": "n1",
                                        "device": "g2",
                                    }
                                ]
                            }
                        },
                    },
                ],
            }
        )
    )
    joined = "\n".join(reasons)
    assert "tainted xid=79:NoSchedule, not tolerated on 2 devices" in joined
    assert "held by claim(s) other/holder on 1 device" in joined


def test_incomplete_pool_is_named() -> None:
    reasons = only_node(
        diagnosis(
            {
                "slices": [
                    {
                        "name": "s",
                        "node": "n1",
                        "pool": "p",
                        "count": 3,
                        "devices": [{"name": "g0"}],
                    }
                ],
                "claims": [{"name": "c"}],
            }
        )
    )
    assert reasons[0].startswith("pool gpu.example.com/p is incomplete")


def test_unmet_constraint_is_named() -> None:
    reasons = only_node(
        diagnosis(
            {
                "slices": [
                    {
                        "name": "s",
                        "node": "n1",
                        "devices": [
                            {"name": "g0", "attributes": {"numa": 0}},
                            {"name": "g1", "attributes": {"numa": 1}},
                        ],
                    }
                ],
                "claims": [
                    {
                        "name": "c",
                        "requests": [{"name": "gpu", "count": 2}],
                        "constraints": [{"matchAttribute": "gpu.example.com/numa"}],
                    }
                ],
            }
        )
    )
    assert reasons == [
        "constraint matchAttribute gpu.example.com/numa cannot be met by the usable devices "
        "(0 on 1, 1 on 1)"
    ]


def test_exhausted_counters_are_reported() -> None:
    reasons = only_node(
        diagnosis(
            {
                "slices": [
                    {
                        "name": "c",
                        "node": "n1",
                        "pool": "p",
                        "count": 2,
                        "sharedCounters": [{"name": "gpu-0", "counters": {"mem": {"value": "1"}}}],
                    },
                    {
                        "name": "d",
                        "node": "n1",
                        "pool": "p",
                        "count": 2,
                        "devices": [
                            {
                                "name": "m0",
                                "consumesCounters": [
                                    {"counterSet": "gpu-0", "counters": {"mem": {"value": "1"}}}
                                ],
                            },
                            {
                                "name": "m1",
                                "consumesCounters": [
                                    {"counterSet": "gpu-0", "counters": {"mem": {"value": "1"}}}
                                ],
                            },
                        ],
                    },
                ],
                "claims": [
                    {"name": "c"},
                    {
                        "name": "holder",
                        "allocation": {
                            "devices": {
                                "results": [
                                    {
                                        "request": "gpu",
                                        "driver": "gpu.example.com",
                                        "pool": "p",
                                        "device": "m0",
                                    }
                                ]
                            }
                        },
                    },
                ],
            }
        )
    )
    joined = "\n".join(reasons)
    assert "held by claim(s) default/holder on 1 device" in joined
    assert "shared counters exhausted (counter set gpu-0) on 1 device" in joined


def test_nodes_with_same_findings_are_grouped_in_reasons() -> None:
    diag = diagnosis(
        {
            "slices": [
                {"name": f"s{i}", "node": f"n{i}", "devices": [{"name": "g0"}]} for i in range(7)
            ],
            "claims": [{"name": "c", "requests": [{"name": "gpu", "count": 2}]}],
        }
    )
    assert reasons_of(diag) == [
        "nodes n0, n1, n2, n3, n4 and 2 more: request gpu: needs 2 device(s) of class gpu, 1 usable"
    ]
