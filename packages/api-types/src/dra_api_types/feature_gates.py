"""Feature-gate machinery: gates with defaults and maturity, rules between them, a parser.

A :class:`GateTable` holds one driver's gates and dependency rules; it parses
``Gate=true,Other=false`` over the defaults, enforces the rules at start and names the gates
that are accepted but not built (their setting only changes a log line). As in Kubernetes'
component-base (which NVIDIA's driver uses), ``AllAlpha=<bool>`` and ``AllBeta=<bool>`` set
every alpha (beta) gate the same text does not name; the rules then apply to the result, so
``AllAlpha=true`` is refused where two alpha gates exclude each other, as NVIDIA's is.
NVIDIA's table, the one every component of this driver accepts, is
:mod:`dra_api_types.nvidia_gates`.

Pure: parsing and checking only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from dra_api_types.errors import FeatureGateError

__all__ = [
    "SPECIAL_GATES",
    "FeatureGate",
    "GateRule",
    "GateTable",
    "Maturity",
    "Origin",
    "RuleKind",
]

_FLAG = "--feature-gates"


class Maturity(StrEnum):
    """Stage of a gate, as Kubernetes names them."""

    ALPHA = "alpha"
    BETA = "beta"
    GA = "ga"


#: The spellings Go's ``strconv.ParseBool`` takes, which component-base parses values with.
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})

#: component-base's gates that set every gate of a maturity the text leaves unset.
SPECIAL_GATES: Mapping[str, Maturity] = {"AllAlpha": Maturity.ALPHA, "AllBeta": Maturity.BETA}


class Origin(StrEnum):
    """Who defines a gate's meaning."""

    NVIDIA = "nvidia"  # NVIDIA's driver (pkg/featuregates)
    KUBERNETES = "kubernetes"  # component-base logging gates
    PROJECT = "project"  # this project's own


@dataclass(frozen=True)
class FeatureGate:
    """One gate: its name, default and maturity, and whether this driver acts on it.

    ``implemented``: the gate's on behaviour is built. ``off_built`` False: its off
    behaviour (NVIDIA's older one) is not; the driver then behaves as with the gate on, and
    an explicit ``false`` is reported as not implemented.
    """

    name: str
    default: bool
    maturity: Maturity
    origin: Origin
    implemented: bool
    summary: str
    off_built: bool = True

    def built(self, on: bool) -> bool:
        """Whether the driver does what this gate at ``on`` asks (a gate not built at all
        counts as not built either way: it is named whatever it is set to)."""
        return self.implemented and (on or self.off_built)


class RuleKind(StrEnum):
    """How two gates depend on each other."""

    REQUIRES = "requires"
    EXCLUDES = "excludes"


@dataclass(frozen=True)
class GateRule:
    """``gate`` on requires (or excludes) ``other`` on."""

    gate: str
    kind: RuleKind
    other: str

    def broken_by(self, gates: Mapping[str, bool]) -> bool:
        """Whether the effective ``gates`` break this rule."""
        if not gates.get(self.gate, False):
            return False
        other_on = gates.get(self.other, False)
        return not other_on if self.kind is RuleKind.REQUIRES else other_on

    def message(self) -> str:
        """What is wrong and how to fix it, in one line."""
        if self.kind is RuleKind.REQUIRES:
            return f"feature gate {self.gate} requires {self.other}=true"
        return f"feature gates {self.gate} and {self.other} cannot both be enabled"


class GateTable:
    """One driver's gates and the dependency rules between them."""

    def __init__(self, gates: Sequence[FeatureGate], rules: Sequence[GateRule]) -> None:
        """``gates`` in the order they are listed to users; ``rules`` checked in order."""
        self.gates = tuple(gates)
        self.rules = tuple(rules)
        self._by_name: Mapping[str, FeatureGate] = {g.name: g for g in self.gates}

    def defaults(self) -> dict[str, bool]:
        """Every gate at its default."""
        return {g.name: g.default for g in self.gates}

    def check_rules(self, gates: Mapping[str, bool]) -> None:
        """Raise on the first dependency rule that ``gates`` break.

        Raises:
            FeatureGateError: naming ``--feature-gates`` and the two gates.
        """
        for rule in self.rules:
            if rule.broken_by(gates):
                raise FeatureGateError(_FLAG, rule.message())

    def parse(self, text: str) -> tuple[dict[str, bool], frozenset[str]]:
        """Parse ``Gate=true,Other=false`` over the defaults; check the rules.

        Returns the effective gates and the names set explicitly in ``text`` (including those
        an ``AllAlpha``/``AllBeta`` item set).

        Values are read as component-base reads them (Go's ``strconv.ParseBool``: ``1``,
        ``t``, ``T``, ``TRUE``, ``true``, ``True`` and their false counterparts).

        Raises:
            FeatureGateError: an item that is not ``Gate=true|false``, an unknown gate (the
                message names it and lists the known ones), or a broken dependency rule.
        """
        gates = self.defaults()
        explicit: set[str] = set()
        by_maturity: dict[Maturity, bool] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            name, sep, value = item.partition("=")
            name, value = name.strip(), value.strip()
            if not sep or value not in _TRUE | _FALSE:
                raise FeatureGateError(_FLAG, f"{item!r} is not Gate=true|false")
            on = value in _TRUE
            if name in SPECIAL_GATES:
                by_maturity[SPECIAL_GATES[name]] = on
                continue
            if name not in self._by_name:
                known = ", ".join([*(g.name for g in self.gates), *SPECIAL_GATES])
                raise FeatureGateError(_FLAG, f"unknown feature gate {name!r} (known: {known})")
            gates[name] = on
            explicit.add(name)
        # Named gates win over AllAlpha/AllBeta whatever their order, as in component-base.
        for gate in self.gates:
            if gate.name not in explicit and gate.maturity in by_maturity:
                gates[gate.name] = by_maturity[gate.maturity]
                explicit.add(gate.name)
        self.check_rules(gates)
        return gates, frozenset(explicit)

    def unimplemented(self, explicit: frozenset[str], gates: Mapping[str, bool]) -> dict[str, bool]:
        """The explicitly set gates whose value this driver accepts but does not act on."""
        return {
            g.name: gates[g.name]
            for g in self.gates
            if g.name in explicit and (not g.implemented or not g.built(gates[g.name]))
        }
