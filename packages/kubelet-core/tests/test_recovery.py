"""The engine's recovery on its own: rebuilding entries from CDI specs, and a driver
recovery that fails being reported once per distinct failure and kept due until it works."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path

from dra_api_types import ResourceClaim
from dra_kubelet_core.allocated import AllocatedDevice
from dra_kubelet_core.allocation_info import DeviceIdentity
from dra_kubelet_core.cdi import CDIKind, ContainerEdits
from dra_kubelet_core.cdi_store import CDIStore
from dra_kubelet_core.checkpoint import CheckpointStore, ClaimState, PreparedClaim, PreparedDevice
from dra_kubelet_core.driver import ClaimEdits, ClaimPlan, DriverIdentity, PrepareContext
from dra_kubelet_core.errors import ClaimRef, RecoveryError
from dra_kubelet_core.events import LogEventRecorder
from dra_kubelet_core.recovery import Recovery, rebuild_from_specs

KIND = CDIKind(vendor="k8s.test.example.com")


class FlakyRecovery:
    """A driver whose recovery fails with the queued errors, then succeeds."""

    def __init__(self, failures: Sequence[Exception]) -> None:
        self.failures = list(failures)
        self.calls: list[dict[str, PreparedClaim]] = []

    @property
    def identity(self) -> DriverIdentity:
        return DriverIdentity(name="test.example.com", cdi=KIND)

    def plan(
        self, ref: ClaimRef, claim: ResourceClaim, allocated: Sequence[AllocatedDevice]
    ) -> ClaimPlan[None]:
        raise AssertionError("not planned in these tests")

    async def prepare(
        self, ref: ClaimRef, plan: ClaimPlan[None], ctx: PrepareContext
    ) -> ClaimEdits:
        raise AssertionError("not prepared in these tests")

    async def unprepare(self, entry: PreparedClaim, *, claims: Mapping[str, PreparedClaim]) -> None:
        raise AssertionError("not unprepared in these tests")

    async def recover(self, entries: Mapping[str, PreparedClaim]) -> None:
        self.calls.append(dict(entries))
        if self.failures:
            raise self.failures.pop(0)

    def device_type(self, device: PreparedDevice) -> str:
        return "toy"

    def device_identity(
        self, claim: PreparedClaim, device: PreparedDevice
    ) -> DeviceIdentity | None:
        return None


def _entry(uid: str, *, rebuilt: bool = False) -> PreparedClaim:
    return PreparedClaim(
        uid=uid,
        namespace="",
        name="",
        state=ClaimState.PREPARE_STARTED,
        devices=(),
        rebuilt=rebuilt,
    )


def _recovery(tmp_path: Path, events: LogEventRecorder) -> Recovery:
    return Recovery(
        driver_name="test.example.com",
        events=events,
        store=CheckpointStore(tmp_path / "checkpoint.json"),
        cdi=CDIStore(tmp_path / "cdi", kind=KIND),
        pool_name="n1",
    )


def test_failed_recovery_is_evented_once_per_failure_and_due_until_it_works(
    tmp_path: Path,
) -> None:
    events = LogEventRecorder("n1")
    recovery = _recovery(tmp_path, events)
    driver = FlakyRecovery(
        [
            RecoveryError("MIG device MIG-1 busy"),
            RecoveryError("MIG device MIG-1 busy"),
            RuntimeError("unexpected"),
        ]
    )

    async def go() -> None:
        for _ in range(3):
            assert not await recovery.run(driver, {})
            assert recovery.due
        assert await recovery.run(driver, {"u1": _entry("u1")})
        assert not recovery.due

    asyncio.run(go())
    assert [r for r, _ in events.recorded] == ["RecoveryIncomplete", "RecoveryIncomplete"]
    assert "MIG device MIG-1 busy" in events.recorded[0][1]
    assert "unexpected" in events.recorded[1][1]
    assert len(driver.calls) == 4


def test_recovery_stays_due_while_rebuilt_entries_exist(tmp_path: Path) -> None:
    recovery = _recovery(tmp_path, LogEventRecorder("n1"))
    driver = FlakyRecovery([])

    async def go() -> None:
        assert await recovery.run(driver, {"u1": _entry("u1", rebuilt=True)})
        assert recovery.due, "what is kept for u1 is removed once it is gone"
        assert await recovery.run(driver, {})
        assert not recovery.due

    asyncio.run(go())


def test_rebuild_from_specs_gives_every_spec_an_entry(tmp_path: Path) -> None:
    cdi = CDIStore(tmp_path, kind=KIND)
    spec = KIND.render_claim_spec(
        claim_uid="u1", devices=(("dev-0", ContainerEdits(env=("A=1",))),), common=()
    )
    cdi.write("u1", spec)
    cdi.path_for("u2").write_text("{not json")
    claims = rebuild_from_specs(cdi, pool_name="n1")
    assert set(claims) == {"u1", "u2"}, "an unreadable spec still serves: kept"
    assert all(c.rebuilt and c.state is ClaimState.PREPARE_STARTED for c in claims.values())
    (device,) = claims["u1"].devices
    assert (device.device_name, device.pool_name) == ("dev-0", "n1")
    assert device.cdi_device_ids == (KIND.device_id("u1", "dev-0"),)
    assert claims["u2"].devices == ()
