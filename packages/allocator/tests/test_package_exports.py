"""``dra_allocator``'s public names load from their modules on first use."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import dra_allocator
import pytest


def test_every_public_name_is_its_modules_object() -> None:
    for name in dra_allocator.__all__:
        module = importlib.import_module(f"dra_allocator.{dra_allocator._MODULE_OF[name]}")
        assert getattr(dra_allocator, name) is getattr(module, name), name
    assert set(dra_allocator._MODULE_OF) == set(dra_allocator.__all__)
    assert set(dra_allocator.__all__) <= set(dir(dra_allocator))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        getattr(dra_allocator, "NoSuchThing")  # noqa: B009


def test_a_light_module_does_not_load_the_allocator() -> None:
    # kubectl dra's command line reads these before it starts a live explain's lists.
    code = (
        "import json, sys; import dra_allocator.features, dra_allocator.errors; "
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.startswith(('dra_', 'pydantic', 'lark')))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [
        "dra_allocator",
        "dra_allocator.errors",
        "dra_allocator.features",
    ]
