"""``dra-fake-imex``: this project's stand-in for ``nvidia-imex`` and ``nvidia-imex-ctl``.

On fake GPU nodes there is no NVLink fabric to join, so the stand-in keeps only the contract
the domain daemon relies on:

* ``dra-fake-imex daemon -c imexd.cfg`` reads the same config keys as ``nvidia-imex``, serves
  the command port (``IMEX_CMD_BIND_INTERFACE_IP``:``IMEX_CMD_PORT``), resolves the names of
  ``IMEX_NODE_CONFIG_FILE`` through the hosts file and re-reads both on SIGUSR1.
* ``dra-fake-imex ctl -c imexd.cfg -q`` asks it for readiness and prints ``READY`` (exit 0)
  or ``NOT_READY`` (exit 1), as ``nvidia-imex-ctl -q`` does; ``-N`` lists the nodes config
  with the address each name resolves to.
* With ``IMEX_CMD_UNIX_DOMAIN_PATH`` in the config the daemon serves that Unix socket instead
  of the port, and ``ctl -q --u=PATH`` asks there, as for a host-managed ``nvidia-imex``.

Faults for tests: ``FAKE_IMEX_READY_AFTER_S`` delays readiness, ``FAKE_IMEX_NEVER_READY=1``
never gets there; ``--hosts-file`` replaces ``/etc/hosts``.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from .errors import ImexConfigError
from .hosts import parse_managed
from .imex_config import parse_config

__all__ = ["FakeImexDaemon", "main", "query"]


def _hosts(path: Path) -> dict[str, str]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    table = parse_managed(text)
    for line in text.splitlines():
        stripped = line.split("#", 1)[0].strip()
        if stripped:
            ip, *names = stripped.split()
            for name in names:
                table.setdefault(name, ip)
    return table


class FakeImexDaemon:
    """The stand-in IMEX daemon: readiness and name resolution over the command port."""

    def __init__(
        self, config_path: Path, *, hosts_file: Path, ready_after_s: float, never_ready: bool
    ) -> None:
        """Load ``config_path``; readiness comes ``ready_after_s`` after start."""
        self.config_path = config_path
        self.config = parse_config(str(config_path), config_path.read_text())
        for key in ("IMEX_CMD_PORT", "IMEX_NODE_CONFIG_FILE"):
            if key not in self.config:
                raise ImexConfigError(str(config_path), key, "required")
        self.hosts_file = hosts_file
        self._ready_at = time.monotonic() + ready_after_s
        self._never_ready = never_ready
        self._lock = threading.Lock()
        self.nodes: list[tuple[str, str]] = []
        self.reloads = 0
        self.reload()

    def reload(self) -> None:
        """Re-read the nodes config and resolve its names (what SIGUSR1 does)."""
        names = [
            line.strip()
            for line in Path(self.config["IMEX_NODE_CONFIG_FILE"]).read_text().splitlines()
            if line.strip() and not line.startswith("#")
        ]
        table = _hosts(self.hosts_file)
        with self._lock:
            self.nodes = [(n, table.get(n, "")) for n in names]
            self.reloads += 1

    def ready(self) -> bool:
        """READY once started (and, like IMEX in RECOVERY quorum mode, without peers)."""
        return not self._never_ready and time.monotonic() >= self._ready_at

    def answer(self, command: str) -> str:
        """The reply to one command-port request."""
        if command == "QUERY":
            return "READY" if self.ready() else "NOT_READY"
        if command == "NODES":
            with self._lock:
                rows = [f"{i} {name} {ip or '-'}" for i, (name, ip) in enumerate(self.nodes)]
            return "\n".join(rows)
        return f"ERROR unknown command {command!r}"

    def serve(self, stop: threading.Event) -> None:
        """Serve the command port until ``stop`` is set."""
        daemon = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                line = self.rfile.readline().decode().strip()
                self.wfile.write((daemon.answer(line) + "\n").encode())

        unix = self.config.get("IMEX_CMD_UNIX_DOMAIN_PATH")
        server: socketserver.BaseServer
        if unix:
            Path(unix).unlink(missing_ok=True)
            server = socketserver.UnixStreamServer(unix, Handler)
            where = unix
        else:
            host = self.config.get("IMEX_CMD_BIND_INTERFACE_IP") or "127.0.0.1"
            socketserver.TCPServer.allow_reuse_address = True
            server = socketserver.TCPServer((host, int(self.config["IMEX_CMD_PORT"])), Handler)
            where = f"{host}:{self.config['IMEX_CMD_PORT']}"
        with server as srv:
            srv.timeout = 0.2
            print(f"fake-imex: serving {where}", flush=True)
            while not stop.is_set():
                srv.handle_request()
        if unix:
            Path(unix).unlink(missing_ok=True)


def query(
    config_path: Path | None, command: str, *, unix: Path | None = None, timeout_s: float = 5.0
) -> str:
    """Send ``command`` to the daemon configured by ``config_path`` (or listening on the
    ``unix`` socket); its reply."""
    if unix is not None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout_s)
        s.connect(str(unix))
    else:
        assert config_path is not None
        config = parse_config(str(config_path), config_path.read_text())
        host = config.get("IMEX_CMD_BIND_INTERFACE_IP") or "127.0.0.1"
        s = socket.create_connection((host, int(config["IMEX_CMD_PORT"])), timeout=timeout_s)
    with s:
        s.sendall(command.encode() + b"\n")
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode().strip()


def _daemon(config: Path, hosts_file: Path) -> int:
    stop = threading.Event()
    imex = FakeImexDaemon(
        config,
        hosts_file=hosts_file,
        ready_after_s=float(os.environ.get("FAKE_IMEX_READY_AFTER_S", "0")),
        never_ready=os.environ.get("FAKE_IMEX_NEVER_READY") == "1",
    )

    def _reload(_signum: int, _frame: FrameType | None) -> None:
        imex.reload()
        print(f"fake-imex: reloaded nodes: {imex.nodes}", flush=True)

    def _stop(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGUSR1, _reload)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    imex.serve(stop)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``dra-fake-imex daemon|ctl``."""
    parser = argparse.ArgumentParser(prog="dra-fake-imex", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("daemon", help="the nvidia-imex stand-in")
    d.add_argument("-c", "--config", type=Path, required=True)
    d.add_argument("--hosts-file", type=Path, default=Path("/etc/hosts"))
    c = sub.add_parser("ctl", help="the nvidia-imex-ctl stand-in")
    c.add_argument("-c", "--config", type=Path)
    c.add_argument("--u", dest="unix", type=Path, help="the daemon's Unix command socket")
    what = c.add_mutually_exclusive_group(required=True)
    what.add_argument("-q", action="store_true", help="print READY or NOT_READY")
    what.add_argument("-N", action="store_true", help="list the nodes config")
    args = parser.parse_args(argv)
    if args.command == "ctl" and args.config is None and args.unix is None:
        parser.error("ctl needs -c CONFIG or --u SOCKET")
    try:
        if args.command == "daemon":
            return _daemon(args.config, args.hosts_file)
        reply = query(args.config, "QUERY" if args.q else "NODES", unix=args.unix)
    except (OSError, ImexConfigError) as exc:
        print(f"dra-fake-imex: {exc}", file=sys.stderr)
        return 1
    print(reply)
    return 0 if (args.N or reply == "READY") else 1


if __name__ == "__main__":
    raise SystemExit(main())
