"""How many nodes the pytest plugin's clusters get: ``$DRA_E2E_NODES`` and ``e2e_nodes(N)``."""

from __future__ import annotations

import pytest
from dra_e2e.errors import E2EError
from dra_e2e.pytest_plugin import NODES_ENV, session_nodes, wanted_nodes


def test_the_session_cluster_has_one_node_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NODES_ENV, raising=False)
    assert session_nodes() == 1
    monkeypatch.setenv(NODES_ENV, "3")
    assert session_nodes() == 3


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_a_bad_session_node_count_is_named(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(NODES_ENV, value)
    with pytest.raises(E2EError, match=NODES_ENV):
        session_nodes()


def test_a_test_without_the_marker_wants_one_node(request: pytest.FixtureRequest) -> None:
    assert wanted_nodes(request.node) == 1


@pytest.mark.e2e_nodes(2)
def test_the_marker_asks_for_nodes(request: pytest.FixtureRequest) -> None:
    assert wanted_nodes(request.node) == 2


@pytest.mark.e2e_nodes("two")
def test_a_bad_marker_is_named(request: pytest.FixtureRequest) -> None:
    with pytest.raises(E2EError, match="e2e_nodes takes a positive number"):
        wanted_nodes(request.node)
