"""IMEX daemon config files (pure): ``imexd.cfg`` and the DNS-name ``nodes.cfg``.

Keys are those of ``nvidia-imex`` (``/etc/nvidia-imex/config.cfg``); the values are NVIDIA's
domain-daemon choices: bind to the pod IP, server port 50000, command port 50005, wait for
quorum only on recovery, no authentication, log to stderr.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .errors import ImexConfigError
from .names import dns_name

__all__ = ["ImexSettings", "parse_config", "render_config", "render_nodes"]


@dataclass(frozen=True)
class ImexSettings:
    """What varies per daemon in ``imexd.cfg``."""

    bind_address: str
    nodes_config_path: str
    server_port: int = 50000
    command_port: int = 50005


def render_config(settings: ImexSettings) -> str:
    """The ``imexd.cfg`` text."""
    lines = {
        "IMEX_NODE_CONFIG_FILE": settings.nodes_config_path,
        "IMEX_BIND_INTERFACE_IP": settings.bind_address,
        "SERVER_PORT": str(settings.server_port),
        "IMEX_CMD_PORT": str(settings.command_port),
        "IMEX_CMD_BIND_INTERFACE_IP": "127.0.0.1",
        "IMEX_CMD_ENABLED": "1",
        "IMEX_WAIT_FOR_QUORUM": "RECOVERY",
        "IMEX_ENABLE_AUTH_ENCRYPTION": "0",
        "SECURITY_MODE": "0",
        "LOG_FILE_NAME": "",
        "LOG_LOCAL_TIME": "0",
        "LOG_LEVEL": "4",
    }
    return "".join(f"{k}={v}\n" for k, v in lines.items())


def parse_config(path: str, text: str) -> Mapping[str, str]:
    """``KEY=VALUE`` lines of an IMEX config (comments and blank lines skipped)."""
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = stripped.partition("=")
        if not sep or not key:
            raise ImexConfigError(path, f"line {number}", f"not KEY=VALUE: {stripped!r}")
        out[key.strip()] = value.strip()
    return out


def render_nodes(max_nodes: int) -> str:
    """``nodes.cfg`` in DNS-name mode: every slot's fixed name, one per line."""
    return "".join(f"{dns_name(i)}\n" for i in range(max_nodes))
