"""Version: strict semver 2.0.0 parsing (as blang/semver Parse) and precedence."""

from __future__ import annotations

import itertools

import pytest
from dra_api_types import Version, VersionError
from hypothesis import given
from hypothesis import strategies as st

# The precedence example of semver.org section 11, in ascending order.
ORDERED = [
    "1.0.0-alpha",
    "1.0.0-alpha.1",
    "1.0.0-alpha.beta",
    "1.0.0-beta",
    "1.0.0-beta.2",
    "1.0.0-beta.11",
    "1.0.0-rc.1",
    "1.0.0",
    "1.0.1",
    "1.1.0",
    "2.0.0",
    "10.0.0",
    "580.126.20",
]


def test_precedence_follows_semver() -> None:
    versions = [Version.parse(v) for v in ORDERED]
    shuffled = versions[len(versions) // 2 :] + versions[: len(versions) // 2]
    assert sorted(shuffled) == versions
    for lower, higher in itertools.pairwise(versions):
        assert lower < higher
        assert lower.compare(higher) == -1


def test_parts_and_roundtrip() -> None:
    v = Version.parse("10.0.0-rc.1+build.5")
    assert (v.major, v.minor, v.patch) == (10, 0, 0)
    assert v.prerelease == ("rc", 1)
    assert v.build == ("build", "5")
    assert str(v) == "10.0.0-rc.1+build.5"
    assert Version(major=1, minor=2, patch=3, prerelease=("alpha",)) == Version.parse("1.2.3-alpha")


def test_build_metadata_is_ignored_by_comparison() -> None:
    assert Version.parse("1.0.0+a") == Version.parse("1.0.0+b")
    assert hash(Version.parse("1.0.0+a")) == hash(Version.parse("1.0.0"))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1",
        "1.0",
        "v1.0.0",
        "1.0.0.0",
        "01.0.0",
        "1.01.0",
        "1.0.01",
        "1.0.0-",
        "1.0.0-01",
        "1.0.0-a..b",
        "1.0.0+",
        "1.0.0+a..b",
        "1.0.0-a_b",
        "-1.0.0",
        "1.0.0 ",
        "18446744073709551616.0.0",
    ],
)
def test_invalid_versions(text: str) -> None:
    with pytest.raises(VersionError):
        Version.parse(text)


_ident = st.from_regex(r"[0-9A-Za-z-]{1,8}", fullmatch=True).filter(
    lambda s: not (s.isdigit() and len(s) > 1 and s[0] == "0")
)
_num = st.integers(min_value=0, max_value=10**6)


@given(_num, _num, _num, st.lists(_ident, max_size=3), st.lists(_ident, max_size=2))
def test_str_roundtrips(
    major: int, minor: int, patch: int, pre: list[str], build: list[str]
) -> None:
    text = f"{major}.{minor}.{patch}"
    if pre:
        text += "-" + ".".join(pre)
    if build:
        text += "+" + ".".join(build)
    v = Version.parse(text)
    assert str(v) == text
    assert Version.parse(str(v)) == v
    assert (v.major, v.minor, v.patch) == (major, minor, patch)
