"""Seeded random DRA CEL selectors for the cost-estimate differential.

Each seed gives one boolean selector built from a small typed grammar: device fields
(driver, attributes and capacity by constant and by iterated domain and name), literals,
string, list, set, quantity, semver and regex functions, comparisons, logical operators,
conditionals, the gated declarations (``allowMultipleAllocations``, ``includes``, iterating
an attribute value), ``cel.bind`` and comprehensions (``all``, ``exists``, ``exists_one``,
``map``, ``filter``, two-variable forms) nested up to a few levels over ``device.attributes``,
list literals and ``lists.range``: the shapes whose cost rules differ, some well over the
API server's limit.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

DOMAINS = ("dra.example.com", "gpu.nvidia.com")
NAMES = ("model", "index", "uuid", "family")
WORDS = ("a", "gpu", "H100", "dra.example.com", "", "x-y")


@dataclass
class _Gen:
    rng: random.Random
    # Variables in scope by type: "string", "int", "domain" (a key of device.attributes).
    scope: dict[str, list[str]] = field(default_factory=dict)
    counter: int = 0
    # Whether the gated declarations may appear (off: only the type check decides).
    gated: bool = True

    def var(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def pick(self, options: list[Callable[[int], str]], depth: int) -> str:
        return self.rng.choice(options)(depth)

    def with_var(self, kind: str, name: str, body: Callable[[], str]) -> str:
        self.scope.setdefault(kind, []).append(name)
        try:
            return body()
        finally:
            self.scope[kind].pop()

    # ------------------------------------------------------------------ leaves
    def word(self) -> str:
        return '"' + self.rng.choice(WORDS) + '"'

    def attribute(self) -> str:
        domain = self.rng.choice(DOMAINS)
        name = self.rng.choice(NAMES)
        if self.rng.random() < 0.5:
            return f'device.attributes["{domain}"].{name}'
        return f'device.attributes["{domain}"]["{name}"]'

    # ------------------------------------------------------------------ strings
    def string(self, depth: int) -> str:
        leaves: list[Callable[[int], str]] = [
            lambda d: self.word(),
            lambda d: "device.driver",
            lambda d: self.attribute(),
        ]
        if self.scope.get("string"):
            leaves.append(lambda d: self.rng.choice(self.scope["string"]))
        if self.scope.get("domain"):
            leaves.append(lambda d: self.rng.choice(self.scope["domain"]))
        if depth <= 0:
            return self.pick(leaves, depth)
        nodes: list[Callable[[int], str]] = [
            lambda d: f"{self.string(d - 1)}.lowerAscii()",
            lambda d: f"{self.string(d - 1)}.upperAscii()",
            lambda d: f"({self.string(d - 1)} + {self.string(d - 1)})",
            lambda d: f"{self.string(d - 1)}.trim()",
            lambda d: f"{self.string(d - 1)}.replace({self.word()}, {self.string(d - 1)})",
            lambda d: f'{self.list_string(d - 1)}.join(",")',
            lambda d: f"string({self.integer(d - 1)})",
            lambda d: f"({self.boolean(d - 1)} ? {self.string(d - 1)} : {self.string(d - 1)})",
        ]
        return self.pick(leaves + nodes, depth)

    # ------------------------------------------------------------------ ints
    def integer(self, depth: int) -> str:
        leaves: list[Callable[[int], str]] = [
            lambda d: str(self.rng.randint(0, 100)),
            lambda d: f'device.attributes["{self.rng.choice(DOMAINS)}"].index',
        ]
        if self.scope.get("int"):
            leaves.append(lambda d: self.rng.choice(self.scope["int"]))
        if depth <= 0:
            return self.pick(leaves, depth)
        nodes: list[Callable[[int], str]] = [
            lambda d: f"{self.string(d - 1)}.size()",
            lambda d: f"{self.list_int(d - 1)}.size()",
            lambda d: f"({self.integer(d - 1)} + {self.integer(d - 1)})",
            lambda d: f"({self.integer(d - 1)} * {self.integer(d - 1)})",
            lambda d: f"{self.string(d - 1)}.indexOf({self.word()})",
            lambda d: f"{self.list_int(d - 1)}.sum()",
            lambda d: "size(device.attributes)",
        ]
        return self.pick(leaves + nodes, depth)

    # ------------------------------------------------------------------ lists
    def list_int(self, depth: int) -> str:
        leaves: list[Callable[[int], str]] = [
            lambda d: "[" + ", ".join(str(self.rng.randint(0, 9)) for _ in range(3)) + "]",
            lambda d: f"lists.range({self.rng.choice((3, 10, 50, 200))})",
        ]
        if depth <= 0:
            return self.pick(leaves, depth)
        nodes: list[Callable[[int], str]] = [
            lambda d: self.comprehension_list("int", d),
            lambda d: f"{self.list_int(d - 1)}.sort()",
            lambda d: f"{self.list_int(d - 1)}.distinct()",
            lambda d: f"{self.list_int(d - 1)}.reverse()",
            lambda d: f"{self.list_int(d - 1)}.slice(0, 1)",
            lambda d: f"({self.list_int(d - 1)} + {self.list_int(d - 1)})",
        ]
        return self.pick(leaves + nodes, depth)

    def list_string(self, depth: int) -> str:
        leaves: list[Callable[[int], str]] = [
            lambda d: "[" + ", ".join(self.word() for _ in range(2)) + "]",
        ]
        if depth <= 0:
            return self.pick(leaves, depth)
        nodes: list[Callable[[int], str]] = [
            lambda d: f'{self.string(d - 1)}.split(",")',
            lambda d: self.comprehension_list("string", d),
            lambda d: f"{self.list_string(d - 1)}.sort()",
        ]
        return self.pick(leaves + nodes, depth)

    def comprehension_list(self, kind: str, depth: int) -> str:
        """``map``/``filter`` over a list of ints or over attribute domains or names."""
        v = self.var()
        source = self.rng.random()
        if kind == "int":
            rng = self.list_int(depth - 1)
            if source < 0.5:
                return f"{rng}.map({v}, {self.with_var('int', v, lambda: self.integer(depth - 1))})"
            body = self.with_var("int", v, lambda: self.boolean(depth - 1))
            return f"{rng}.filter({v}, {body})"
        if source < 0.5:
            body = self.with_var("domain", v, lambda: self.string(depth - 1))
            return f"device.attributes.map({v}, {body})"
        body = self.with_var("string", v, lambda: self.boolean(depth - 1))
        return f"{self.list_string(depth - 1)}.filter({v}, {body})"

    # ------------------------------------------------------------------ quantities
    def quantity(self) -> str:
        if self.rng.random() < 0.5:
            return f'quantity("{self.rng.choice(("1", "80Gi", "500m"))}")'
        return f'device.capacity["{self.rng.choice(DOMAINS)}"].memory'

    # ------------------------------------------------------------------ booleans
    def boolean(self, depth: int) -> str:
        leaves: list[Callable[[int], str]] = [
            lambda d: self.rng.choice(("true", "false")),
            lambda d: f"device.driver == {self.word()}",
            lambda d: f"{self.attribute()} == {self.word()}",
            lambda d: f'has(device.attributes["{self.rng.choice(DOMAINS)}"].model)',
            lambda d: f"{self.quantity()}.compareTo({self.quantity()}) >= 0",
        ]
        # Gated declarations, used under either setting: the gate decides whether they compile.
        if self.gated and self.rng.random() < 0.15:
            leaves.append(lambda d: "device.allowMultipleAllocations")
        if self.gated and self.rng.random() < 0.15:
            leaves.append(lambda d: f"{self.attribute()}.includes({self.word()})")
        if self.gated and self.rng.random() < 0.15:
            v = self.var()
            leaves.append(lambda d: f"{self.attribute()}.exists({v}, {v} == {self.word()})")
        if depth <= 0:
            return self.pick(leaves, depth)
        nodes: list[Callable[[int], str]] = [
            lambda d: f"{self.string(d - 1)} == {self.string(d - 1)}",
            lambda d: f"{self.string(d - 1)} != {self.string(d - 1)}",
            lambda d: f"{self.string(d - 1)}.startsWith({self.string(d - 1)})",
            lambda d: f"{self.string(d - 1)}.endsWith({self.word()})",
            lambda d: f"{self.string(d - 1)}.contains({self.string(d - 1)})",
            lambda d: f'{self.string(d - 1)}.matches("^[a-z]+[.]com$")',
            lambda d: f"{self.integer(d - 1)} < {self.integer(d - 1)}",
            lambda d: f"({self.boolean(d - 1)} && {self.boolean(d - 1)})",
            lambda d: f"({self.boolean(d - 1)} || {self.boolean(d - 1)})",
            lambda d: f"!({self.boolean(d - 1)})",
            # Back to back, cel-go's parser drops both (an accepted, cheaper selector).
            lambda d: f"!!{self.string(d - 1)} == {self.word()}",
            lambda d: f"({self.boolean(d - 1)} ? {self.boolean(d - 1)} : {self.boolean(d - 1)})",
            lambda d: f"{self.string(d - 1)} in {self.list_string(d - 1)}",
            lambda d: f"{self.integer(d - 1)} in {self.list_int(d - 1)}",
            lambda d: f"sets.contains({self.list_int(d - 1)}, {self.list_int(d - 1)})",
            lambda d: f"{self.list_int(d - 1)}.isSorted()",
            lambda d: f"{self.quantity()}.isLessThan({self.quantity()})",
            lambda d: self.bind(d),
            lambda d: self.quantifier(d),
            lambda d: self.quantifier(d),
            lambda d: self.attributes_quantifier(d),
            lambda d: self.attributes_quantifier(d),
        ]
        return self.pick(leaves + nodes, depth)

    def bind(self, depth: int) -> str:
        v = self.var()
        init = self.string(depth - 1)
        body = self.with_var("string", v, lambda: self.boolean(depth - 1))
        return f"cel.bind({v}, {init}, {body})"

    def quantifier(self, depth: int) -> str:
        macro = self.rng.choice(("all", "exists", "exists_one"))
        v = self.var()
        if self.rng.random() < 0.5:
            rng = self.list_int(depth - 1)
            body = self.with_var("int", v, lambda: self.boolean(depth - 1))
            return f"{rng}.{macro}({v}, {body})"
        rng = self.list_string(depth - 1)
        body = self.with_var("string", v, lambda: self.boolean(depth - 1))
        return f"{rng}.{macro}({v}, {body})"

    def attributes_quantifier(self, depth: int) -> str:
        """Over attribute domains, the names of one domain, or both at once (two variables)."""
        macro = self.rng.choice(("all", "exists", "exists_one"))
        d, k = self.var(), self.var()
        shape = self.rng.random()
        if shape < 0.4:
            body = self.with_var("domain", d, lambda: self.boolean(depth - 1))
            return f"device.attributes.{macro}({d}, {body})"
        if shape < 0.8:
            domain = f'"{self.rng.choice(DOMAINS)}"'
            if self.scope.get("domain") and self.rng.random() < 0.6:
                domain = self.rng.choice(self.scope["domain"])

            def value_body() -> str:
                inner = self.boolean(depth - 1)
                if self.rng.random() < 0.5:
                    return f"(device.attributes[{domain}][{k}] == {self.word()} || {inner})"
                return inner

            body = self.with_var("string", k, value_body)
            return f"device.attributes[{domain}].{macro}({k}, {body})"
        two = "existsOne" if macro == "exists_one" else macro
        body = self.with_var("domain", d, lambda: self.boolean(depth - 1))
        return f"device.attributes.{two}({d}, {k}, {body})"


def random_selector(seed: int) -> str:
    """The selector of one seed (deterministic)."""
    rng = random.Random(seed)
    gen = _Gen(rng)
    return gen.boolean(rng.choice((1, 2, 3, 3, 4)))


def _type_clash(rng: random.Random) -> str:
    """One selector joining two typed sub-expressions where the type check decides."""
    gen = _Gen(rng, gated=False)
    depth = rng.choice((0, 1, 1, 2))
    typed: list[Callable[[], str]] = [
        lambda: gen.string(depth),
        lambda: gen.integer(depth),
        lambda: gen.boolean(depth),
        lambda: gen.list_int(depth),
        lambda: gen.list_string(depth),
        lambda: rng.choice(("1.5", "2u", "null", 'b"x"', "optional.of(1)")),
    ]

    def any_typed() -> str:
        return rng.choice(typed)()

    def a_list() -> str:
        return rng.choice(typed[3:5])()

    v = gen.var()
    shapes: list[Callable[[], str]] = [
        lambda: f"{any_typed()} == {any_typed()}",
        lambda: f"{any_typed()} != {any_typed()}",
        lambda: f"{any_typed()} in {a_list()}",
        lambda: f"({any_typed()} + {any_typed()}) == {any_typed()}",
        lambda: f"!{any_typed()}",
        lambda: f"({gen.boolean(depth)} ? {any_typed()} : {any_typed()}) == {any_typed()}",
        lambda: f"[{any_typed()}, {any_typed()}].size() > 0",
        lambda: f"{a_list()}.exists({v}, {v} == {any_typed()})",
        lambda: f"{a_list()}.all({v}, {v})",
    ]
    return rng.choice(shapes)()


def type_error_expressions(seed: int, count: int) -> list[str]:
    """``count`` seeded selectors that join two typed sub-expressions where the type check
    decides: ``==``, ``in``, ``+``, ``!``, conditionals, list literals and comprehensions
    over typed ranges. Many do not type-check (``"a" == 1``); those where a side is an
    attribute value (``any``) or otherwise unifies do, which the API server decides."""
    rng = random.Random(seed)
    return [_type_clash(rng) for _ in range(count)]
