"""The per-function cost tables of the estimate: what one call costs, without its arguments.

``library.CostEstimator`` (Kubernetes' libraries), the estimators ``ext.Lists`` and
``ext.Sets`` register, and cel-go's own ``coster.functionCost`` for the rest.
"""

from __future__ import annotations

import math
from typing import Final

from .cost_ranges import ONE, U64_MAX, UNKNOWN, ZERO, Range, add_u64, fixed, mul_u64
from .cost_types import (
    BOOL,
    BYTES,
    CIDR,
    DYN,
    FORMAT,
    IP,
    ORDERINGS,
    QUANTITY,
    SEMVER,
    STRING,
    URL,
    Entry,
    Info,
    Ty,
    declared_size,
    is_dyn,
    is_scalar,
    listish,
    result_type,
)

_STRING_FACTOR: Final = 0.1  # common.StringTraversalCostFactor
_REGEX_FACTOR: Final = 0.25  # common.RegexStringLengthCostFactor
LIST_CREATE: Final = 10
MAP_CREATE: Final = 30
_CHEAP_EQUALITY: Final = frozenset((QUANTITY.kind, SEMVER.kind, IP.kind, CIDR.kind))
_MAX_FORMAT_SIZE: Final = 253  # cel.MaxFormatSize
_MAX_NAME_FORMAT_REGEX: Final = 1000  # cel.MaxNameFormatRegexSize
_NOMINAL: Final = frozenset(
    (
        "masked",
        "prefixLength",
        "family",
        "isUnspecified",
        "isLoopback",
        "isLinkLocalMulticast",
        "isLinkLocalUnicast",
        "isGlobalUnicast",
        "format.named",
        "sign",
        "asInteger",
        "isInteger",
        "asApproximateFloat",
        "isGreaterThan",
        "isLessThan",
        "compareTo",
        "add",
        "sub",
        "major",
        "minor",
        "patch",
        "getScheme",
        "getHostname",
        "getHost",
        "getPort",
        "getEscapedPath",
        "getQuery",
    )
)


class FunctionCosts:
    """The cost rules of calls, over the sizes the walk computes."""

    # -------------------------------------------------------------- sizes
    def size(self, info: Info) -> Range | None:
        """``computeSize``: computed, literal, declared, scalar, then variable size."""
        if info.size is not None:
            return info.size
        declared = None if info.accumulator else declared_size(info.path)
        if declared is not None:
            info.size = declared
            return declared
        if is_scalar(info.type):
            return ONE
        return None

    def size_or_unknown(self, info: Info) -> Range:
        """The node's size range, or the unknown range where none is known."""
        found = self.size(info)
        return UNKNOWN if found is None else found

    # -------------------------------------------------------------- functions
    def _estimate(
        self, name: str, target: Info | None, args: list[Info]
    ) -> tuple[Range, Ty, Range | None, Entry | None]:
        """The call's own cost (without its arguments), result type, size and entries."""
        k8s = self._kubernetes(name, target, args)
        result = result_type(name, target, args)
        if k8s is not None:
            cost, size = k8s
            return cost, result, size, None
        return self._builtin(name, target, args, result)

    def _sizes(self, info: Info) -> Range:
        """``sizeEstimate`` of the Kubernetes estimator (computed, else declared)."""
        return self.size_or_unknown(info)

    def _element_size(self, target: Info) -> tuple[Ty, Range] | None:
        """``listElementNode``: the element type of a list (or key type of a map)."""
        if not target.type.params:
            return None
        elem = target.type.params[0]
        path = None if target.path is None or target.accumulator else (*target.path, "@items")
        size = declared_size(path)
        if size is None:
            size = ONE if is_scalar(elem) else UNKNOWN
        return elem, size

    def _kubernetes(
        self, name: str, target: Info | None, args: list[Info]
    ) -> tuple[Range, Range | None] | None:
        """``library.CostEstimator.EstimateCallCost`` (after the libraries' own estimators)."""
        ext = self._extension(name, target, args)
        if ext is not None:
            return ext
        if name in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes"):
            if target is None:
                return None
            if target.type.kind == "string" and name in ("indexOf", "lastIndexOf"):
                return self._sizes(target).factor(_STRING_FACTOR), None
            element = self._element_size(target)
            if element is not None:
                elem_type, elem_size = element
                per = ONE
                if elem_type.kind in ("string", "bytes"):
                    per = per + elem_size.factor(_STRING_FACTOR)
                return times(self._sizes(target), per), None
            if name == "includes":
                return times(self._sizes(target), ONE), None
            return self._sizes(target).factor(_STRING_FACTOR), None
        if name == "url" and len(args) == 1:
            size = self._sizes(args[0])
            return size.factor(_STRING_FACTOR), size
        if name in ("lowerAscii", "upperAscii", "substring", "trim") and target is not None:
            size = self._sizes(target)
            return size.factor(_STRING_FACTOR), size
        if name == "replace" and target is not None and len(args) >= 2:
            return self._replace(target, args)
        if name == "split" and target is not None:
            size = self._sizes(target)
            hi = size.hi
            if len(args) > 1 and args[1].is_literal and type(args[1].const) is int:
                hi = args[1].const % 2**64
            return size.factor(2 * _STRING_FACTOR), Range(0, hi)
        if name == "join" and target is not None:
            return self._join(target, args)
        if name in ("find", "findAll") and target is not None and args:
            size = self._sizes(target)
            text = (size + ONE).factor(_STRING_FACTOR)
            regex = self._sizes(args[0]).factor(_REGEX_FACTOR)
            return text.times(regex), Range(0, size.hi)
        if name in ("cidr", "isIP", "isCIDR") and args:
            return self._sizes(args[0]).factor(_STRING_FACTOR), None
        if name == "ip":
            if target is not None and target.type == CIDR:
                return ONE, None
            if args:
                return self._sizes(args[0]).factor(_STRING_FACTOR), None
        if name == "ip.isCanonical" and args:
            return self._sizes(args[0]).factor(2 * _STRING_FACTOR), None
        if name in _NOMINAL:
            return ONE, None
        if name in ("containsIP", "containsCIDR") and args:
            ip = Range(4, 16)
            cost = (ip + ip).factor(_STRING_FACTOR)
            if name == "containsCIDR":
                cost = cost + ip.factor(_STRING_FACTOR) + ONE
            parsed = cost + self._sizes(args[0]).factor(_STRING_FACTOR)
            if args[0].type.kind == "string":
                return parsed, None
            if is_dyn(args[0].type):
                return cost.union(parsed), None
            return cost, None
        if name in ("quantity", "isQuantity", "semver", "isSemver") and args:
            return self._sizes(args[0]).factor(_STRING_FACTOR), None
        if name == "validate" and args:
            size = self._sizes(args[0]).factor(_STRING_FACTOR)
            return size.factor(_MAX_NAME_FORMAT_REGEX * _REGEX_FACTOR), None
        if name in ("_==_", "_!=_") and name == "_==_" and len(args) == 2:
            lhs, rhs = args[0].type, args[1].type
            if lhs == rhs and lhs.kind in _CHEAP_EQUALITY:
                return ONE, None
            if lhs == rhs and lhs == FORMAT:
                return Range(1, _MAX_FORMAT_SIZE).factor(_STRING_FACTOR), None
            if lhs == rhs and lhs == URL:
                return Range(1, 1).factor(_STRING_FACTOR), None
        return None

    def _extension(
        self, name: str, target: Info | None, args: list[Info]
    ) -> tuple[Range, Range | None] | None:
        """The estimators ``ext.Lists`` (version 3) and ``ext.Sets`` register per overload."""
        call = ONE
        alloc = fixed(LIST_CREATE)
        if name in ("sets.contains", "sets.intersects", "sets.equivalent") and len(args) == 2:
            f = 2.0 if name == "sets.equivalent" else 1.0
            both = self._sizes(args[0]).times(self._sizes(args[1]))
            return both.factor(f) + call, None
        if target is not None and target.type.kind in ("list", "dyn", "any"):
            if name == "slice" and len(args) == 2:
                size = self._sizes(target)
                start = _literal_uint(args[0], 0)
                end = _literal_uint(args[1], size.hi)
                result = fixed(max(end - start, 0) % 2**64)
                return result.factor(1) + call + alloc, result
            if name == "flatten" and len(args) <= 1 and listish(target.type):
                depth = _literal_uint(args[0], U64_MAX) if args else 1
                size = self._sizes(target)
                return size.factor(float(depth)) + call + alloc, size
            if name == "reverse" and not args and listish(target.type):
                size = self._sizes(target)
                return size.factor(1) + call + alloc, size
            if name == "distinct" and not args and listish(target.type):
                size = self._sizes(target)
                square = size.times(size)
                return square.factor(2.0) + call + alloc, square
            if name == "sort" and not args and listish(target.type):
                size = self._sizes(target)
                square = size.times(size)
                elem = target.type.params[0] if target.type.params else DYN
                if is_dyn(elem):
                    # Every comparable element type's overload: the union of their costs.
                    cost = square.factor(2.0).union(square.factor(2.1))
                else:
                    cost = square.factor(2.1 if elem.kind in ("string", "bytes") else 2.0)
                return cost + call + alloc, square
        if name == "lists.range" and target is None and len(args) == 1:
            result = fixed(_literal_uint(args[0], U64_MAX))
            return result.factor(1) + call + alloc, result
        return None

    def _replace(self, target: Info, args: list[Info]) -> tuple[Range, Range | None]:
        size = self._sizes(target)
        old = self._sizes(args[0])
        new = self._sizes(args[1])
        count_hi = count_lo = 0
        kept_hi = kept_lo = 0
        if old.lo == 0:
            count_hi = size.hi + 1 if size.hi < U64_MAX else size.hi
            kept_hi = size.hi
        elif new.hi <= old.lo:
            kept_hi = size.hi
        else:
            count_hi = _ceil_div(size.hi, old.lo)
        if old.hi == 0:
            count_lo = size.lo + 1 if size.lo < U64_MAX else size.lo
            kept_lo = size.lo
        elif old.hi <= new.lo:
            kept_lo = size.lo
        else:
            count_lo = _ceil_div(size.lo, old.hi)
        result = Range(count_lo, count_hi).times(new) + Range(kept_lo, kept_hi)
        return size.factor(2 * _STRING_FACTOR), result

    def _join(self, target: Info, args: list[Info]) -> tuple[Range, Range | None]:
        size = ZERO
        items = self._sizes(target)
        element = self._element_size(target)
        if element is not None:
            size = items.times(element[1])
        if args:
            separator = self._sizes(args[0])
            separators = Range(max(items.lo - 1, 0), max(items.hi - 1, 0))
            size = size + separator.times(separators)
        return size.factor(_STRING_FACTOR), size

    def _builtin(
        self, name: str, target: Info | None, args: list[Info], result: Ty
    ) -> tuple[Range, Ty, Range | None, Entry | None]:
        """cel-go's own rules (``coster.functionCost``) for what no estimator priced."""
        if name in ("startsWith", "endsWith") and target is not None and len(args) == 1:
            return self.size_or_unknown(args[0]).factor(_STRING_FACTOR), BOOL, None, None
        if name == "@in" and len(args) == 2:
            container = args[1].type.kind
            in_list = self.size_or_unknown(args[1]).factor(1)
            if container == "list":
                return in_list, BOOL, None, None
            if is_dyn(args[1].type):
                return in_list.union(ONE), BOOL, None, None
            return ONE, BOOL, None, None
        if name == "matches":
            text, regex = (target, args[0]) if target is not None and args else (None, None)
            if target is None and len(args) == 2:
                text, regex = args[0], args[1]
            if text is not None and regex is not None:
                text_cost = (self.size_or_unknown(text) + ONE).factor(_STRING_FACTOR)
                regex_cost = self.size_or_unknown(regex).factor(_REGEX_FACTOR)
                return text_cost.times(regex_cost), BOOL, None, None
        if name == "contains" and target is not None and len(args) == 1:
            whole = self.size_or_unknown(target).factor(_STRING_FACTOR)
            part = self.size_or_unknown(args[0]).factor(_STRING_FACTOR)
            return whole.times(part), BOOL, None, None
        if name == "format" and target is not None:
            return self.size_or_unknown(target).factor(_STRING_FACTOR), STRING, None, None
        if name == "strings.quote" and len(args) == 1:
            size = self.size_or_unknown(args[0])
            quoted = Range(add_u64(size.lo, 2), add_u64(mul_u64(size.hi, 2), 2))
            return size.factor(_STRING_FACTOR), STRING, quoted, None
        if name in ("bytes", "string") and len(args) == 1 and target is None:
            source = args[0].type.kind
            size = self.size_or_unknown(args[0])
            if name == "bytes" and source == "string":
                return size.factor(_STRING_FACTOR), BYTES, Range(size.lo, mul_u64(size.hi, 4)), None
            if name == "string" and source == "bytes":
                return size.factor(_STRING_FACTOR), STRING, Range(size.lo // 4, size.hi), None
            if source in ("dyn", "any"):
                # A dyn argument resolves to every overload; only the bytes/string one
                # knows its result's size, so that size is the result's.
                cost = size.factor(_STRING_FACTOR).union(ONE)
                if name == "bytes":
                    return cost, BYTES, Range(size.lo, mul_u64(size.hi, 4)), None
                return cost, STRING, Range(size.lo // 4, size.hi), None
        if name == "_+_" and len(args) == 2:
            kinds = {args[0].type.kind, args[1].type.kind}
            lhs, rhs = self.size_or_unknown(args[0]), self.size_or_unknown(args[1])
            total = lhs + rhs
            entry = args[0].entry.union(args[1].entry) if args[0].entry is not None else None
            if kinds & {"string", "bytes"} and kinds <= {"string", "bytes", "dyn", "any"}:
                return total.factor(_STRING_FACTOR), result, total, entry
            if "list" in kinds:
                return ONE, result, total, entry
            if kinds <= {"dyn", "any"}:
                # dyn + dyn resolves to every overload: the union covers the string one.
                cost = total.factor(_STRING_FACTOR).union(ONE)
                return cost, result, total, entry
        if name in ORDERINGS and len(args) == 2:
            kinds = {args[0].type.kind, args[1].type.kind}
            if (
                kinds <= {"string"}
                or kinds <= {"bytes"}
                or (kinds & {"dyn", "any"} and not kinds - {"dyn", "any", "string", "bytes"})
            ):
                sized = self._comparison(args)
                if kinds <= {"string"} or kinds <= {"bytes"}:
                    return sized, BOOL, None, None
                return sized.union(ONE), BOOL, None, None
        if name in ("_==_", "_!=_") and len(args) == 2:
            return self._comparison(args), BOOL, None, None
        return ONE, result, None, None

    def _comparison(self, args: list[Info]) -> Range:
        lhs, rhs = self.size_or_unknown(args[0]), self.size_or_unknown(args[1])
        smallest = min(lhs.hi, rhs.hi)
        return Range(1 if smallest > 0 else 0, smallest).factor(_STRING_FACTOR)


def times(count: Range, cost: Range) -> Range:
    """``SizeEstimate.MultiplyByCost``: a per-item cost times an item count."""
    return count.times(cost)


def _ceil_div(x: int, y: int) -> int:
    # float64 division as upstream, then ceiling.
    return math.ceil(float(x) / float(y)) if x < U64_MAX else U64_MAX


def _literal_uint(info: Info, default: int) -> int:
    """``nodeAsUintValue``: an int literal argument (negative as 0), else the default."""
    if not info.is_literal or type(info.const) is not int:
        return default
    return max(info.const, 0)
