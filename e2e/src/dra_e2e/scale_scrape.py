"""Scraping our allocation controller's ``/metrics`` for the metrics lag, out of the way of the
cluster under measurement.

The scale benchmark runs the whole cluster on the VM it runs on. Its scrapes (the controller's
text fetched and scanned twice a second, ~1-2 MB at 5,000 claims) cost ~0.04 core, and only
the phase with our components makes them: in the benchmark's own process they competed with
the kube-scheduler at the host's saturation point, charged to our components, and held the GIL
that the claim watch timestamping each claim's binding needs (docs/scale.md, run 22).

So :class:`MetricsScraper` runs the scrapes in a child process (``python -m
dra_e2e.scale_scrape URL NAMESPACE INTERVAL``) that lowers its own priority to nice 19 before
its first scrape: when the host has an idle core it scrapes on time; when it has none, the
cluster's processes run first and a scrape waits, which can only over-state the metrics lag
(our figure), never slow the cluster. The child writes one line per event on its stdout, in
``time.monotonic()`` (system-wide on Linux, so the parent's clock)::

    scrape <t>          a scrape answered; <t> is when it began
    seen <t> <name>     claim <name> first shows allocated, in the scrape begun at <t>
    fail <message>      a scrape failed
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field

from dra_e2e.scale_metrics import claims_in
from dra_e2e.scale_observe import Say, quiet

#: The child's niceness: the lowest priority, so a saturated host runs the cluster first.
NICENESS = 19


def fetch_text(url: str, timeout: float = 10.0) -> str:
    """The body of a plain-HTTP GET of ``url`` (a component's ``/metrics``); ``OSError``
    when it does not answer."""
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return str(resp.read().decode())


@dataclass
class MetricsScraper:
    """When each claim of ``namespace`` first shows in ``kube_resourceclaim_allocated`` of
    the allocation controller at ``url`` (plain HTTP: the benchmark installs its metrics
    with ``metrics.insecure``, so the scrapes make no TokenReview that would count as our
    components' API requests), scraped every ``interval`` seconds by a child process at
    nice 19 (the module's docstring says why). ``pid`` is the child's, for its CPU time."""

    url: str
    namespace: str
    interval: float = 0.5
    say: Say = quiet
    seen: dict[str, float] = field(default_factory=dict)
    scrapes: int = 0
    failures: int = 0
    _child: subprocess.Popen[str] | None = None
    _reader: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        """The scraping child's process ID (``None`` before :meth:`start`)."""
        return self._child.pid if self._child is not None else None

    def start(self) -> None:
        """Start the child, and a daemon thread recording what it reports, until :meth:`stop`."""
        self._child = subprocess.Popen(
            [sys.executable, "-m", __name__, self.url, self.namespace, str(self.interval)],
            stdout=subprocess.PIPE,
            text=True,
        )
        stdout = self._child.stdout
        assert stdout is not None
        self._reader = threading.Thread(target=self._record, args=(stdout,), daemon=True)
        self._reader.start()

    def _record(self, lines: Iterable[str]) -> None:
        for line in lines:
            kind, _, rest = line.rstrip("\n").partition(" ")
            if kind == "scrape":
                self.scrapes += 1
            elif kind == "seen":
                at, _, name = rest.partition(" ")
                # The child is killed by stop(): its last line may be cut short.
                with contextlib.suppress(ValueError):
                    if name:
                        self.seen.setdefault(name, float(at))
            elif kind == "fail":
                self.failures += 1
                if self.failures <= 3:
                    self.say(f"[bench] scrape of {self.url} failed: {rest}")

    def stop(self) -> None:
        """Stop the child and wait until everything it reported is recorded."""
        if self._child is None:
            return
        self._child.terminate()
        self._child.wait(timeout=30)
        if self._reader is not None:
            self._reader.join(timeout=30)
        if self._child.stdout is not None:
            self._child.stdout.close()


def scrape_forever(url: str, namespace: str, interval: float) -> None:
    """The child's loop: scrape ``url`` every ``interval`` seconds and report on stdout (the
    module's docstring gives the lines) until terminated."""
    os.nice(NICENESS)
    reported: set[str] = set()
    while True:
        began = time.monotonic()
        try:
            text = fetch_text(url)
        except OSError as exc:
            print(f"fail {exc}".replace("\n", " "), flush=True)
        else:
            # The claim appeared after the previous scrape and before this one's collect
            # (right after its start): the lag is over-stated by at most one interval.
            new = claims_in(text, namespace) - reported
            reported |= new
            lines = [f"scrape {began}", *(f"seen {began} {name}" for name in sorted(new))]
            print("\n".join(lines), flush=True)
        time.sleep(max(0.0, interval - (time.monotonic() - began)))


def main(argv: list[str]) -> int:
    """``python -m dra_e2e.scale_scrape URL NAMESPACE INTERVAL``."""
    url, namespace, interval = argv
    # Terminated by the parent (SIGTERM ends it by default); an interrupt or a parent gone
    # (broken pipe) also end it quietly.
    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
        scrape_forever(url, namespace, float(interval))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
