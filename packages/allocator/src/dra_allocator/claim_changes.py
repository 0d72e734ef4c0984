"""Which claims one snapshot changed against the snapshot before it from the same source.

A caller that builds a snapshot several times a second from a slowly changing set of
claims (the allocation controller, from its informer caches) knows which claims it re-read.
Handing that on lets what is derived from every claim (the allocated state, the controller's
claim series) be updated by those claims alone, instead of a pass over thousands of claims
per snapshot to find the few that changed.

Snapshots are numbered from one counter for the whole process, so a consumer that saw
snapshot ``since`` of one source can apply the changes of the next one, and one that did not
(another source, a snapshot skipped, a first call) cannot mistake them for its own: it reads
every claim instead.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from .model import ClaimInfo

_serials = itertools.count(1)


def next_serial() -> int:
    """A number no snapshot of this process had before."""
    return next(_serials)


@dataclass(frozen=True, slots=True)
class ClaimChanges:
    """How a snapshot's claims differ from those of snapshot ``since``.

    ``changed`` pairs each claim that is not the same object as before with what it was:
    ``(before, after)``, ``before`` None for a claim that is new, ``after`` None for one
    that is gone. ``since`` None: nothing is known of what came before (the claims were read
    whole), so a consumer reads every claim of the snapshot.
    """

    serial: int
    since: int | None = None
    changed: Sequence[tuple[ClaimInfo | None, ClaimInfo | None]] = ()

    def follows(self, serial: int | None) -> bool:
        """Whether these changes apply to what a consumer derived from snapshot ``serial``."""
        return self.since is not None and self.since == serial
