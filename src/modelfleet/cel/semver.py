"""Semantic versions with the rules Kubernetes DRA uses (blang/semver v4).

Layer rules: this module belongs to ``modelfleet.cel``, the pure base package under ``api`` and
``scheduling``. It does no I/O and imports only the standard library: no Temporal, no Kubernetes
client, no cloud SDK, no other modelfleet package.

Strict parsing (``Semver.parse(s)``) is blang's ``Parse``: exactly ``MAJOR.MINOR.PATCH`` with
an optional ``-prerelease`` and ``+build``, no ``v`` prefix, no leading zeros in numeric parts,
no surrounding whitespace. Device version attributes are parsed this way.

``normalize=True`` is the Kubernetes CEL ``semver(s, true)`` overload: strip one leading ``v``,
drop leading zeros, and fill a missing minor or patch with ``0`` (``v1.2`` becomes ``1.2.0``).
A shortened version may not carry prerelease or build data.

Precedence follows semver.org section 11 as blang implements it; build metadata is ignored by
comparisons and by ``==``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["PrereleaseId", "Semver", "is_semver"]

_UINT64_MAX: Final = 2**64 - 1
_NUMBERS: Final = frozenset("0123456789")
_ALPHANUM: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-0123456789")


def _contains_only(text: str, allowed: frozenset[str]) -> bool:
    # Like blang's containsOnly, this is true for the empty string; callers check emptiness.
    return all(c in allowed for c in text)


def _has_leading_zero(text: str) -> bool:
    return len(text) > 1 and text[0] == "0"


def _parse_uint64(text: str, what: str, source: str) -> int:
    if not text:
        raise ValueError(f"invalid semver {source!r}: empty {what}")
    if not _contains_only(text, _NUMBERS):
        raise ValueError(f"invalid semver {source!r}: invalid character(s) in {what} {text!r}")
    if _has_leading_zero(text):
        raise ValueError(f"invalid semver {source!r}: {what} {text!r} has a leading zero")
    # 20 digits bounds the int() call; more cannot fit in a uint64 anyway.
    value = int(text) if len(text) <= 20 else _UINT64_MAX + 1
    if value > _UINT64_MAX:
        raise ValueError(f"invalid semver {source!r}: {what} {text!r} overflows uint64")
    return value


@dataclass(frozen=True, slots=True)
class PrereleaseId:
    """One dot-separated prerelease identifier; numeric ones sort before alphanumeric ones."""

    text: str
    number: int | None

    def compare(self, other: PrereleaseId) -> int:
        if self.number is not None and other.number is not None:
            return (self.number > other.number) - (self.number < other.number)
        if self.number is not None:
            return -1
        if other.number is not None:
            return 1
        # Go compares strings bytewise; for these ASCII identifiers that is code-point order.
        return (self.text > other.text) - (self.text < other.text)


def _parse_prerelease(text: str, source: str) -> PrereleaseId:
    if not text:
        raise ValueError(f"invalid semver {source!r}: empty prerelease identifier")
    if _contains_only(text, _NUMBERS):
        return PrereleaseId(text, _parse_uint64(text, "prerelease identifier", source))
    if _contains_only(text, _ALPHANUM):
        return PrereleaseId(text, None)
    raise ValueError(f"invalid semver {source!r}: invalid prerelease identifier {text!r}")


@dataclass(frozen=True, slots=True, eq=False)
class Semver:
    """A parsed semantic version. Components are unsigned 64-bit as in blang/semver."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[PrereleaseId, ...] = ()
    build: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str, *, normalize: bool = False) -> Semver:
        """Parse ``text``; raise ``ValueError`` with the reason when it is not valid."""
        if not isinstance(text, str):
            raise TypeError(f"semver must be parsed from a str, not {type(text).__name__}")
        return cls._strict(_normalized(text) if normalize else text, text)

    @classmethod
    def _strict(cls, text: str, source: str) -> Semver:
        if not text:
            raise ValueError("invalid semver '': empty string")
        parts = text.split(".", 2)
        if len(parts) != 3:
            raise ValueError(f"invalid semver {source!r}: expected MAJOR.MINOR.PATCH")
        major = _parse_uint64(parts[0], "major version", source)
        minor = _parse_uint64(parts[1], "minor version", source)

        rest = parts[2]
        build: tuple[str, ...] = ()
        plus = rest.find("+")
        if plus != -1:
            build = tuple(rest[plus + 1 :].split("."))
            rest = rest[:plus]
        prerelease_texts: list[str] = []
        dash = rest.find("-")
        if dash != -1:
            prerelease_texts = rest[dash + 1 :].split(".")
            rest = rest[:dash]
        patch = _parse_uint64(rest, "patch version", source)
        prerelease = tuple(_parse_prerelease(p, source) for p in prerelease_texts)
        for item in build:
            if not item:
                raise ValueError(f"invalid semver {source!r}: empty build metadata identifier")
            if not _contains_only(item, _ALPHANUM):
                raise ValueError(f"invalid semver {source!r}: invalid build metadata {item!r}")
        return cls(major, minor, patch, prerelease, build)

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1 by semver precedence; build metadata does not take part."""
        if not isinstance(other, Semver):
            raise TypeError(f"cannot compare a Semver with {type(other).__name__}")
        mine = (self.major, self.minor, self.patch)
        theirs = (other.major, other.minor, other.patch)
        if mine != theirs:
            return 1 if mine > theirs else -1
        # A release sorts after every prerelease of the same version.
        if not self.prerelease or not other.prerelease:
            return (not self.prerelease) - (not other.prerelease)
        for left, right in zip(self.prerelease, other.prerelease, strict=False):
            result = left.compare(right)
            if result:
                return result
        return (len(self.prerelease) > len(other.prerelease)) - (
            len(self.prerelease) < len(other.prerelease)
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Semver):
            return NotImplemented
        return self.compare(other) == 0

    def __hash__(self) -> int:
        # Numeric prerelease ids equal by value share a hash, matching __eq__.
        key = tuple(p.number if p.number is not None else p.text for p in self.prerelease)
        return hash((self.major, self.minor, self.patch, key))

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(p.text for p in self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text


def _normalized(text: str) -> str:
    """Kubernetes' ``normalizeAndParse`` rewrite, minus the final strict parse."""
    if text.startswith("v"):
        text = text[1:]
    parts = text.split(".", 2)
    for index, part in enumerate(parts):
        if len(part) > 1:
            stripped = part.lstrip("0")
            if not stripped or stripped[0] not in _NUMBERS:
                stripped = "0" + stripped
            parts[index] = stripped
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise ValueError(
                f"invalid semver {text!r}: a shortened version cannot have prerelease or build"
            )
        parts.extend(["0"] * (3 - len(parts)))
    return ".".join(parts)


def is_semver(text: str, *, normalize: bool = False) -> bool:
    """Whether ``text`` parses as a semver (CEL ``isSemver``)."""
    try:
        Semver.parse(text, normalize=normalize)
    except (TypeError, ValueError):
        return False
    return True
