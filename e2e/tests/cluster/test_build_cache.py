"""The binary cache: build once, reuse, rebuild on change, keep failures visible."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dra_e2e.build import GoComponent, build_component, component_dir, find_go, is_built
from dra_e2e.errors import BuildError

MAIN = """package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func main() { fmt.Println("called as", filepath.Base(os.Args[0])) }
"""


@pytest.fixture
def hello(tmp_path: Path) -> GoComponent:
    try:
        find_go()
    except Exception:
        pytest.skip("no Go toolchain")
    src = tmp_path / "src"
    src.mkdir()
    (src / "go.mod").write_text("module example.com/hello\n\ngo 1.22\n")
    (src / "main.go").write_text(MAIN)
    return GoComponent(
        name="hello",
        version="v0.0.1",
        packages=(".",),
        outputs=("hello",),
        aliases=("hi",),
        source_dir=src,
    )


def test_builds_once_then_reuses_the_cache(hello: GoComponent, tmp_path: Path) -> None:
    root = tmp_path / "cache"
    messages: list[str] = []
    built = build_component(hello, progress=messages.append, root=root)
    assert built == component_dir(hello, root=root)
    assert built.name.startswith("hello-v0.0.1-")
    assert is_built(hello, root=root)
    assert os.access(built / "hello", os.X_OK)
    assert (built / "hi").readlink() == Path("hello")
    assert any("done in" in m for m in messages)
    messages.clear()
    assert build_component(hello, progress=messages.append, root=root) == built
    assert messages == []


def test_changed_source_gets_a_new_cache_entry(hello: GoComponent, tmp_path: Path) -> None:
    root = tmp_path / "cache"
    first = build_component(hello, progress=lambda _: None, root=root)
    assert hello.source_dir is not None
    (hello.source_dir / "main.go").write_text(MAIN.replace("called as", "invoked as"))
    second = build_component(hello, progress=lambda _: None, root=root)
    assert second != first
    assert is_built(hello, root=root)


def test_failed_build_raises_with_log_and_leaves_no_entry(
    hello: GoComponent, tmp_path: Path
) -> None:
    assert hello.source_dir is not None
    (hello.source_dir / "main.go").write_text("package main\n\nfunc main() { undefined() }\n")
    root = tmp_path / "cache"
    with pytest.raises(BuildError, match="undefined") as info:
        build_component(hello, progress=lambda _: None, root=root)
    assert info.value.component == "hello"
    assert info.value.log is not None
    assert "undefined" in info.value.log.read_text()
    assert not is_built(hello, root=root)
