"""The fake backend's MPS control daemon, and the client that reads it from a pod.

``python -m dra_sharing.fake_mps_daemon --pipe-dir P --log-dir L --devices U1,U2
[--active-thread-percentage N] [--pinned-mem-limit UUID=1024M ...]`` behaves like
``nvidia-cuda-mps-control -d`` as far as a pod can tell: it owns ``P`` (the directory
containers see as ``CUDA_MPS_PIPE_DIRECTORY``), writes its pid to ``P/nvidia-mps.pid``, logs
to ``L/control.log``, publishes its settings in ``P/control.settings``, answers on the unix
socket ``P/control`` (the real daemon's control pipe: one command a connection, one answer
line; :func:`query` is its client) and marks readiness with ``P/ready``. SIGTERM makes it
remove those files and exit (the driver stops it at unprepare, as it sends ``quit`` to the
real one). Only the control socket tells a live daemon from the files a killed one left:
a SIGKILLed daemon leaves ``ready`` behind, but nothing answers on its socket.

Crash tests hold a daemon before it is ready with ``DRA_FAKE_MPS_HOLD_READY=DIR``: it writes
its pid file, then waits for ``DIR/mps-ready.release`` before marking itself ready, so the
plugin that started it can be SIGKILLed while it waits.

:func:`render_mps_control_client` is the ``nvidia-cuda-mps-control`` the fake CDI edits
mount into the pod: it answers ``get_default_active_thread_percentage``,
``get_default_device_pinned_mem_limit <UUID>``, ``get_server_list`` and
``get_device_client_list`` from the settings file, using shell builtins only.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType

__all__ = [
    "CONTROL_SOCKET",
    "READY_FILE",
    "SETTINGS_FILE",
    "answer",
    "main",
    "query",
    "render_mps_control_client",
    "render_settings",
]

READY_FILE = "ready"
SETTINGS_FILE = "control.settings"
PID_FILE = "nvidia-mps.pid"
#: The control pipe: a unix socket in the pipe directory.
CONTROL_SOCKET = "control"
#: Test hook: a directory; the daemon is not ready until ``mps-ready.release`` is in it.
ENV_HOLD_READY = "DRA_FAKE_MPS_HOLD_READY"


def render_settings(
    *, devices: Sequence[str], active_thread_percentage: int | None, limits: dict[str, str]
) -> str:
    """The settings file: one ``key value...`` line each (pure)."""
    pct = 100 if active_thread_percentage is None else active_thread_percentage
    lines = [
        f"pid {os.getpid()}",
        f"devices {','.join(devices)}",
        f"default_active_thread_percentage {pct}.0",
    ]
    lines += [f"device_pinned_mem_limit {uuid} {limit}" for uuid, limit in sorted(limits.items())]
    return "\n".join(lines) + "\n"


def answer(command: str, settings: str) -> str:
    """The daemon's answer to one control command, from its settings file's text (pure);
    an unknown command gets a line starting ``error``."""
    name, _, arg = command.strip().partition(" ")
    table = {
        "get_server_list": ("pid", ""),
        "get_default_active_thread_percentage": ("default_active_thread_percentage", ""),
        "get_device_client_list": ("devices", ""),
        "get_default_device_pinned_mem_limit": ("device_pinned_mem_limit", arg),
    }
    if name not in table:
        return f"error unsupported command {name!r}"
    key, want = table[name]
    for line in settings.splitlines():
        got, _, rest = line.partition(" ")
        if got != key:
            continue
        if not want:
            return rest
        first, _, value = rest.partition(" ")
        if first == want:
            return value
    return "0M" if want else "error no such setting"


@contextlib.contextmanager
def _in_dir(directory: Path) -> Iterator[str]:
    """A short path to ``directory``: a unix socket path is limited to 107 bytes, and the
    daemon directories of a kubelet plugin (or a test) can be longer."""
    fd = os.open(directory, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def query(pipe_dir: Path, command: str, *, timeout_s: float = 2.0) -> str:
    """Send one command to the daemon of ``pipe_dir`` and return its answer line.

    Raises:
        OSError: nothing answers (no daemon, or a dead one's socket file) or it timed out.
    """
    with _in_dir(pipe_dir) as short, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(f"{short}/{CONTROL_SOCKET}")
        sock.sendall(command.encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    if not data:
        raise OSError(f"MPS control daemon of {pipe_dir} closed the connection")
    return data.decode().strip()


def _serve_one(server: socket.socket, settings: Path) -> None:
    conn, _ = server.accept()
    with conn:
        conn.settimeout(2.0)
        try:
            line = conn.recv(4096).decode(errors="replace")
            conn.sendall(answer(line, settings.read_text()).encode() + b"\n")
        except OSError:
            pass  # a client that went away is its own problem


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the fake daemon until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(prog="dra-fake-mps-daemon")
    parser.add_argument("--pipe-dir", type=Path, required=True)
    parser.add_argument("--log-dir", type=Path, required=True)
    parser.add_argument("--devices", default="")
    parser.add_argument("--active-thread-percentage", type=int)
    parser.add_argument("--pinned-mem-limit", action="append", default=[])
    parser.add_argument(
        "--multi-user", action="store_true", help="serve clients of any uid (as -M does)"
    )
    parser.add_argument(
        "--background", action="store_true", help="detach (as nvidia-cuda-mps-control -d does)"
    )
    args = parser.parse_args(argv)
    limits: dict[str, str] = {}
    for item in args.pinned_mem_limit:
        uuid, sep, limit = str(item).partition("=")
        if not sep:
            parser.error(f"--pinned-mem-limit {item!r} is not UUID=LIMIT")
        limits[uuid] = limit
    pipe: Path = args.pipe_dir
    log_dir: Path = args.log_dir
    pipe.mkdir(parents=True, exist_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    if args.background and os.fork() != 0:
        # The parent returns at once; the daemon is reparented to init and outlives the
        # plugin that started it, as the real control daemon does.
        os._exit(0)
    if args.background:
        os.setsid()
    stopping = False

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    devices = [d for d in str(args.devices).split(",") if d]
    with open(log_dir / "control.log", "a", encoding="utf-8") as logf:
        mode = " multi-user" if args.multi_user else ""
        logf.write(
            f"[fake-mps] starting{mode} control daemon pid {os.getpid()} devices {devices}\n"
        )
        logf.flush()
        _write_atomic(pipe / PID_FILE, f"{os.getpid()}\n")
        hold = os.environ.get(ENV_HOLD_READY)
        while hold and not stopping and not (Path(hold) / "mps-ready.release").exists():
            time.sleep(0.01)
        _write_atomic(
            pipe / SETTINGS_FILE,
            render_settings(
                devices=devices,
                active_thread_percentage=args.active_thread_percentage,
                limits=limits,
            ),
        )
        (pipe / CONTROL_SOCKET).unlink(missing_ok=True)
        with (
            _in_dir(pipe) as short,
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server,
        ):
            server.bind(f"{short}/{CONTROL_SOCKET}")
            server.listen(16)
            _write_atomic(pipe / READY_FILE, "ready\n")
            while not stopping:
                with contextlib.suppress(InterruptedError):
                    readable, _, _ = select.select([server], [], [], 0.05)
                    if readable:
                        _serve_one(server, pipe / SETTINGS_FILE)
        for name in (READY_FILE, SETTINGS_FILE, PID_FILE, CONTROL_SOCKET):
            (pipe / name).unlink(missing_ok=True)
        logf.write("[fake-mps] control daemon exiting\n")
    return 0


_CLIENT = r"""#!/bin/sh
# Fake nvidia-cuda-mps-control generated by dra-sharing: answers queries from the settings
# the fake MPS control daemon published in $CUDA_MPS_PIPE_DIRECTORY.
dir=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}
settings="$dir/SETTINGS"
if [ "$1" = "-d" ]; then
  echo "nvidia-cuda-mps-control (fake GPU node): the daemon is run by the DRA driver" >&2
  exit 1
fi
if [ ! -f "$settings" ]; then
  echo "Cannot find MPS control daemon process" >&2
  exit 1
fi
lookup() {
  while IFS=' ' read -r key a b; do
    case "$key" in
      "$1")
        if [ -z "$2" ]; then printf '%s\n' "$a"; return 0; fi
        if [ "$a" = "$2" ]; then printf '%s\n' "$b"; return 0; fi
        ;;
    esac
  done < "$settings"
  return 1
}
status=0
while IFS=' ' read -r cmd arg rest; do
  case "$cmd" in
    '') ;;
    get_default_active_thread_percentage) lookup default_active_thread_percentage ;;
    get_default_device_pinned_mem_limit)
      lookup device_pinned_mem_limit "$arg" || echo "0M" ;;
    get_server_list) lookup pid ;;
    get_device_client_list) lookup devices ;;
    quit) echo "quit is done by the DRA driver at unprepare" >&2; status=1 ;;
    *) echo "Unsupported command: $cmd" >&2; status=1 ;;
  esac
done
exit $status
""".replace("SETTINGS", SETTINGS_FILE)


def render_mps_control_client() -> str:
    """The fake ``nvidia-cuda-mps-control`` client script (``/bin/sh``, builtins only)."""
    return _CLIENT


if __name__ == "__main__":
    sys.exit(main())
