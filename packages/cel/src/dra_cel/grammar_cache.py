"""Where the CEL parser's tables are kept between processes.

Building the LALR tables of cel-python's grammar takes ~0.2 s, paid by every process on its
first selector: each ``kubectl dra`` command, the webhook's first admission, the
controllers' start. Lark can save the built parser and load it in ~0.01 s. Its own default
place is a shared temporary directory, and the file is a pickle, which a process must not
load from where another user could have written it. This module names a file in the user's
own cache directory instead (``$XDG_CACHE_HOME/dra-cel``, else ``~/.cache/dra-cel``), used
only when that directory belongs to the user and nobody else can write to it; anywhere else
(a read-only container, a foreign home) there is no cache and the tables are built as before.
Lark checks the grammar's and options' digest stored in the file and rebuilds on a mismatch.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from pathlib import Path

import lark

__all__ = ["cache_file", "grammar_text"]


def grammar_text() -> str:
    """cel-python's ``cel.lark``, found without importing cel-python (~50 ms saved)."""
    spec = importlib.util.find_spec("celpy")
    if spec is None or spec.origin is None:
        raise ImportError("cel-python (celpy) is not installed: its grammar file is needed")
    return (Path(spec.origin).parent / "cel.lark").read_text()


def cache_file(environ: dict[str, str] | None = None) -> str | None:
    """The file to keep the built parser in, or None where no private place exists."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(base, "dra-cel")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.stat(folder)
    except OSError:
        return None
    if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return None
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    return os.path.join(folder, f"cel-lalr-lark{lark.__version__}-py{python}.cache")
