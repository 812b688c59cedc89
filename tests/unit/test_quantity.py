"""Kubernetes quantity parsing and arithmetic (tables follow apimachinery's quantity_test.go)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from modelfleet.cel.quantity import INT64_MAX, INT64_MIN, Quantity, is_quantity

KI, MI, GI, TI, PI, EI = (2**n for n in (10, 20, 30, 40, 50, 60))


def d(text: str) -> Decimal:
    return Decimal(text)


# (input, exact value after nano rounding and binary saturation)
PARSE_TABLE: list[tuple[str, Decimal]] = [
    ("0", d("0")),
    ("0n", d("0")),
    ("0u", d("0")),
    ("0m", d("0")),
    ("0Ki", d("0")),
    ("0k", d("0")),
    ("0Mi", d("0")),
    ("0M", d("0")),
    ("0Gi", d("0")),
    ("0G", d("0")),
    ("0Ti", d("0")),
    ("0T", d("0")),
    ("1", d("1")),
    # Binary suffixes
    ("1Ki", d(str(KI))),
    ("8Ki", d(str(8 * KI))),
    ("7Mi", d(str(7 * MI))),
    ("6Gi", d(str(6 * GI))),
    ("5Ti", d(str(5 * TI))),
    ("4Pi", d(str(4 * PI))),
    ("3Ei", d(str(3 * EI))),
    ("10Ti", d(str(10 * TI))),
    ("100Ti", d(str(100 * TI))),
    # Decimal suffixes
    ("5n", d("5e-9")),
    ("4u", d("4e-6")),
    ("3m", d("3e-3")),
    ("9", d("9")),
    ("8k", d("8e3")),
    ("50k", d("5e4")),
    ("7M", d("7e6")),
    ("6G", d("6e9")),
    ("5T", d("5e12")),
    ("40T", d("4e13")),
    ("300T", d("3e14")),
    ("2P", d("2e15")),
    ("1E", d("1e18")),
    # Decimal exponents
    ("1E-3", d("1e-3")),
    ("1e3", d("1e3")),
    ("1E6", d("1e6")),
    ("1e9", d("1e9")),
    ("1E12", d("1e12")),
    ("1e15", d("1e15")),
    ("1E18", d("1e18")),
    ("1e14", d("1e14")),
    ("1e13", d("1e13")),
    ("100.035k", d("100035")),
    # Things that look like floating point
    ("0.001", d("0.001")),
    ("0.0005k", d("0.5")),
    ("0.005", d("0.005")),
    ("0.05", d("0.05")),
    ("0.5", d("0.5")),
    ("0.00050k", d("0.5")),
    ("0.00500", d("0.005")),
    ("0.05000", d("0.05")),
    ("0.50000", d("0.5")),
    ("0.5e0", d("0.5")),
    ("0.5e-1", d("0.05")),
    ("0.5e-2", d("0.005")),
    ("10.035M", d("10035000")),
    ("1.2e3", d("1200")),
    ("1.3E+6", d("1300000")),
    ("1.40e9", d("1.4e9")),
    ("1.53E12", d("1.53e12")),
    ("1.6e15", d("1.6e15")),
    ("1.7E18", d("1.7e18")),
    ("9.01", d("9.01")),
    ("8.1k", d("8100")),
    ("7.123456M", d("7123456")),
    ("6.987654321G", d("6987654321")),
    ("5.444T", d("5.444e12")),
    ("40.1T", d("4.01e13")),
    ("300.2T", d("3.002e14")),
    ("2.5P", d("2.5e15")),
    ("1.01E", d("1.01e18")),
    # Things that round up to the next nano
    ("3.001n", d("4e-9")),
    ("1.1E-9", d("2e-9")),
    ("0.0000000001", d("1e-9")),
    ("0.0000000005", d("1e-9")),
    ("0.00000000050", d("1e-9")),
    ("0.5e-9", d("1e-9")),
    ("0.9n", d("1e-9")),
    ("0.00000012345", d("124e-9")),
    ("0.00000012354", d("124e-9")),
    # Binary values saturate at int64 max; decimal ones do not
    ("9Ei", d(str(INT64_MAX))),
    ("9223372036854775807Ki", d(str(INT64_MAX))),
    ("12E", d("12e18")),
    # Fractional binary values
    ("100.035Ki", d("102435.84")),
    ("0.5Mi", d(str(MI // 2))),
    ("0.05Gi", d("53687091.2")),
    ("0.025Ti", d("27487790694.4")),
    # Odd but accepted spellings
    ("0.000000000001Ki", d("2e-9")),
    (".001", d("0.001")),
    (".0001k", d("0.1")),
    ("1.", d("1")),
    ("1.G", d("1e9")),
    # The H100 figure that trips up "80Gi" thresholds
    ("81559Mi", d(str(81559 * MI))),
]


@pytest.mark.parametrize(("text", "expected"), PARSE_TABLE)
def test_parse_value(text: str, expected: Decimal) -> None:
    assert Quantity.parse(text).value == expected


@pytest.mark.parametrize(("text", "expected"), PARSE_TABLE)
def test_parse_with_explicit_sign(text: str, expected: Decimal) -> None:
    assert Quantity.parse("+" + text).value == expected
    assert Quantity.parse("-" + text).value == -expected


INVALID = [
    "",
    "1.1.M",
    "1+1.0M",
    "0.1mi",
    "0.1am",
    "aoeu",
    ".5i",
    "1i",
    "-3.01i",
    "-3.01e-",
    " 1",
    "1 ",
    "1 Gi",
    "\t1Gi",
    "1Gi\n",
    "200K",
    "10Mo",
    "10Mm",
    "1,3G",
    "Three",
    "1e",
    "1E+",
    "1e3i",
    "1Ki5",
    "1ki",
    "1KI",
    "1_000",
    "\u0661",  # an Arabic-Indic digit: int() would accept it, Go does not
    "1e99999999999999999999",
]


# apimachinery's scanner reads a missing number as 0 (kubernetes/apimachinery#165), so these
# are zero on a cluster, and integers (Go's int64 fast path).
BARE = ["Mi", "k", "e3", "+", "-", ".", "-.", "+.Ki", "m", "E-2"]


@pytest.mark.parametrize("text", BARE)
def test_a_bare_sign_point_or_suffix_is_zero(text: str) -> None:
    assert is_quantity(text)
    q = Quantity.parse(text)
    assert q.value == 0
    assert q.sign() == 0
    assert q == Quantity.parse("0")


@pytest.mark.parametrize("text", INVALID)
def test_invalid_quantities_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        Quantity.parse(text)
    assert not is_quantity(text)


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(TypeError):
        Quantity.parse(5)  # type: ignore[arg-type]
    assert not is_quantity(5)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["1.3G", "1.3Gi", "10000k", "20", "20M", "20Mi", "-1e-3"])
def test_is_quantity_true(text: str) -> None:
    assert is_quantity(text)


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        ("0", "0", 0),
        ("100m", "50m", 1),
        ("50m", "100m", -1),
        ("10000T", "100Gi", 1),
        ("200M", "0.2G", 0),
        ("50M", "50Mi", -1),
        ("50Mi", "50M", 1),
        ("1Gi", "1024Mi", 0),
        ("81559Mi", "80Gi", -1),
        ("81559Mi", "79Gi", 1),
        ("81559Mi", "80G", 1),
        ("10Ei", "8Ei", 0),
        ("-10Ei", "-8Ei", 0),
        ("12E", "9Ei", 1),
        ("-1n", "0", -1),
        ("1e-9", "0.9n", 0),
    ],
)
def test_compare(left: str, right: str, expected: int) -> None:
    a, b = Quantity.parse(left), Quantity.parse(right)
    assert a.compare(b) == expected
    assert b.compare(a) == -expected
    assert (a == b) is (expected == 0)


def test_equality_and_hash_follow_the_value() -> None:
    assert Quantity.parse("1Gi") == Quantity.parse("1024Mi")
    assert hash(Quantity.parse("1Gi")) == hash(Quantity.parse("1024Mi"))
    assert Quantity.parse("1") != Quantity.parse("1001m")
    assert Quantity.parse("1") != 1
    assert len({Quantity.parse("1k"), Quantity.parse("1000"), Quantity.parse("1e3")}) == 1


def test_quantities_have_no_ordering_operators() -> None:
    with pytest.raises(TypeError):
        _ = Quantity.parse("1") < Quantity.parse("2")  # type: ignore[operator]
    with pytest.raises(TypeError):
        Quantity.parse("1").compare(1)  # type: ignore[arg-type]


def test_binary_values_saturate_at_int64_max() -> None:
    assert Quantity.parse("10Ei").value == INT64_MAX
    assert Quantity.parse("8Ei") == Quantity.parse("10Ei")
    assert Quantity.parse("-10Ei").value == -INT64_MAX
    # Decimal spellings of the same magnitude are not capped.
    assert Quantity.parse("10E").value == 10 * 10**18
    assert Quantity.parse("10E").compare(Quantity.parse("10Ei")) == 1


def test_decimal_exponent_wraps_like_go_int32() -> None:
    # Go narrows the parsed exponent to int32, so 2**32 becomes 0.
    assert Quantity.parse("1e4294967296") == Quantity.parse("1")
    assert Quantity.parse("1e4294967299") == Quantity.parse("1k")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("50k", 50_000),
        ("50", 50),
        ("0", 0),
        ("-3", -3),
        ("50000000G", 50_000_000 * 10**9),
        ("81559Mi", 81559 * MI),
        ("1Ti", TI),
        ("922337203685477580", 922337203685477580),
        ("-922337203685477580", -922337203685477580),
        ("1e18", 10**18),
    ],
)
def test_as_integer(text: str, expected: int) -> None:
    q = Quantity.parse(text)
    assert q.is_integer()
    assert q.as_integer() == expected


@pytest.mark.parametrize(
    "text",
    [
        "1.5",
        "1n",
        "9999999999999999999999999999999999999G",
        "1e19",
        # 19 digits exceed Go's fast-path precision even though the value fits in an int64.
        "9223372036854775807",
        # Integral values that Go keeps outside its int64 fast path are not integers for CEL.
        "9Ei",
        "0.5Mi",
        "100Ti",
        "1.0",
        "1000m",
        "0m",
    ],
)
def test_not_integer(text: str) -> None:
    q = Quantity.parse(text)
    assert not q.is_integer()
    with pytest.raises(ValueError, match="cannot convert"):
        q.as_integer()


@pytest.mark.parametrize(
    ("text", "expected"),
    [("-1", -1), ("0", 0), ("-0", 0), ("-0.0", 0), ("1n", 1), ("-1n", -1), ("5Gi", 1)],
)
def test_sign(text: str, expected: int) -> None:
    assert Quantity.parse(text).sign() == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("50.703k", 50703.0),
        ("1.5", 1.5),
        ("81559Mi", float(81559 * MI)),
        ("9Ei", float(INT64_MAX)),
        ("1e400", float("inf")),
        ("-1e400", float("-inf")),
        ("1e-400", 1e-9),
        ("-5m", -0.005),
    ],
)
def test_as_approximate_float(text: str, expected: float) -> None:
    assert Quantity.parse(text).as_approximate_float() == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize(
    ("left", "op", "right", "expected"),
    [
        ("50k", "add", "20", "50.02k"),
        ("50k", "sub", "20", "49.98k"),
        ("50k", "add", 20, "50020"),
        ("50k", "sub", 20_000, "30k"),
        ("1Gi", "add", "1Gi", "2Gi"),
        ("500m", "add", "500m", "1"),
        ("1n", "sub", "1n", "0"),
        ("8Ei", "add", 1, "9223372036854775808"),
        ("12E", "sub", "12E", "0"),
        ("1e-5", "add", "1e5", "100000.00001"),
    ],
)
def test_add_and_sub(left: str, op: str, right: str | int, expected: str) -> None:
    q = Quantity.parse(left)
    operand = right if isinstance(right, int) else Quantity.parse(right)
    result = q.add(operand) if op == "add" else q.sub(operand)
    assert result.value == Quantity.parse(expected).value


def test_arithmetic_chain_from_upstream_docs() -> None:
    q = Quantity.parse("50k").add(20).sub(Quantity.parse("100k"))
    assert q.as_integer() == -49_980
    assert q.sub(-50_000).as_integer() == 20


def test_int64_overflow_in_arithmetic_leaves_the_integer_path() -> None:
    total = Quantity.from_int(INT64_MAX).add(1)
    assert total.value == 2**63
    assert not total.is_integer()
    assert Quantity.from_int(0).sub(Quantity.from_int(INT64_MIN)).value == 2**63
    assert Quantity.parse("1.5").add(Quantity.parse("0.5")).value == 2
    # The sum of two fast-path values at negative scale stays at that scale, as in Go.
    assert not Quantity.parse("1.5").add(Quantity.parse("0.5")).is_integer()
    assert Quantity.parse("1k").add(Quantity.parse("1")).as_integer() == 1001


def test_from_int_validates() -> None:
    assert Quantity.from_int(7).as_integer() == 7
    with pytest.raises(TypeError):
        Quantity.from_int(True)
    with pytest.raises(ValueError, match="int64"):
        Quantity.from_int(INT64_MAX + 1)


def test_text_and_repr_keep_the_input() -> None:
    q = Quantity.parse("81559Mi")
    assert str(q) == "81559Mi"
    assert q.text == "81559Mi"
    assert repr(q) == "Quantity('81559Mi')"
    assert str(Quantity.parse("1k").add(1)) == "1001"


def test_huge_exponents_stay_cheap() -> None:
    # Neither parsing nor comparing may expand 10**2000000000 into digits.
    huge = Quantity.parse("1e2000000000")
    tiny = Quantity.parse("1e-2000000000")
    assert huge.compare(tiny) == 1
    assert tiny.value == Decimal("1e-9")
    assert not huge.is_integer()
