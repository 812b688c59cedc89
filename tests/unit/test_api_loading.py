"""Loading manifests from files, directories and stdin, with located errors; round-trips."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from modelfleet.api.kinds import parse_resource
from modelfleet.api.loading import dump_resource, load_paths, load_text

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# Other projects' kinds that drive a ModelDeployment through its scale subresource (KEDA, HPA):
# applied to the management cluster beside modelfleet's, never to modelfleet itself.
SCALERS = EXAMPLES / "gitops"

BROKEN = """\
apiVersion: modelfleet.dev/v1alpha1
kind: InferenceClass
metadata:
  name: ok
spec:
  devices:
    - name: gpu
      driver: gpu.nvidia.com
      deviceClassName: gpu.nvidia.com
---
apiVersion: modelfleet.dev/v1alpha1
kind: InferenceCluster
metadata:
  name: broken
spec:
  cluster:
    source: Existing
  nodePools:
    - name: gpu
      className: ok
      nodeCont: 2
"""


def test_every_example_validates() -> None:
    ours = [str(p) for p in sorted(EXAMPLES.iterdir()) if p.is_dir() and p != SCALERS]
    result = load_paths(ours)
    assert result.errors == []
    kinds = {d.resource.KIND for d in result.documents}
    assert kinds == {
        "InferenceClass",
        "InferenceCluster",
        "ModelDeployment",
        "ModelService",
        "ModelAutoscaler",
        "InferenceGateway",
    }
    assert len(result.documents) >= 15


@pytest.mark.parametrize(
    "path",
    sorted(p for p in EXAMPLES.rglob("*.yaml") if SCALERS not in p.parents),
    ids=lambda p: p.name,
)
def test_examples_round_trip(path: Path) -> None:
    for doc in load_paths([str(path)]).documents:
        dumped = dump_resource(doc.resource)
        again = parse_resource(yaml.safe_load(dumped))
        assert again == doc.resource
        assert dump_resource(again) == dumped


def test_error_carries_file_document_line_and_field(tmp_path: Path) -> None:
    f = tmp_path / "fleet.yaml"
    f.write_text(BROKEN)
    result = load_paths([str(f)])
    assert len(result.documents) == 1
    [error] = result.errors
    assert error.source == str(f)
    assert error.document == 1
    assert error.line == 21  # the line of the misspelt key
    assert error.field == "spec.nodePools[0].nodeCont"
    assert "unknown field" in error.reason
    assert error.subject == "InferenceCluster broken"


def test_directories_are_recursive_and_only_yaml(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "one.yml").write_text(BROKEN.split("---")[0])
    (tmp_path / "a" / "notes.txt").write_text("not yaml: [")
    result = load_paths([str(tmp_path)])
    assert result.errors == []
    assert [d.resource.name for d in result.documents] == ["ok"]


def test_stdin_is_read_for_dash() -> None:
    result = load_paths(["-"], stdin=io.StringIO(BROKEN.split("---")[0]))
    assert [d.source for d in result.documents] == ["<stdin>"]


def test_invalid_yaml_is_located() -> None:
    result = load_text("kind: [unclosed\n", "x.yaml")
    [error] = result.errors
    assert error.source == "x.yaml"
    assert "invalid YAML" in error.reason
    assert error.line == 2


def test_missing_file_is_an_error() -> None:
    result = load_paths(["/nonexistent/fleet.yaml"])
    [error] = result.errors
    assert "No such file" in error.reason


def test_duplicate_resources_are_rejected(tmp_path: Path) -> None:
    one = BROKEN.split("---")[0]
    f = tmp_path / "dup.yaml"
    f.write_text(one + "---\n" + one)
    result = load_paths([str(f)])
    [error] = result.errors
    assert "defined twice" in error.reason
    assert error.document == 1


def test_empty_documents_are_skipped() -> None:
    result = load_text("---\n---\n" + BROKEN.split("---")[0], "x.yaml")
    assert result.errors == []
    assert result.documents[0].index == 1


def test_non_mapping_document_is_an_error() -> None:
    result = load_text("- a\n- b\n", "x.yaml")
    [error] = result.errors
    assert "must be a mapping" in error.reason


def test_the_scaler_examples_target_a_model_deployments_scale_subresource() -> None:
    docs = [d for p in sorted(SCALERS.glob("*.yaml")) for d in yaml.safe_load_all(p.read_text())]
    assert {d["kind"] for d in docs} == {"ScaledObject", "HorizontalPodAutoscaler"}
    for doc in docs:
        assert doc["spec"]["scaleTargetRef"]["apiVersion"] == "modelfleet.dev/v1alpha1"
        assert doc["spec"]["scaleTargetRef"]["kind"] == "ModelDeployment"
