"""The DRM node and by-path link rules (pure); the scan is in test_container_edits.py."""

from __future__ import annotations

from dra_kubelet_plugin.drm_devices import (
    by_path_link_names,
    by_path_links,
    drm_node_paths,
    profile_has_graphics,
)


def test_nodes_are_the_sysfs_entries_in_name_order() -> None:
    assert drm_node_paths(["renderD129", "card2"]) == ["/dev/dri/card2", "/dev/dri/renderD129"]


def test_only_links_to_the_gpus_own_existing_nodes_are_kept() -> None:
    card, render = by_path_link_names("0000:41:00.0")
    assert card == "/dev/dri/by-path/pci-0000:41:00.0-card"
    links = [(card, "../card2"), (render, "/dev/dri/renderD200")]
    assert by_path_links(links, ["/dev/dri/card2"]) == [f"../card2::{card}"]
    assert by_path_links(links, ["/dev/dri/card2", "/dev/dri/renderD200"]) == [
        f"../card2::{card}",
        f"/dev/dri/renderD200::{render}",
    ]
    assert by_path_links(links, []) == []


def test_gfx_is_a_profile_attribute_not_a_substring() -> None:
    assert profile_has_graphics("1g.10gb+gfx")
    assert profile_has_graphics("1g.24gb+me+gfx")
    assert not profile_has_graphics("1g.10gb")
    assert not profile_has_graphics("1g.10gb+me")
