"""The simulator's DRA selector oracle (modelfleet.sim.controllers.dra_cel) against the product.

Differential: every device-selector expression the repository's examples, corpus, goldens,
tests and benches use is evaluated by the product (modelfleet.cel, cel-python) and by the
simulator's oracle (cel-expr-python with its own quantity and semver code) on a set of devices:
the example InferenceClasses' devices as the simulator publishes them, the CEL unit tests'
devices and a few edge cases. Any disagreement fails, naming the expression and the device,
unless it is listed in KNOWN_DIVERGENCES with the reason (where the product departs from
Kubernetes); such an entry fails too once the two agree, so that it is removed.

The oracle's quantities and versions on their own: test_sim_dra_quantity_semver.py.
"""

from __future__ import annotations

import ast
import dataclasses
import json
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
from modelfleet.sim.controllers.device_allocation import node_states
from modelfleet.sim.controllers.dra_cel import DraDevice, SelectorOracle
from modelfleet.sim.infrastructure import (
    PoolLayout,
    device_class_manifests,
    resource_slice_manifests,
)

ROOT = Path(__file__).resolve().parents[2]
NV = 'device.attributes["gpu.nvidia.com"]'
NV_MEMORY = 'device.capacity["gpu.nvidia.com"].memory'

# Where the product (cel-python, partial static checks) departs from Kubernetes' CEL environment and
# the oracle follows Kubernetes. Each is a product finding, not an oracle exception.
KNOWN_DIVERGENCES: dict[str, str] = {
    f"{NV}.?type.orValue('') == 'gpu'": (
        "optional field selection is in Kubernetes' base environment; cel-python's grammar "
        "has no '.?', so the product rejects it at compile time ('not supported by modelfleet')"
    ),
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
    for text in test_quantity.BARE:
        found.add(f"isQuantity({_cel_string(text)})")
        found.add(f"quantity({_cel_string(text)}).isInteger()")
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
