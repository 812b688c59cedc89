"""``modelfleet validate`` and ``modelfleet schema`` from a user's point of view."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modelfleet.cli.main import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


def test_validate_examples_exits_zero_with_a_line_per_document() -> None:
    # examples/gitops holds KEDA's and the HPA's kinds (for the management cluster), not ours.
    ours = [p for p in sorted(EXAMPLES.iterdir()) if p.is_dir() and p.name != "gitops"]
    result = runner.invoke(app, ["validate", *(a for p in ours for a in ("-f", str(p)))])
    assert result.exit_code == 0, result.output
    assert "ModelDeployment ml-team/qwen3-8b valid" in result.output
    assert "InferenceCluster h200-west valid" in result.output
    assert "documents valid." in result.output


def test_validate_broken_file_lists_every_error_and_exits_two(tmp_path: Path) -> None:
    doc = (EXAMPLES / "quickstart" / "qwen3-8b.yaml").read_text()
    broken = doc.replace("replicas: 2", "replicas: 20").replace("name: engine", "name: vllm")
    f = tmp_path / "broken.yaml"
    f.write_text(broken)
    result = runner.invoke(app, ["validate", "-f", str(f)])
    assert result.exit_code == 2
    assert f"{f}:" in result.stderr
    assert "spec.replicas" in result.stderr
    assert "spec.template.spec.engines[0].members[0].template.spec.containers[0].name" in (
        result.stderr
    )
    assert "2 errors; nothing was changed." in result.stderr


def test_schema_prints_json_schema_with_camel_case_fields() -> None:
    result = runner.invoke(app, ["schema", "md"])
    assert result.exit_code == 0
    schema = json.loads(result.output)
    assert schema["title"] == "ModelDeployment"
    assert "apiVersion" in schema["properties"]


def test_schema_unknown_kind_exits_two() -> None:
    result = runner.invoke(app, ["schema", "Pod"])
    assert result.exit_code == 2
    assert "unknown kind" in result.stderr


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.startswith("modelfleet ")


@pytest.mark.parametrize(
    "args",
    [
        ["get", "pods"],
        ["describe", "pod", "x"],
        ["delete", "pod", "x"],
        ["scale", "pod", "x", "--replicas", "1"],
    ],
)
def test_unknown_kind_is_a_clear_error_before_anything_connects(args: list[str]) -> None:
    result = runner.invoke(app, [*args, "--address", "127.0.0.1:1"])
    assert result.exit_code == 2
    assert "unknown kind 'pod" in result.stderr
    assert "known kinds" in result.stderr


QUICKSTART = EXAMPLES / "quickstart"
MEMORY_SELECTOR = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("20Gi")) >= 0'


def _with_selector(tmp_path: Path, selector: str, *, classes: bool = True) -> Path:
    """The quickstart deployment with ``selector`` (and, with ``classes``, its classes)."""
    deployment = (QUICKSTART / "qwen3-8b.yaml").read_text()
    assert MEMORY_SELECTOR in deployment
    (tmp_path / "qwen.yaml").write_text(deployment.replace(MEMORY_SELECTOR, selector))
    if classes:
        (tmp_path / "classes.yaml").write_text((QUICKSTART / "classes.yaml").read_text())
    return tmp_path


def _no_python_in(text: str) -> None:
    for leak in ("celpy", "<class", "IntType", "StringType", "Traceback"):
        assert leak not in text, text


PRODUCT_NAME_GT_5 = 'device.attributes["gpu.nvidia.com"].productName > 5'
SELECTOR_FIELD = "spec.template.spec.engines[0].members[0].nodeSelector.devices[0].selectors[0].cel"


@pytest.mark.parametrize("verb", ["validate", "apply"])
def test_a_selector_that_cannot_evaluate_on_any_declared_class_is_an_error(
    tmp_path: Path, verb: str
) -> None:
    folder = _with_selector(tmp_path, PRODUCT_NAME_GT_5)
    args = [verb, "-f", str(folder)]
    result = runner.invoke(app, [*args, "--address", "127.0.0.1:1"] if verb == "apply" else args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert f"{folder / 'qwen.yaml'}:" in line
    assert SELECTOR_FIELD in line
    assert PRODUCT_NAME_GT_5 in line
    assert "'_>_' applied to '(string, int)'" in line
    assert "any declared InferenceClass (l4, h100x8, h200x8-ib)" in line
    _no_python_in(result.stderr)
    assert "nothing was changed" in result.stderr


@pytest.mark.parametrize(
    ("selector", "why"),
    [
        (
            'device.attributes["gpu.nvidia.com"].driverVersion == "580"',
            "(kubernetes.Semver, string)",
        ),
        ('device.attributes["gpu.nvidia.com"].noSuchAttribute == "x"', "noSuchAttribute"),
        ('device.attributes["gpu.nvidia.com"].productName', "evaluates to string, not a bool"),
        ('device.attributes["gpu.nvidia.com"].productName + 1 == 2', "type error"),
    ],
)
def test_each_kind_of_unevaluable_selector_says_why_in_cels_words(
    tmp_path: Path, selector: str, why: str
) -> None:
    result = runner.invoke(app, ["validate", "-f", str(_with_selector(tmp_path, selector))])
    assert result.exit_code == 2, result.output
    assert why in result.stderr
    assert selector in result.stderr
    _no_python_in(result.stderr)


@pytest.mark.parametrize(
    "selector",
    [
        MEMORY_SELECTOR,
        # A string compared with a string: it evaluates on every class, matching one or none.
        'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"',
        'device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA")',
    ],
)
def test_a_selector_that_evaluates_on_a_declared_class_is_valid(
    tmp_path: Path, selector: str
) -> None:
    result = runner.invoke(app, ["validate", "-f", str(_with_selector(tmp_path, selector))])
    assert result.exit_code == 0, result.output


def test_without_a_declared_class_a_selector_is_not_judged(tmp_path: Path) -> None:
    folder = _with_selector(tmp_path, PRODUCT_NAME_GT_5, classes=False)
    result = runner.invoke(app, ["validate", "-f", str(folder)])
    assert result.exit_code == 0, result.output
