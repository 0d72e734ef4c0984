"""``kubectl dra validate`` against the real API server's type check of CEL selectors.

A table of expression shapes, one DeviceClass each, created together in one
``kubectl create --dry-run=server`` (one process, the API server validates every object as
new and stores nothing). The API server's answer is the oracle: accepted, refused as too
expensive, or refused with a compile error. ``validate`` must give the same verdict and,
for compile errors, the same first line of the message (``Invalid value: "...":
compilation failed: ERROR: <input>:L:C: ...``; the API server adds the source line and a
caret below it). The shapes cover what cel-go's checker decides: equality without numeric
conversion, ``in`` against the element type, null, optionals, element types of literals
(HomogeneousAggregateLiterals, ``format`` exempt), typed comprehension variables (one
named ``device`` shadows the device), generic library functions, conditionals, positions.
Cases from ``random_cel.type_error_expressions`` add seeded random ill-typed shapes.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from dra_allocator.inputs import Document
from dra_e2e.errors import KubectlError
from dra_e2e.handle import ClusterHandle
from kubectl_dra.validation import TOO_COMPLEX, validate_documents
from random_cel import type_error_expressions

pytestmark = pytest.mark.e2e

FIELD = "spec.selectors[0].cel.expression: "

# The expectation documents each case ("ok", "too complex", "compile"); the API server's
# answer is what is compared.
SHAPES: list[tuple[str, str]] = [
    # equality: one overload (A, A), no numeric conversion, null only with nullable types
    ('true == "a"', "compile"),
    ("1 == 1.0", "compile"),
    ("1 == 1u", "compile"),
    ("1.0 == 1u", "compile"),
    ("1 != 1.0", "compile"),
    ("size([1]) == 1.0", "compile"),
    ("int('1') == 1.0", "compile"),
    ("dyn(1) == 'a'", "ok"),
    ("dyn(2) == 2u", "ok"),
    ("1 < 1.0", "ok"),
    ("[1] == [1.0]", "compile"),
    ('[1] == ["a"]', "compile"),
    ("[[1]] == [['a']]", "compile"),
    ('{"a": 1} == {"a": "b"}', "compile"),
    ("[1] == []", "ok"),
    ("{} == {'a': 1}", "ok"),
    ("[1] == dyn(['a'])", "ok"),
    ("null == 1", "compile"),
    ("1 != null", "compile"),
    ("null == 'a'", "compile"),
    ("null == [1]", "compile"),
    ("null == null", "ok"),
    ("null == dyn(1)", "ok"),
    ("null == optional.none()", "ok"),
    ("null == quantity('1')", "ok"),
    ("null == timestamp('2020-01-01T00:00:00Z')", "ok"),
    ("optional.of(1) == optional.of('a')", "compile"),
    ("optional.of(1) == 1", "compile"),
    ("optional.none() == optional.of(1)", "ok"),
    ("timestamp('2020-01-01T00:00:00Z') == duration('1s')", "compile"),
    ("b'a' == 'a'", "compile"),
    ("type(1) == 'int'", "compile"),
    ("type([1]) == 'a'", "compile"),
    ("device.driver == 1", "compile"),
    ("device.capacity['x'].y == 1", "compile"),
    ("device.capacity['x'].y == quantity('1')", "ok"),
    ("device.attributes['x'].y == 1", "ok"),
    ("device.attributes['x'].y == 'a'", "ok"),
    ("device.attributes['a'].b == device.capacity['a'].b", "ok"),
    ("device.capacity == {'a': {'b': 1}}", "compile"),
    ("device.attributes == {'a': {'b': 1}}", "ok"),
    ("(1 == 1) == true", "ok"),
    # in: the element (key) type of the container
    ("true in [1, 2]", "compile"),
    ("device.driver in [1]", "compile"),
    ("1 in [1.0]", "compile"),
    ("2u in [1, 2]", "compile"),
    ("1 in {'a': 1}", "compile"),
    ("'a' in {'a': 1}", "ok"),
    ("1 in [dyn(1)]", "ok"),
    ("dyn(1) in [1]", "ok"),
    ("1 in dyn([1])", "ok"),
    ("device.attributes['a'].b in [1, 'a']", "compile"),
    # unary operators
    ("!1", "compile"),
    ("!!device.driver == 'gpu.nvidia.com'", "ok"),
    # literals: element types agree exactly (dyn and any are types of their own)
    ("'a' in [1, dyn('a')]", "compile"),
    ("[dyn(1), 1].size() > 0", "compile"),
    ("[[1], [dyn(1)]].size() > 0", "compile"),
    ("[[1], []].size() > 0", "ok"),
    ("[device.attributes['a'].b, 1].size() > 0", "compile"),
    ("[1, device.attributes['a'].b].size() > 0", "compile"),
    ("{'a': 1, 'b': dyn(2)}.size() > 0", "compile"),
    ("[?optional.of(1), 2].size() > 0", "ok"),
    ("[?optional.of(1), 'a'].size() > 0", "compile"),
    ("'%s %d'.format(['a', 1]) == ''", "ok"),
    # comprehension variables have the range's element type; one named device shadows it
    ("[1].all(device, device > 0)", "ok"),
    ("[1].all(device, device.driver == 'x')", "compile"),
    ("[1, 2].exists(x, x == 'a')", "compile"),
    ("[1, 2].map(x, x + 'a').size() > 0", "compile"),
    ("{'a': 1}.all(k, k == 1)", "compile"),
    ("[1].all(i, v, v == 'a')", "compile"),
    ("[1].all(i, v, i == 'a')", "compile"),
    ("{'a': 1}.all(k, v, v == 'a')", "compile"),
    ("[1].exists_one(x, x == 'a')", "compile"),
    ("lists.range(3).exists(i, i == 'a')", "compile"),
    ("'a.b'.split('.').exists(s, s == 1)", "compile"),
    ("device.attributes['a'].all(k, k == 1)", "compile"),
    ("device.attributes.all(d, d == 1)", "compile"),
    ("device.capacity['a'].all(k, device.capacity['a'][k] == 1)", "compile"),
    ("[1].exists(x, x in ['a'])", "compile"),
    ("cel.bind(x, 1, x == 'a')", "compile"),
    ("cel.bind(x, [1], x[0] == 'a')", "compile"),
    ("[1].map(x, [x]) == [['a']]", "compile"),
    ("[1].filter(x, x > 0) == ['a']", "compile"),
    ("{'a': 1}.filter(k, k == 'a') == [1]", "compile"),
    ("{'a': 1}.transformMap(k, v, v + 1)['a'] == 'a'", "compile"),
    ("[1].transformList(i, v, v)[0] == 'a'", "compile"),
    ("[1].sortBy(x, x)[0] == 'a'", "compile"),
    ("[1].all(x, x)", "compile"),
    ("[true].all(x, x)", "ok"),
    ("[1].exists_one(x, x)", "compile"),
    ("[1].filter(x, x).size() > 0", "compile"),
    ("{'a': 1}.filter(x, x).size() > 0", "compile"),
    ("[1].map(x, x, x > 0).size() > 0", "compile"),
    ("[1].map(x, x > 0, x).size() > 0", "ok"),
    ("[1].existsOne(i, v, v == 1)", "ok"),
    # indexing, selection, concatenation keep element types
    ("[1][0] == 'a'", "compile"),
    ("([1] + [2])[0] == 'a'", "compile"),
    ("[1] + ['a'] == []", "compile"),
    ("{'a': 1}['a'] == 'b'", "compile"),
    ("{'a': 1}.a == 'b'", "compile"),
    ("{'a': [1]}.?a.value()[0] == 'a'", "compile"),
    ("{'a': 1}[?'a'].value() == 'a'", "compile"),
    ("[1][?0].value() == 'a'", "compile"),
    ("[1].x == 1", "compile"),
    ("'a'.x == 1", "compile"),
    ("device.x == 1", "compile"),
    ("device.capacity['a'].b.c == 1", "compile"),
    ("semver('1.0.0').x == 1", "compile"),
    ("has(device.capacity['a'].b.c)", "compile"),
    ("device.attributes['a'].b.c == 1", "ok"),
    # generic library functions bind their type parameters
    ("[3, 1].sort()[0] == 'a'", "compile"),
    ("[1].first().value() == 'a'", "compile"),
    ("[1, 2].sum() == 'a'", "compile"),
    ("[1, 2].max() == 'a'", "compile"),
    ("[1, 2].distinct()[0] == 'a'", "compile"),
    ("[1, 2].reverse()[0] == 'a'", "compile"),
    ("[1, 2].slice(0, 1)[0] == 'a'", "compile"),
    ("[1, 2].indexOf('a') > 0", "compile"),
    ("[1, 2].lastIndexOf(1.0) > 0", "compile"),
    ("[1].join() == ''", "compile"),
    ("['a', 'b'].join(',') == 1", "compile"),
    ("sets.contains([1], ['a'])", "compile"),
    ("sets.contains([1], [dyn('a')])", "ok"),
    ("optional.of(1).optMap(x, x + 'a').hasValue()", "compile"),
    ("optional.of([1]).value()[0] == 'a'", "compile"),
    ("optional.of(1).orValue('a') == 1", "compile"),
    ("'abc'.reverse() == 'cba'", "compile"),
    ("1 + 1u == 2", "compile"),
    (
        "timestamp('2024-01-02T03:04:05Z') - timestamp('2024-01-02T03:04:00Z') == duration('5s')",
        "ok",
    ),
    # conditionals: both branches unify
    ("(true ? 1 : 2) == 'a'", "compile"),
    ("(true ? [1] : ['a']).size() > 0", "compile"),
    ("(true ? 1 : 2.0) == 1", "compile"),
    ("[true ? 1 : dyn(2)].size() > 0", "ok"),
]

#: How many seeded random ill-typed expressions join the table.
RANDOM_CASES = 40


def _class(i: int, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": f"cel-types-{i}"},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def _api_server_says(cluster: ClusterHandle, objects: list[dict[str, Any]]) -> dict[str, str]:
    """Per object name, the API server's message about its selector ("" when accepted)."""
    stream = "\n".join(json.dumps(o) for o in objects)
    try:
        cluster.kubectl("create", "--dry-run=server", "-o", "name", "-f", "-", input_text=stream)
    except KubectlError as exc:
        stderr = exc.stderr
    else:
        stderr = ""
    said = {o["metadata"]["name"]: "" for o in objects}
    # One "Error from server ..." block per refused object, naming it.
    for block in re.split(r"(?=^Error from server)", stderr, flags=re.MULTILINE):
        found = re.search(
            r'DeviceClass\.resource\.k8s\.io "([^"]+)" is (?:invalid|forbidden)', block
        )
        if found is None:
            found = re.search(r'"(cel-types-\d+)"', block)
        if found is not None:
            said[found.group(1)] = block.strip()
    return said


def _first_line(message: str) -> str:
    """The selector's message without the object prefix and cel-go's source excerpt."""
    return message.split(FIELD, 1)[-1].split("\n", 1)[0]


def _verdict(message: str) -> str:
    if not message:
        return "ok"
    if TOO_COMPLEX in message:
        return "too complex"
    if "compilation failed" in message:
        return "compile"
    return f"other: {message}"


def test_validate_type_checks_selectors_as_the_api_server(e2e_cluster: ClusterHandle) -> None:
    expressions = [e for e, _ in SHAPES] + type_error_expressions(seed=10, count=RANDOM_CASES)
    objects = [_class(i, e) for i, e in enumerate(expressions)]
    theirs = _api_server_says(e2e_cluster, objects)
    mismatches: list[str] = []
    verdicts: list[str] = []
    for obj, expression in zip(objects, expressions, strict=True):
        said = theirs[obj["metadata"]["name"]]
        verdicts.append(_verdict(said))
        result = validate_documents([Document("apiserver", 0, obj)])
        ours = "; ".join(f.message for f in result.findings)
        if _verdict(said) != _verdict(ours):
            mismatches.append(
                f"{expression!r}: API server: {said or 'accepted'}; validate: {ours or 'valid'}"
            )
        elif _verdict(said) == "compile" and _first_line(said) != ours:
            mismatches.append(f"{expression!r}: API server: {_first_line(said)}; validate: {ours}")
    assert not mismatches, "\n".join(mismatches)
    # The table documents the API server's verdicts (and covers each).
    assert verdicts[: len(SHAPES)] == [want for _, want in SHAPES]
