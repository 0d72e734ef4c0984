"""Fixtures of the kubelet plugin core's tests; helpers live in kubelet_core_support.py."""

from __future__ import annotations

from kubelet_core_fixtures import plugin_dirs, reference

__all__ = ["plugin_dirs", "reference"]
