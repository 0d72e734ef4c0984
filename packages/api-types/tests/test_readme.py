"""The usage example in the package README runs."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]


def test_readme_usage_example_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    text = (PACKAGE / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no python example"
    out = io.StringIO()
    # From any directory: the example reads no file of the checkout.
    monkeypatch.chdir(tmp_path)
    with contextlib.redirect_stdout(out):
        exec(compile(blocks[0], "README.md", "exec"), {})
    printed = out.getvalue()
    assert "['ts-gpu'] TimeSlicing" in printed
    assert "['mps-gpu'] MPS" in printed
    assert 'spec.devices[0].attributes["gpu.nvidia.com/uuid"]' in printed
    assert "kind: ResourceClaim" in printed
