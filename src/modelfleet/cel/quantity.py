"""Kubernetes ``resource.Quantity`` semantics for DRA selector evaluation.

Layer rules: this module belongs to ``modelfleet.cel``, the pure base package under ``api`` and
``scheduling``. It does no I/O, reads no clock or environment, and imports only the standard
library: no Temporal, no Kubernetes client, no cloud SDK, no other modelfleet package.

What is mirrored from ``k8s.io/apimachinery/pkg/api/resource`` (``ParseQuantity``, ``Cmp``,
``Add``, ``Sub``, ``AsInt64``, ``AsApproximateFloat64``):

* Grammar: optional sign, digits with an optional fraction, then a decimal SI suffix
  (``n u m k M G T P E`` or none), a binary suffix (``Ki .. Ei``) or an exponent (``e3``,
  ``E-3``, ``e+6``). Nothing is trimmed, so whitespace anywhere is an error, and suffixes are
  case-sensitive (``200K`` is an error).
* The value is exact, then rounded away from zero to a multiple of 1e-9 when it has finer
  digits (``0.1n`` becomes ``1n``), which is what ``Cmp`` compares.
* Only binary-suffixed values saturate: their magnitude is capped at 2**63-1, so ``8Ei`` and
  ``10Ei`` compare equal. Decimal values are not capped, as upstream, so
  ``9999999999999999999999999999999999999G`` stays larger than any int64.
* ``is_integer``/``as_integer`` follow ``AsInt64``, which answers from the int64 fast-path
  representation only. A value parsed or computed outside that path (``9Ei``, ``0.5Mi``,
  ``100Ti``) or held at a negative scale (``1.0``, ``1000m``) is not an integer for CEL even when
  its value is integral. This is kept on purpose: the real allocator decides with these rules.

* A number part without any digit reads as zero, as Go's scanner does (kubernetes/apimachinery
  issue 165, closed unfixed): ``Mi``, ``k``, ``e3``, ``+``, ``-``, ``.`` and ``-.`` are
  quantities on a cluster whatever the Kubernetes CEL library's doc comment says.
"""

from __future__ import annotations

import decimal
from decimal import Decimal
from typing import Final, final

__all__ = ["INT64_MAX", "INT64_MIN", "Quantity", "is_quantity"]

INT64_MAX: Final = 2**63 - 1
INT64_MIN: Final = -(2**63)

_NANO: Final = Decimal("1e-9")
_NANO_EXPONENT: Final = -9
_MAX_ALLOWED: Final = Decimal(INT64_MAX)
# Go keeps an int64 fast path only when the digit count leaves room for the scale.
_MAX_INT64_FACTORS: Final = 18
_INT32_SPAN: Final = 2**32

_DECIMAL_SI: Final[dict[str, int]] = {
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
_BINARY_SI: Final[dict[str, int]] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_CHARS: Final = frozenset("eEinumkKMGTP")
_DIGITS: Final = frozenset("0123456789")

# Sums of operands with absurdly different magnitudes would otherwise need unbounded digits.
_ARITHMETIC: Final = decimal.Context(
    prec=4096,
    rounding=decimal.ROUND_HALF_EVEN,
    Emax=decimal.MAX_EMAX,
    Emin=decimal.MIN_EMIN,
)

_DECIMAL_FORMAT: Final = "decimal"
_BINARY_FORMAT: Final = "binary"


def _fits_int64(value: int) -> bool:
    return INT64_MIN <= value <= INT64_MAX


def _scale_up(value: int, places: int) -> int | None:
    """``value * 10**places`` if it fits in an int64 (Go's ``positiveScaleInt64``)."""
    if value == 0:
        return 0
    # Any non-zero int64 times 10**19 overflows; checking first avoids huge powers.
    if places >= 19:
        return None
    scaled = value * 10**places
    return scaled if _fits_int64(scaled) else None


def _add_scaled(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int] | None:
    """Go's ``int64Amount.Add``: the int64 sum at the finer scale, or None on overflow."""
    a_value, a_scale = a
    b_value, b_scale = b
    if b_value == 0:
        return a
    if a_value == 0:
        return b
    if a_scale == b_scale:
        total = a_value + b_value
        return (total, a_scale) if _fits_int64(total) else None
    if a_scale > b_scale:
        lifted = _scale_up(a_value, a_scale - b_scale)
        if lifted is None:
            return None
        total = lifted + b_value
        return (total, b_scale) if _fits_int64(total) else None
    lifted = _scale_up(b_value, b_scale - a_scale)
    if lifted is None:
        return None
    total = a_value + lifted
    return (total, a_scale) if _fits_int64(total) else None


def _decimal_from_digits(negative: bool, digits: str, exponent: int) -> Decimal:
    # A digit tuple is exact and, unlike int(), has no length limit.
    return Decimal((1 if negative else 0, tuple(int(d) for d in digits), exponent))


def _pow10(exponent: int) -> float:
    # Parsing "1eN" gives the correctly rounded power, like Go's math.Pow10 table.
    if exponent > 308:
        return float("inf")
    if exponent < -323:
        return 0.0
    return float(f"1e{exponent}")


class _Scanned:
    __slots__ = ("denominator", "numerator", "positive", "suffix")

    def __init__(self, positive: bool, numerator: str, denominator: str, suffix: str) -> None:
        self.positive = positive
        self.numerator = numerator
        self.denominator = denominator
        self.suffix = suffix


def _scan(text: str) -> _Scanned:
    """Split ``text`` like Go's ``parseQuantityString`` (sign, digits, fraction, suffix)."""
    end = len(text)
    pos = 0
    positive = True
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1

    while pos < end and text[pos] == "0":
        pos += 1
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    # No digits at all (a bare sign, point or suffix) is zero, as in Go.
    numerator = text[start:pos] or "0"

    denominator = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denominator = text[start:pos]

    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos != end:
        raise ValueError(
            f"invalid quantity {text!r}: unexpected {text[pos]!r} at offset {pos}; expected "
            "<sign><digits>[.<digits>][suffix]"
        )
    return _Scanned(positive, numerator, denominator, text[suffix_start:])


def _interpret_suffix(text: str, suffix: str) -> tuple[str, int]:
    """Return (format, exponent): base 10 for decimal and exponent forms, base 2 for binary."""
    if suffix in _DECIMAL_SI:
        return _DECIMAL_FORMAT, _DECIMAL_SI[suffix]
    if suffix in _BINARY_SI:
        return _BINARY_FORMAT, _BINARY_SI[suffix]
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        unsigned = digits[1:] if digits[0] in "+-" else digits
        # The length check keeps int() away from huge digit strings; those overflow int64 anyway.
        if unsigned and all(c in _DIGITS for c in unsigned) and len(unsigned.lstrip("0")) <= 19:
            parsed = int(digits)
            if _fits_int64(parsed):
                # Go narrows the parsed int64 exponent to int32 without a range check.
                wrapped = (parsed + 2**31) % _INT32_SPAN - 2**31
                return _DECIMAL_FORMAT, wrapped
    raise ValueError(
        f"invalid quantity {text!r}: unknown suffix {suffix!r} (use n, u, m, k, M, G, T, P, E, "
        "Ki, Mi, Gi, Ti, Pi, Ei or an exponent such as e3)"
    )


@final
class Quantity:
    """An immutable Kubernetes quantity.

    ``==`` and ``hash`` follow the value, so ``1Gi`` equals ``1024Mi``. There are no ordering
    operators, as in CEL; use :meth:`compare`.
    """

    __slots__ = ("_scaled", "_text", "_value")

    _value: Decimal
    _scaled: tuple[int, int] | None
    _text: str

    def __init__(self, value: Decimal, scaled: tuple[int, int] | None, text: str) -> None:
        """Internal; build quantities with :meth:`parse` or :meth:`from_int`."""
        # Normalise -0 so that sign() and repr() never report a negative zero.
        self._value = value if value else Decimal(0)
        self._scaled = scaled
        self._text = text

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """Parse a quantity string; raise ``ValueError`` with the reason if it is invalid."""
        if not isinstance(text, str):
            raise TypeError(f"quantity must be parsed from a str, not {type(text).__name__}")
        if not text:
            raise ValueError("invalid quantity '': empty string")
        if text == "0":
            return cls(Decimal(0), (0, 0), text)
        scanned = _scan(text)
        fmt, exponent = _interpret_suffix(text, scanned.suffix)
        numerator, denominator = scanned.numerator, scanned.denominator
        negative = not scanned.positive

        fast = cls._fast_path(fmt, exponent, numerator, denominator, negative)
        if fast is not None:
            value, scale = fast
            return cls(_decimal_from_digits(value < 0, str(abs(value)), scale), fast, text)

        # Enough precision for every digit of the input plus a 2**60 factor keeps this exact.
        context = decimal.Context(
            prec=len(text) + 64,
            rounding=decimal.ROUND_UP,
            Emax=decimal.MAX_EMAX,
            Emin=decimal.MIN_EMIN,
        )
        digits = numerator + denominator
        if fmt == _BINARY_FORMAT:
            amount = context.multiply(
                _decimal_from_digits(False, digits, -len(denominator)), Decimal(2**exponent)
            )
        else:
            amount = _decimal_from_digits(False, digits, exponent - len(denominator))
        # Round magnitudes up so a tiny non-zero request never becomes zero (Go: inf.RoundUp).
        exponent_of_amount = amount.as_tuple().exponent
        if amount and isinstance(exponent_of_amount, int) and exponent_of_amount < _NANO_EXPONENT:
            amount = amount.quantize(_NANO, rounding=decimal.ROUND_UP, context=context)
        if fmt == _BINARY_FORMAT and amount > _MAX_ALLOWED:
            amount = _MAX_ALLOWED
        return cls(-amount if negative else amount, None, text)

    @staticmethod
    def _fast_path(
        fmt: str, exponent: int, numerator: str, denominator: str, negative: bool
    ) -> tuple[int, int] | None:
        """The (int64 value, base-10 scale) Go would store, or None when Go uses inf.Dec."""
        mantissa = 1
        if fmt == _BINARY_FORMAT:
            scale = 0
            if denominator:
                return None
            mantissa = 1 << exponent
            precision = 15 - len(numerator) - exponent * 3 // 10 - 1
        else:
            scale = exponent
            precision = _MAX_INT64_FACTORS - (len(numerator) + len(denominator))
        if precision < 0:
            return None
        scale -= len(denominator)
        if scale < _NANO_EXPONENT:
            return None
        result = int(numerator + denominator) * mantissa
        if not _fits_int64(result):
            return None
        return (-result if negative else result), scale

    @classmethod
    def from_int(cls, value: int) -> Quantity:
        """A quantity holding the integer ``value`` (CEL ``add``/``sub`` with an int operand)."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"expected an int, not {type(value).__name__}")
        if not _fits_int64(value):
            raise ValueError(f"{value} does not fit in an int64")
        return cls(Decimal(value), (value, 0), str(value))

    @property
    def value(self) -> Decimal:
        """The exact value after nano rounding and binary saturation."""
        return self._value

    @property
    def text(self) -> str:
        """The string this quantity was parsed from (a computed form for arithmetic results)."""
        return self._text

    def compare(self, other: Quantity) -> int:
        """-1, 0 or 1 as ``self`` is less than, equal to or greater than ``other`` (Go ``Cmp``)."""
        if not isinstance(other, Quantity):
            raise TypeError(f"cannot compare a Quantity with {type(other).__name__}")
        if self._value < other._value:
            return -1
        return 1 if self._value > other._value else 0

    def sign(self) -> int:
        """-1, 0 or 1."""
        return 0 if not self._value else (1 if self._value > 0 else -1)

    def is_integer(self) -> bool:
        """Whether :meth:`as_integer` succeeds (Go ``AsInt64``'s ok flag)."""
        return self._as_int64() is not None

    def as_integer(self) -> int:
        """The value as an int64; ``ValueError`` when Go's ``AsInt64`` would fail."""
        result = self._as_int64()
        if result is None:
            raise ValueError(f"cannot convert quantity {self._text!r} to an integer")
        return result

    def _as_int64(self) -> int | None:
        if self._scaled is None:
            return None
        value, scale = self._scaled
        if scale == 0:
            return value
        if scale < 0:
            return None
        return _scale_up(value, scale)

    def as_approximate_float(self) -> float:
        """A float that may lose precision; +/-inf when out of range."""
        if self._scaled is not None:
            value, scale = self._scaled
            base = float(value)
            return base if scale == 0 else base * _pow10(scale)
        return float(self._value)

    def add(self, other: Quantity | int) -> Quantity:
        """``self + other``; an int operand counts as a whole number of base units."""
        return self._combine(other, subtract=False)

    def sub(self, other: Quantity | int) -> Quantity:
        """``self - other``; an int operand counts as a whole number of base units."""
        return self._combine(other, subtract=True)

    def _combine(self, other: Quantity | int, *, subtract: bool) -> Quantity:
        operand = other if isinstance(other, Quantity) else Quantity.from_int(other)
        scaled: tuple[int, int] | None = None
        if self._scaled is not None and operand._scaled is not None:
            other_value, other_scale = operand._scaled
            if subtract:
                # Negating int64 min overflows; Go falls back to inf.Dec for it.
                if other_value != INT64_MIN:
                    scaled = _add_scaled(self._scaled, (-other_value, other_scale))
            else:
                scaled = _add_scaled(self._scaled, operand._scaled)
        if subtract:
            value = _ARITHMETIC.subtract(self._value, operand._value)
        else:
            value = _ARITHMETIC.add(self._value, operand._value)
        return Quantity(value, scaled, _format_decimal(value))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._value == other._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return f"Quantity({self._text!r})"

    def __str__(self) -> str:
        return self._text


def _format_decimal(value: Decimal) -> str:
    # Only for repr/debugging; an exponent form keeps huge or tiny values short.
    text = format(value.normalize(_ARITHMETIC), "f")
    if len(text) <= 40:
        return text
    return format(value.normalize(_ARITHMETIC), "e").replace("+", "")


def is_quantity(text: str) -> bool:
    """Whether ``text`` parses as a quantity (CEL ``isQuantity``)."""
    try:
        Quantity.parse(text)
    except (TypeError, ValueError):
        return False
    return True
