"""Checkpoint format: integrity over stored bytes, tolerance of newer fields, atomic writes."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from dra_kubelet_core.checkpoint import (
    Checkpoint,
    CheckpointStore,
    ClaimState,
    PreparedClaim,
    PreparedDevice,
    decode_checkpoint,
    encode_checkpoint,
)
from dra_kubelet_core.errors import (
    CheckpointCorruptError,
    CheckpointError,
    CheckpointTooNewError,
)


def sample() -> Checkpoint:
    device = PreparedDevice(
        request_names=("gpu",),
        pool_name="n1",
        device_name="gpu-0",
        cdi_device_ids=("k8s.gpu.nvidia.com/claim=u1-gpu-0",),
    )
    claim = PreparedClaim(
        uid="u1",
        namespace="default",
        name="c",
        state=ClaimState.PREPARE_COMPLETED,
        devices=(device,),
    )
    return Checkpoint(boot_id="b1", claims={"u1": claim})


def test_round_trip_is_exact() -> None:
    raw = encode_checkpoint(sample())
    assert decode_checkpoint(raw) == sample()
    assert json.loads(raw)["version"] == 1


def test_file_from_a_newer_writer_with_unknown_fields_is_accepted_and_kept() -> None:
    # A newer plugin adds fields and serializes differently (compact, reordered). The
    # checksum covers its bytes, so this older reader accepts the file and keeps the fields.
    doc = json.loads(encode_checkpoint(sample()))
    doc["claims"]["u1"]["mpsDaemon"] = {"pid": 42}
    doc["futureTopLevel"] = [1, 2]
    doc["checksum"] = "sha256:" + "0" * 64
    body = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    import hashlib

    body = body.replace(b"0" * 64, hashlib.sha256(body).hexdigest().encode(), 1)
    decoded = decode_checkpoint(body)
    assert decoded.claims["u1"].extra == {"mpsDaemon": {"pid": 42}}
    assert decoded.extra == {"futureTopLevel": [1, 2]}
    again = decode_checkpoint(encode_checkpoint(decoded))
    assert again.claims["u1"].extra == {"mpsDaemon": {"pid": 42}}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b.replace(b'"gpu-0"', b'"gpu-1"'), "checksum mismatch"),
        (lambda b: b[: len(b) // 2], "checksum"),
        (lambda b: b"", "no checksum"),
        (lambda b: b.replace(b'"version": 1', b'"version": 9'), "checksum mismatch"),
    ],
)
def test_damaged_bytes_are_detected(mutate: object, message: str) -> None:
    raw = encode_checkpoint(sample())
    assert callable(mutate)
    with pytest.raises(CheckpointCorruptError, match=message):
        decode_checkpoint(mutate(raw))


def test_unsupported_version_with_valid_checksum_is_reported() -> None:
    import hashlib

    raw = encode_checkpoint(sample())
    stored = json.loads(raw)["checksum"].encode()
    zeroed = raw.replace(stored, b"sha256:" + b"0" * 64).replace(b'"version": 1', b'"version": 7')
    fixed = zeroed.replace(b"0" * 64, hashlib.sha256(zeroed).hexdigest().encode(), 1)
    with pytest.raises(CheckpointCorruptError, match="version"):
        decode_checkpoint(fixed)


def test_store_moves_a_corrupt_file_aside_and_never_raises(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "checkpoint.json")
    store.path.write_text("{not json")
    result = store.load()
    assert result.checkpoint is None
    assert result.problem is not None
    assert result.moved_to is not None
    assert result.moved_to.read_text() == "{not json"
    assert not store.path.exists()
    assert store.load().problem is None  # now simply absent


def test_save_is_atomic_and_leaves_no_temp_file(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "checkpoint.json")
    store.save(sample())
    assert store.load().checkpoint == sample()
    assert sorted(os.listdir(tmp_path)) == ["checkpoint.json"]


def test_failed_save_keeps_the_previous_file(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "checkpoint.json")
    store.save(sample())
    before = store.path.read_bytes()
    bad = Checkpoint(boot_id="b2")
    blocker = tmp_path / f".checkpoint.json.tmp-{os.getpid()}"
    blocker.mkdir()  # the temp file cannot be created
    with pytest.raises(CheckpointError, match="write failed"):
        store.save(bad)
    assert store.path.read_bytes() == before


def _with_version(raw: bytes, version: int) -> bytes:
    """``raw`` claiming another format version, with a valid checksum (a newer writer)."""
    doc = json.loads(raw)
    doc["version"] = version
    doc["checksum"] = "sha256:" + "0" * 64
    body = (json.dumps(doc, indent=2) + "\n").encode()
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    return body.replace(("sha256:" + "0" * 64).encode(), digest.encode(), 1)


def test_newer_version_is_refused_as_too_new_and_moved_aside(tmp_path: Path) -> None:
    raw = _with_version(encode_checkpoint(sample()), 2)
    with pytest.raises(CheckpointTooNewError, match="version 2 is newer than this plugin"):
        decode_checkpoint(raw, path="cp")
    store = CheckpointStore(tmp_path / "checkpoint.json")
    store.path.write_bytes(raw)
    result = store.load()
    assert result.too_new
    assert result.checkpoint is None
    assert result.moved_to is not None
    assert result.moved_to.name.startswith("checkpoint.json.newer-")
    assert result.moved_to.read_bytes() == raw, "moved, never rewritten"
    assert not store.path.exists()


def test_rebuilt_mark_round_trips_and_keeps_version_1() -> None:
    cp = sample()
    cp.claims["u1"] = PreparedClaim(
        uid="u1",
        namespace="",
        name="",
        state=ClaimState.PREPARE_STARTED,
        devices=(),
        rebuilt=True,
    )
    raw = encode_checkpoint(cp)
    doc = json.loads(raw)
    assert doc["version"] == 1, "readable by the previous release (rollback)"
    assert doc["claims"]["u1"]["rebuiltFromSpec"] is True
    decoded = decode_checkpoint(raw)
    assert decoded.claims["u1"].rebuilt
    assert decoded.claims["u1"].extra == {}
    assert "rebuiltFromSpec" not in json.loads(encode_checkpoint(sample()))["claims"]["u1"]
