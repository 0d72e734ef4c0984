"""The plugin's ComputeDomain cache: found by UID, a late domain waited for, no guessing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from computedomain_support import domain_body
from dra_computedomain.api_paths import object_path
from dra_computedomain.domain_cache import DomainCache
from dra_kube_client import KubeApiError
from dra_kube_client.testing import MemoryApi


@pytest.fixture
def live() -> Iterator[MemoryApi]:
    """A server whose watches stay open (a second at a time)."""
    api = MemoryApi(watch_wait_s=1.0)
    yield api
    api.close()


def test_a_domain_is_found_by_uid_and_a_late_one_is_waited_for(live: MemoryApi) -> None:
    first = live.put_object(object_path("ComputeDomain", "team-a", "cd1"), domain_body())
    cache = DomainCache(live, miss_wait_s=10)
    stop = threading.Event()
    cache.start(stop)
    try:
        assert cache.informer.synced.wait(10)
        found = cache.get(first["metadata"]["uid"])
        assert found is not None
        assert found.metadata.name == "cd1"
        # Created after the list: the lookup waits for the watch event, not a list.
        body = domain_body("cd2", "team-b")
        body["metadata"]["uid"] = "late-uid"
        timer = threading.Timer(
            0.2, live.put_object, (object_path("ComputeDomain", "team-b", "cd2"), body)
        )
        timer.start()
        late = cache.get("late-uid")
        timer.join()
        assert late is not None
        assert late.metadata.namespace == "team-b"
        # Deleted: gone from the index too.
        gone = live.request("DELETE", object_path("ComputeDomain", "team-a", "cd1"))
        version = int(gone["metadata"]["resourceVersion"])
        deadline = time.monotonic() + 10
        while int(cache.informer.resource_version) < version:  # the watch event's arrival
            assert time.monotonic() < deadline
            time.sleep(0.01)
        cache.miss_wait_s = 0.1
        assert cache.get(first["metadata"]["uid"]) is None
        lists = [p for m, p in live.requests if m == "GET"]
        assert lists == ["/apis/resource.nvidia.com/v1beta1/computedomains"]
    finally:
        stop.set()


def test_before_the_first_list_a_miss_is_an_error_not_a_missing_domain() -> None:
    cache = DomainCache(MemoryApi(), miss_wait_s=0.01)  # never started
    with pytest.raises(KubeApiError) as err:
        cache.get("uid-1")
    assert err.value.status == 503
    assert "uid-1" in str(err.value)
