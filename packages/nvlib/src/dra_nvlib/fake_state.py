"""The fake node's state: one JSON file, changed only under an exclusive ``fcntl`` lock.

Several processes (kubelet plugin, sharing manager, the fake ``nvidia-smi``) open the same
file; each change is a read-modify-write under the lock, written to a temporary file and
renamed into place, so a reader never sees half a document and a crash loses nothing.
The lock lives in a sibling ``.lock`` file because the state file itself is replaced.

:class:`MemoryStateStore` keeps one process's node in memory instead (nothing written), for
a one-shot look at a fleet such as the kubelet plugin's ``--print-resource-slices``.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import NotRequired, TypedDict, cast

from dra_nvlib.errors import FakeStateError

STATE_VERSION = 1


class GiState(TypedDict):
    """One GPU instance with its compute instance."""

    gi_id: int
    ci_id: int
    profile_id: int
    start: int
    uuid: str


class FabricEntry(TypedDict):
    """NVLink fabric membership of one GPU."""

    cluster_uuid: str
    clique_id: int
    state: int
    status: int


class GpuState(TypedDict):
    """One fake GPU."""

    index: int
    model: str
    uuid: str
    minor: int
    pci_bus_id: str
    pcie_root: str
    compute_mode: int
    time_slice: int
    mig_current: bool
    mig_pending: bool
    lost: bool
    fabric: FabricEntry | None
    gpu_instances: list[GiState]
    #: Absent in files written before it was recorded (then: on).
    persistence_mode: NotRequired[bool]


class EventState(TypedDict):
    """One recorded health event."""

    seq: int
    kind: str
    gpu_uuid: str
    xid: int | None
    gi_id: int | None
    ci_id: int | None
    description: str


class FaultState(TypedDict):
    """An armed fault: the next ``remaining`` calls of ``operation`` fail with ``error``."""

    operation: str
    gpu_uuid: str | None
    error: str
    remaining: int


class NodeState(TypedDict):
    """The whole fake node."""

    version: int
    node_name: str
    fleet: str
    driver_version: str
    cuda_driver_version: str
    nvml_version: str
    gpus: list[GpuState]
    events: list[EventState]
    next_seq: int
    faults: list[FaultState]


class FakeStateStore:
    """Locked access to one state file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock_path = path.with_name(path.name + ".lock")

    def host_dir(self) -> Path:
        """Where the node's fake host tree (sysfs, ``/dev``) lives: ``<state>.host/``."""
        return self.path.with_name(self.path.stem + ".host")

    def close(self) -> None:
        """Nothing to release: the state stays on disk for the node's other processes."""

    @contextlib.contextmanager
    def _locked(self, *, exclusive: bool) -> Iterator[None]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise FakeStateError(str(self.path), f"cannot open lock: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    def _load(self) -> NodeState | None:
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise FakeStateError(str(self.path), f"cannot read: {exc.strerror}") from exc
        try:
            doc = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise FakeStateError(str(self.path), f"not valid JSON: {exc}") from exc
        if not isinstance(doc, dict) or doc.get("version") != STATE_VERSION:
            raise FakeStateError(str(self.path), f"not a version {STATE_VERSION} fake GPU state")
        return cast(NodeState, doc)

    def _store(self, doc: NodeState) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, indent=1, sort_keys=True)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise FakeStateError(str(self.path), f"cannot write: {exc.strerror}") from exc

    def read(self) -> NodeState | None:
        """A consistent snapshot (``None`` when the file does not exist yet)."""
        with self._locked(exclusive=False):
            return self._load()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """Exclusive read-modify-write; the document is written back only if ``tx.doc`` was
        set or ``tx.dirty`` was marked and no exception escaped."""
        with self._locked(exclusive=True):
            tx = Transaction(self._load())
            yield tx
            if tx.dirty and tx.doc is not None:
                self._store(tx.doc)


class MemoryStateStore(FakeStateStore):
    """A node held by this process only: no state file, no lock (nobody else sees it).

    ``path`` names it in messages only. The fake host tree, built only when asked for
    (passthrough), goes to a private temporary directory that :meth:`close` removes.
    """

    def __init__(self, label: str) -> None:
        super().__init__(Path(label))
        self._doc: NodeState | None = None
        self._host: Path | None = None

    @contextlib.contextmanager
    def _locked(self, *, exclusive: bool) -> Iterator[None]:  # noqa: ARG002 - one process
        yield

    def _load(self) -> NodeState | None:
        # A copy, as a file read gives: a failed transaction leaves the node unchanged.
        return copy.deepcopy(self._doc)

    def _store(self, doc: NodeState) -> None:
        self._doc = copy.deepcopy(doc)

    def host_dir(self) -> Path:
        """A private temporary directory, made on first use and removed by :meth:`close`."""
        if self._host is None:
            self._host = Path(tempfile.mkdtemp(prefix="dra-nvlib-host-"))
        return self._host

    def close(self) -> None:
        """Remove the temporary host tree, if one was built."""
        if self._host is not None:
            shutil.rmtree(self._host, ignore_errors=True)
            self._host = None


class Transaction:
    """The document inside :meth:`FakeStateStore.transaction`."""

    def __init__(self, doc: NodeState | None) -> None:
        self.doc = doc
        self.dirty = False

    def replace(self, doc: NodeState) -> None:
        """Install a whole new document."""
        self.doc = doc
        self.dirty = True

    def node(self) -> NodeState:
        """The existing document, marked to be written back."""
        if self.doc is None:
            raise FakeStateError("<transaction>", "no state document")
        self.dirty = True
        return self.doc
