"""``kubectl dra allocate`` against the real kube-scheduler: same objects, same devices.

Each scenario creates a DeviceClass and ResourceSlices for a made-up driver on one node, then
pods with ResourceClaims one after the other; the real scheduler allocates them, and
``kubectl-dra allocate`` gets the same objects (earlier pods' claims as allocated, this pod's
claims as created). The whole allocation must be equal: results (request, driver, pool,
device, admin access, consumed capacity), configs, node selector, and the node.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from differential_support import Scenario, ScenarioSkipped, assert_agrees, run_scenario
from dra_e2e.handle import ClusterHandle
from plugin_slices import plugin_consumable_shares, plugin_dynamic_mig
from pool_scenarios import (
    binding_conditions,
    cel_runtime_error,
    consumable_capacity,
    consumable_policies,
    node_selector,
    partitionable,
    per_device_node_selection,
    pools,
    taint_rules,
    taints,
)
from random_scenarios import random_devices, random_partitions
from request_scenarios import (
    admin_access,
    all_mode,
    all_mode_with_held_devices,
    cel_quantity,
    distinct_attribute,
    first_available,
    held_by_other_claims,
    match_attribute,
    plain,
)

pytestmark = pytest.mark.e2e


SCENARIOS = [
    plain(),
    cel_quantity(),
    match_attribute(),
    distinct_attribute(),
    first_available(),
    all_mode(),
    held_by_other_claims(),
    admin_access(),
    all_mode_with_held_devices(),
    partitionable(),
    node_selector(),
    pools(),
    per_device_node_selection(),
    cel_runtime_error(),
    binding_conditions(),
    taints(),
    taint_rules(),
    consumable_capacity(),
    consumable_policies(),
    plugin_dynamic_mig(),
    plugin_consumable_shares(),
    *(random_devices(seed) for seed in (1, 2, 3)),
    *(random_partitions(seed) for seed in (1, 2, 3)),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_kubectl_dra_allocates_like_the_scheduler(
    scenario: Scenario, e2e_cluster: ClusterHandle, e2e_namespace: str, tmp_path: Path
) -> None:
    try:
        outcomes = run_scenario(e2e_cluster, scenario, namespace=e2e_namespace, workdir=tmp_path)
    except ScenarioSkipped as exc:
        pytest.skip(f"{scenario.name}: {exc}")
    assert outcomes, "the scenario ran no pod"
    if scenario.refused is not None:
        # The scenario is meant to exercise these outcomes: the scheduler must agree.
        refused = {i: o.refused for i, o in enumerate(outcomes) if o.refused is not None}
        assert refused == scenario.refused, f"pods the scheduler refused: {refused}"
    assert_agrees(outcomes)
