"""Quantity: parsing, canonical form, arithmetic, pydantic integration.

The expected strings follow k8s.io/apimachinery/pkg/api/resource (ParseQuantity and
Quantity.String): the parsed string is kept when Go's fast path deems it canonical, values
are rounded up to 1n, BinarySI is capped at 2^63-1 and printed in base 1024 when exact.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from dra_api_types import DeviceCapacity, Quantity, QuantityError, QuantityFormat, parsed_identity
from hypothesis import given
from hypothesis import strategies as st

GO_STRING_TABLE = [
    # (input, Go's String())
    ("0", "0"),
    ("0n", "0"),
    ("0m", "0"),
    ("0Ki", "0"),
    ("0Gi", "0"),
    ("-0", "0"),
    ("000", "0"),
    ("1", "1"),
    ("1n", "1n"),
    ("1u", "1u"),
    ("1m", "1m"),
    ("1k", "1k"),
    ("1M", "1M"),
    ("1G", "1G"),
    ("1T", "1T"),
    ("1P", "1P"),
    ("1E", "1E"),
    ("1Ki", "1Ki"),
    ("1Mi", "1Mi"),
    ("1Gi", "1Gi"),
    ("1Ti", "1Ti"),
    ("1Pi", "1Pi"),
    ("1Ei", "1Ei"),
    # canonicalised: trailing zeros move into the suffix
    ("1000", "1k"),
    ("1000m", "1"),
    ("1000000u", "1"),
    ("2000m", "2"),
    ("1000k", "1M"),
    ("1000000", "1M"),
    ("5.3M", "5300k"),
    ("1.5", "1500m"),
    ("0.1", "100m"),
    ("0.01", "10m"),
    ("0.001", "1m"),
    ("0.0001", "100u"),
    (".5", "500m"),
    ("-0.5", "-500m"),
    ("12345", "12345"),
    ("1024", "1024"),
    # binary: base 1024 when exact, decimal when not or when |value| < 1024
    ("1.5Gi", "1536Mi"),
    ("1536Mi", "1536Mi"),
    ("1024Mi", "1Gi"),
    ("2048Ki", "2Mi"),
    ("1024Ki", "1Mi"),
    ("1025Ki", "1025Ki"),
    ("2Ki", "2Ki"),
    ("8Ki", "8Ki"),
    ("0.5Ki", "512"),
    ("-0.5Ki", "-512"),
    ("1.1Ki", "1126400m"),
    ("0.9Gi", "966367641600m"),
    ("189471Mi", "189471Mi"),
    ("10Gi", "10Gi"),
    ("-1Ki", "-1Ki"),
    # binary values above int64 are capped
    ("8Ei", "9223372036854775807"),
    ("100Ei", "9223372036854775807"),
    # exponent notation is its own format; canonical inputs are kept verbatim
    ("1e3", "1e3"),
    ("1E3", "1E3"),
    ("1e6", "1e6"),
    ("10e3", "10e3"),
    ("100e-3", "100e-3"),
    ("12e-3", "12e-3"),
    ("1000e-3", "1"),
    ("1.5e3", "1500"),
    ("15e2", "1500"),
    # rounding up to 1n
    ("0.1n", "1n"),
    ("1.1n", "2n"),
    ("-0.1n", "-1n"),
    ("0.30000000000000004", "300000001n"),
    ("1e-100", "1e-9"),
    # Go keeps these inputs verbatim (its fast path treats them as canonical)
    ("+1", "+1"),
    ("1.", "1."),
    # Go's scanner accepts a missing number as zero
    ("-", "0"),
    (".", "0"),
    ("Gi", "0"),
]


@pytest.mark.parametrize(("text", "expected"), GO_STRING_TABLE)
def test_string_matches_go(text: str, expected: str) -> None:
    q = Quantity.parse(text)
    assert str(q) == expected
    assert Quantity.parse(str(q)) == q


CANONICAL_TABLE = [
    ("1E3", "1e3"),
    ("+1", "1"),
    ("1.", "1"),
    ("1536Mi", "1536Mi"),
    ("1000E", "1000E"),  # Go would print "1" here (it has no suffix for 10^21); see module doc
    ("1e21", "1e21"),
]


@pytest.mark.parametrize(("text", "expected"), CANONICAL_TABLE)
def test_canonical_form(text: str, expected: str) -> None:
    assert Quantity.parse(text).canonical() == expected


VALUE_TABLE = [
    ("1Ki", Fraction(1024)),
    ("1.5Gi", Fraction(3 << 29)),
    ("100m", Fraction(1, 10)),
    ("1e-3", Fraction(1, 1000)),
    ("-2.5k", Fraction(-2500)),
    ("1n", Fraction(1, 10**9)),
    ("8Ei", Fraction((1 << 63) - 1)),
]


@pytest.mark.parametrize(("text", "value"), VALUE_TABLE)
def test_exact_value(text: str, value: Fraction) -> None:
    assert Quantity.parse(text).value == value


INVALID = [
    "",
    " 1",
    "1 ",
    "1 Gi",
    "a",
    "1K",
    "1ki",
    "1Kib",
    "1Gib",
    "1.5.5",
    "--1",
    "1e",
    "1e-",
    "1e1.5",
    "1Mi5",
    "0x10",
    "1_000",
    "∞",
]


@pytest.mark.parametrize("text", INVALID)
def test_invalid_strings_are_rejected(text: str) -> None:
    with pytest.raises(QuantityError):
        Quantity.parse(text)


def test_absurd_inputs_are_quantity_errors() -> None:
    with pytest.raises(QuantityError, match="digits"):
        Quantity.parse("1" * 5000)
    with pytest.raises(QuantityError, match="exponent"):
        Quantity.parse("1e999999999")


def test_quantity_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="1K"):
        Quantity.parse("1K")


def test_comparison_and_hash_by_value() -> None:
    assert Quantity.parse("1Gi") == Quantity.parse("1024Mi") == Quantity.parse("1073741824")
    assert hash(Quantity.parse("1Gi")) == hash(Quantity.parse("1073741824"))
    assert Quantity.parse("999Mi") < Quantity.parse("1Gi") <= Quantity.parse("1Gi")
    assert Quantity.parse("1k") > Quantity.parse("999")
    assert sorted(Quantity.parse(s) for s in ["1Gi", "1", "500m"]) == [
        Quantity.parse("500m"),
        Quantity.parse("1"),
        Quantity.parse("1Gi"),
    ]
    assert len({Quantity.parse("1k"), Quantity.parse("1000"), Quantity.parse("1e3")}) == 1
    assert Quantity.parse("1").cmp(Quantity.parse("2")) == -1


ARITHMETIC = [
    ("1Gi", "+", "512Mi", "1536Mi"),
    ("100m", "+", "900m", "1"),
    ("1", "-", "1500m", "-500m"),
    ("0", "+", "1Ki", "1Ki"),  # zero takes the other operand's format
    ("1k", "+", "1Ki", "2024"),  # the left operand's format (decimal) wins
    ("1Ki", "+", "1", "1025"),
    ("10Gi", "-", "10Gi", "0"),
    ("1e3", "+", "1e3", "2e3"),
]


@pytest.mark.parametrize(("a", "op", "b", "expected"), ARITHMETIC)
def test_arithmetic_keeps_left_format(a: str, op: str, b: str, expected: str) -> None:
    x, y = Quantity.parse(a), Quantity.parse(b)
    result = x + y if op == "+" else x - y
    assert str(result) == expected
    assert result.value == (x.value + y.value if op == "+" else x.value - y.value)


def test_integer_accessors() -> None:
    assert Quantity.parse("1Ki").as_int() == 1024
    assert Quantity.parse("2k").is_integer()
    assert not Quantity.parse("1500m").is_integer()
    with pytest.raises(ValueError, match="not an integer"):
        Quantity.parse("1500m").as_int()
    with pytest.raises(ValueError, match="int64"):
        Quantity.parse("1e19").as_int()
    assert Quantity.parse("100Ei").as_int() == (1 << 63) - 1
    assert Quantity.parse("1.5").milli_value() == 1500
    assert Quantity.parse("1n").milli_value() == 1
    assert Quantity.parse("1.5").value_ceil() == 2
    assert Quantity.parse("250m").as_approximate_float() == 0.25
    assert Quantity.parse("-3").sign() == -1
    assert Quantity.parse("0").sign() == 0
    assert Quantity.parse("1n").sign() == 1
    assert Quantity.from_milli(1500) == Quantity.parse("1.5")
    assert str(Quantity.from_int(2 << 30, QuantityFormat.BINARY_SI)) == "2Gi"


def test_coerce_accepts_json_numbers_and_trims() -> None:
    assert Quantity.coerce(1) == Quantity.parse("1")
    assert Quantity.coerce(0.5) == Quantity.parse("500m")
    assert Quantity.coerce(" 2Gi ") == Quantity.parse("2Gi")
    with pytest.raises(QuantityError):
        Quantity.coerce(True)
    with pytest.raises(QuantityError):
        Quantity.coerce(float("nan"))


def test_pydantic_field_accepts_str_and_int_and_dumps_string() -> None:
    cap = DeviceCapacity.from_dict({"value": "1.5Gi"})
    assert cap.value == Quantity.parse("1536Mi")
    assert cap.to_dict() == {"value": "1536Mi"}
    assert DeviceCapacity.from_dict({"value": 3}).to_dict() == {"value": "3"}
    assert DeviceCapacity(value=Quantity.parse("80Gi")).to_dict() == {"value": "80Gi"}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("80Gi", 80 * 2**30),
        ("1.5", Fraction(3, 2)),
        ("500m", Fraction(1, 2)),
        ("2e3", 2000),
        ("1k", 1000),
        ("-4Ki", -4096),
        (7, 7),
    ],
)
def test_amount_is_exact_and_an_int_when_whole(text: object, value: Fraction) -> None:
    amount = Quantity.coerce(text).amount()
    assert amount == value
    assert isinstance(amount, int) is (Fraction(value).denominator == 1)


def test_binary_canonical_form_of_computed_values() -> None:
    assert Quantity(8 * 2**30, QuantityFormat.BINARY_SI).canonical() == "8Gi"
    assert Quantity(1536, QuantityFormat.BINARY_SI).canonical() == "1536"
    assert Quantity(0, QuantityFormat.BINARY_SI).canonical() == "0"


@pytest.mark.parametrize(
    ("text", "identity"),
    [
        ("10Gi", (10 * 2**30, 0, "10Gi", "BinarySI")),
        ("1536Mi", (1536 * 2**20, 0, "", "BinarySI")),
        ("1.5Gi", None),
        ("500m", (500, -3, "500m", "DecimalSI")),
        ("0.5", (5, -1, "", "DecimalSI")),
        ("1", (1, 0, "1", "DecimalSI")),
        ("1000", (1000, 0, "", "DecimalSI")),
        ("0", (0, 0, "0", "DecimalSI")),
    ],
)
def test_parsed_identity_is_what_go_equality_sees(text: str, identity: object) -> None:
    assert parsed_identity(text) == identity


# ---------------------------------------------------------------------------- properties
_SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


@st.composite
def quantity_strings(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "-", "+"]))
    whole = draw(st.from_regex(r"[0-9]{0,12}", fullmatch=True))
    frac = draw(st.one_of(st.just(None), st.from_regex(r"[0-9]{0,6}", fullmatch=True)))
    if not whole and not frac:
        whole = "1"
    number = whole + ("." + frac if frac is not None else "")
    suffix = draw(
        st.one_of(
            st.sampled_from(_SUFFIXES),
            st.integers(min_value=-30, max_value=30).map(lambda e: f"e{e}"),
            st.integers(min_value=0, max_value=30).map(lambda e: f"E{e}"),
        )
    )
    return sign + number + suffix


def _expected_value(text: str) -> Fraction:
    """Independent model of the parse: exact value, rounded up to 1n, binary capped."""
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("+-")
    i = 0
    while i < len(body) and (body[i].isdigit() or body[i] == "."):
        i += 1
    number, suffix = body[:i], body[i:]
    value = Fraction(number if number not in ("", ".") else "0")
    binary = suffix.endswith("i")
    if binary:
        value *= 1024 ** (_SUFFIXES.index(suffix) - 9)
    elif suffix[:1] in ("e", "E") and len(suffix) > 1:
        value *= Fraction(10) ** int(suffix[1:])
    else:
        value *= Fraction(10) ** {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9,
                                  "T": 12, "P": 15, "E": 18}[suffix]  # fmt: skip
    nanos = value * 10**9
    if nanos.denominator != 1:
        nanos = Fraction(-(-nanos.numerator // nanos.denominator))
    value = nanos / 10**9
    if binary and value > (1 << 63) - 1:
        value = Fraction((1 << 63) - 1)
    return sign * value


@given(quantity_strings())
def test_parse_of_str_roundtrips(text: str) -> None:
    q = Quantity.parse(text)
    assert Quantity.parse(str(q)) == q
    assert Quantity.parse(q.canonical()) == q


@given(quantity_strings())
def test_value_matches_independent_model(text: str) -> None:
    assert Quantity.parse(text).value == _expected_value(text)


@given(quantity_strings())
def test_canonical_form_is_stable(text: str) -> None:
    canonical = Quantity.parse(text).canonical()
    again = Quantity.parse(canonical)
    assert str(again) == canonical
    assert again.canonical() == canonical


@given(quantity_strings(), quantity_strings())
def test_ordering_and_addition_are_exact(a: str, b: str) -> None:
    x, y = Quantity.parse(a), Quantity.parse(b)
    assert (x < y) == (x.value < y.value)
    assert (x == y) == (x.value == y.value)
    assert (x + y).value == x.value + y.value
    assert (x - y).value == x.value - y.value
    total = x + y
    if str(total).endswith("i") and abs(total.value) > (1 << 63) - 1:
        # As in Go: sums may exceed int64, but parsing a binary quantity caps it at 2^63-1.
        assert abs(Quantity.parse(str(total)).value) == (1 << 63) - 1
    else:
        assert Quantity.parse(str(total)) == total


@given(st.integers(min_value=-(1 << 62), max_value=1 << 62))
def test_integers_roundtrip_through_every_format(n: int) -> None:
    for fmt in QuantityFormat:
        q = Quantity.from_int(n, fmt)
        assert Quantity.parse(str(q)).as_int() == n


def test_a_repeated_string_parses_to_the_same_value_and_bad_input_fails_every_time() -> None:
    first = Quantity.parse("1.50Gi")
    again = Quantity.parse("1.50Gi")
    assert again == first
    assert str(again) == str(first) == "1536Mi"
    assert Quantity.parse("80Gi").value == 80 * 2**30
    for _ in range(2):
        with pytest.raises(QuantityError):
            Quantity.parse("12 Gi")
