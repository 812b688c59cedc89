"""Kubernetes resource quantities as the simulator's DRA CEL oracle (:mod:`.dra_cel`) needs them:
parsing, ordering, ``add``/``sub`` and the integer and float conversions of the apiserver's CEL
quantity library.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure: no I/O and
no imports beyond the standard library. Written from apimachinery's ``resource.Quantity``; it
must not import or copy the product's ``modelfleet.cel``, which the oracle is there to check.

The value is kept exactly. Of apimachinery's representation only what changes a CEL answer is
kept, as a :class:`Kind`: whether Go holds the amount as an ``int64`` with a non-negative scale
(``isInteger()`` can be true), as an ``int64`` with a fractional scale (``1.5``, ``1000m``), or
as an ``inf.Dec`` (too many digits, binary fractions, values capped at 2^63-1). Simplifications:
the int64 overflow that moves a sum to ``inf.Dec`` is judged on the canonical scales rather
than Go's exact ones, and ``asApproximateFloat`` applies Go's formula to the canonical digits,
so a value Go holds with extra trailing zeros may differ from it in the last bit.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Final

__all__ = ["INT64_MAX", "INT64_MIN", "Kind", "Quantity", "go_pow10", "is_quantity"]

INT64_MAX: Final = 2**63 - 1
INT64_MIN: Final = -(2**63)

# Suffix tables of apimachinery's quantitySuffixer: decimal SI powers of ten, binary powers of two.
_DECIMAL: Final = {
    "": 0,
    "n": -9,
    "u": -6,
    "m": -3,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_CHARS: Final = frozenset("eEinumkKMGTP")
# Go scans ASCII digits only; str.isdigit would also take other scripts' digits.
_DIGITS: Final = frozenset("0123456789")
_GO_INT: Final = re.compile(r"[+-]?[0-9]+")
# Go's int64 fast path takes at most 18 significant digits (maxInt64Factors).
_MAX_FAST_DIGITS: Final = 18
_NANO: Final = -9
# Exact sums need both operands at one scale; past this gap the digits would not fit in memory
# (Go would try anyway). Such a sum is an evaluation error here.
_MAX_ALIGN: Final = 10_000


class Kind(enum.Enum):
    """How apimachinery holds the amount, as far as CEL can tell."""

    INT64 = "int64"  # int64Amount with scale >= 0: asInteger() works when the value fits
    INT64_FRACTION = "int64-fraction"  # int64Amount with scale < 0: never an integer
    DECIMAL = "decimal"  # inf.Dec: never an integer


@dataclass(frozen=True, slots=True, eq=False)
class Quantity:
    """``coefficient * 10**exponent`` with trailing zeros moved into ``exponent`` (zero is
    ``0e0``), and the :class:`Kind` Go would hold it as. Compare with :meth:`compare`; ``==``
    is identity, because equal values of different kinds are equal to CEL yet not the same."""

    coefficient: int
    exponent: int
    kind: Kind

    @classmethod
    def of(cls, coefficient: int, exponent: int, kind: Kind) -> Quantity:
        if coefficient == 0:
            return cls(0, 0, kind)
        while coefficient % 10 == 0:
            coefficient //= 10
            exponent += 1
        return cls(coefficient, exponent, kind)

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """apimachinery's ``ParseQuantity``; raises :class:`ValueError` for an invalid one."""
        if not isinstance(text, str):
            raise TypeError(f"a quantity must be a str, not {type(text).__name__}")
        if text == "":
            raise ValueError("invalid quantity '': empty")
        negative, whole, fraction, suffix = _scan(text)
        binary, power = _interpret(text, suffix)
        sign = -1 if negative else 1

        # The int64 fast path: few enough digits, no binary fraction, no finer scale than nano.
        mantissa = 1
        if binary:
            scale = 0
            precision = -1
            if not fraction:
                mantissa = 1 << power
                # Go's estimate of the decimal digits a binary suffix uses (float32 exponent*3/10).
                precision = 15 - len(whole) - (power * 3 // 10) - 1
        else:
            scale = power
            precision = _MAX_FAST_DIGITS - (len(whole) + len(fraction))
        if precision >= 0:
            scale -= len(fraction)
            if scale >= _NANO:
                magnitude = int(whole + fraction) * mantissa
                if magnitude <= INT64_MAX:
                    kind = Kind.INT64 if scale >= 0 else Kind.INT64_FRACTION
                    return cls.of(sign * magnitude, scale, kind)

        # The inf.Dec path: exact, rounded up (away from zero) to a whole number of nanos, and
        # binary values capped at the largest int64.
        magnitude = int(whole + fraction)
        exponent = -len(fraction)
        if binary:
            magnitude <<= power
        else:
            exponent += power
        if magnitude and exponent < _NANO:
            magnitude = _divide_round_up(magnitude, _NANO - exponent)
            exponent = _NANO
        if binary and _compare_magnitudes(magnitude, exponent, INT64_MAX, 0) > 0:
            magnitude, exponent = INT64_MAX, 0
        return cls.of(sign * magnitude, exponent, Kind.DECIMAL)

    @classmethod
    def from_int(cls, value: int) -> Quantity:
        """``resource.NewQuantity(value, ...)``, what ``add(int)`` and ``sub(int)`` add."""
        if isinstance(value, bool) or not INT64_MIN <= value <= INT64_MAX:
            raise ValueError(f"{value!r} is not an int64")
        return cls.of(value, 0, Kind.INT64)

    def sign(self) -> int:
        return (self.coefficient > 0) - (self.coefficient < 0)

    def compare(self, other: Quantity) -> int:
        """-1, 0 or 1 as ``resource.Quantity.Cmp``; exact, whatever the exponents."""
        mine, theirs = self.sign(), other.sign()
        if mine != theirs:
            return 1 if mine > theirs else -1
        if mine == 0:
            return 0
        return mine * _compare_magnitudes(
            abs(self.coefficient), self.exponent, abs(other.coefficient), other.exponent
        )

    def as_int64(self) -> int | None:
        """``AsInt64``: the value when Go can give it as an int64 without loss, else None."""
        if self.kind is not Kind.INT64:
            return None
        if self.coefficient == 0:
            return 0
        if self.exponent > 18:  # 10**19 alone is past int64
            return None
        value = self.coefficient * 10**self.exponent
        return value if INT64_MIN <= value <= INT64_MAX else None

    def as_approximate_float(self) -> float:
        """``AsApproximateFloat64``: float(digits) times Go's ``math.Pow10(exponent)``."""
        try:
            base = float(self.coefficient)
        except OverflowError:
            base = float("inf") if self.coefficient > 0 else float("-inf")
        if self.exponent == 0:
            return base
        return base * go_pow10(self.exponent)

    def add(self, other: Quantity) -> Quantity:
        """``Quantity.Add``: int64 arithmetic while both are int64 amounts and nothing
        overflows, exact decimal arithmetic otherwise."""
        if self.kind is not Kind.DECIMAL and other.kind is not Kind.DECIMAL:
            # int64Amount.Add returns the other amount unchanged when one side is zero.
            if other.coefficient == 0:
                return self
            if self.coefficient == 0:
                return other
            low = min(self.exponent, other.exponent)
            if low - max(self.exponent, other.exponent) > -19:
                left = self.coefficient * 10 ** (self.exponent - low)
                right = other.coefficient * 10 ** (other.exponent - low)
                if all(INT64_MIN <= v <= INT64_MAX for v in (left, right, left + right)):
                    both_whole = self.kind is Kind.INT64 and other.kind is Kind.INT64
                    kind = Kind.INT64 if both_whole else Kind.INT64_FRACTION
                    return Quantity.of(left + right, low, kind)
        if other.coefficient == 0:
            return Quantity(self.coefficient, self.exponent, Kind.DECIMAL)
        if self.coefficient == 0:
            return Quantity(other.coefficient, other.exponent, Kind.DECIMAL)
        if abs(self.exponent - other.exponent) > _MAX_ALIGN:
            raise OverflowError("quantities too far apart in scale to add exactly")
        low = min(self.exponent, other.exponent)
        total = self.coefficient * 10 ** (self.exponent - low) + other.coefficient * 10 ** (
            other.exponent - low
        )
        return Quantity.of(total, low, Kind.DECIMAL)

    def negated(self) -> Quantity:
        return Quantity(-self.coefficient, self.exponent, self.kind)

    def sub(self, other: Quantity) -> Quantity:
        """``Quantity.Sub``: adding the negated amount, as int64Amount.Sub does."""
        return self.add(other.negated())

    def __repr__(self) -> str:
        return f"Quantity({self.coefficient}e{self.exponent}, {self.kind.value})"


def is_quantity(text: object) -> bool:
    if not isinstance(text, str):
        return False
    try:
        Quantity.parse(text)
    except ValueError:
        return False
    return True


def _scan(text: str) -> tuple[bool, str, str, str]:
    """apimachinery's ``parseQuantityString``: sign, whole digits (leading zeros dropped, "0"
    when none), fraction digits and the suffix. A bare sign or ``.`` scans as zero, as in Go."""
    end = len(text)
    pos = 0
    negative = False
    if text[0] in "+-":
        negative = text[0] == "-"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos == end:
        return negative, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    whole = text[start:pos] or "0"
    fraction = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        fraction = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos != end:
        raise ValueError(f"invalid quantity {text!r}: unexpected {text[pos]!r}")
    return negative, whole, fraction, text[suffix_start:]


def _interpret(text: str, suffix: str) -> tuple[bool, int]:
    """(binary, power) for a suffix: 10**power for decimal SI and exponents, 2**power for
    binary SI."""
    if suffix in _DECIMAL:
        return False, _DECIMAL[suffix]
    if suffix in _BINARY:
        return True, _BINARY[suffix]
    if len(suffix) > 1 and suffix[0] in "eE" and _GO_INT.fullmatch(suffix[1:]):
        power = int(suffix[1:])
        if INT64_MIN <= power <= INT64_MAX:
            # Go parses the exponent as an int64 and keeps it in an int32, wrapping.
            return False, (power + 2**31) % 2**32 - 2**31
    raise ValueError(f"invalid quantity {text!r}: unknown suffix {suffix!r}")


def _divide_round_up(magnitude: int, digits: int) -> int:
    """ceil(magnitude / 10**digits) for a positive magnitude, without building a huge power."""
    if digits > len(str(magnitude)):
        return 1
    divisor = int(10**digits)  # int ** int is typed Any: it is a float for negative powers
    return -(-magnitude // divisor)


def _compare_magnitudes(left: int, left_exp: int, right: int, right_exp: int) -> int:
    """Compares left*10**left_exp with right*10**right_exp for non-negative coefficients; the
    digit counts settle far-apart exponents, so no power of ten beyond the digits is built."""
    if left == 0 or right == 0:
        return (left > 0) - (right > 0)
    left_size = len(str(left)) + left_exp
    right_size = len(str(right)) + right_exp
    if left_size != right_size:
        return 1 if left_size > right_size else -1
    # Same number of integer digits: the exponents differ by at most the digit counts.
    if left_exp > right_exp:
        left *= 10 ** (left_exp - right_exp)
    else:
        right *= 10 ** (right_exp - left_exp)
    return (left > right) - (left < right)


# Go's math.Pow10 tables: 10**n is a product (or quotient) of two table entries, which is not
# always the correctly rounded power, so asApproximateFloat matches Go only with these.
_POW10: Final = tuple(float(f"1e{n}") for n in range(32))
_POW10_POS32: Final = tuple(float(f"1e{32 * n}") for n in range(10))
_POW10_NEG32: Final = tuple(float(f"1e-{32 * n}") for n in range(11))


def go_pow10(n: int) -> float:
    if 0 <= n <= 308:
        return _POW10_POS32[n // 32] * _POW10[n % 32]
    if -323 <= n <= 0:
        return _POW10_NEG32[-n // 32] / _POW10[-n % 32]
    return float("inf") if n > 0 else 0.0
