"""What the scale benchmark watches: claim and pod times from its watches."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from dra_e2e.scale_observe import ClaimWatch
from dra_kube_client.testing import MemoryApi

NS = "scale-with"
CLAIMS = f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims"


def _until(what: str, check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_claim_watch_records_first_sight_allocation_and_reservation() -> None:
    api = MemoryApi()
    watch = ClaimWatch(api, NS)
    watch.start()
    try:
        claim: dict[str, Any] = {"metadata": {"name": "c1", "namespace": NS}, "spec": {}}
        api.request("POST", CLAIMS, body=claim)
        api.request(
            "POST",
            f"/api/v1/namespaces/{NS}/pods",
            body={"metadata": {"name": "p1", "namespace": NS}, "spec": {"nodeName": "kwok-node-0"}},
        )
        _until("claim seen", lambda: "c1" in watch.claim_created)
        assert "c1" not in watch.claim_allocated
        claim["status"] = {"allocation": {"devices": {"results": []}}}
        api.request("PUT", f"{CLAIMS}/c1", body=claim)
        _until("allocation seen", lambda: "c1" in watch.claim_allocated)
        assert "c1" not in watch.claim_bound
        claim["status"]["reservedFor"] = [{"resource": "pods", "name": "p1", "uid": "u"}]
        api.request("PUT", f"{CLAIMS}/c1", body=claim)
        _until("reservation seen", lambda: "c1" in watch.claim_bound)
        _until("pod scheduled", lambda: "p1" in watch.scheduled)
    finally:
        watch.stop()
    created, allocated, bound = (
        watch.claim_created["c1"],
        watch.claim_allocated["c1"],
        watch.claim_bound["c1"],
    )
    assert created <= allocated <= bound
    assert watch.bound_since(created) == [bound - created]
    assert watch.bound_since(bound + 1) == []
