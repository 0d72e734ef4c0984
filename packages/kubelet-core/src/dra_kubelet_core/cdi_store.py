"""Writing and removing the per-claim transient CDI spec files (the I/O edge of CDI)."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from dra_kubelet_core.cdi import CDIKind, CDISpec
from dra_kubelet_core.errors import CDIError

__all__ = ["CDIStore"]

log = logging.getLogger(__name__)


class CDIStore:
    """The directory of transient CDI specs (``--cdi-root``), one file per claim."""

    def __init__(self, root: Path, *, kind: CDIKind, durable: bool = False) -> None:
        """Manage the specs of ``kind`` in ``root`` (other drivers' specs are never touched).

        Specs are transient (``/var/run/cdi`` is a tmpfs and a reboot discards all prepared
        state), so they are replaced atomically but not fsynced unless ``durable``.
        """
        self.root = root
        self.kind = kind
        self._durable = durable

    def path_for(self, claim_uid: str) -> Path:
        """Return the spec path of a claim."""
        return self.root / self.kind.spec_file_name(claim_uid)

    def write(self, claim_uid: str, spec: CDISpec) -> Path:
        """Write a claim's spec atomically; runtimes never see a partial file.

        The temporary name starts with a dot and has no ``.json`` suffix, so CDI caches that
        watch the directory ignore it until the rename.
        """
        target = self.path_for(claim_uid)
        tmp = self.root / f".{target.name}.tmp-{os.getpid()}"
        data = spec.to_bytes()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if self._durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, target)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise CDIError(f"CDI spec {target}: write failed: {exc}") from exc
        return target

    def exists(self, claim_uid: str) -> bool:
        """Whether the claim's spec file exists."""
        return self.path_for(claim_uid).is_file()

    def remove(self, claim_uid: str) -> bool:
        """Remove a claim's spec; return whether a file was removed."""
        try:
            self.path_for(claim_uid).unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise CDIError(f"CDI spec {self.path_for(claim_uid)}: remove failed: {exc}") from exc
        return True

    def claim_uids(self) -> set[str]:
        """Return the UIDs of every claim that has a spec in the directory."""
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return set()
        except OSError as exc:
            raise CDIError(f"CDI root {self.root}: cannot list: {exc}") from exc
        return {
            uid for n in names if (uid := self.kind.claim_uid_from_spec_file_name(n)) is not None
        }

    def remove_stale(self, keep: set[str]) -> list[str]:
        """Remove specs (and leftover temporary files) of claims not in ``keep``."""
        removed: list[str] = []
        for uid in sorted(self.claim_uids() - keep):
            if self.remove(uid):
                removed.append(uid)
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(self.root):
                if (
                    name.startswith(".")
                    and ".tmp-" in name
                    and self.kind.claim_uid_from_spec_file_name(name[1:].split(".tmp-")[0])
                ):
                    with contextlib.suppress(OSError):
                        (self.root / name).unlink()
        return removed
