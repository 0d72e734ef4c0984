#!/usr/bin/env python3
"""A stand-in for docker, kind, kubectl, helm and uv when test_kind.py runs kind/up.sh.

Installed under each tool's name in a directory put first on PATH. Every call appends one JSON
line to ``$FAKE_TOOLS_LOG``: the tool's name, its arguments, ``KUBECONFIG`` and, for ``kind load
image-archive``, whether the archive existed. It answers the few queries up.sh makes: cluster
list, kubeconfig, the Docker server's platform, the GPU nodes and their published devices
(``$FAKE_PUBLISHED_GPUS`` per node). ``uv`` calls other than ``uv run ... pytest`` run the real
uv (``$FAKE_REAL_UV``), so up.sh's GPU count comes from the plugin's own fleet parser.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _record(tool: str, args: list[str], **extra: object) -> None:
    entry = {"tool": tool, "args": args, "kubeconfig": os.environ.get("KUBECONFIG"), **extra}
    if tool == "uv":
        entry["env"] = {k: v for k, v in os.environ.items() if k.startswith("DRA_E2E_")}
    with open(os.environ["FAKE_TOOLS_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")


def _after(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def main() -> int:
    """Record the call, then answer it."""
    tool, args = Path(sys.argv[0]).name, sys.argv[1:]
    if tool == "uv" and "pytest" not in args:
        real = os.environ["FAKE_REAL_UV"]
        os.execv(real, [real, *args])
    extra: dict[str, object] = {}
    if args[:2] == ["load", "image-archive"]:
        extra["archive_exists"] = Path(args[2]).is_file()
    _record(tool, args, **extra)
    if tool == "kind" and args[:2] == ["get", "kubeconfig"]:
        print("apiVersion: v1\nkind: Config\n")
    elif tool == "docker" and args[:1] == ["version"]:
        print("linux/amd64")
    elif tool == "docker" and args[:2] == ["image", "save"]:
        Path(_after(args, "--output")).write_bytes(b"an image archive")
    elif tool == "kubectl" and args[:2] == ["get", "nodes"]:
        print("dra-nvidia-fake-worker")
    elif tool == "kubectl" and args[:2] == ["get", "resourceslices"] and "-o" in args:
        print("gpu\n" * int(os.environ.get("FAKE_PUBLISHED_GPUS", "0")), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
