"""The daemon's ``/etc/hosts``: DNS names of the clique's daemons in a managed block (pure).

The IMEX nodes config lists fixed names (``compute-domain-daemon-0000``...), so a daemon
that moves to another IP only changes ``/etc/hosts``; the IMEX daemon is told with SIGUSR1
instead of being restarted. Lines outside the block (the kubelet's own) are kept.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["BEGIN", "END", "parse_managed", "render_hosts"]

BEGIN = "# BEGIN compute-domain-daemon (managed, do not edit)"
END = "# END compute-domain-daemon"


def render_hosts(current: str, mapping: Mapping[str, str]) -> str:
    """``current`` with the managed block replaced by ``mapping`` (name -> IP), sorted."""
    kept: list[str] = []
    inside = False
    for line in current.splitlines():
        if line.strip() == BEGIN:
            inside = True
            continue
        if line.strip() == END:
            inside = False
            continue
        if not inside:
            kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    block = [BEGIN] + [f"{ip}\t{name}" for name, ip in sorted(mapping.items())] + [END]
    return "\n".join([*kept, *block]) + "\n"


def parse_managed(text: str) -> dict[str, str]:
    """The name -> IP entries of the managed block of a hosts file."""
    out: dict[str, str] = {}
    inside = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped == BEGIN:
            inside = True
        elif stripped == END:
            inside = False
        elif inside and stripped and not stripped.startswith("#"):
            ip, *names = stripped.split()
            for name in names:
                out[name] = ip
    return out
