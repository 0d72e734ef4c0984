"""What the scale benchmark watches while a phase runs, on the client's clock.

:class:`ClaimWatch` follows a namespace's Pods and ResourceClaims: when each pod got a node,
and each claim was first seen, first seen allocated, and first seen allocated and reserved
for its pod (:mod:`dra_e2e.scale_scrape` records when each shows allocated in our allocation
controller's ``/metrics``). :class:`RssSampler` reads a process's resident memory every few
seconds, each sample labelled with the phase's step. Both run in daemon threads until
:meth:`stop`; the times are ``time.monotonic()``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dra_kube_client import JsonTransport
from dra_kube_client.informers import Informer, Listener, Resource, Store

from dra_e2e.memory_timeline import MemorySample

Say = Callable[[str], None]


def quiet(_: str) -> None:
    """A :data:`Say` that says nothing."""
    return


@dataclass
class ClaimWatch:
    """Client-side times of pods getting a node and claims getting allocated and reserved.

    Followed by the client's own informers, which resume each watch from the last version
    they saw: a watch reopened without one is answered with every object of the namespace
    again (5,000 pods and as many claims at the end of a 1,000-node phase): work for the
    API server that the cluster under test would not do, read here ahead of the events
    being timed (~0.2 CPU s a replay, docs/scale.md run 14).
    """

    transport: JsonTransport
    namespace: str
    say: Say = quiet
    scheduled: dict[str, float] = field(default_factory=dict)
    claim_created: dict[str, float] = field(default_factory=dict)
    claim_allocated: dict[str, float] = field(default_factory=dict)
    claim_bound: dict[str, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _informers: list[Informer] = field(default_factory=list)

    def _pod(self, obj: Mapping[str, Any], now: float) -> None:
        name = obj.get("metadata", {}).get("name", "")
        if (obj.get("spec") or {}).get("nodeName") and name not in self.scheduled:
            self.scheduled[name] = now

    def _claim(self, obj: Mapping[str, Any], now: float) -> None:
        name = obj.get("metadata", {}).get("name", "")
        self.claim_created.setdefault(name, now)
        status = obj.get("status") or {}
        if status.get("allocation"):
            self.claim_allocated.setdefault(name, now)
            if status.get("reservedFor"):
                self.claim_bound.setdefault(name, now)

    def _listener(self, store: Store, on: Callable[[Mapping[str, Any], float], None]) -> Listener:
        def changed(_kind: str, key: str) -> None:
            # Called on the informer's thread right after the event is applied.
            now = time.monotonic()
            if key == "*":  # listed (at start, or after the version expired)
                for listed in store.items().values():
                    on(listed, now)
            elif (obj := store.get(key)) is not None:
                on(obj, now)

        return changed

    def start(self) -> None:
        """Open both watches (each in a daemon thread)."""
        ns = self.namespace
        for resource, on in (
            (Resource("Pod", "v1", f"/api/v1/namespaces/{ns}/pods"), self._pod),
            (
                Resource(
                    "ResourceClaim",
                    "resource.k8s.io/v1",
                    f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims",
                ),
                self._claim,
            ),
        ):
            informer = Informer(self.transport, resource)
            informer.store.subscribe(self._listener(informer.store, on))
            self._informers.append(informer)
            threading.Thread(target=informer.run, args=(self._stop,), daemon=True).start()

    def stop(self) -> None:
        """Stop recording (the threads end with their watch's next event or timeout), and
        say how often each watch was listed again."""
        self._stop.set()
        for informer in self._informers:
            stats = informer.stats
            if stats.relists_gone or stats.errors:
                self.say(
                    f"[bench] {informer.resource.plural} watch: listed again "
                    f"{stats.relists_gone} times (version expired), {stats.errors} errors"
                )

    def bound_since(self, since: float) -> list[float]:
        """Claim-to-bound seconds of the claims first seen at or after ``since``."""
        return [
            self.claim_bound[c] - created
            for c, created in list(self.claim_created.items())
            if created >= since and c in self.claim_bound
        ]


@dataclass
class RssSampler:
    """Reads a process's resident memory every ``interval`` seconds, labelling each sample
    with the step :meth:`mark` last named (see :mod:`dra_e2e.memory_timeline`). ``read``
    returns the bytes now, or ``None`` when there is nothing to read (the process gone): no
    sample then."""

    read: Callable[[], int | None]
    interval: float = 2.0
    step: str = "start"
    samples: list[MemorySample] = field(default_factory=list)
    _began: float = field(default_factory=time.monotonic)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self) -> None:
        """Take one sample now (the thread's loop; also at a step's boundary)."""
        rss = self.read()
        if rss is not None:
            self.samples.append(MemorySample(time.monotonic() - self._began, self.step, rss))

    def mark(self, step: str) -> None:
        """Close the current step with a sample and label the samples from now ``step``."""
        self.sample()
        self.step = step
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def start(self) -> None:
        """Sample in a daemon thread until :meth:`stop`."""
        self._began = time.monotonic()
        self.sample()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling, with a last sample."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()
