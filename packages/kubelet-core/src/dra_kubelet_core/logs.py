"""Structured logging: one JSON object per line, with request and claim context bound once.

Modules log with ``logging.getLogger(__name__)`` and put fields in ``extra``; the request id
and claim namespace/name/UID of the call being served are added from context variables, so
every line of one kubelet request can be found with one grep.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
import time
from collections.abc import Iterator

__all__ = ["JsonFormatter", "bind", "configure_logging", "context_fields"]

_EMPTY: dict[str, str] = {}
_context: contextvars.ContextVar[dict[str, str]] = contextvars.ContextVar(
    "log_context",
    default=_EMPTY,  # never mutated: bind() sets a new dict
)
_RESERVED = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


@contextlib.contextmanager
def bind(**fields: str) -> Iterator[None]:
    """Add ``fields`` to every log line emitted inside the ``with`` block (this task only)."""
    token = _context.set({**_context.get(), **fields})
    try:
        yield
    finally:
        _context.reset(token)


def context_fields() -> dict[str, str]:
    """Return the fields currently bound with :func:`bind`."""
    return dict(_context.get())


class JsonFormatter(logging.Formatter):
    """Formats records as single-line JSON with time, level, logger, msg and extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record``."""
        out: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update(_context.get())
        for key, value in record.__dict__.items():
            if key not in _RESERVED and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure_logging(verbosity: int) -> None:
    """Send JSON lines to stderr: ``-v`` 0 logs info, 1+ the plugin's debug lines, 6+ debug
    lines of the libraries too (the Kubernetes client's request bodies included)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    # Third-party debug output (urllib3, grpc) only at -v 6 and up; the chart's default is 4.
    root.setLevel(logging.DEBUG if verbosity >= 6 else logging.INFO)
    logging.getLogger("dra_kubelet_plugin").setLevel(
        logging.DEBUG if verbosity >= 1 else logging.INFO
    )
    # The kubernetes client logs request bodies at debug; keep it quiet unless asked.
    logging.getLogger("kubernetes").setLevel(logging.DEBUG if verbosity >= 6 else logging.WARNING)
