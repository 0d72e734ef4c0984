"""What the scale benchmark watches: claim and pod times from its watches, and the first scrape
of the allocation controller's metrics that shows each claim allocated, made by a child
process at the lowest priority (:mod:`dra_e2e.scale_scrape`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from dra_e2e.scale_observe import ClaimWatch
from dra_e2e.scale_scrape import NICENESS, MetricsScraper
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


@pytest.fixture
def metrics_server() -> Iterator[tuple[str, list[str]]]:
    pages: list[str] = [""]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages[-1].encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics", pages
    server.shutdown()
    server.server_close()


def test_scraper_records_when_each_claim_first_shows_allocated(
    metrics_server: tuple[str, list[str]],
) -> None:
    url, pages = metrics_server
    scraper = MetricsScraper(url, NS, interval=0.05)
    line = 'kube_resourceclaim_allocated{{namespace="{ns}",name="{name}",resource_class="g"}} 1\n'
    scraper.start()
    try:
        _until("a scrape", lambda: scraper.scrapes >= 1)
        assert scraper.seen == {}
        before = time.monotonic()
        pages.append(line.format(ns=NS, name="a") + line.format(ns="other", name="b"))
        _until("a seen", lambda: "a" in scraper.seen)
        first = scraper.seen["a"]
        pages.append(pages[-1] + line.format(ns=NS, name="c"))
        _until("c seen", lambda: "c" in scraper.seen)
    finally:
        scraper.stop()
    assert set(scraper.seen) == {"a", "c"}
    assert before - 0.05 <= first <= scraper.seen["c"]
    assert scraper.seen["a"] == first  # the first sight is kept
    assert scraper.failures == 0


def test_scraper_counts_failed_scrapes() -> None:
    scraper = MetricsScraper("http://127.0.0.1:9/metrics", NS, interval=0.02)
    scraper.start()
    try:
        _until("failures", lambda: scraper.failures >= 2)
    finally:
        scraper.stop()
    assert scraper.seen == {}


def test_the_scraping_child_runs_at_the_lowest_priority_and_stops(
    metrics_server: tuple[str, list[str]],
) -> None:
    url, _ = metrics_server
    scraper = MetricsScraper(url, NS, interval=0.05)
    scraper.start()
    pid = scraper.pid
    assert pid is not None
    try:
        _until("a scrape", lambda: scraper.scrapes >= 1)
        # /proc/<pid>/stat: field 19 is the nice value (after the parenthesised name).
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        assert int(fields[16]) == NICENESS
    finally:
        scraper.stop()
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    scrapes = scraper.scrapes
    time.sleep(0.2)
    assert scraper.scrapes == scrapes  # nothing scrapes after stop
