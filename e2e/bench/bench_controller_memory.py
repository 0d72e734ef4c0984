"""Where the allocation controller's memory goes at the 1,000-node run's size, without a cluster.

Run: ``make bench BENCH=controller_memory`` (on demand: the heap census takes minutes);
``--quick``: 100 nodes, 500 pods; ``--no-trace``: RSS figures only, in seconds.

The objects (:func:`dra_e2e.controller_fleet.build_fleet`: 1,000 kwok nodes x 8 GPUs, GB200,
H100 and MIG A100 in turn, their slices from the plugins' own code, 5,000 pods and their
5,164 allocated claims) are written as list pages of 500 (JSON text) by this process; then
fresh processes read them, each through the controller's real informers (decoding a page at
a time and trimming each object with its resource's transform, as from the API server):

- ``imports``: everything imported, nothing listed (the floor);
- ``stores-untrimmed``: every informer's cache filled with the objects as ``ALL_RESOURCES``
  trims them (managed fields, pods' unread fields), as the controller did before it kept
  only what it reads;
- ``stores``: every informer's cache filled as the controller's ``CONTROLLER_RESOURCES``
  select (pods: only those not bound) and trim them (the baseline the controller is judged
  against: the objects alone);
- ``controller``: the same, then ``AllocationController`` with its real ``ControllerMetrics``,
  3 reconciles and one ``/metrics`` rendering (what a scrape allocates);
- ``trace``: the ``controller`` side under ``tracemalloc``, printing what the caches hold and
  what the controller adds on top, by allocation site and by type.

Figures: ``VmRSS`` after each side's work (after a garbage collection) and ``VmHWM``, the
peak, which is what the scale run's 497 MB is. MB are 10^6 bytes.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import tracemalloc
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from dra_controller.allocation_controller import AllocationController, ControllerMetrics
from dra_controller.allocation_controller.caches import CONTROLLER_RESOURCES, PENDING_PODS
from dra_e2e.controller_fleet import build_fleet
from dra_e2e.footprint import MemoryFigures, parse_proc_status
from dra_kube_client.informers import Informer
from dra_kube_client.informers.resources import ALL_RESOURCES, Resource
from dra_kube_client.informers.store import Store
from prometheus_client import generate_latest

MB = 1_000_000
PAGE = 500
RECONCILES = 3
SIDES = ("imports", "stores-untrimmed", "stores", "controller")


class PagedFiles:
    """The list pages written by :func:`write_pages`, answered as an API server would (JSON
    text decoded per request, so each page's objects are fresh, as over the wire)."""

    def __init__(self, root: Path) -> None:
        """Pages under ``root``."""
        self.root = root
        self.kinds = {r.path: r.kind for r in ALL_RESOURCES}

    def request(
        self, method: str, path: str, *, query: Mapping[str, str] | None = None, **_: Any
    ) -> dict[str, Any]:
        """One page of a list (``continue`` is the page number), less the objects outside
        the query's field selector (the controller lists only pods not bound)."""
        del method
        page = int((query or {}).get("continue") or 0)
        text = (self.root / f"{self.kinds[path]}-{page}.json").read_text()
        body: dict[str, Any] = json.loads(text)
        selector = (query or {}).get("fieldSelector", "")
        if selector:
            # The controller's one field selector; the test double's selector code is not
            # imported here, since it would count in every side's memory.
            if selector != PENDING_PODS:
                raise ValueError(f"fieldSelector {selector!r}: only {PENDING_PODS!r} is served")
            body["items"] = [o for o in body["items"] if not (o.get("spec") or {}).get("nodeName")]
        return body

    def watch_lines(
        self, path: str, *, query: Mapping[str, str], timeout_s: float
    ) -> Iterator[dict[str, Any]]:
        """No watch events: the benchmark only lists."""
        del path, query, timeout_s
        yield from ()


def write_pages(root: Path, nodes: int, gpus: int, pods: int) -> dict[str, int]:
    """Every kind's list pages as JSON files under ``root``; the object count per kind."""
    fleet = build_fleet(nodes, gpus, pods)
    for kind, items in fleet.objects.items():
        pages = [items[i : i + PAGE] for i in range(0, len(items), PAGE)] or [[]]
        for n, chunk in enumerate(pages):
            meta = {"resourceVersion": "99999"}
            if n + 1 < len(pages):
                meta["continue"] = str(n + 1)
            (root / f"{kind}-{n}.json").write_text(json.dumps({"items": chunk, "metadata": meta}))
    return {kind: len(items) for kind, items in fleet.objects.items()}


def _memory() -> MemoryFigures:
    return parse_proc_status(Path("/proc/self/status").read_text())


def fill_stores(
    root: Path, resources: Sequence[Resource] = CONTROLLER_RESOURCES
) -> dict[str, Store]:
    """The controller's informer caches (as ``dra-allocation-controller`` wires them), filled
    from the pages (one list each)."""
    api = PagedFiles(root)
    informers = {r.kind: Informer(api, r) for r in resources}
    for informer in informers.values():
        informer.list_once()
    return {kind: i.store for kind, i in informers.items()}


def run_controller(stores: dict[str, Store]) -> tuple[AllocationController, int]:
    """The controller on ``stores``: reconciled :data:`RECONCILES` times, its metrics rendered
    once; the controller and the size of the rendering."""
    controller = AllocationController(stores, metrics=ControllerMetrics())
    for _ in range(RECONCILES):
        controller.reconcile()
    return controller, len(generate_latest(controller.metrics.registry))


def run_side(side: str, root: Path) -> dict[str, Any]:
    """One side in this process; its memory figures."""
    out: dict[str, Any] = {}
    if side == "stores-untrimmed":
        untrimmed = fill_stores(root, ALL_RESOURCES)
        out["objects"] = {k: len(s) for k, s in untrimmed.items()}
    if side in ("stores", "controller"):
        stores = fill_stores(root)
        out["objects"] = {k: len(s) for k, s in stores.items()}
        if side == "controller":
            _controller, out["scrape_bytes"] = run_controller(stores)
    gc.collect()
    memory = _memory()
    out["rss"], out["peak_rss"] = memory.rss, memory.peak_rss
    return out


def _types() -> Counter[str]:
    """Bytes (``sys.getsizeof``) of every object reachable from the collector's, by type."""
    seen: set[int] = set()
    sizes: Counter[str] = Counter()
    stack = gc.get_objects()
    # Not the census' own objects (its id set alone is tens of MB).
    seen.update((id(seen), id(sizes), id(stack)))
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        sizes[type(obj).__name__] += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return sizes


def _print_stats(title: str, stats: list[Any], top: int) -> None:
    print(f"  {title}")
    for stat in stats[:top]:
        frame = stat.traceback[0]
        where = f"{Path(frame.filename).parent.name}/{Path(frame.filename).name}:{frame.lineno}"
        size = getattr(stat, "size_diff", stat.size)
        print(f"    {size / MB:8.1f} MB  {where}")


def trace(root: Path, top: int) -> None:
    """The allocation sites and types of the caches, and of what the controller adds."""
    types_before = _types()
    tracemalloc.start(1)
    stores = fill_stores(root)
    gc.collect()
    # The census before each snapshot, and the first snapshot out of memory during the
    # second census: its traces are Python objects the census would count.
    types_stores = _types()
    dump = root / "stores.tracemalloc"
    tracemalloc.take_snapshot().dump(str(dump))
    controller, _ = run_controller(stores)
    gc.collect()
    types_controller = _types()
    after_controller = tracemalloc.take_snapshot()
    filters = [tracemalloc.Filter(False, tracemalloc.__file__)]
    s1 = tracemalloc.Snapshot.load(str(dump)).filter_traces(filters)
    s2 = after_controller.filter_traces(filters)
    total_stores = sum(s.size for s in s1.statistics("filename"))
    total_controller = sum(s.size for s in s2.statistics("filename"))
    print(
        f"\ntraced (tracemalloc): stores {total_stores / MB:.1f} MB, "
        f"controller adds {(total_controller - total_stores) / MB:.1f} MB"
    )
    _print_stats("the caches, by line:", s1.statistics("lineno"), top)
    _print_stats("what the controller adds, by file:", s2.compare_to(s1, "filename"), top)
    _print_stats("what the controller adds, by line:", s2.compare_to(s1, "lineno"), top)
    for title, diff in (
        ("the caches, by type (getsizeof):", types_stores - types_before),
        ("what the controller adds, by type:", types_controller - types_stores),
    ):
        print(f"  {title}")
        for name, size in diff.most_common(top):
            print(f"    {size / MB:8.1f} MB  {name}")
    del controller


def main() -> int:
    """Write the pages, run each side in a fresh process, print the figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="100 nodes, 500 pods")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--top", type=int, default=12, help="lines per breakdown")
    parser.add_argument("--no-trace", action="store_true", help="RSS figures only")
    parser.add_argument("--side", choices=[*SIDES, "trace"], help=argparse.SUPPRESS)
    parser.add_argument("--pages", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side == "trace":
        trace(args.pages, args.top)
        return 0
    if args.side:
        print(json.dumps(run_side(args.side, args.pages)))
        return 0
    if args.quick:
        args.nodes, args.pods = 100, 500
    with tempfile.TemporaryDirectory(prefix="bench-controller-memory-") as tmp:
        counts = write_pages(Path(tmp), args.nodes, args.gpus, args.pods)
        print(
            f"allocation controller memory: {args.nodes} nodes x {args.gpus} GPUs; "
            f"objects: {counts}"
        )
        results = {}
        for side in SIDES:
            cmd = [sys.executable, __file__, "--side", side, "--pages", tmp]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            results[side] = json.loads(out.strip().splitlines()[-1])
        for side, r in results.items():
            print(
                f"  {side:10s}  RSS {r['rss'] / MB:7.1f} MB   peak RSS {r['peak_rss'] / MB:7.1f} MB"
            )
        floor = results["imports"]["rss"]
        stores = results["stores"]["rss"] - floor
        ours = results["controller"]["rss"] - floor
        print(
            f"  above the imports: stores {stores / MB:.1f} MB, stores+controller "
            f"{ours / MB:.1f} MB (ratio {ours / stores:.2f}x); peak "
            f"{results['controller']['peak_rss'] / MB:.1f} MB "
            f"(the scale run's 497 MB; target 300 MB); one /metrics rendering "
            f"{results['controller']['scrape_bytes'] / MB:.1f} MB"
        )
        if not args.no_trace:
            cmd = [
                sys.executable,
                __file__,
                "--side",
                "trace",
                "--pages",
                tmp,
                "--top",
                str(args.top),
            ]
            subprocess.run(cmd, check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
