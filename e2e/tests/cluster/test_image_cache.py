"""The image archive cache: one build per content, a rebuild on any input change, never a stale
or half-written archive, and a second concurrent builder that waits for the first."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from dra_e2e import image_cache
from dra_e2e.checkout import REPO
from dra_e2e.image_cache import (
    COMPLETE,
    NotACheckoutError,
    cached_archive,
    current_key,
    input_files,
    prune,
)

PLUGIN_SOURCE = "packages/kubelet-plugin/src/dra_kubelet_plugin/__init__.py"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """A git checkout holding a copy of every file the real image build reads."""
    if shutil.which("git") is None:
        pytest.skip("no git")
    repo = tmp_path / "repo"
    for name in input_files(REPO):
        if (REPO / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, repo / name)
    (repo / ".gitignore").write_text("__pycache__/\n")
    (repo / "README.md").write_text("not an input\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    return repo


def _build_copying(repo: Path, calls: list[str]) -> Callable[[Path], None]:
    """A stand-in for build_image.py: the archive is the plugin source it was built from."""

    def build(path: Path) -> None:
        calls.append(path.name)
        path.write_bytes((repo / PLUGIN_SOURCE).read_bytes())

    return build


def test_the_key_covers_the_real_inputs() -> None:
    files = input_files(REPO)
    for expected in (
        "uv.lock",
        "pyproject.toml",
        "images/build_image.py",
        "images/app_stage.py",
        "images/debian_layer.py",
        "packages/oci/src/dra_oci/archive.py",
        "deployments/helm/dra-driver-nvidia-gpu/Chart.yaml",
        PLUGIN_SOURCE,
    ):
        assert expected in files
    assert "packages/kubelet-plugin/pyproject.toml" in files
    assert "packages/kubelet-plugin/README.md" in files
    assert not [f for f in files if "__pycache__" in f or f.startswith("e2e/tests/")]
    # Not in any wheel: a test edit must not cost an image build.
    assert not [f for f in files if f.split("/")[2:3] in (["tests"], ["bench"])]


def test_package_tests_are_not_inputs(inputs: Path) -> None:
    before = current_key("driver", inputs)
    (inputs / "packages" / "nvlib" / "tests").mkdir(exist_ok=True)
    (inputs / "packages" / "nvlib" / "tests" / "test_new.py").write_text("def test(): ...\n")
    assert current_key("driver", inputs) == before


def test_key_stays_when_nothing_changes(inputs: Path) -> None:
    assert current_key("driver", inputs) == current_key("driver", inputs)
    (inputs / "README.md").write_text("edited, but the build never reads it\n")
    (inputs / "packages" / "__pycache__").mkdir()
    (inputs / "packages" / "__pycache__" / "x.pyc").write_bytes(b"ignored by git")
    before = current_key("driver", inputs)
    (inputs / "README.md").write_text("edited again\n")
    assert current_key("driver", inputs) == before


def test_key_changes_with_each_input(inputs: Path) -> None:
    seen = {current_key("driver", inputs), current_key("workload", inputs)}
    assert len(seen) == 2
    edits: list[Callable[[], object]] = [
        lambda: (inputs / PLUGIN_SOURCE).write_text("# edited, uncommitted\n"),
        lambda: (inputs / "packages" / "nvlib" / "src" / "new_module.py").write_text("X = 1\n"),
        lambda: (inputs / "uv.lock").write_text((inputs / "uv.lock").read_text() + "\n"),
        lambda: (inputs / "images" / "build_image.py").write_text("# another build\n"),
        lambda: (inputs / "images" / "app_stage.py").unlink(),
    ]
    for edit in edits:
        edit()
        key = current_key("driver", inputs)
        assert key not in seen
        seen.add(key)


def test_apt_index_changes_change_the_key(tmp_path: Path) -> None:
    lists = tmp_path / "lists"
    lists.mkdir()
    index = lists / "deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages"
    index.write_text("Package: bash\nVersion: 5.2.15-2+b7\n")
    before = image_cache.apt_state([lists])
    index.write_text("Package: bash\nVersion: 5.2.15-2+b8\n")
    os.utime(index, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    after = image_cache.apt_state([lists])
    assert before != after
    assert image_cache.image_key("driver", "s", before, []) != image_cache.image_key(
        "driver", "s", after, []
    )


def test_an_edited_source_is_never_served_from_the_cache(inputs: Path, tmp_path: Path) -> None:
    root = tmp_path / "cache"
    calls: list[str] = []
    build = _build_copying(inputs, calls)
    first = cached_archive(current_key("driver", inputs), build, root=root)
    assert cached_archive(current_key("driver", inputs), build, root=root) == first
    assert len(calls) == 1
    (inputs / PLUGIN_SOURCE).write_text("# the new code\n")
    second = cached_archive(current_key("driver", inputs), build, root=root)
    assert len(calls) == 2
    assert second != first
    assert second.read_text() == "# the new code\n"


def test_a_concurrent_second_builder_waits_and_reuses(tmp_path: Path) -> None:
    calls: list[str] = []
    started = threading.Event()

    def slow_build(path: Path) -> None:
        calls.append(path.name)
        started.set()
        time.sleep(0.5)
        path.write_bytes(b"archive")

    results: list[Path] = []
    first = threading.Thread(
        target=lambda: results.append(cached_archive("driver-k", slow_build, root=tmp_path))
    )
    first.start()
    assert started.wait(10)
    # The first build holds the lock now: the second caller must wait, then reuse it.
    results.append(cached_archive("driver-k", slow_build, root=tmp_path))
    first.join()
    assert calls == ["image.tar"]
    assert results[0] == results[1]
    assert results[1].read_bytes() == b"archive"


def test_a_failed_build_leaves_nothing_to_reuse(tmp_path: Path) -> None:
    def crashing(path: Path) -> None:
        path.write_bytes(b"half an archi")
        raise RuntimeError("build killed")

    with pytest.raises(RuntimeError):
        cached_archive("driver-k", crashing, root=tmp_path)
    assert not (tmp_path / "driver-k").exists()
    archive = cached_archive("driver-k", lambda p: p.write_bytes(b"whole"), root=tmp_path)
    assert archive.read_bytes() == b"whole"
    assert not (tmp_path / "driver-k.partial").exists()


def test_prune_removes_only_old_entries_of_the_same_kind(tmp_path: Path) -> None:
    for key in ("driver-old", "driver-recent", "workload-old", "driver-new"):
        cached_archive(key, lambda p: p.write_bytes(b"x"), root=tmp_path)
    long_ago = time.time() - 10 * 24 * 3600
    for key in ("driver-old", "workload-old"):
        os.utime(tmp_path / key / COMPLETE, (long_ago, long_ago))
    assert prune("driver-new", root=tmp_path) == [tmp_path / "driver-old"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [
        "driver-new",
        "driver-recent",
        "workload-old",
    ]


def test_outside_git_the_key_is_refused(tmp_path: Path) -> None:
    proc = subprocess.run(["git", "rev-parse"], cwd=tmp_path, capture_output=True, check=False)
    if proc.returncode == 0:
        pytest.skip("tmp_path is inside a git checkout")
    with pytest.raises(NotACheckoutError):
        input_files(tmp_path)
