"""DRA device-selector CEL: Kubernetes semantics on top of cel-python."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from modelfleet.cel import evaluator as evaluator_module
from modelfleet.cel.compiler import MAX_EXPRESSION_LENGTH, CelCompileError, check_selector
from modelfleet.cel.device import DeviceFacts
from modelfleet.cel.evaluator import SelectorEvaluator

NV = 'device.attributes["gpu.nvidia.com"]'
NV_MEMORY = 'device.capacity["gpu.nvidia.com"].memory'
EX = 'device.attributes["dra.example.com"]'

H100 = DeviceFacts.build(
    "gpu.nvidia.com",
    {
        "type": ("string", "gpu"),
        "uuid": ("string", "GPU-5f1c0a4e-0000-0000-0000-000000000000"),
        "productName": ("string", "NVIDIA H100 80GB HBM3"),
        "brand": ("string", "Nvidia"),
        "architecture": ("string", "Hopper"),
        "cudaComputeCapability": ("version", "9.0.0"),
        "driverVersion": ("version", "580.65.6"),
        "cudaDriverVersion": ("version", "13.0.0"),
        "resource.kubernetes.io/pcieRoot": ("string", "pci0000:00"),
        "resource.kubernetes.io/pciBusID": ("string", "0000:1b:00.0"),
    },
    {"memory": "81559Mi"},
)
MIG = DeviceFacts.build(
    "gpu.nvidia.com",
    {
        "type": ("string", "mig"),
        "profile": ("string", "1g.10gb"),
        "productName": ("string", "NVIDIA A100-SXM4-40GB"),
        "cudaComputeCapability": ("version", "8.0.0"),
        "driverVersion": ("version", "550.54.15"),
    },
    {"memory": "9984Mi", "multiprocessors": "14"},
)
EXAMPLE = DeviceFacts.build(
    "dra.example.com",
    {
        "color": ("string", "black"),
        "size": ("string", "large"),
        "model": ("string", "LATEST-GPU-MODEL"),
        "healthy": ("bool", True),
        "cores": ("int", 16),
        "firmware": ("version", "1.2.3-rc.1"),
    },
    {"memory": "64Gi"},
)
# Kubernetes would refuse to evaluate anything against these.
TWO_PART_VERSION = DeviceFacts.build(
    "gpu.nvidia.com", {"type": ("string", "gpu"), "cudaDriverVersion": ("version", "12.4")}
)
BAD_QUANTITY = DeviceFacts.build("gpu.nvidia.com", {"type": ("string", "gpu")}, {"memory": "80 Gi"})
DUPLICATE_NAME = DeviceFacts.build(
    "gpu.nvidia.com", {"type": ("string", "gpu"), "gpu.nvidia.com/type": ("string", "mig")}
)
HUGE_INT = DeviceFacts.build("dra.example.com", {"cores": ("int", 2**63)})

H100_BYTES = 81559 * 2**20

CASES: list[tuple[str, DeviceFacts, str, bool]] = [
    # driver
    ("driver equal", H100, 'device.driver == "gpu.nvidia.com"', True),
    ("driver different", H100, 'device.driver == "dra.example.com"', False),
    # quantity
    ("h100 is not 80Gi", H100, f'{NV_MEMORY}.compareTo(quantity("80Gi")) >= 0', False),
    ("h100 is 79Gi", H100, f'{NV_MEMORY}.compareTo(quantity("79Gi")) >= 0', True),
    ("h100 is over 80G", H100, f'{NV_MEMORY}.isGreaterThan(quantity("80G"))', True),
    ("h100 is under 80Gi", H100, f'{NV_MEMORY}.isLessThan(quantity("80Gi"))', True),
    ("sign global", H100, 'sign(quantity("-5m")) == -1', True),
    ("sign of a capacity", H100, f"sign({NV_MEMORY}) == 1", True),
    ("asInteger", H100, f"{NV_MEMORY}.asInteger() == {H100_BYTES}", True),
    ("isInteger", H100, f"{NV_MEMORY}.isInteger()", True),
    ("isInteger fraction", H100, 'quantity("1.5").isInteger()', False),
    ("add quantity", H100, f'{NV_MEMORY}.add(quantity("361Mi")) == quantity("80Gi")', True),
    ("sub int", H100, 'sign(quantity("1Gi").sub(1073741824)) == 0', True),
    (
        "arith chain",
        H100,
        'quantity("50k").add(20).sub(quantity("100k")).asInteger() == -49980',
        True,
    ),
    ("approx float", H100, 'quantity("50k").sub(20000).asApproximateFloat() == 30000.0', True),
    ("asInteger overflow", H100, 'quantity("9999999999999999999G").asInteger() > 0', False),
    ("no < on quantity", H100, 'quantity("1Gi") < quantity("2Gi")', False),
    ("isQuantity true", H100, 'isQuantity("1.3Gi")', True),
    ("isQuantity false", H100, 'isQuantity("200K")', False),
    ("isQuantity negated", H100, '!isQuantity("200K")', True),
    ("bare suffix is zero", H100, 'isQuantity("Mi") && sign(quantity("Mi")) == 0', True),
    ("bare sign is zero", H100, 'quantity("-") == quantity("0") && isQuantity(".")', True),
    ("quantity value equality", H100, 'quantity("1Gi") == quantity("1024Mi")', True),
    ("quantity inequality", H100, 'quantity("1G") != quantity("1Gi")', True),
    ("binary saturation", H100, 'quantity("10Ei") == quantity("8Ei")', True),
    ("saturated is not integer", H100, 'quantity("9Ei").isInteger()', False),
    # semver
    ("semver greater", H100, f'{NV}.driverVersion.isGreaterThan(semver("550.0.0"))', True),
    ("semver not greater", MIG, f'{NV}.driverVersion.isGreaterThan(semver("550.54.15"))', False),
    ("semver less", MIG, f'{NV}.cudaComputeCapability.isLessThan(semver("9.0.0"))', True),
    (
        "major minor patch",
        H100,
        f"{NV}.cudaComputeCapability.major() == 9 && {NV}.cudaComputeCapability.minor() == 0"
        f" && {NV}.cudaComputeCapability.patch() == 0",
        True,
    ),
    ("semver equality", H100, f'{NV}.driverVersion == semver("580.65.6")', True),
    ("semver vs string is an error", H100, f'{NV}.driverVersion == "580.65.6"', False),
    ("prerelease precedence", EXAMPLE, f'{EX}.firmware.compareTo(semver("1.2.3")) == -1', True),
    ("isSemver strict", H100, 'isSemver("1.2.3") && !isSemver("v1.2")', True),
    ("isSemver normalize", H100, 'isSemver("v1.2", true)', True),
    ("semver normalize overload", H100, 'semver("v01.02", true) == semver("1.2.0")', True),
    ("semver literal major", H100, 'semver("1.2.3").major() == 1', True),
    # cel.bind
    ("bind", H100, f"cel.bind(a, {NV}, a.type == 'gpu')", True),
    ("bind on mig", MIG, f"cel.bind(a, {NV}, a.type == 'gpu')", False),
    ("bind shadows", H100, "cel.bind(a, 1, cel.bind(a, 2, a) + a) == 3", True),
    (
        "bind a quantity",
        H100,
        f"cel.bind(q, {NV_MEMORY}, q.isInteger() && sign(q) == 1)",
        True,
    ),
    ("bind in a macro", H100, "[1, 2].all(x, cel.bind(y, x * 2, y > x))", True),
    ("bind error used", H100, "cel.bind(a, 1 / 0, a > 0)", False),
    ("bind error absorbed", H100, "cel.bind(a, 1 / 0, a > 0) || true", True),
    ("bind error unused", H100, "cel.bind(a, 1 / 0, true)", True),
    # string, bool and int attributes
    ("string attribute", H100, f'{NV}.productName == "NVIDIA H100 80GB HBM3"', True),
    ("string method", H100, f'{NV}.productName.startsWith("NVIDIA H1")', True),
    ("regex matches", H100, f'{NV}.productName.matches("H[0-9]00")', True),
    ("bool attribute", EXAMPLE, f"{EX}.healthy", True),
    ("int attribute", EXAMPLE, f"{EX}.cores >= 8 && {EX}.cores < 32", True),
    ("int equals double", EXAMPLE, f"{EX}.cores == 16.0", True),
    ("int attribute is not a string", EXAMPLE, f'!({EX}.cores == "16")', True),
    # type() against the type identifiers
    ("type of a string attribute", H100, "type(device.driver) == string", True),
    ("type of an int attribute", EXAMPLE, f"type({EX}.cores) == int", True),
    ("type of a bool attribute", EXAMPLE, f"type({EX}.healthy) == bool && type(1u) == uint", True),
    ("type of a device map", H100, "type(device.attributes) == map && type([1]) == list", True),
    ("type of a double", H100, "type(1.5) == double && type(null) == null_type", True),
    ("type of a type", H100, "type(string) == type && type(type(1)) == type", True),
    ("type mismatch", H100, "type(device.driver) == int || type(1) == string", False),
    ("string() still converts", H100, 'string(1) == "1" && type(string(1)) == string', True),
    # qualified names
    (
        "qualified own domain",
        H100,
        'device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"',
        True,
    ),
    ("qualified not under driver", H100, f'{NV}.pcieRoot == "pci0000:00"', False),
    # malformed devices never match
    ("two-component version", TWO_PART_VERSION, 'device.driver == "gpu.nvidia.com"', False),
    ("malformed quantity", BAD_QUANTITY, 'device.driver == "gpu.nvidia.com"', False),
    ("duplicate qualified name", DUPLICATE_NAME, 'device.driver == "gpu.nvidia.com"', False),
    ("int out of range", HUGE_INT, 'device.driver == "dra.example.com"', False),
    # unknown ids are errors
    ("unknown attribute id", H100, f'{NV}.noSuchThing == "x"', False),
    ("unknown id negated", H100, f'!({NV}.noSuchThing == "x")', False),
    ("unknown capacity id", H100, 'sign(device.capacity["gpu.nvidia.com"].cores) == 1', False),
    # non-bool results
    ("string result", H100, f"{NV}.productName", False),
    ("int result", EXAMPLE, f"{EX}.cores", False),
    ("quantity result", H100, NV_MEMORY, False),
    # unknown vs known domains
    ("known domain in", H100, '"gpu.nvidia.com" in device.attributes', True),
    ("unknown domain in", H100, '"dra.example.com" in device.attributes', False),
    ("unknown domain is empty", H100, f"{EX}.size() == 0", True),
    ("capacity domain in", H100, '"gpu.nvidia.com" in device.capacity', True),
    (
        "domain exists macro",
        H100,
        'device.attributes.exists(d, d == "resource.kubernetes.io")',
        True,
    ),
    # guarded expressions
    (
        "guard skips",
        H100,
        f'"dra.example.com" in device.attributes && {EX}.color == "black"',
        False,
    ),
    (
        "guard passes",
        EXAMPLE,
        f'"dra.example.com" in device.attributes && {EX}.color == "black"',
        True,
    ),
    ("guard or", H100, f'!("dra.example.com" in device.attributes) || {EX}.color == "black"', True),
    ("has guard false", H100, f'has({NV}.profile) && {NV}.profile == "1g.10gb"', False),
    ("has guard true", MIG, f'has({NV}.profile) && {NV}.profile == "1g.10gb"', True),
    (
        "error absorbed by or",
        H100,
        f'sign({NV}.cores) == 1 || device.driver == "gpu.nvidia.com"',
        True,
    ),
    # examples in the style of the upstream docs
    ("large-black", EXAMPLE, f'{EX}.color == "black" && {EX}.size == "large"', True),
    ("large-black other device", H100, f'{EX}.color == "black" && {EX}.size == "large"', False),
    (
        "extended-resource class",
        EXAMPLE,
        f'device.driver == "dra.example.com" && {EX}.model == "LATEST-GPU-MODEL"',
        True,
    ),
    (
        "type and memory",
        H100,
        f'{NV}.type == "gpu" && {NV_MEMORY}.compareTo(quantity("40Gi")) >= 0',
        True,
    ),
    (
        "type and memory on mig",
        MIG,
        f'{NV}.type == "gpu" && {NV_MEMORY}.compareTo(quantity("40Gi")) >= 0',
        False,
    ),
    ("mig class", MIG, f'device.driver == "gpu.nvidia.com" && {NV}.type == "mig"', True),
]


@pytest.mark.parametrize(
    ("device", "expression", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_selector(device: DeviceFacts, expression: str, expected: bool) -> None:
    check_selector(expression)
    assert SelectorEvaluator().matches(expression, device) is expected


def test_h100_memory_threshold() -> None:
    evaluator = SelectorEvaluator()
    at_least = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("{}")) >= 0'
    assert not evaluator.matches(at_least.format("80Gi"), H100)
    assert evaluator.matches(at_least.format("79Gi"), H100)
    assert evaluator.matches(at_least.format("80G"), H100)


INVALID = [
    ("incomplete", "device.driver ==", "unexpected end"),
    ("assignment", 'device.driver = "x"', "syntax error"),
    ("empty", "", "empty"),
    ("blank", "   ", "empty"),
    ("bad quantity literal", 'sign(quantity("200K")) == 1', "invalid quantity literal"),
    ("bad semver literal", 'semver("1.0") == semver("1.0.0")', "invalid semver literal"),
    ("bad normalized semver", 'semver("1-rc", true).major() == 1', "invalid semver literal"),
    ("unknown variable", "foo == 1", "undeclared reference to 'foo'"),
    ("unknown device field", "device.foo == 1", "no field 'foo'"),
    ("allowMultipleAllocations", "device.allowMultipleAllocations", "not supported"),
    ("optional field", f"{NV}.?type.orValue('') == 'gpu'", "not supported by modelfleet"),
    ("optional index", f"{NV}[?'type'] == 'gpu'", "not supported by modelfleet; guard"),
    ("orValue", f"{NV}.type.orValue('') == 'gpu'", "not supported by modelfleet"),
    ("optional.of", "optional.of(1) == 1", "not supported by modelfleet"),
    ("bind arity", "cel.bind(a, 1)", "takes a variable name, a value and an expression"),
    ("bind variable", "cel.bind(1, 1, true)", "must be a variable name"),
    ("bind scope", "cel.bind(a, 1, true) && a == 1", "undeclared reference to 'a'"),
    ("other cel function", "cel.block([1], true)", "undeclared function 'cel.block'"),
    ("unknown function", 'lowerAscii(device.driver) == "x"', "undeclared function 'lowerAscii'"),
    ("unknown method", 'device.driver.lowerAscii() == "x"', "undeclared function 'lowerAscii'"),
    ("list to isQuantity", "isQuantity([1, 2])", "argument 1 must be string"),
    ("int to quantity", "sign(quantity(1)) == 1", "argument 1 must be string"),
    ("string to add", 'sign(quantity("1").add("1")) == 1', "argument 2 must be int"),
    ("string normalize flag", 'semver("1.0.0", "true").major() == 1', "argument 2 must be bool"),
    ("literal receiver", '"1.2.3".major() == 1', "argument 1 must be a quantity or semver"),
    ("arity", 'sign(quantity("1", "2")) == 1', "takes 1 argument"),
    ("member sign", f"{NV_MEMORY}.sign() == 1", r"global function .*use sign\(q\) instead"),
    ("member sign of a result", 'quantity("1").sub(1).sign() == 0', r"use sign\(q\)"),
    ("member quantity", '"1Gi".quantity().isInteger()', r"use quantity\(s\)"),
    ("member isSemver", '"1.0.0".isSemver()', r"use isSemver\(s\)"),
    ("global compareTo", f'compareTo({NV_MEMORY}, quantity("1")) == 0', "is a method"),
    ("global isInteger", f"isInteger({NV_MEMORY})", r"write x.isInteger\(...\)"),
    ("string == int", '!("a" == 1)', r"'\"a\" == 1' does not type-check: .*'\(string, int\)'"),
    (
        "quantity == int",
        'quantity("1") == 1 || true',
        r"'_==_' applied to '\(kubernetes.Quantity, int\)",
    ),
    ("capacity == int", f"{NV_MEMORY} == 85521809408", r"applied to '\(kubernetes.Quantity, int\)"),
    ("double == int", 'quantity("50k").asApproximateFloat() == 30000', r"\(double, int\).*2\.0"),
    (
        "semver == quantity",
        'semver("1.0.0") == quantity("1")',
        "kubernetes.Semver, kubernetes.Quantity",
    ),
    ("int == uint", f"({NV}.driverVersion.major() + 1) == 581u", r"\(int, uint\)"),
    ("string < int", f'size({NV}.productName) > "3"', "does not order values of different types"),
    ("member arity", f"{NV_MEMORY}.compareTo() == 0", "takes 2 argument"),
    ("macro variable", "device.attributes.exists(1, true)", "must be a variable name"),
    ("macro variable scope", 'device.attributes.exists(d, d == "x") && d == "x"', "'d'"),
    ("leading dot", '.device.driver == "x"', "leading-dot"),
    ("too long", '"' + "x" * MAX_EXPRESSION_LENGTH + '" == device.driver', "limit"),
    ("too deep", "(" * 3000 + "true" + ")" * 3000, "nested too deeply"),
]


@pytest.mark.parametrize(
    ("expression", "reason"), [case[1:] for case in INVALID], ids=[case[0] for case in INVALID]
)
def test_invalid_expression_raises(expression: str, reason: str) -> None:
    with pytest.raises(CelCompileError, match=reason) as caught:
        check_selector(expression)
    assert isinstance(caught.value, ValueError)
    with pytest.raises(CelCompileError, match=reason):
        SelectorEvaluator().matches(expression, H100)


def test_compile_error_reports_position() -> None:
    with pytest.raises(CelCompileError) as caught:
        check_selector('device.driver == "a" &&\n  device.foo == 1')
    assert (caught.value.line, caught.value.column) == (2, 3)
    assert str(caught.value).endswith("(line 2, column 3)")
    assert caught.value.expression.startswith("device.driver")


@pytest.mark.parametrize(
    "expression",
    [
        'semver("1.0", true) == semver("1.0.0")',
        "type(device.driver) == string && size(device.driver) > 0",
        "[1, 2, 3].all(x, x > 0) && [1].map(x, x * 2) == [2]",
        'isQuantity("Three") || isSemver("bogus")',
        'device.attributes["gpu.nvidia.com"].exists(k, k == "type")',
        '// a comment\ndevice.driver == "gpu.nvidia.com"',
    ],
)
def test_valid_expressions_compile(expression: str) -> None:
    check_selector(expression)


def test_memo_skips_repeated_evaluation() -> None:
    evaluator = SelectorEvaluator()
    expression = 'device.driver == "gpu.nvidia.com"'
    assert evaluator.matches(expression, H100)
    assert evaluator.matches(expression, H100)
    assert (evaluator.evaluations, evaluator.compilations) == (1, 1)
    assert evaluator.matches(expression, MIG)
    assert (evaluator.evaluations, evaluator.compilations) == (2, 1)


def test_without_cache_every_call_evaluates_but_compiles_once() -> None:
    evaluator = SelectorEvaluator(cache=False)
    expression = 'device.driver == "gpu.nvidia.com"'
    for _ in range(3):
        assert evaluator.matches(expression, H100)
    assert (evaluator.evaluations, evaluator.compilations) == (3, 1)


def test_equal_devices_share_memo_entries() -> None:
    evaluator = SelectorEvaluator()
    first = DeviceFacts.build("d.io", {"a": ("int", 1), "b": ("string", "x")}, {"m": "1Gi"})
    second = DeviceFacts.build("d.io", {"b": ("string", "x"), "a": ("int", 1)}, {"m": "1Gi"})
    assert first == second
    assert hash(first) == hash(second)
    assert evaluator.matches('device.attributes["d.io"].a == 1', first)
    assert evaluator.matches('device.attributes["d.io"].a == 1', second)
    assert evaluator.evaluations == 1


def test_malformed_device_is_not_evaluated() -> None:
    evaluator = SelectorEvaluator()
    assert not evaluator.matches("true", TWO_PART_VERSION)
    assert not evaluator.matches("true", BAD_QUANTITY)
    assert evaluator.evaluations == 0
    assert evaluator.matches("true", H100)
    assert evaluator.evaluations == 1


def test_invalid_expression_is_compiled_once() -> None:
    evaluator = SelectorEvaluator()
    for _ in range(2):
        with pytest.raises(CelCompileError):
            evaluator.matches("device.driver ==", H100)
    assert (evaluator.compilations, evaluator.evaluations) == (1, 0)


def test_caches_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evaluator_module, "_MAX_RESULTS", 3)
    monkeypatch.setattr(evaluator_module, "_MAX_DEVICES", 2)
    monkeypatch.setattr(evaluator_module, "_MAX_PROGRAMS", 2)
    evaluator = SelectorEvaluator()
    devices = [DeviceFacts.build(f"d{i}.io") for i in range(5)]
    for device in devices:
        evaluator.matches('device.driver != ""', device)
    assert evaluator.evaluations == 5
    assert len(evaluator._results) == 3
    assert len(evaluator._devices) == 2
    # The oldest result was forgotten, so it is evaluated again.
    evaluator.matches('device.driver != ""', devices[0])
    assert evaluator.evaluations == 6
    for n in range(4):
        evaluator.matches(f"{n} == {n}", H100)
    assert len(evaluator._programs) == 2


def test_matches_all() -> None:
    evaluator = SelectorEvaluator()
    assert evaluator.matches_all([], H100)
    assert evaluator.matches_all(['device.driver == "gpu.nvidia.com"', f'{NV}.type == "gpu"'], H100)
    assert not evaluator.matches_all(
        ['device.driver == "gpu.nvidia.com"', f'{NV}.type == "gpu"'], MIG
    )
    # A later invalid selector is reported even when an earlier one already fails.
    with pytest.raises(CelCompileError):
        evaluator.matches_all(["false", "device.driver =="], H100)
    with pytest.raises(TypeError):
        evaluator.matches_all("true", H100)


def test_device_facts_build_is_canonical() -> None:
    facts = DeviceFacts.build(
        "gpu.nvidia.com", {"z": ("int", 1), "a": ("bool", True)}, {"b": "1", "a": "2"}
    )
    assert facts.attributes == (("a", "bool", True), ("z", "int", 1))
    assert facts.capacity == (("a", "2"), ("b", "1"))
    assert DeviceFacts.build("x") == DeviceFacts("x")
    assert {facts: 1}[facts] == 1


@pytest.mark.parametrize(
    ("attributes", "capacity", "error"),
    [
        ({"n": ("int", "5")}, {}, TypeError),
        ({"n": ("int", True)}, {}, TypeError),
        ({"n": ("bool", 1)}, {}, TypeError),
        ({"n": ("string", 5)}, {}, TypeError),
        ({"n": ("version", 1)}, {}, TypeError),
        ({"n": ("float", 1.0)}, {}, ValueError),
        ({}, {"memory": 5}, TypeError),
    ],
)
def test_device_facts_reject_wrong_types(
    attributes: dict[str, tuple[str, object]], capacity: dict[str, object], error: type[Exception]
) -> None:
    with pytest.raises(error):
        DeviceFacts.build("d.io", attributes, capacity)  # type: ignore[arg-type]


def test_concurrent_use_is_consistent() -> None:
    evaluator = SelectorEvaluator()
    expression = f'{NV_MEMORY}.compareTo(quantity("79Gi")) >= 0'
    devices = [H100, MIG] * 50
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda d: evaluator.matches(expression, d), devices))
    assert results == [True, False] * 50
    assert evaluator.compilations == 1
    assert evaluator.evaluations >= 2
