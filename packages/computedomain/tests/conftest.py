"""Shared fixtures: an in-memory API and ComputeDomain builders."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from template_bytes_api import TemplateBytesApi


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
