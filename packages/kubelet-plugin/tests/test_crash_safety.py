"""Crash safety: SIGKILL the real plugin process at random points during 200
prepare/unprepare cycles, restart it, let the "kubelet" retry, and check the invariants
after every restart:

- the checkpoint is readable (never moved aside as corrupt);
- no CDI spec exists without a checkpoint entry for its claim;
- after the retry, every prepared claim has its spec and the retried call succeeded;
- no device is prepared for two claims.
"""

from __future__ import annotations

import json
import random
import threading
import uuid
from dataclasses import dataclass, field

import grpc
import pytest
from dra_kubelet_core.checkpoint import ClaimState, decode_checkpoint
from kubelet_plugin_support import (
    PluginDirs,
    PluginProcess,
    ReferenceProtos,
    make_claim,
    write_claim,
)

pytestmark = pytest.mark.slow

CYCLES = 200
KILL_EVERY = 8  # on average one kill per 8 operations: ~25 restarts


@dataclass
class Slot:
    """A pair of GPUs used by one claim at a time (a new claim, new UID, each time)."""

    devices: tuple[str, str]
    claim: dict[str, object] = field(default_factory=dict)
    prepared: bool = False

    def ref(self) -> tuple[str, str, str]:
        meta = self.claim["metadata"]
        assert isinstance(meta, dict)
        return (meta["namespace"], meta["name"], meta["uid"])


def check_invariants(dirs: PluginDirs, slots: list[Slot], *, after_retry: bool) -> None:
    assert not list(dirs.plugin_dir.glob("checkpoint.json.corrupt-*")), "checkpoint corrupt"
    raw = dirs.checkpoint.read_bytes()
    checkpoint = decode_checkpoint(raw, path=str(dirs.checkpoint))
    specs = {
        p.name.removeprefix("k8s.gpu.nvidia.com-claim_").removesuffix(".json")
        for p in dirs.cdi.glob("k8s.gpu.nvidia.com-claim_*.json")
    }
    assert specs <= set(checkpoint.claims), (
        f"specs without claims: {specs - set(checkpoint.claims)}"
    )
    seen: dict[str, str] = {}
    for uid, claim in checkpoint.claims.items():
        for device in claim.devices:
            assert device.device_name not in seen, (
                f"{device.device_name} prepared for {seen[device.device_name]} and {uid}"
            )
            seen[device.device_name] = uid
        if claim.state is ClaimState.PREPARE_COMPLETED:
            assert uid in specs, f"completed claim {uid} has no CDI spec"
            spec = json.loads((dirs.cdi / f"k8s.gpu.nvidia.com-claim_{uid}.json").read_text())
            assert len(spec["devices"]) == len(claim.devices)
    if after_retry:
        expected = {s.ref()[2] for s in slots if s.prepared}
        completed = {
            uid for uid, c in checkpoint.claims.items() if c.state is ClaimState.PREPARE_COMPLETED
        }
        assert completed == expected
        assert set(checkpoint.claims) == expected


def call(
    reference: ReferenceProtos, proc: PluginProcess, op: str, refs: list[tuple[str, str, str]]
) -> None:
    """One kubelet call for ``refs``; every claim must succeed."""
    with proc.channel() as ch:
        send = reference.prepare if op == "prepare" else reference.unprepare
        answer = send(ch, refs)
    for ref in refs:
        assert answer.claims[ref[2]].error == "", answer


def test_sigkill_at_random_points_never_breaks_the_invariants(
    plugin_dirs: PluginDirs, reference: ReferenceProtos
) -> None:
    rng = random.Random(20261130)
    proc = PluginProcess(plugin_dirs)
    proc.start()
    slots = [Slot(devices=(f"gpu-{2 * i}", f"gpu-{2 * i + 1}")) for i in range(4)]
    restarts = 0
    try:
        for cycle in range(CYCLES):
            # One call for 1-3 claims in the same direction (a pod's claims), so several
            # claims are committed together.
            op = rng.choice(["prepare", "unprepare"])
            candidates = [s for s in slots if s.prepared == (op == "unprepare")]
            if not candidates:
                op = "unprepare" if op == "prepare" else "prepare"
                candidates = [s for s in slots if s.prepared == (op == "unprepare")]
            chosen = rng.sample(candidates, k=min(len(candidates), rng.randint(1, 3)))
            for i, slot in enumerate(chosen):
                if op == "prepare":
                    slot.claim = make_claim(
                        name=f"c{cycle}-{i}", devices=list(slot.devices), uid=str(uuid.uuid4())
                    )
                    write_claim(plugin_dirs.claims, slot.claim)
            refs = [slot.ref() for slot in chosen]
            killer = None
            if rng.randrange(KILL_EVERY) == 0:
                assert proc.proc is not None
                killer = threading.Timer(rng.uniform(0.0, 0.03), proc.proc.kill)
                killer.start()
            try:
                call(reference, proc, op, refs)
            except grpc.RpcError:
                assert killer is not None, proc.logs()
            if killer is not None:
                killer.join()
                proc.kill()  # no-op if the timer already did it
                check_invariants(plugin_dirs, slots, after_retry=False)
                proc.start()
                restarts += 1
                # The kubelet retries the call it did not get an answer for.
                call(reference, proc, op, refs)
            for slot in chosen:
                slot.prepared = op == "prepare"
                if op == "unprepare":
                    meta = slot.claim["metadata"]
                    assert isinstance(meta, dict)
                    (plugin_dirs.claims / "default" / f"{meta['name']}.json").unlink()
            if killer is not None:
                check_invariants(plugin_dirs, slots, after_retry=True)
        prepared = [slot.ref() for slot in slots if slot.prepared]
        if prepared:
            call(reference, proc, "unprepare", prepared)
        for slot in slots:
            slot.prepared = False
        check_invariants(plugin_dirs, slots, after_retry=True)
        assert not list(plugin_dirs.cdi.iterdir())
    finally:
        if proc.proc is not None and proc.proc.poll() is None:
            proc.stop()
    assert restarts >= 10
