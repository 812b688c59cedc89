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
    result = runner.invoke(app, ["validate", "-f", str(EXAMPLES)])
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
