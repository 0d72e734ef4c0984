"""The seed's four families, and their exposition text rendered without prometheus_client.

prometheus_client renders every sample through generic code (a ``Sample`` per series,
label names validated and escaped, one format call per label): at ~6,200 per-claim series
one scrape cost the controller 0.109 CPU s in the 1,000-node run (docs/scale.md). These
families change only when a reconcile publishes, so :class:`SeedText` writes their text
itself, keeping each series' line between renders (a claim's labels do not change while it
exists), and the controller renders it once per published state, not once per scrape.

The text is the one ``generate_latest`` writes for the same families: the HELP and TYPE
lines are taken from it, and each line is written as its ``sample_line`` does (label names
sorted, values escaped for backslash, newline and double quote, the value as
``floatToGoString``); the tests compare the two.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from .availability import AvailableSeries
from .claim_series import ClaimSeries

ALLOCATED = "kube_resourceclaim_allocated"
PENDING = "kube_resourceclaim_pending"
UNSATISFIABLE = "kube_resourceclaim_unsatisfiable"
AVAILABLE = "node_dra_resource_available"

# prometheus_client's own value formatting (untyped there): "8.0", "1e+06", "NaN".
_go_float: Callable[[float], str] = floatToGoString

_CLAIM_LABELS = ["namespace", "name", "resource_class"]
_HELP = {
    ALLOCATED: "1 for each allocated ResourceClaim, by the DeviceClass of its requests",
    PENDING: "1 for each ResourceClaim waiting for allocation, by the DeviceClass of its requests",
    UNSATISFIABLE: "1 for each pending ResourceClaim that an unschedulable pod waits for and "
    "that no node can satisfy, by the DeviceClass of its requests",
    AVAILABLE: "Free devices per node matching each DeviceClass, by product name or MIG profile",
}


def seed_families() -> tuple[GaugeMetricFamily, ...]:
    """The four families, empty: allocated, pending, unsatisfiable, available."""
    return (
        GaugeMetricFamily(ALLOCATED, _HELP[ALLOCATED], labels=_CLAIM_LABELS),
        GaugeMetricFamily(PENDING, _HELP[PENDING], labels=_CLAIM_LABELS),
        GaugeMetricFamily(UNSATISFIABLE, _HELP[UNSATISFIABLE], labels=_CLAIM_LABELS),
        GaugeMetricFamily(
            AVAILABLE, _HELP[AVAILABLE], labels=["node", "resource_class", "attribute"]
        ),
    )


def sorted_available(available: Mapping[AvailableSeries, int]) -> list[tuple[AvailableSeries, int]]:
    """The available series in exposition order: by node, class, attribute."""
    return sorted(available.items())


class _Empty(Collector):
    def collect(self) -> Iterable[GaugeMetricFamily]:
        return seed_families()


def _headers() -> dict[str, str]:
    """Each family's HELP and TYPE lines, as ``generate_latest`` writes them."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Empty())
    headers: dict[str, str] = {}
    lines = generate_latest(registry).decode().splitlines(keepends=True)
    for help_line, type_line in zip(lines[::2], lines[1::2], strict=True):
        headers[help_line.split(" ", 3)[2]] = help_line + type_line
    return headers


def _escape(value: str) -> str:
    """A label value escaped as the text format wants (what prometheus_client does)."""
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def _claim_tail(s: ClaimSeries) -> str:
    # Label names sorted, as generate_latest writes them.
    return (
        f'{{name="{_escape(s.name)}",namespace="{_escape(s.namespace)}",'
        f'resource_class="{_escape(s.resource_class)}"}} 1.0\n'
    )


def _available_tail(s: AvailableSeries, count: int) -> str:
    return (
        f'{{attribute="{_escape(s.attribute)}",node="{_escape(s.node)}",'
        f'resource_class="{_escape(s.resource_class)}"}} {_go_float(count)}\n'
    )


class SeedText:
    """Renders the four families, keeping each series' line for the next render.

    Not thread-safe: one caller at a time (the metrics' render lock).
    """

    def __init__(self) -> None:
        """No lines kept yet."""
        self._headers = _headers()
        self._claims: dict[ClaimSeries, str] = {}
        self._available: dict[tuple[AvailableSeries, int], str] = {}

    def render(
        self,
        allocated: Sequence[ClaimSeries],
        pending: Sequence[ClaimSeries],
        unsatisfiable: Sequence[ClaimSeries],
        available: Mapping[AvailableSeries, int],
    ) -> bytes:
        """The families' exposition text (lines kept only for the series given now)."""
        old_claims: dict[ClaimSeries, str] = self._claims
        claims: dict[ClaimSeries, str] = {}
        out: list[str] = []
        for name, series in ((ALLOCATED, allocated), (PENDING, pending)):
            out.append(self._headers[name])
            for s in series:
                tail = claims.get(s) or old_claims.get(s) or _claim_tail(s)
                claims[s] = tail
                out.append(name)
                out.append(tail)
        out.append(self._headers[UNSATISFIABLE])
        for s in unsatisfiable:
            tail = claims.get(s) or _claim_tail(s)
            out.append(UNSATISFIABLE)
            out.append(tail)
        old_available = self._available
        kept: dict[tuple[AvailableSeries, int], str] = {}
        out.append(self._headers[AVAILABLE])
        for item in sorted_available(available):
            tail = old_available.get(item) or _available_tail(*item)
            kept[item] = tail
            out.append(AVAILABLE)
            out.append(tail)
        self._claims, self._available = claims, kept
        return "".join(out).encode()
