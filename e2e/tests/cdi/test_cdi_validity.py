"""Every CDI spec our plugins write, through the CDI library a runtime loads specs with.

Each test prepares claims of one kind in process, with the plugins' own code on the fake GPU
backend (the claim engine, the GPU driver with its sharing and passthrough steps, the
compute-domain driver over an in-memory API), and hands the spec files and the CDI device IDs
returned to the kubelet to :func:`dra_e2e.cdi_oracle.validate_specs`: the CDI JSON schema,
the library's spec validation, one spec cache holding them all, and every device injected
alone into an empty OCI spec. Stand-in device nodes are ``/dev/null``, which the library can
stat, so injection runs as on a node.

Built from the Go module proxy (``dra_e2e.cdi_oracle``), like the toolkit-parity tests.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dra_api_types import ResourceClaim
from dra_computedomain.api_paths import node_path, object_path
from dra_computedomain.channel_nodes import ChannelNodes
from dra_computedomain.domain_cache import DomainCache
from dra_computedomain.node_api import NodeApi
from dra_computedomain.plugin_driver import CDI_KIND, ComputeDomainDriver
from dra_e2e.cdi_oracle import CdiOracle, CdiSpecRefusedError, build_cdi_oracle, validate_specs
from dra_kube_client.testing import MemoryApi
from dra_kubelet_core.cdi_store import CDIStore
from dra_kubelet_core.checkpoint import CheckpointStore
from dra_kubelet_core.claim_source import DirectoryClaimSource
from dra_kubelet_core.errors import ClaimRef
from dra_kubelet_core.events import LogEventRecorder
from dra_kubelet_core.host_devices import StandInDeviceNodes
from dra_kubelet_core.metrics import PluginMetrics
from dra_kubelet_core.node_lock import NodeLock
from dra_kubelet_core.state import ClaimEngine
from dra_kubelet_plugin.cdi import GPU_CDI
from dra_kubelet_plugin.container_edits import FakeEdits
from dra_kubelet_plugin.device_metadata import MetadataFiles
from dra_kubelet_plugin.gpu_driver import GpuDriver, GpuPlan
from dra_kubelet_plugin.gpu_sharing import GpuSharing
from dra_kubelet_plugin.inventory import NodeDevice
from dra_kubelet_plugin.passthrough_claims import PassthroughClaims
from dra_kubelet_plugin.passthrough_devices import Passthrough
from dra_kubelet_plugin.plugin import enumerate_devices
from dra_nvlib import DeviceLibConfig, FakeDeviceLib, FakePciBus, open_device_lib
from dra_sharing import (
    DynamicMig,
    FakeMpsLauncher,
    MpsDaemonManager,
    SharingGates,
    SharingManager,
    TimeSlicer,
)
from kubelet_core_support import make_claim

pytestmark = pytest.mark.slow

GPU_DRIVER = "gpu.nvidia.com"
CD_DRIVER = "compute-domain.nvidia.com"
API = "resource.nvidia.com/v1beta1"
NODE = "n1"
DRIVER_NS = "dra-driver"


def gpu_config(parameters: dict[str, Any], *, requests: list[str] | None = None) -> dict[str, Any]:
    """An allocation config entry carrying ``parameters`` for the GPU driver."""
    entry: dict[str, Any] = {
        "source": "FromClaim",
        "opaque": {"driver": GPU_DRIVER, "parameters": parameters},
    }
    if requests:
        entry["requests"] = requests
    return entry


def write_claim(claims_dir: Path, claim: dict[str, Any]) -> None:
    """Store a claim where the directory claim source finds it."""
    meta = claim["metadata"]
    path = claims_dir / meta["namespace"] / f"{meta['name']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(claim))


@pytest.fixture(scope="module")
def oracle() -> CdiOracle:
    return build_cdi_oracle(progress=lambda msg: print(msg, file=sys.stderr, flush=True))


def _check(oracle: CdiOracle, cdi_dir: Path, ids: list[str]) -> list[str]:
    """Validate every spec in ``cdi_dir``; every returned ID must be one of its devices."""
    devices = validate_specs(oracle, sorted(cdi_dir.glob("*.json")), inject=ids)
    assert set(ids) <= set(devices)
    return devices


# ------------------------------------------------------------------ GPU plugin


def _gpu_engine(
    root: Path, fleet: str, *, passthrough: bool = False, dynamic_mig: bool = False
) -> tuple[ClaimEngine[GpuPlan], list[NodeDevice]]:
    """The GPU plugin's engine on a fake fleet; a ``:mig`` GPU gets one static MIG device."""
    lib = open_device_lib(
        DeviceLibConfig(
            backend="fake", node_name=NODE, fake_fleet=fleet, fake_state_path=root / "fake.json"
        )
    )
    assert isinstance(lib, FakeDeviceLib)
    for gpu in lib.gpus():
        if gpu.mig_mode.current and not dynamic_mig:
            lib.create_mig_device(gpu.uuid, profile_id=19, placement_start=0)
    (root / "plugin").mkdir(parents=True, exist_ok=True)
    edits = FakeEdits(root / "plugin" / "claims")
    claims = None
    if passthrough:
        bus = lib.pci_bus()
        assert isinstance(bus, FakePciBus)
        claims = PassthroughClaims(
            Passthrough(bus, host=StandInDeviceNodes(), lib=lib, wait_timeout_s=0),
            driver_name=GPU_DRIVER,
            metadata=MetadataFiles(root / "plugin", driver=GPU_DRIVER),
            on_change=lambda: None,
        )
    manager = SharingManager(
        time_slicer=TimeSlicer(lib),
        mps=MpsDaemonManager(root / "mps", lib=lib, launcher=FakeMpsLauncher()),
        dynamic_mig=DynamicMig(lib),
    )
    sharing = GpuSharing(
        lib=lib, manager=manager, gates=SharingGates(time_slicing=True, mps=True), edits=edits
    )
    devices = enumerate_devices(lib, claims, dynamic_mig=dynamic_mig)
    driver = GpuDriver(
        driver_name=GPU_DRIVER, devices=devices, edits=edits, passthrough=claims, sharing=sharing
    )
    engine = ClaimEngine(
        driver=driver,
        pool_name=NODE,
        claims=DirectoryClaimSource(root / "claims"),
        checkpoints=CheckpointStore(root / "plugin" / "checkpoint.json"),
        cdi=CDIStore(root / "cdi", kind=GPU_CDI),
        lock=NodeLock(root / "plugin" / "prepare.lock"),
        boot_id="boot-1",
        events=LogEventRecorder(NODE),
        metrics=PluginMetrics(),
    )
    return engine, devices


Prepared = list[tuple[ClaimEngine[GpuPlan], list[ClaimRef]]]


@pytest.fixture
def prepared() -> Iterator[Prepared]:
    """The claims a test prepared, unprepared after it: an MPS claim's daemon, a process,
    must not outlive the test."""
    out: Prepared = []
    yield out
    for engine, refs in out:
        outcomes = asyncio.run(engine.unprepare_claims(refs))
        assert all(outcomes[ref.uid].error == "" for ref in refs), outcomes


def _prepare_gpu(
    root: Path, engine: ClaimEngine[GpuPlan], claims: list[dict[str, Any]], prepared: Prepared
) -> list[str]:
    refs = []
    for claim in claims:
        write_claim(root / "claims", claim)
        meta = claim["metadata"]
        refs.append(ClaimRef(namespace=meta["namespace"], name=meta["name"], uid=meta["uid"]))

    async def go() -> list[str]:
        await engine.start()
        outcomes = await engine.prepare_claims(refs)
        for ref in refs:
            assert outcomes[ref.uid].error == "", outcomes[ref.uid].error
        return [i for ref in refs for d in outcomes[ref.uid].devices for i in d.cdi_device_ids]

    prepared.append((engine, refs))
    return asyncio.run(go())


def _sharing(strategy: dict[str, Any]) -> dict[str, Any]:
    return gpu_config({"apiVersion": API, "kind": "GpuConfig", "sharing": strategy})


GPU_CASES = {
    "full-gpus": ("2xH100-80GB", [["gpu-0", "gpu-1"]], []),
    "mig-static": (
        "1xA100-40GB:mig,1xH100-80GB",
        [["MIG"], ["gpu-1"]],
        [gpu_config({"apiVersion": API, "kind": "MigDeviceConfig"}, requests=["mig"])],
    ),
    "time-slicing": (
        "1xH100-80GB",
        [["gpu-0"]],
        [_sharing({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}})],
    ),
    "mps": (
        "1xH100-80GB",
        [["gpu-0"]],
        [_sharing({"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50}})],
    ),
}


@pytest.mark.parametrize("case", sorted(GPU_CASES))
def test_gpu_claim_specs_are_valid_for_the_cdi_library(
    oracle: CdiOracle, tmp_path: Path, case: str, prepared: Prepared
) -> None:
    fleet, claims, configs = GPU_CASES[case]
    engine, devices = _gpu_engine(tmp_path, fleet)
    names = {d.name for d in devices}
    static_mig = [d.name for d in devices if d.mig is not None]
    objects = []
    for n, listed in enumerate(claims):
        wanted = [("mig", static_mig[0]) if w == "MIG" else w for w in listed]
        assert {w if isinstance(w, str) else w[1] for w in wanted} <= names, sorted(names)
        objects.append(make_claim(name=f"{case}-{n}", devices=wanted, configs=configs))
    ids = _prepare_gpu(tmp_path, engine, objects, prepared)
    assert len(ids) == sum(len(c) for c in claims)
    _check(oracle, tmp_path / "cdi", ids)


def test_dynamic_mig_and_consumable_share_specs_are_valid(
    oracle: CdiOracle, tmp_path: Path, prepared: Prepared
) -> None:
    engine, devices = _gpu_engine(tmp_path, "1xA100-40GB,1xH100-80GB", dynamic_mig=True)
    placement = next(d.name for d in devices if d.dynamic)
    mig = make_claim(name="dyn", devices=[placement])
    shares = []
    for n in range(2):
        claim = make_claim(name=f"share-{n}", devices=["gpu-1"])
        claim["status"]["allocation"]["devices"]["results"][0]["shareID"] = f"0b7c-000{n}"
        shares.append(claim)
    ids = _prepare_gpu(tmp_path, engine, [mig, *shares], prepared)
    assert len(ids) == 3
    _check(oracle, tmp_path / "cdi", ids)


def test_vfio_passthrough_spec_is_valid(
    oracle: CdiOracle, tmp_path: Path, prepared: Prepared
) -> None:
    engine, _ = _gpu_engine(tmp_path, "2xA100-40GB", passthrough=True)
    vfio = {
        "apiVersion": API,
        "kind": "VfioDeviceConfig",
        "iommu": {"backendPolicy": "PreferIommuFD", "enableAPIDevice": True},
    }
    claim = make_claim(name="vm", devices=["gpu-vfio-0"], configs=[gpu_config(vfio)])
    ids = _prepare_gpu(tmp_path, engine, [claim], prepared)
    _check(oracle, tmp_path / "cdi", ids)


# ------------------------------------------------------------------ compute-domain plugin


class _Claims:
    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], ResourceClaim] = {}

    async def get(self, namespace: str, name: str) -> ResourceClaim | None:
        return self.claims.get((namespace, name))


def _cd_claim(
    domain_uid: str, *, uid: str, device: str, namespace: str, mode: str = ""
) -> ResourceClaim:
    kind = "ComputeDomainChannelConfig" if device == "channel-0" else "ComputeDomainDaemonConfig"
    parameters: dict[str, Any] = {"apiVersion": API, "kind": kind, "domainID": domain_uid}
    if mode:
        parameters["allocationMode"] = mode
    result = {"request": "r", "driver": CD_DRIVER, "pool": NODE, "device": device}
    config = {"source": "FromClaim", "opaque": {"driver": CD_DRIVER, "parameters": parameters}}
    return ResourceClaim.from_dict(
        {
            "metadata": {"name": f"c-{uid}", "namespace": namespace, "uid": uid},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "x"}}]}},
            "status": {"allocation": {"devices": {"results": [result], "config": [config]}}},
        }
    )


@pytest.fixture
def cd_api() -> tuple[MemoryApi, str]:
    api = MemoryApi()
    body = {
        "apiVersion": API,
        "kind": "ComputeDomain",
        "metadata": {"name": "cd1", "namespace": "team-a"},
        "spec": {"numNodes": 1, "channel": {"resourceClaimTemplate": {"name": "ch"}}},
    }
    cd = api.put_object(object_path("ComputeDomain", "team-a", "cd1"), body)
    api.put_object(node_path(NODE), {"metadata": {"name": NODE, "labels": {}}})
    return api, str(cd["metadata"]["uid"])


def _ready(api: MemoryApi, uid: str, clique: str) -> None:
    daemon = {"nodeName": NODE, "ipAddress": "10.0.0.1", "cliqueID": clique, "index": 0}
    if clique:
        api.put_object(
            object_path("ComputeDomainClique", DRIVER_NS, f"{uid}.{clique}"),
            {
                "metadata": {
                    "name": f"{uid}.{clique}",
                    "namespace": DRIVER_NS,
                    "labels": {"resource.nvidia.com/computeDomain": uid},
                },
                "daemons": [{**daemon, "status": "Ready"}],
            },
        )
        return
    path = object_path("ComputeDomain", "team-a", "cd1")
    api.objects[path]["status"] = {
        "status": "Ready",
        "nodes": [{"name": NODE, "ipAddress": "10.0.0.1", "cliqueID": "", "status": "Ready"}],
    }


@pytest.mark.parametrize("clique", ["cluster.1", ""], ids=["nvlink-clique", "no-fabric"])
def test_compute_domain_specs_are_valid_with_and_without_fabric(
    oracle: CdiOracle, cd_api: tuple[MemoryApi, str], tmp_path: Path, clique: str
) -> None:
    """Channel Single and All, and the daemon: valid on a node with an NVLink clique; without
    one (NVIDIA's: no channel nodes) the channel claims name no CDI device at all."""
    api, uid = cd_api
    _ready(api, uid, clique)
    claims = _Claims()
    domains = DomainCache(api)
    domains.informer.list_once()  # everything is in place: one list, no watch needed
    driver = ComputeDomainDriver(
        NodeApi(api, node_name=NODE, driver_namespace=DRIVER_NS, domains=domains),
        clique_id=clique,
        domains_dir=tmp_path / "domains",
        channel_nodes=ChannelNodes(StandInDeviceNodes()),
    )
    engine = ClaimEngine(
        driver=driver,
        hooks=driver,
        pool_name=NODE,
        claims=claims,
        checkpoints=CheckpointStore(tmp_path / "checkpoint.json"),
        cdi=CDIStore(tmp_path / "cdi", kind=CDI_KIND),
        lock=NodeLock(tmp_path / "lock"),
        boot_id="boot",
        events=LogEventRecorder(NODE),
        metrics=PluginMetrics(),
    )
    wanted = [
        ("d-1", "daemon-0", ""),
        ("single", "channel-0", "Single"),
        ("all", "channel-0", "All"),
    ]
    injected: dict[str, list[str]] = {}

    async def go() -> None:
        await engine.start()
        for claim_uid, device, mode in wanted:
            # The daemon's claim lives in the driver namespace, a workload's in the domain's.
            namespace = DRIVER_NS if device == "daemon-0" else "team-a"
            claim = _cd_claim(uid, uid=claim_uid, device=device, namespace=namespace, mode=mode)
            claims.claims[(namespace, f"c-{claim_uid}")] = claim
            ref = ClaimRef(namespace=namespace, name=f"c-{claim_uid}", uid=claim_uid)
            prepared = await engine.prepare(ref)
            ids = injected[claim_uid] = [i for d in prepared for i in d.cdi_device_ids]
            spec = tmp_path / "cdi" / CDI_KIND.spec_file_name(claim_uid)
            if ids:
                _check(oracle, tmp_path / "cdi", ids)
            else:
                assert not spec.exists()
            if device == "channel-0":
                # One channel-0 at a time on a node (NVIDIA #641): the next claim needs it free.
                await engine.unprepare(ref)

    asyncio.run(go())
    assert len(injected["d-1"]) == 1
    assert len(injected["single"] + injected["all"]) == (2 if clique else 0)


def test_the_oracle_refuses_a_device_with_empty_edits(oracle: CdiOracle, tmp_path: Path) -> None:
    """What the compute-domain plugin wrote on a node without a clique before the fix."""
    spec = tmp_path / "k8s.compute-domain.nvidia.com-claim_u1.json"
    spec.write_text(
        '{"cdiVersion": "0.3.0", "kind": "k8s.compute-domain.nvidia.com/claim",'
        ' "devices": [{"name": "u1-channel-0", "containerEdits": {}}]}'
    )
    with pytest.raises(CdiSpecRefusedError, match="invalid device, empty device edits"):
        validate_specs(oracle, [spec])
