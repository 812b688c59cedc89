"""Semantic versions as blang/semver v4 and the Kubernetes CEL semver library define them."""

from __future__ import annotations

import itertools

import pytest

from modelfleet.cel.semver import Semver, is_semver

VALID_STRICT = [
    ("0.0.0", (0, 0, 0)),
    ("1.2.3", (1, 2, 3)),
    ("10.20.30", (10, 20, 30)),
    ("1.2.3-beta.1+build.1", (1, 2, 3)),
    ("1.0.0-alpha", (1, 0, 0)),
    ("1.0.0-0.3.7", (1, 0, 0)),
    ("1.0.0-x.7.z.92", (1, 0, 0)),
    ("1.0.0-alpha-1", (1, 0, 0)),
    ("1.0.0-alpha+001", (1, 0, 0)),
    ("1.0.0+20130313144700", (1, 0, 0)),
    ("1.0.0-beta+exp.sha.5114f85", (1, 0, 0)),
    ("1.0.0+-", (1, 0, 0)),
    ("580.65.6", (580, 65, 6)),
    ("18446744073709551615.0.0", (2**64 - 1, 0, 0)),
]


@pytest.mark.parametrize(("text", "parts"), VALID_STRICT)
def test_strict_parse(text: str, parts: tuple[int, int, int]) -> None:
    version = Semver.parse(text)
    assert (version.major, version.minor, version.patch) == parts
    assert str(version) == text
    assert is_semver(text)


INVALID_STRICT = [
    "",
    "v1.0.0",
    " 1.0.0",
    "1. 0.0",
    "1.0.0 ",
    "01.01.01",
    "1.01.0",
    "1.0.01",
    "1",
    "1.1",
    "v1.0",
    "1.0.0-",
    "1.0.0-01",
    "1.0.0-alpha..1",
    "1.0.0-al$pha",
    "1.0.0+",
    "1.0.0+a..b",
    "1.0.0+a_b",
    "1.0.0.0",
    "a.b.c",
    "-1.0.0",
    "1.-0.0",
    "1..0",
    "18446744073709551616.0.0",
    "1.0.0-18446744073709551616",
    "\u0661.0.0",
]


@pytest.mark.parametrize("text", INVALID_STRICT)
def test_strict_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid semver"):
        Semver.parse(text)
    assert not is_semver(text)


NORMALIZED = [
    ("v1.0.0", "1.0.0"),
    ("01.01.01", "1.1.1"),
    ("1", "1.0.0"),
    ("1.1", "1.1.0"),
    ("v1.2", "1.2.0"),
    ("v1.0", "1.0.0"),
    ("v01.01", "1.1.0"),
    ("00.0.0", "0.0.0"),
    ("1.2.3", "1.2.3"),
    ("1.0.0-alpha", "1.0.0-alpha"),
    ("1.0.0+build", "1.0.0+build"),
]


@pytest.mark.parametrize(("text", "expected"), NORMALIZED)
def test_normalize(text: str, expected: str) -> None:
    assert str(Semver.parse(text, normalize=True)) == expected
    assert is_semver(text, normalize=True)


@pytest.mark.parametrize(
    "text", ["", " 1.0.0", "1. 0.0", "1.0.0 ", "1-alpha", "1.1+build", "vv1.0.0", "v", "x1"]
)
def test_normalize_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid semver"):
        Semver.parse(text, normalize=True)
    assert not is_semver(text, normalize=True)


# semver.org section 11: each entry has lower precedence than the next.
PRECEDENCE = [
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
    "2.1.0",
    "2.1.1",
    "10.0.0",
]


@pytest.mark.parametrize(
    ("lower", "higher"), list(itertools.combinations(PRECEDENCE, 2)), ids=lambda v: v
)
def test_precedence(lower: str, higher: str) -> None:
    a, b = Semver.parse(lower), Semver.parse(higher)
    assert a.compare(b) == -1
    assert b.compare(a) == 1
    assert a != b


@pytest.mark.parametrize(
    ("left", "right"),
    [("1.0.0+a", "1.0.0+b"), ("1.0.0-rc.1+x", "1.0.0-rc.1"), ("1.2.3", "1.2.3")],
)
def test_build_metadata_is_ignored(left: str, right: str) -> None:
    a, b = Semver.parse(left), Semver.parse(right)
    assert a.compare(b) == 0
    assert a == b
    assert hash(a) == hash(b)


def test_normalized_equals_strict() -> None:
    assert Semver.parse("v01.01", normalize=True) == Semver.parse("1.1.0")


def test_components_and_types() -> None:
    version = Semver.parse("1.2.3-rc.1")
    assert (version.major, version.minor, version.patch) == (1, 2, 3)
    assert [p.text for p in version.prerelease] == ["rc", "1"]
    assert [p.number for p in version.prerelease] == [None, 1]
    assert Semver.parse("1.2.3") != "1.2.3"
    with pytest.raises(TypeError):
        Semver.parse("1.2.3").compare("1.2.3")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Semver.parse(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _ = Semver.parse("1.0.0") < Semver.parse("2.0.0")  # type: ignore[operator]
