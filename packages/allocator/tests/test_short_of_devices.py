"""Nodes provably short of devices are not searched when asked (``kubectl dra explain``),
and the outcome is still the search's: errors the search would meet are still met."""

from __future__ import annotations

import re

import pytest
from case_cluster import case_cluster
from dra_allocator.allocator import Unsatisfiable
from dra_allocator.errors import SelectorError
from dra_allocator.features import Features


def test_a_node_short_of_devices_is_not_searched_when_asked() -> None:
    case = {
        "slices": [{"name": "s", "node": "n1", "devices": [{"name": "g0"}, {"name": "g1"}]}],
        "claims": [{"name": "c", "requests": [{"name": "gpu", "count": 3}]}],
    }
    cluster, claims = case_cluster(case)
    node = cluster.node("n1")
    searched = cluster.allocate_on(claims, node)
    assert isinstance(searched, Unsatisfiable)
    assert cluster.allocator.last_invocations > 0
    skipped = cluster.allocate_on(claims, node, skip_hopeless=True)
    assert skipped == searched
    assert cluster.allocator.last_invocations == 0


def test_a_short_node_whose_device_fails_a_selector_is_still_searched() -> None:
    # Two devices for three: short, but g1 lacks the attribute the selector reads, and the
    # scheduler's search meets that error, so explain must report it too.
    case = {
        "slices": [
            {
                "name": "s",
                "node": "n1",
                "devices": [{"name": "g0", "attributes": {"model": "x"}}, {"name": "g1"}],
            }
        ],
        "claims": [
            {
                "name": "c",
                "requests": [
                    {
                        "name": "gpu",
                        "count": 3,
                        "selectors": ['device.attributes["gpu.example.com"].model == "x"'],
                    }
                ],
            }
        ],
    }
    cluster, claims = case_cluster(case)
    with pytest.raises(SelectorError, match=re.escape("gpu.example.com/n1/g1")):
        cluster.allocate_on(claims, cluster.node("n1"), skip_hopeless=True)


@pytest.mark.parametrize("kube_minor", [34, 35, 36, 37])
def test_a_shareable_device_is_never_proven_short(kube_minor: int) -> None:
    # One shareable device with room for three picks of 1 core, and a request for three:
    # whatever the release's search makes of it, skipping must not change it.
    case = {
        "slices": [
            {
                "name": "s",
                "node": "n1",
                "devices": [
                    {"name": "g0", "allowMultipleAllocations": True, "capacity": {"cores": "4"}}
                ],
            }
        ],
        "claims": [
            {
                "name": "c",
                "requests": [{"name": "gpu", "count": 3, "capacity": {"requests": {"cores": "1"}}}],
            }
        ],
    }
    outcomes = []
    for skip in (False, True):
        cluster, claims = case_cluster(case, features=Features(kube_minor=kube_minor))
        outcomes.append(cluster.allocate_on(claims, cluster.node("n1"), skip_hopeless=skip))
    assert outcomes[0] == outcomes[1]
