"""The parser's tables are kept in the user's own cache directory, and only there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dra_cel.grammar_cache import cache_file

# ``true`` is re-typed by a lexer callback, which a parser loaded from the file must keep.
PARSE = (
    "from dra_cel import CelDevice, compile_selector; "
    "s = compile_selector(\"device.attributes['a.example.com'].n > 1 || true\"); "
    "print(s.footprint, s.matches(CelDevice(driver='x')))"
)


def test_the_cache_lives_in_a_private_folder_of_the_user_cache(tmp_path: Path) -> None:
    found = cache_file({"XDG_CACHE_HOME": str(tmp_path)})
    assert found is not None
    folder = Path(found).parent
    assert folder == tmp_path / "dra-cel"
    assert folder.stat().st_mode & 0o077 == 0


def test_a_folder_others_can_write_to_is_not_used(tmp_path: Path) -> None:
    folder = tmp_path / "dra-cel"
    folder.mkdir()
    folder.chmod(0o777)
    assert cache_file({"XDG_CACHE_HOME": str(tmp_path)}) is None


def test_no_cache_where_the_folder_cannot_be_made(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert cache_file({"XDG_CACHE_HOME": str(blocker)}) is None


def test_a_second_process_parses_from_the_saved_tables(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", PARSE], env=env, capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    ]
    assert list((tmp_path / "dra-cel").iterdir()), "the first process saved the tables"
    assert runs[0] == runs[1]
    assert "a.example.com/n" in runs[1]
    assert runs[1].rstrip().endswith("True")
    # A damaged file is rebuilt over, not trusted.
    saved = next((tmp_path / "dra-cel").iterdir())
    saved.write_bytes(b"not the digest\n")
    again = subprocess.run(
        [sys.executable, "-c", PARSE], env=env, capture_output=True, text=True, check=True
    )
    assert again.stdout == runs[0]
