"""Semantic versions as the simulator's DRA CEL oracle (:mod:`.dra_cel`) needs them: parsing
(strict, and the ``semver(s, true)`` normalisation), precedence and the parts.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure: no I/O and
no imports beyond the standard library. Written from blang/semver v4 (which Kubernetes uses)
and the apiserver's CEL semver library; it must not import or copy the product's
``modelfleet.cel``, which the oracle is there to check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["Semver", "is_semver"]

_NUMBERS: Final = frozenset("0123456789")
_ALPHANUM: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
_UINT64_MAX: Final = 2**64 - 1


@dataclass(frozen=True, slots=True)
class Semver:
    """A version without its build metadata, which takes no part in precedence or equality.
    ``prerelease`` holds ints for numeric identifiers and strs for the others."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[int | str, ...] = ()

    @classmethod
    def parse(cls, text: str, *, normalize: bool = False) -> Semver:
        """blang/semver ``Parse``, or with ``normalize`` the apiserver's ``normalizeAndParse``
        (no ``v`` prefix, missing minor/patch filled with 0, leading zeros dropped). Raises
        :class:`ValueError` for an invalid version."""
        if not isinstance(text, str):
            raise TypeError(f"a version must be a str, not {type(text).__name__}")
        return _parse(_normalized(text) if normalize else text, text)

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1 by semver precedence (semver.org section 11)."""
        mine = (self.major, self.minor, self.patch)
        theirs = (other.major, other.minor, other.patch)
        if mine != theirs:
            return 1 if mine > theirs else -1
        # A version with a prerelease sorts before the same version without one.
        if not self.prerelease or not other.prerelease:
            return (not self.prerelease) - (not other.prerelease)
        for left, right in zip(self.prerelease, other.prerelease, strict=False):
            if left == right:
                continue
            if isinstance(left, int) and isinstance(right, int):
                return 1 if left > right else -1
            if isinstance(left, str) and isinstance(right, str):
                return 1 if left > right else -1  # ASCII, so Go's byte order
            return -1 if isinstance(left, int) else 1  # numeric identifiers sort first
        return (len(self.prerelease) > len(other.prerelease)) - (
            len(self.prerelease) < len(other.prerelease)
        )

    def __str__(self) -> str:
        core = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            core += "-" + ".".join(str(p) for p in self.prerelease)
        return core


def is_semver(text: object, *, normalize: bool = False) -> bool:
    if not isinstance(text, str):
        return False
    try:
        Semver.parse(text, normalize=normalize)
    except ValueError:
        return False
    return True


def _invalid(source: str, why: str) -> ValueError:
    return ValueError(f"invalid semver {source!r}: {why}")


def _only(text: str, allowed: frozenset[str]) -> bool:
    return all(c in allowed for c in text)


def _number(text: str, source: str, what: str) -> int:
    # Go: containsOnly(numbers) (true for ""), no leading zero, then ParseUint(64 bits).
    if not text or not _only(text, _NUMBERS):
        raise _invalid(source, f"{what} is not a number")
    if len(text) > 1 and text[0] == "0":
        raise _invalid(source, f"{what} has a leading zero")
    value = int(text)
    if value > _UINT64_MAX:
        raise _invalid(source, f"{what} is out of range")
    return value


def _parse(text: str, source: str) -> Semver:
    if not text:
        raise _invalid(source, "empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise _invalid(source, "no major.minor.patch")
    major = _number(parts[0], source, "major")
    minor = _number(parts[1], source, "minor")
    rest = parts[2]
    build: list[str] = []
    prerelease: list[str] = []
    if "+" in rest:
        rest, _, meta = rest.partition("+")
        build = meta.split(".")
    if "-" in rest:
        rest, _, pre = rest.partition("-")
        prerelease = pre.split(".")
    patch = _number(rest, source, "patch")
    identifiers: list[int | str] = []
    for ident in prerelease:
        if not ident:
            raise _invalid(source, "empty prerelease identifier")
        if _only(ident, _NUMBERS):
            identifiers.append(_number(ident, source, "prerelease number"))
        elif _only(ident, _ALPHANUM):
            identifiers.append(ident)
        else:
            raise _invalid(source, f"bad prerelease identifier {ident!r}")
    for meta in build:
        if not meta or not _only(meta, _ALPHANUM):
            raise _invalid(source, f"bad build metadata {meta!r}")
    return Semver(major, minor, patch, tuple(identifiers))


def _normalized(text: str) -> str:
    text = text.removeprefix("v")
    parts = text.split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            if not part or part[0] not in _NUMBERS:
                part = "0" + part
            parts[i] = part
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise _invalid(text, "a short version cannot carry prerelease or build data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)
