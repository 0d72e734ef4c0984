"""Compile calls of library functions: overload resolution, literal checks, dispatch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from .calls import PY_TYPES, direct_call, invoke
from .compile_base import BOOL, Compiled, CompilerBase, kind_of
from .errors import CelRuntimeError
from .generic_calls import generic_result
from .library import DYN, FUNCTIONS, Overload
from .regex import compile_regex
from .runtime import COST_LIMIT, Fn, Frame, charge
from .static_types import is_wildcard, shown
from .syntax import Call, ListLit, Node
from .temporal import Duration, Timestamp
from .values import no_overload

_LITERAL_CHECKED: Final[dict[str, Callable[[str], Any]]] = {
    "duration": Duration.parse,
    "timestamp": Timestamp.parse,
}


class FunctionCompiler(CompilerBase):
    """Compile calls of library functions: overload resolution, literal checks, dispatch."""

    # ------------------------------------------------------------------ functions
    def _function(self, node: Call, name: str, target: Node | None) -> Compiled:
        overloads = FUNCTIONS.get(name)
        if overloads is None:
            # A macro name with other arguments is no macro: a call of an undeclared
            # function, as cel-go's parser leaves it.
            raise self.error(f"undeclared reference to '{name}' (in container '')", node)
        if name == "format":
            self.exempt_lists.update(id(a) for a in node.args if isinstance(a, ListLit))
        compiled_args = tuple(self.compile(a) for a in node.args)
        receiver = self.compile(target) if target is not None else None
        all_args = ((receiver,) if receiver is not None else ()) + compiled_args
        static = tuple(a.type for a in all_args)
        fulls = tuple(a.full for a in all_args)
        candidates = [
            o
            for o in overloads
            if o.receiver == (receiver is not None)
            and len(o.params) == len(all_args)
            and o.accepts_static(static)
        ]
        generic = generic_result(name, fulls)
        if not candidates or generic is None:
            named = [shown(t) for t in fulls]
            if receiver is not None:
                applied = f"{named[0]}.({', '.join(named[1:])})"
            else:
                applied = "(" + ", ".join(named) + ")"
            raise self.error(
                f"found no matching overload for '{name}' applied to '{applied}'", node
            )
        if name in _LITERAL_CHECKED and len(all_args) == 1 and all_args[0].is_const:
            self._check_literal(name, all_args[0])
        if name == "matches" and all_args[1].is_const and type(all_args[1].value) is str:
            fast = self._matches_constant(node, all_args)
            if fast is not None:
                return fast
        fns = tuple(a.fn for a in all_args)
        result_types = {o.result for o in candidates}
        static_result = result_types.pop() if len(result_types) == 1 else DYN
        if generic == DYN:
            # Several overloads match (``list(any).sort()``): cel-go types the call dyn.
            full = static_result = DYN
        elif generic and kind_of(generic) == static_result:
            full = generic
        elif generic and static_result == DYN and not is_wildcard(generic):
            # A list's sum/min/max, an optional's value: the element type is known here.
            full = generic
            static_result = kind_of(generic)
        else:
            full = static_result
        fn = self._call_fn(name, candidates, fns, static)
        return self._fold(node, static_result, fn, all_args, full)

    def _check_literal(self, name: str, arg: Compiled) -> None:
        """Upstream's AST validators reject bad duration and timestamp literals at compile
        time (ValidateDurationLiterals, ValidateTimestampLiterals)."""
        if type(arg.value) is not str:
            return
        try:
            _LITERAL_CHECKED[name](arg.value)
        except CelRuntimeError as err:
            raise self.error(err.message, arg.node) from None

    def _matches_constant(self, node: Call, args: tuple[Compiled, ...]) -> Compiled | None:
        """``s.matches('<constant>')``: compile the pattern once, here."""
        pattern = args[1].value
        try:
            regex = compile_regex(pattern)
        except CelRuntimeError as err:
            # Upstream programs are built with OptOptimize, which compiles constant
            # patterns when the program is created: a bad one fails compilation.
            raise self.error(err.message, args[1].node) from None
        subject = args[0].fn

        def matches(frame: Frame) -> Any:
            text = subject(frame)
            if type(text) is not str:
                raise no_overload("matches", text, pattern)
            frame[1] += 1 + len(text) // 10
            if frame[1] > COST_LIMIT:
                charge(frame, 0)
            return regex.search(text)

        return self._fold(node, BOOL, matches, args)

    def _call_fn(
        self, name: str, candidates: list[Overload], fns: tuple[Fn, ...], static: tuple[str, ...]
    ) -> Fn:
        if len(candidates) == 1:
            overload = candidates[0]
            # Arguments whose static type is dyn need a runtime check against the param.
            guards = tuple(
                PY_TYPES.get(p) if p != DYN and t == DYN else None
                for p, t in zip(overload.params, static, strict=True)
            )
            return direct_call(name, overload.impl, fns, guards, overload.cost)

        options = tuple(candidates)

        def dispatch(frame: Frame) -> Any:
            args = tuple([f(frame) for f in fns])
            for o in options:
                if o.accepts(args):
                    if o.cost is not None:
                        charge(frame, o.cost(*args))
                    return invoke(name, o.impl, args)
            raise no_overload(name, *args)

        return dispatch
