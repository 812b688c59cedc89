"""The simulator's DRA selector oracle (modelfleet.sim.controllers.dra_cel) against the product.

Differential: every device-selector expression the repository's examples, corpus, goldens,
tests and benches use is evaluated by the product (modelfleet.cel, cel-python) and by the
simulator's oracle (cel-expr-python with its own quantity and semver code) on a set of devices:
the example InferenceClasses' devices as the simulator publishes them, the CEL unit tests'
devices and a few edge cases. Any disagreement fails, naming the expression and the device,
unless it is listed in KNOWN_DIVERGENCES with the reason (where the product departs from
Kubernetes); such an entry fails too once the two agree, so that it is removed.

Then the oracle's quantity and semver code against answers Kubernetes documents or its tests
pin down, and the two quantity/semver implementations against each other on the literals of
the product's own tables.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import test_cel
import test_quantity
import test_semver
import yaml

from modelfleet.api.classes import InferenceClass
from modelfleet.api.loading import load_paths
from modelfleet.cel.compiler import CelCompileError
from modelfleet.cel.device import DeviceFacts
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.cel.quantity import Quantity as ProductQuantity
from modelfleet.cel.semver import Semver as ProductSemver
from modelfleet.sim.controllers.device_allocation import node_states
from modelfleet.sim.controllers.dra_cel import DraDevice, SelectorOracle
from modelfleet.sim.controllers.dra_quantity import Kind, Quantity, go_pow10, is_quantity
from modelfleet.sim.controllers.dra_semver import Semver, is_semver
from modelfleet.sim.infrastructure import (
    PoolLayout,
    device_class_manifests,
    resource_slice_manifests,
)

ROOT = Path(__file__).resolve().parents[2]
NV = 'device.attributes["gpu.nvidia.com"]'
NV_MEMORY = 'device.capacity["gpu.nvidia.com"].memory'

# Where the product (cel-python, no type checker) departs from Kubernetes' CEL environment and
# the oracle follows Kubernetes. Each is a product finding, not an oracle exception.
KNOWN_DIVERGENCES: dict[str, str] = {
    f"{NV_MEMORY}.sign() == 1": (
        "upstream declares sign as a global function (cel.Overload, not MemberOverload): "
        "q.sign() does not compile on a cluster; the product accepts it"
    ),
    'quantity("1Gi").sub(1073741824).sign() == 0': "member sign() again (see above)",
    '!("a" == 1)': (
        "cel-go's type checker rejects == between a string and an int; the product has no "
        "checker and evaluates it to false"
    ),
    'quantity("1") == 1 || device.driver == "gpu.nvidia.com"': (
        "Quantity == int does not type-check upstream, so the whole selector fails to compile; "
        "the product lets || absorb the runtime error"
    ),
    'quantity("50k").sub(20000).asApproximateFloat() == 30000': (
        "double == int does not type-check upstream (the apiserver doc comment shows it, but "
        "the checker needs 30000.0); the product compares across types"
    ),
    f"cel.bind(a, {NV}, a.type == 'gpu')": (
        "cel.bind is in the DRA environment (ext.Bindings); the product lacks it"
    ),
    f"{NV}.?type.orValue('') == 'gpu'": (
        "optional field selection is in Kubernetes' base environment; the product lacks it"
    ),
    "type(device.driver) == string && size(device.driver) > 0": (
        "type(s) == string is true in CEL; the product's type() comparison says false (bug)"
    ),
    **{
        f"isQuantity({literal})": (
            "apimachinery's ParseQuantity reads a missing number as 0 (kubernetes/apimachinery "
            "issue 165, closed unfixed), so a bare sign, point or suffix is a quantity on a "
            "cluster whatever the CEL library's doc comment says; the product rejects it"
        )
        for literal in ('"+"', '"-"', '"."', '"-."', '"Mi"', '"k"', '"e3"')
    },
}


# --- the expressions -------------------------------------------------------------------------


def _yaml_expressions() -> Iterator[str]:
    """``cel:`` strings (modelfleet's API) and ``cel: {expression:}`` (Kubernetes objects)."""

    def walk(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("cel", "expression") and isinstance(value, str):
                    yield value
                yield from walk(value)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value)

    for folder in ("examples", "tests/corpus", "tests/golden"):
        for path in sorted((ROOT / folder).rglob("*.yaml")):
            try:
                documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
            except yaml.YAMLError:
                continue  # the invalid corpus holds deliberately broken YAML
            for document in documents:
                yield from walk(document)


def _looks_like_selector(text: str) -> bool:
    return any(
        word in text
        for word in ("device.", "quantity(", "semver(", "isQuantity(", "isSemver(", "sign(")
    )


def _python_expressions() -> Iterator[str]:
    """String constants in the tests and benches that look like selectors, with f-strings
    whose placeholders name module-level string constants resolved (``f"{NV}.type"``).
    Fragments (``'device.capacity["'``) come along; they fail to compile on both sides."""
    for path in sorted([*(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]):
        if path.name == Path(__file__).name:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names: dict[str, str] = {}
        for node in tree.body:
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                value = _resolve(node.value, names) if node.value is not None else None
                for target in targets:
                    if isinstance(target, ast.Name) and value is not None:
                        names[target.id] = value
        for node in ast.walk(tree):
            value = _resolve(node, names) if isinstance(node, ast.expr) else None
            if value is not None and _looks_like_selector(value):
                yield value


def _resolve(node: ast.expr, names: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for piece in node.values:
            if isinstance(piece, ast.FormattedValue):
                if piece.format_spec is not None or piece.conversion != -1:
                    return None
                resolved = _resolve(piece.value, names)
            else:
                resolved = _resolve(piece, names)
            if resolved is None:
                return None
            parts.append(resolved)
        return "".join(parts)
    return None


def _classes() -> list[InferenceClass]:
    paths = sorted(
        str(p)
        for folder in ("examples", "tests/corpus/modelplane/valid")
        for p in (ROOT / folder).rglob("*.yaml")
    )
    result = load_paths(paths)
    return [r for r in result.resources if isinstance(r, InferenceClass)]


CLASSES = _classes()


def _expressions() -> list[str]:
    found: set[str] = set()
    found.update(case[2] for case in test_cel.CASES)
    found.update(case[1] for case in test_cel.INVALID)
    found.update(_yaml_expressions())
    found.update(_python_expressions())
    # The simulator's own DeviceClasses for the example classes.
    for device_class in device_class_manifests({c.name: c for c in CLASSES}):
        for selector in device_class["spec"]["selectors"]:
            found.add(selector["cel"]["expression"])
    at_least = f'{NV_MEMORY}.compareTo(quantity("{{}}")) >= 0'
    found.update(at_least.format(q) for q in ("80Gi", "79Gi", "80G"))
    # The literals of the product's quantity and semver tables, through the CEL functions.
    for text, _ in test_quantity.PARSE_TABLE:
        found.add(f"isQuantity({_cel_string(text)})")
        found.add(f"quantity({_cel_string(text)}).isInteger()")
    found.update(f"isQuantity({_cel_string(t)})" for t in test_quantity.INVALID if t)
    for text in [*(v for v, _ in test_semver.VALID_STRICT), *test_semver.INVALID_STRICT]:
        found.add(f"isSemver({_cel_string(text)})")
    for text, _ in test_semver.NORMALIZED:
        found.add(f"isSemver({_cel_string(text)}, true)")
    return sorted(found)


def _cel_string(text: str) -> str:
    # JSON string escapes (\n, \t, \", \\, \uXXXX) are CEL string escapes too.
    return json.dumps(text)


# --- the devices -----------------------------------------------------------------------------


def _from_facts(facts: DeviceFacts) -> DraDevice:
    return DraDevice.build(
        facts.driver, {n: (k, v) for n, k, v in facts.attributes}, dict(facts.capacity)
    )


def _to_facts(device: DraDevice) -> DeviceFacts:
    return DeviceFacts.build(
        device.driver, {n: (k, v) for n, k, v in device.attributes}, dict(device.capacity)
    )


def _class_devices() -> Iterator[tuple[str, DraDevice]]:
    """One device of each DRA device of each example class, as the simulated scheduler sees it
    (published in a ResourceSlice, read back by device_allocation.node_states)."""
    pool = types.SimpleNamespace(name="pool")
    for klass in CLASSES:
        layout = PoolLayout(pool, klass, ("n0",))  # type: ignore[arg-type]
        slices = resource_slice_manifests("c", "n0", layout)
        [node] = node_states([{"metadata": {"name": "n0"}}], slices)
        seen: set[str] = set()
        for device in node.devices:
            kind = device.name.rsplit("-", 1)[0]
            if kind not in seen:
                seen.add(kind)
                yield f"{klass.name}/{kind}", device.facts


def _devices() -> dict[str, DraDevice]:
    devices = {
        name: _from_facts(getattr(test_cel, name))
        for name in (
            "H100",
            "MIG",
            "EXAMPLE",
            "TWO_PART_VERSION",
            "BAD_QUANTITY",
            "DUPLICATE_NAME",
            "HUGE_INT",
        )
    }
    devices.update(_class_devices())
    devices.update(
        {
            "bare gpu": DraDevice.build("gpu.nvidia.com"),
            "nic": DraDevice.build(
                "nic.nvidia.com", {"linkType": ("string", "infiniband")}, {"bandwidth": "400G"}
            ),
            "gpu in bytes": DraDevice.build(
                "gpu.nvidia.com",
                {
                    "type": ("string", "gpu"),
                    "productName": ("string", "NVIDIA H200"),
                    "driverVersion": ("version", "570.10.0-rc.1+build.7"),
                    "cudaComputeCapability": ("version", "10.0.0"),
                },
                {"memory": "150754820096"},
            ),
            "fractional capacity": DraDevice.build(
                "dra.example.com", {"cores": ("int", -3)}, {"memory": "1.5Gi", "share": "500m"}
            ),
        }
    )
    return devices


DEVICES = _devices()
EXPRESSIONS = _expressions()


def test_the_collection_is_not_empty() -> None:
    # A path or loader change must not quietly turn the differential test into nothing.
    assert len(EXPRESSIONS) > 300
    assert any(e.startswith(f"{NV_MEMORY}.compareTo(quantity(") for e in EXPRESSIONS)
    assert 'device.attributes["nic.nvidia.com"].linkType == "infiniband"' in EXPRESSIONS
    assert "device.attributes['gpu.nvidia.com'].type == 'gpu'" in " ".join(EXPRESSIONS)
    assert len([n for n in DEVICES if "/" in n]) >= 3
    assert set(KNOWN_DIVERGENCES) <= set(EXPRESSIONS)


PRODUCT = SelectorEvaluator()
ORACLE = SelectorOracle()


def _product(expression: str, device: DraDevice) -> bool:
    try:
        return PRODUCT.matches(expression, _to_facts(device))
    except CelCompileError:
        return False


def _disagreements(expression: str) -> list[str]:
    out = []
    for name, device in DEVICES.items():
        product = _product(expression, device)
        oracle = ORACLE.evaluate(expression, device)
        if product != oracle.matched:
            why = f" ({oracle.error})" if oracle.error else ""
            out.append(f"device {name}: product {product}, oracle {oracle.matched}{why}")
    return out


@pytest.mark.parametrize("expression", EXPRESSIONS, ids=lambda e: e[:80])
def test_product_and_oracle_agree(expression: str) -> None:
    disagreements = _disagreements(expression)
    if expression in KNOWN_DIVERGENCES:
        assert disagreements, (
            f"{expression!r} now agrees on every device; remove it from KNOWN_DIVERGENCES"
        )
        return
    assert not disagreements, f"selector {expression!r}:\n  " + "\n  ".join(disagreements)


def test_a_wrong_answer_is_caught() -> None:
    # The differential can fail: a product that took 80G for 80Gi would disagree on the H100.
    expression = f'{NV_MEMORY}.compareTo(quantity("80Gi")) >= 0'
    wrong = expression.replace("80Gi", "80G")
    h100 = DEVICES["H100"]
    assert _product(wrong, h100) != ORACLE.matches(expression, h100)


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


def test_oracle_device_value_semantics() -> None:
    # Not a product comparison: the DRA variable's shape, straight from Kubernetes' rules.
    h100 = DEVICES["H100"]
    assert ORACLE.matches('device.attributes["dra.example.com"].size() == 0', h100)
    assert not ORACLE.matches('"dra.example.com" in device.attributes', h100)
    assert ORACLE.matches('device.attributes["x.io"].?color.orValue("none") == "none"', h100)
    missing = ORACLE.evaluate(f"{NV}.noSuchThing == 1", h100)
    assert not missing.matched
    assert missing.error is not None
    assert "noSuchThing" in missing.error
    assert not ORACLE.matches("true", DEVICES["TWO_PART_VERSION"])
    assert ORACLE.matches(f"sign({NV_MEMORY}) == 1 && {NV_MEMORY}.isInteger()", h100)
    assert ORACLE.matches(
        f"{NV}.driverVersion.major() == 580 && {NV}.driverVersion.minor() == 65", h100
    )
    assert ORACLE.matches(
        'quantity("1") == quantity("1000m") && !quantity("1000m").isInteger()', h100
    )
    assert ORACLE.matches('semver("1.10.0").isGreaterThan(semver("1.9.0"))', h100)
    with pytest.raises(TypeError):
        ORACLE.matches_all("true", h100)  # type: ignore[arg-type]


def test_device_build_refuses_wrong_types_like_the_schema() -> None:
    with pytest.raises(TypeError):
        DraDevice.build("d.io", {"n": ("int", "5")})
    with pytest.raises(TypeError):
        DraDevice.build("d.io", {"n": ("bool", 1)})
    with pytest.raises(ValueError, match="unknown kind"):
        DraDevice.build("d.io", {"n": ("float", 1.0)})
    same = DraDevice.build("d.io", {"b": ("int", 1), "a": ("string", "x")}, {"m": "1Gi"})
    assert same == DraDevice.build("d.io", {"a": ("string", "x"), "b": ("int", 1)}, {"m": "1Gi"})
    assert hash(same) == hash(dataclasses.replace(same))
