"""A fake Fabric Manager: the partitions of an HGX layout in a JSON state file shared by
every process of one fake node (the plugin, ``dra-nvlib``, tests), as the fake GPU fleet is.

It refuses what Fabric Manager refuses: an unknown partition, and activating a partition
that shares a GPU with an active one (FM's "in use"). :meth:`FakeFabricManager.set_running`
stops it: every call then fails as a connection to a stopped Fabric Manager does.

A fake GPU node keeps it next to its fleet's state file (:func:`fake_fabric_manager_path`),
so the GPU plugin and ``dra-nvlib fabric-manager`` see one Fabric Manager per node.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

from dra_nvlib.errors import FabricManagerError, FakeStateError
from dra_nvlib.fabric_partitions import FabricManager, FabricPartition, hgx_partitions

__all__ = ["FAKE_FABRIC_MANAGER_FILE", "FakeFabricManager", "fake_fabric_manager_path"]

_VERSION = 1

#: The fake Fabric Manager's state file, in the directory of the fake fleet's state.
FAKE_FABRIC_MANAGER_FILE = "fake-fabric-manager.json"


def fake_fabric_manager_path(gpu_state: Path) -> Path:
    """Where the fake node whose GPUs are in ``gpu_state`` keeps its Fabric Manager."""
    return gpu_state.with_name(FAKE_FABRIC_MANAGER_FILE)


class FakeFabricManager(FabricManager):
    """Partitions in ``path``; a new file gets the HGX layout for ``gpu_count`` GPUs
    (``None``: the file must exist).

    Raises:
        FakeStateError: no file and no ``gpu_count``, or an unreadable file.
        ValueError: ``gpu_count`` is not a power of two (no HGX layout).
    """

    def __init__(self, path: Path, *, gpu_count: int | None) -> None:
        self.path = path
        self._lock = path.with_name(path.name + ".lock")
        with self._locked():
            if self._load() is None:
                if gpu_count is None:
                    raise FakeStateError(str(path), "no fake Fabric Manager state")
                self._store(hgx_partitions(gpu_count))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise FakeStateError(str(self.path), f"cannot open lock: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _doc(self) -> dict[str, object] | None:
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError) as exc:
            raise FakeStateError(str(self.path), f"cannot read: {exc}") from exc
        if not isinstance(doc, dict) or doc.get("version") != _VERSION:
            raise FakeStateError(str(self.path), "not a version 1 fake Fabric Manager state")
        return doc

    def _running(self) -> bool:
        doc = self._doc()
        return doc is None or doc.get("running", True) is not False

    def _load(self) -> tuple[FabricPartition, ...] | None:
        doc = self._doc()
        if doc is None:
            return None
        raw = doc.get("partitions")
        if not isinstance(raw, list):
            raise FakeStateError(str(self.path), "malformed: no partition list")
        try:
            return tuple(
                FabricPartition(
                    id=int(p["id"]),
                    active=bool(p["active"]),
                    module_ids=tuple(int(m) for m in p["module_ids"]),
                )
                for p in raw
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise FakeStateError(str(self.path), f"malformed partition: {exc!r}") from exc

    def _store(self, partitions: tuple[FabricPartition, ...], *, running: bool = True) -> None:
        doc = {
            "version": _VERSION,
            "running": running,
            "partitions": [
                {"id": p.id, "active": p.active, "module_ids": list(p.module_ids)}
                for p in partitions
            ],
        }
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(doc, indent=1), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise FakeStateError(str(self.path), f"cannot write: {exc.strerror}") from exc

    def _current(self, operation: str) -> tuple[FabricPartition, ...]:
        if not self._running():
            # What fmConnect answers when nothing listens on the socket.
            raise FabricManagerError(None, operation, "cannot connect: Fabric Manager is stopped")
        partitions = self._load()
        if partitions is None:
            raise FakeStateError(str(self.path), "state file is gone")
        return partitions

    def partitions(self) -> tuple[FabricPartition, ...]:
        """Every partition with its activation, as last written by any process."""
        with self._locked():
            return self._current("list")

    def set_running(self, running: bool) -> None:
        """Start or stop the fake Fabric Manager (activations are kept, as FM keeps them
        while the NVSwitch fabric stays programmed)."""
        with self._locked():
            partitions = self._load()
            if partitions is None:
                raise FakeStateError(str(self.path), "state file is gone")
            self._store(partitions, running=running)

    def _set(self, partition_id: int, *, active: bool) -> None:
        operation = "activate" if active else "deactivate"
        with self._locked():
            partitions = self._current(operation)
            target = next((p for p in partitions if p.id == partition_id), None)
            if target is None:
                raise FabricManagerError(partition_id, operation, "unknown partition")
            if active:
                busy = sorted(
                    p.id
                    for p in partitions
                    if p.active
                    and p.id != partition_id
                    and set(p.module_ids) & set(target.module_ids)
                )
                if busy:
                    raise FabricManagerError(
                        partition_id, operation, f"in use: shares GPUs with active {busy}"
                    )
            self._store(
                tuple(
                    FabricPartition(p.id, active, p.module_ids) if p.id == partition_id else p
                    for p in partitions
                )
            )

    def _activate(self, partition_id: int) -> None:
        self._set(partition_id, active=True)

    def _deactivate(self, partition_id: int) -> None:
        self._set(partition_id, active=False)
