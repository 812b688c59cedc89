"""The simulator's own Kubernetes quantities and semantic versions (sim/controllers/dra_quantity
and dra_semver, behind the DRA selector oracle): answers Kubernetes documents or its tests pin
down, and, literal by literal, agreement with the product's implementations (modelfleet.cel)
on the product's own tables.
"""

from __future__ import annotations

import math

import pytest
import test_quantity
import test_semver

from modelfleet.cel.quantity import Quantity as ProductQuantity
from modelfleet.cel.semver import Semver as ProductSemver
from modelfleet.sim.controllers.dra_quantity import Kind, Quantity, go_pow10, is_quantity
from modelfleet.sim.controllers.dra_semver import Semver, is_semver

# --- Kubernetes' answers for the oracle's quantities ------------------------------------------


def q(text: str) -> Quantity:
    return Quantity.parse(text)


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        # k8s.io/apiserver/pkg/cel/library quantity docs and tests
        ("200M", "0.2G", 0),
        ("50M", "50Mi", -1),
        ("50Mi", "50M", 1),
        ("150Mi", "100Mi", 1),
        ("1Gi", "1024Mi", 0),
        ("2M", "0.002G", 0),
        ("2000k", "2M", 0),
        # apimachinery TestQuantityCmp
        ("100m", "50m", 1),
        ("10000T", "100Gi", 1),
        # binary values saturate at 2^63-1, decimal ones do not
        ("10Ei", "8Ei", 0),
        ("12E", "9Ei", 1),
        # the H100's 81559Mi is under 80Gi and over 80G
        ("81559Mi", "80Gi", -1),
        ("81559Mi", "80G", 1),
        ("1e2000000000", "1e-2000000000", 1),
    ],
)
def test_quantity_order(left: str, right: str, expected: int) -> None:
    assert q(left).compare(q(right)) == expected
    assert q(right).compare(q(left)) == -expected


@pytest.mark.parametrize(
    ("text", "integer"),
    [
        ("50k", 50_000),
        ("50", 50),
        ("50000000G", 50_000_000 * 10**9),
        ("81559Mi", 81559 * 2**20),
        ("1.5k", 1500),  # int64 fast path at scale 2
        ("9999999999999999999999999999999999999G", None),  # "cannot convert value to integer"
        ("1.5", None),
        ("1000m", None),  # the int64 amount keeps scale -3
        ("9Ei", None),  # saturated, so held as inf.Dec
        ("100Ti", None),  # too many binary digits for the fast path
        ("1e19", None),
    ],
)
def test_quantity_as_integer(text: str, integer: int | None) -> None:
    assert q(text).as_int64() == integer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("50.703k", 50703.0),
        ("1.5", 1.5),
        ("-5m", -0.005),
        ("9Ei", float(2**63 - 1)),
        ("1e400", math.inf),
        ("1e-400", 1e-9),  # rounded up to one nano
        ("0.0000000001", 1e-9),
    ],
)
def test_quantity_as_approximate_float(text: str, expected: float) -> None:
    assert q(text).as_approximate_float() == expected


def test_go_pow10_follows_gos_tables() -> None:
    assert go_pow10(0) == 1.0
    assert go_pow10(-9) == 1 / 1e9
    assert go_pow10(309) == math.inf
    assert go_pow10(-324) == 0.0
    # 10**40 is 1e8 * 1e32 in Go, which need not be the correctly rounded 1e40.
    assert go_pow10(40) == 1e8 * 1e32


def test_quantity_arithmetic_from_the_library_docs() -> None:
    assert q("50k").add(q("20")).compare(q("50.02k")) == 0
    assert q("50k").add(Quantity.from_int(20)).compare(q("50020")) == 0
    assert q("50k").sub(Quantity.from_int(20000)).as_approximate_float() == 30000.0
    chain = q("50k").add(Quantity.from_int(20)).sub(q("100k"))
    assert chain.as_int64() == -49980
    assert chain.sub(Quantity.from_int(-50000)).as_int64() == 20


def test_quantity_arithmetic_keeps_gos_representation() -> None:
    # int64 + int64 at non-negative scales stays an integer; a fractional scale never is one.
    assert q("1k").add(q("1")).as_int64() == 1001
    assert q("1.5").add(q("0.5")).as_int64() is None
    assert q("1.5").add(q("0.5")).kind is Kind.INT64_FRACTION
    # A zero operand leaves the other amount as it was (int64Amount.Add).
    assert q("0m").add(Quantity.from_int(5)).as_int64() == 5
    # Past int64 the sum moves to inf.Dec and is exact there.
    total = Quantity.from_int(2**63 - 1).add(Quantity.from_int(1))
    assert total.kind is Kind.DECIMAL
    assert total.compare(q("9223372036854775808")) == 0


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1.1.M",
        "1+1.0M",
        "0.1mi",
        "aoeu",
        ".5i",
        "1i",
        "-3.01e-",
        " 1",
        "1 ",
        "200K",
        "10Mo",
        "10Mm",
        "1,3G",
        "Three",
        "1e",
        "1ki",
        "\u0661",
    ],
)
def test_invalid_quantities(text: str) -> None:
    assert not is_quantity(text)
    with pytest.raises(ValueError, match="invalid quantity"):
        Quantity.parse(text)


def test_go_reads_a_missing_number_as_zero() -> None:
    # parseQuantityString makes the number "0" when no digit comes before the suffix.
    for text in ("+", "-", ".", "-.", "+0", "Mi", "k", "e3"):
        assert q(text).sign() == 0


# --- Kubernetes' answers for the oracle's versions --------------------------------------------


@pytest.mark.parametrize(
    ("lower", "higher"),
    [
        ("1.9.0", "1.10.0"),  # numeric, not lexical
        ("1.0.0-alpha", "1.0.0-alpha.1"),
        ("1.0.0-alpha.1", "1.0.0-alpha.beta"),
        ("1.0.0-beta.2", "1.0.0-beta.11"),
        ("1.0.0-rc.1", "1.0.0"),
        ("550.54.15", "580.65.6"),
        ("9.0.0", "10.0.0"),
    ],
)
def test_semver_precedence(lower: str, higher: str) -> None:
    assert Semver.parse(lower).compare(Semver.parse(higher)) == -1
    assert Semver.parse(higher).compare(Semver.parse(lower)) == 1


def test_semver_parts_build_metadata_and_normalisation() -> None:
    version = Semver.parse("1.2.3-rc.1+build.5")
    assert (version.major, version.minor, version.patch) == (1, 2, 3)
    assert version.compare(Semver.parse("1.2.3-rc.1")) == 0
    assert Semver.parse("v1.0", normalize=True) == Semver.parse("1.0.0")
    assert Semver.parse("01.01.01", normalize=True) == Semver.parse("1.1.1")
    for text in (
        "v1.0.0",
        "1.0",
        "01.1.1",
        "1.0.0-",
        "1.0.0+",
        "1.0.0-01",
        "18446744073709551616.0.0",
    ):
        assert not is_semver(text)
    assert not is_semver("1-rc", normalize=True)


# --- the two quantity and semver implementations, literal by literal ---------------------------

QUANTITY_LITERALS = sorted(
    {t for t, _ in test_quantity.PARSE_TABLE}
    | {"-" + t for t, _ in test_quantity.PARSE_TABLE}
    | {"0.9n", "1e-9", "1.3Gi", "10000k", "-1e-3", "1k", "1000", "1e3", "50k"}
)


def _product_quantity(text: str) -> ProductQuantity | None:
    try:
        return ProductQuantity.parse(text)
    except ValueError:
        return None


def test_quantity_literals_agree_with_the_product() -> None:
    problems = []
    for text in QUANTITY_LITERALS:
        mine, theirs = q(text), _product_quantity(text)
        assert theirs is not None, text
        theirs_int = theirs.as_integer() if theirs.is_integer() else None
        if (mine.sign(), mine.as_int64()) != (theirs.sign(), theirs_int):
            problems.append(
                f"{text}: sign/asInteger {mine.sign(), mine.as_int64()} vs "
                f"{theirs.sign(), theirs_int}"
            )
        for other in QUANTITY_LITERALS:
            theirs_other = _product_quantity(other)
            assert theirs_other is not None
            if mine.compare(q(other)) != theirs.compare(theirs_other):
                problems.append(f"{text} vs {other}: compareTo differs")
    assert not problems, "\n".join(problems)


def test_semver_literals_agree_with_the_product() -> None:
    texts = [v for v, _ in test_semver.VALID_STRICT] + test_semver.PRECEDENCE
    for left in texts:
        for right in texts:
            mine = Semver.parse(left).compare(Semver.parse(right))
            assert mine == ProductSemver.parse(left).compare(ProductSemver.parse(right)), (
                left,
                right,
            )
