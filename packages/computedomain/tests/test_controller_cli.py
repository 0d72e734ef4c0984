"""The controller's leader-election flags: NVIDIA's names, environment variables and defaults."""

from __future__ import annotations

import pytest
from dra_computedomain.controller_cli import build_parser, lease_lock
from dra_computedomain.names import LEASE_NAME


def test_lease_defaults_to_nvidias_binary_default_in_the_driver_namespace() -> None:
    args = build_parser().parse_args(["--namespace=driver-ns"])
    assert not args.leader_election
    assert lease_lock(args) == ("driver-ns", LEASE_NAME)
    assert LEASE_NAME == "nvidia-compute-domain-controller"


def test_nvidias_flag_names_set_the_lease_and_switch_election_on() -> None:
    args = build_parser().parse_args(
        [
            "--namespace=driver-ns",
            "--leader-election-enabled",
            "--leader-election-lease-lock-name=dra-driver-nvidia-gpu-controller",
            "--leader-election-lease-lock-namespace=elsewhere",
        ]
    )
    assert args.leader_election
    assert lease_lock(args) == ("elsewhere", "dra-driver-nvidia-gpu-controller")


def test_nvidias_environment_variables_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # NVIDIA's controller takes every leader-election setting from the environment too.
    monkeypatch.setenv("LEADER_ELECTION_ENABLED", "true")
    monkeypatch.setenv("LEADER_ELECTION_LEASE_LOCK_NAME", "my-lease")
    monkeypatch.setenv("LEADER_ELECTION_LEASE_LOCK_NAMESPACE", "lease-ns")
    args = build_parser().parse_args([])
    assert args.leader_election
    assert lease_lock(args) == ("lease-ns", "my-lease")


def test_our_older_flag_still_switches_election_on() -> None:
    assert build_parser().parse_args(["--leader-election"]).leader_election
