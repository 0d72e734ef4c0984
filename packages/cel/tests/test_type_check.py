"""The type check as cel-go's (the API server's verdicts, recorded from the harness's real
API server by ``e2e/tests/differential/test_cel_types_apiserver.py``): which expressions
compile, and for those that do not, the position and message of cel-go's first error."""

from __future__ import annotations

import pytest
from dra_cel import CelCompileError, compile_selector
from dra_cel.static_types import (
    FREE,
    assignable,
    equivalent,
    list_of,
    map_of,
    most_general,
    params,
    shown,
)

CASES: list[tuple[str, str | None]] = [
    ('true == "a"', "1:6: found no matching overload for '_==_' applied to '(bool, string)'"),
    ("1 == 1.0", "1:3: found no matching overload for '_==_' applied to '(int, double)'"),
    ("1 == 1u", "1:3: found no matching overload for '_==_' applied to '(int, uint)'"),
    ("1.0 == 1u", "1:5: found no matching overload for '_==_' applied to '(double, uint)'"),
    ("1 != 1.0", "1:3: found no matching overload for '_!=_' applied to '(int, double)'"),
    ("size([1]) == 1.0", "1:11: found no matching overload for '_==_' applied to '(int, double)'"),
    ("int('1') == 1.0", "1:10: found no matching overload for '_==_' applied to '(int, double)'"),
    ("dyn(1) == 'a'", None),
    ("dyn(2) == 2u", None),
    ("1 < 1.0", None),
    (
        "[1] == [1.0]",
        "1:5: found no matching overload for '_==_' applied to '(list(int), list(double))'",
    ),
    (
        '[1] == ["a"]',
        "1:5: found no matching overload for '_==_' applied to '(list(int), list(string))'",
    ),
    (
        "[[1]] == [['a']]",
        "1:7: found no matching overload for '_==_' applied to '(list(list(int)), list(list(string)))'",  # noqa: E501 (the API server's message, whole)
    ),
    (
        '{"a": 1} == {"a": "b"}',
        "1:10: found no matching overload for '_==_' applied to '(map(string, int), map(string, string))'",  # noqa: E501 (the API server's message, whole)
    ),
    ("[1] == []", None),
    ("{} == {'a': 1}", None),
    ("[1] == dyn(['a'])", None),
    ("null == 1", "1:6: found no matching overload for '_==_' applied to '(null, int)'"),
    ("1 != null", "1:3: found no matching overload for '_!=_' applied to '(int, null)'"),
    ("null == 'a'", "1:6: found no matching overload for '_==_' applied to '(null, string)'"),
    ("null == [1]", "1:6: found no matching overload for '_==_' applied to '(null, list(int))'"),
    ("null == null", None),
    ("null == dyn(1)", None),
    ("null == optional.none()", None),
    ("null == quantity('1')", None),
    ("null == timestamp('2020-01-01T00:00:00Z')", None),
    (
        "optional.of(1) == optional.of('a')",
        "1:16: found no matching overload for '_==_' applied to '(optional_type(int), optional_type(string))'",  # noqa: E501 (the API server's message, whole)
    ),
    (
        "optional.of(1) == 1",
        "1:16: found no matching overload for '_==_' applied to '(optional_type(int), int)'",
    ),
    ("optional.none() == optional.of(1)", None),
    (
        "timestamp('2020-01-01T00:00:00Z') == duration('1s')",
        "1:35: found no matching overload for '_==_' applied to '(timestamp, duration)'",
    ),
    ("b'a' == 'a'", "1:6: found no matching overload for '_==_' applied to '(bytes, string)'"),
    (
        "type(1) == 'int'",
        "1:9: found no matching overload for '_==_' applied to '(type(int), string)'",
    ),
    (
        "type([1]) == 'a'",
        "1:11: found no matching overload for '_==_' applied to '(type(list(int)), string)'",
    ),
    (
        "device.driver == 1",
        "1:15: found no matching overload for '_==_' applied to '(string, int)'",
    ),
    (
        "device.capacity['x'].y == 1",
        "1:24: found no matching overload for '_==_' applied to '(kubernetes.Quantity, int)'",
    ),
    ("device.capacity['x'].y == quantity('1')", None),
    ("device.attributes['x'].y == 1", None),
    ("device.attributes['x'].y == 'a'", None),
    ("device.attributes['a'].b == device.capacity['a'].b", None),
    (
        "device.capacity == {'a': {'b': 1}}",
        "1:17: found no matching overload for '_==_' applied to '(map(string, map(string, kubernetes.Quantity)), map(string, map(string, int)))'",  # noqa: E501 (the API server's message, whole)
    ),
    ("device.attributes == {'a': {'b': 1}}", None),
    ("(1 == 1) == true", None),
    ("true in [1, 2]", "1:6: found no matching overload for '@in' applied to '(bool, list(int))'"),
    (
        "device.driver in [1]",
        "1:15: found no matching overload for '@in' applied to '(string, list(int))'",
    ),
    ("1 in [1.0]", "1:3: found no matching overload for '@in' applied to '(int, list(double))'"),
    ("2u in [1, 2]", "1:4: found no matching overload for '@in' applied to '(uint, list(int))'"),
    (
        "1 in {'a': 1}",
        "1:3: found no matching overload for '@in' applied to '(int, map(string, int))'",
    ),
    ("'a' in {'a': 1}", None),
    ("1 in [dyn(1)]", None),
    ("dyn(1) in [1]", None),
    ("1 in dyn([1])", None),
    ("device.attributes['a'].b in [1, 'a']", "1:33: expected type 'int' but found 'string'"),
    ("!1", "1:1: found no matching overload for '!_' applied to '(int)'"),
    ("!!device.driver == 'gpu.nvidia.com'", None),
    ("'a' in [1, dyn('a')]", "1:15: expected type 'int' but found 'dyn'"),
    ("[dyn(1), 1].size() > 0", "1:10: expected type 'dyn' but found 'int'"),
    ("[[1], [dyn(1)]].size() > 0", "1:7: expected type 'list(int)' but found 'list(dyn)'"),
    ("[[1], []].size() > 0", None),
    ("[device.attributes['a'].b, 1].size() > 0", "1:28: expected type 'any' but found 'int'"),
    ("[1, device.attributes['a'].b].size() > 0", "1:27: expected type 'int' but found 'any'"),
    ("{'a': 1, 'b': dyn(2)}.size() > 0", "1:18: expected type 'int' but found 'dyn'"),
    ("[?optional.of(1), 2].size() > 0", None),
    ("[?optional.of(1), 'a'].size() > 0", "1:19: expected type 'int' but found 'string'"),
    ("'%s %d'.format(['a', 1]) == ''", None),
    ("[1].all(device, device > 0)", None),
    ("[1].all(device, device.driver == 'x')", "1:23: type 'int' does not support field selection"),
    (
        "[1, 2].exists(x, x == 'a')",
        "1:20: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "[1, 2].map(x, x + 'a').size() > 0",
        "1:17: found no matching overload for '_+_' applied to '(int, string)'",
    ),
    (
        "{'a': 1}.all(k, k == 1)",
        "1:19: found no matching overload for '_==_' applied to '(string, int)'",
    ),
    (
        "[1].all(i, v, v == 'a')",
        "1:17: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "[1].all(i, v, i == 'a')",
        "1:17: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "{'a': 1}.all(k, v, v == 'a')",
        "1:22: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "[1].exists_one(x, x == 'a')",
        "1:21: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "lists.range(3).exists(i, i == 'a')",
        "1:28: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "'a.b'.split('.').exists(s, s == 1)",
        "1:30: found no matching overload for '_==_' applied to '(string, int)'",
    ),
    (
        "device.attributes['a'].all(k, k == 1)",
        "1:33: found no matching overload for '_==_' applied to '(string, int)'",
    ),
    (
        "device.attributes.all(d, d == 1)",
        "1:28: found no matching overload for '_==_' applied to '(string, int)'",
    ),
    (
        "device.capacity['a'].all(k, device.capacity['a'][k] == 1)",
        "1:53: found no matching overload for '_==_' applied to '(kubernetes.Quantity, int)'",
    ),
    (
        "[1].exists(x, x in ['a'])",
        "1:17: found no matching overload for '@in' applied to '(int, list(string))'",
    ),
    (
        "cel.bind(x, 1, x == 'a')",
        "1:18: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "cel.bind(x, [1], x[0] == 'a')",
        "1:23: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "[1].map(x, [x]) == [['a']]",
        "1:17: found no matching overload for '_==_' applied to '(list(list(int)), list(list(string)))'",  # noqa: E501 (the API server's message, whole)
    ),
    (
        "[1].filter(x, x > 0) == ['a']",
        "1:22: found no matching overload for '_==_' applied to '(list(int), list(string))'",
    ),
    (
        "{'a': 1}.filter(k, k == 'a') == [1]",
        "1:30: found no matching overload for '_==_' applied to '(list(string), list(int))'",
    ),
    (
        "{'a': 1}.transformMap(k, v, v + 1)['a'] == 'a'",
        "1:41: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "[1].transformList(i, v, v)[0] == 'a'",
        "1:31: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "[1].sortBy(x, x)[0] == 'a'",
        "1:21: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    ("[1].all(x, x)", "1:12: expected type 'bool' but found 'int'"),
    ("[true].all(x, x)", None),
    (
        "[1].exists_one(x, x)",
        "1:15: found no matching overload for '_?_:_' applied to '(int, int, int)'",
    ),
    (
        "[1].filter(x, x).size() > 0",
        "1:11: found no matching overload for '_?_:_' applied to '(int, list(int), list(int))'",
    ),
    (
        "{'a': 1}.filter(x, x).size() > 0",
        "1:16: found no matching overload for '_?_:_' applied to '(string, list(string), list(string))'",  # noqa: E501 (the API server's message, whole)
    ),
    (
        "[1].map(x, x, x > 0).size() > 0",
        "1:8: found no matching overload for '_?_:_' applied to '(int, list(bool), list(bool))'",
    ),
    ("[1].map(x, x > 0, x).size() > 0", None),
    ("[1].existsOne(i, v, v == 1)", None),
    ("[1][0] == 'a'", "1:8: found no matching overload for '_==_' applied to '(int, string)'"),
    (
        "([1] + [2])[0] == 'a'",
        "1:16: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "[1] + ['a'] == []",
        "1:5: found no matching overload for '_+_' applied to '(list(int), list(string))'",
    ),
    (
        "{'a': 1}['a'] == 'b'",
        "1:15: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    ("{'a': 1}.a == 'b'", "1:12: found no matching overload for '_==_' applied to '(int, string)'"),
    (
        "{'a': [1]}.?a.value()[0] == 'a'",
        "1:26: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "{'a': 1}[?'a'].value() == 'a'",
        "1:24: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "[1][?0].value() == 'a'",
        "1:17: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    ("[1].x == 1", "1:4: type 'list(int)' does not support field selection"),
    ("'a'.x == 1", "1:4: type 'string' does not support field selection"),
    ("device.x == 1", "1:7: undefined field 'x'"),
    (
        "device.capacity['a'].b.c == 1",
        "1:23: unexpected failed resolution of 'kubernetes.Quantity'",
    ),
    ("semver('1.0.0').x == 1", "1:16: unexpected failed resolution of 'kubernetes.Semver'"),
    ("has(device.capacity['a'].b.c)", "1:4: unexpected failed resolution of 'kubernetes.Quantity'"),
    ("device.attributes['a'].b.c == 1", None),
    (
        "[3, 1].sort()[0] == 'a'",
        "1:18: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "[1].first().value() == 'a'",
        "1:21: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "[1, 2].sum() == 'a'",
        "1:14: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "[1, 2].max() == 'a'",
        "1:14: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "[1, 2].distinct()[0] == 'a'",
        "1:22: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "[1, 2].reverse()[0] == 'a'",
        "1:21: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "[1, 2].slice(0, 1)[0] == 'a'",
        "1:23: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "[1, 2].indexOf('a') > 0",
        "1:15: found no matching overload for 'indexOf' applied to 'list(int).(string)'",
    ),
    (
        "[1, 2].lastIndexOf(1.0) > 0",
        "1:19: found no matching overload for 'lastIndexOf' applied to 'list(int).(double)'",
    ),
    ("[1].join() == ''", "1:9: found no matching overload for 'join' applied to 'list(int).()'"),
    (
        "['a', 'b'].join(',') == 1",
        "1:22: found no matching overload for '_==_' applied to '(string, int)'",
    ),
    (
        "sets.contains([1], ['a'])",
        "1:14: found no matching overload for 'sets.contains' applied to '(list(int), list(string))'",  # noqa: E501 (the API server's message, whole)
    ),
    ("sets.contains([1], [dyn('a')])", None),
    (
        "optional.of(1).optMap(x, x + 'a').hasValue()",
        "1:28: found no matching overload for '_+_' applied to '(int, string)'",
    ),
    (
        "optional.of([1]).value()[0] == 'a'",
        "1:29: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "optional.of(1).orValue('a') == 1",
        "1:23: found no matching overload for 'orValue' applied to 'optional_type(int).(string)'",
    ),
    (
        "'abc'.reverse() == 'cba'",
        "1:14: found no matching overload for 'reverse' applied to 'string.()'",
    ),
    ("1 + 1u == 2", "1:3: found no matching overload for '_+_' applied to '(int, uint)'"),
    (
        "timestamp('2024-01-02T03:04:05Z') - timestamp('2024-01-02T03:04:00Z') == duration('5s')",
        None,
    ),
    (
        "(true ? 1 : 2) == 'a'",
        "1:16: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        "(true ? [1] : ['a']).size() > 0",
        "1:7: found no matching overload for '_?_:_' applied to '(bool, list(int), list(string))'",
    ),
    (
        "(true ? 1 : 2.0) == 1",
        "1:7: found no matching overload for '_?_:_' applied to '(bool, int, double)'",
    ),
    ("[true ? 1 : dyn(2)].size() > 0", None),
]


@pytest.mark.parametrize(("expression", "error"), CASES)
def test_type_check_is_cel_gos(expression: str, error: str | None) -> None:
    if error is None:
        compile_selector(expression)
        return
    with pytest.raises(CelCompileError) as caught:
        compile_selector(expression)
    assert str(caught.value) == f"compilation failed: {error}"


def test_full_types_unify_as_in_cel_go() -> None:
    assert params("map(string, list(int))") == ("string", "list(int)")
    assert assignable(list_of("int"), list_of("dyn"))
    assert assignable(list_of(FREE), list_of("string"))
    assert not assignable(list_of("int"), list_of("double"))
    assert not assignable("null_type", map_of("string", "int"))
    assert assignable("null_type", "kubernetes.Quantity")
    assert assignable("type(int)", "type(string)")
    assert equivalent(list_of(FREE), list_of("int"))
    assert not equivalent("dyn", "int")
    assert most_general(list_of("int"), list_of("dyn")) == list_of("dyn")
    assert most_general(list_of(FREE), list_of("int")) == list_of("int")
    assert shown("optional_type(google.protobuf.Timestamp)") == "optional_type(timestamp)"
