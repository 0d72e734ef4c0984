"""The usage example in the package README runs from any directory."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]


def test_readme_usage_example_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    text = (PACKAGE / "README.md").read_text(encoding="utf-8")
    assert text.split("\n")[2:4] == [
        "```bash",
        "pip install ./packages/oci              "
        "# from the repository root; pure Python, no dependencies",
    ]
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no python example"
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(blocks[0], "README.md", "exec"), {})
    assert out.getvalue() == "True ['docker.io/example/motd:1.0']\n"
