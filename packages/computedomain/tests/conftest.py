"""Shared fixtures: an in-memory API and ComputeDomain builders."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from template_bytes_api import TemplateBytesApi

DRIVER_NS = "dra-driver"


def domain_body(
    name: str = "cd1",
    namespace: str = "team-a",
    *,
    num_nodes: int = 2,
    template: str = "imex-channel-0",
    mode: str | None = None,
) -> dict[str, Any]:
    """A ComputeDomain as a user writes it."""
    channel: dict[str, Any] = {"resourceClaimTemplate": {"name": template}}
    if mode is not None:
        channel["allocationMode"] = mode
    return {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"numNodes": num_nodes, "channel": channel},
    }


@pytest.fixture
def api() -> TemplateBytesApi:
    """An empty in-memory API server (templates immutable as on a real one)."""
    return TemplateBytesApi()


@pytest.fixture(autouse=True)
def _log_everything() -> Iterator[None]:
    """Every log call builds its record (a reserved ``extra`` key fails the test)."""
    logger = logging.getLogger("dra_computedomain")
    old = logger.level
    logger.setLevel(logging.DEBUG)
    yield
    logger.setLevel(old)
