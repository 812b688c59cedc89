"""ModelAutoscaler manifests: one broken rule per case with its exact field path and reason (the
style of the invalid-manifest corpus), HPA's defaults, the schema, and the example."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from modelfleet.api.autoscalers import (
    ModelAutoscaler,
    PolicyType,
    ScalingRules,
    SelectPolicy,
    default_scale_down,
    default_scale_up,
    resolve,
)
from modelfleet.api.kinds import parse_resource
from modelfleet.api.loading import load_paths
from modelfleet.api.manifest_errors import InvalidResourceError
from modelfleet.cli.main import app

Doc = dict[str, Any]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "autoscaling"


def autoscaler() -> Doc:
    return {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "ModelAutoscaler",
        "metadata": {"name": "qwen", "namespace": "ml"},
        "spec": {
            "scaleTargetRef": {"kind": "ModelDeployment", "name": "qwen"},
            "minReplicas": 1,
            "maxReplicas": 4,
            "metrics": [
                {
                    "type": "Engine",
                    "engine": {
                        "name": "vllm:num_requests_waiting",
                        "target": {"averageValue": 4},
                    },
                }
            ],
        },
    }


def _set(path: list[str | int], value: Any) -> Callable[[Doc], Doc]:
    def mutate(doc: Doc) -> Doc:
        node: Any = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        return doc

    return mutate


def _del(path: list[str | int]) -> Callable[[Doc], Doc]:
    def mutate(doc: Doc) -> Doc:
        node: Any = doc
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
        return doc

    return mutate


def _add_metric(metric: Doc) -> Callable[[Doc], Doc]:
    def mutate(doc: Doc) -> Doc:
        doc["spec"]["metrics"].append(metric)
        return doc

    return mutate


PROM = {"url": "http://prometheus:9090", "query": "sum(up)", "target": {"averageValue": 2}}

CASES: list[tuple[str, Callable[[Doc], Doc], str, str]] = [
    ("min above max", _set(["spec", "minReplicas"], 5), "spec.minReplicas", "must not exceed"),
    ("negative min", _set(["spec", "minReplicas"], -1), "spec.minReplicas", "greater than or"),
    ("max zero", _set(["spec", "maxReplicas"], 0), "spec.maxReplicas", "greater than or equal"),
    (
        "max above the deployment bound",
        _set(["spec", "maxReplicas"], 11),
        "spec.maxReplicas",
        "less than or equal to 10",
    ),
    ("max missing", _del(["spec", "maxReplicas"]), "spec.maxReplicas", "required field"),
    (
        "target kind",
        _set(["spec", "scaleTargetRef", "kind"], "Deployment"),
        "spec.scaleTargetRef.kind",
        "'ModelDeployment'",
    ),
    (
        "target name",
        _set(["spec", "scaleTargetRef", "name"], "Qwen"),
        "spec.scaleTargetRef.name",
        "invalid name",
    ),
    ("no metrics", _set(["spec", "metrics"], []), "spec.metrics", "at least 1 item"),
    (
        "engine block missing",
        _del(["spec", "metrics", 0, "engine"]),
        "spec.metrics[0].engine",
        "required when type is Engine",
    ),
    (
        "prometheus block on an engine metric",
        _set(["spec", "metrics", 0, "prometheus"], PROM),
        "spec.metrics[0].prometheus",
        "must not be set when type is Engine",
    ),
    (
        "bad metric name",
        _set(["spec", "metrics", 0, "engine", "name"], "9vllm waiting"),
        "spec.metrics[0].engine.name",
        "not a Prometheus metric name",
    ),
    (
        "zero target",
        _set(["spec", "metrics", 0, "engine", "target", "averageValue"], 0),
        "spec.metrics[0].engine.target.averageValue",
        "greater than 0",
    ),
    (
        "target type",
        _set(["spec", "metrics", 0, "engine", "target", "type"], "Utilization"),
        "spec.metrics[0].engine.target.type",
        "'AverageValue'",
    ),
    (
        "unknown metric type",
        _set(["spec", "metrics", 0, "type"], "Pods"),
        "spec.metrics[0].type",
        "'Engine' or 'Prometheus'",
    ),
    (
        "duplicate metric",
        _add_metric(
            {
                "type": "Engine",
                "engine": {"name": "vllm:num_requests_waiting", "target": {"averageValue": 8}},
            }
        ),
        "spec.metrics[1]",
        "duplicate metric 'vllm:num_requests_waiting'",
    ),
    (
        "prometheus url without host",
        _add_metric({"type": "Prometheus", "prometheus": {**PROM, "url": "prometheus:9090"}}),
        "spec.metrics[1].prometheus.url",
        "http(s) URL with a host",
    ),
    (
        "prometheus url with credentials",
        _add_metric(
            {"type": "Prometheus", "prometheus": {**PROM, "url": "http://u:p@prometheus:9090"}}
        ),
        "spec.metrics[1].prometheus.url",
        "must not carry credentials",
    ),
    (
        "prometheus query missing",
        _add_metric({"type": "Prometheus", "prometheus": {"url": PROM["url"], "target": {}}}),
        "spec.metrics[1].prometheus.query",
        "required field",
    ),
    (
        "window too long",
        _set(["spec", "behavior"], {"scaleDown": {"stabilizationWindowSeconds": 3601}}),
        "spec.behavior.scaleDown.stabilizationWindowSeconds",
        "less than or equal to 3600",
    ),
    (
        "negative window",
        _set(["spec", "behavior"], {"scaleUp": {"stabilizationWindowSeconds": -1}}),
        "spec.behavior.scaleUp.stabilizationWindowSeconds",
        "greater than or equal to 0",
    ),
    (
        "empty policies",
        _set(["spec", "behavior"], {"scaleUp": {"policies": []}}),
        "spec.behavior.scaleUp.policies",
        "at least 1 item",
    ),
    (
        "policy value zero",
        _set(
            ["spec", "behavior"],
            {"scaleDown": {"policies": [{"type": "Pods", "value": 0, "periodSeconds": 60}]}},
        ),
        "spec.behavior.scaleDown.policies[0].value",
        "greater than 0",
    ),
    (
        "policy period too long",
        _set(
            ["spec", "behavior"],
            {"scaleDown": {"policies": [{"type": "Percent", "value": 10, "periodSeconds": 1801}]}},
        ),
        "spec.behavior.scaleDown.policies[0].periodSeconds",
        "less than or equal to 1800",
    ),
    (
        "policy type",
        _set(
            ["spec", "behavior"],
            {"scaleDown": {"policies": [{"type": "Replicas", "value": 1, "periodSeconds": 60}]}},
        ),
        "spec.behavior.scaleDown.policies[0].type",
        "'Pods' or 'Percent'",
    ),
    (
        "select policy",
        _set(["spec", "behavior"], {"scaleUp": {"selectPolicy": "Average"}}),
        "spec.behavior.scaleUp.selectPolicy",
        "'Max', 'Min' or 'Disabled'",
    ),
    (
        "negative tolerance",
        _set(["spec", "behavior"], {"scaleUp": {"tolerance": -0.1}}),
        "spec.behavior.scaleUp.tolerance",
        "greater than or equal to 0",
    ),
    (
        "interval too short",
        _set(["spec", "intervalSeconds"], 1),
        "spec.intervalSeconds",
        "greater than or equal to 5",
    ),
    (
        "typo in behavior",
        _set(["spec", "behavior"], {"scaleup": {}}),
        "spec.behavior.scaleup",
        "unknown field",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "field", "reason"), [pytest.param(m, f, r, id=i) for i, m, f, r in CASES]
)
def test_invalid_autoscaler_reports_field_and_reason(
    mutate: Callable[[Doc], Doc], field: str, reason: str
) -> None:
    valid = autoscaler()
    parse_resource(copy.deepcopy(valid))
    with pytest.raises(InvalidResourceError) as info:
        parse_resource(mutate(valid))
    found = {(e.field, e.reason) for e in info.value.errors}
    assert any(f == field and reason in r for f, r in found), found


def test_min_zero_and_a_prometheus_metric_are_valid() -> None:
    doc = autoscaler()
    doc["spec"]["minReplicas"] = 0
    doc["spec"]["metrics"].append({"type": "Prometheus", "prometheus": PROM})
    resource = parse_resource(doc)
    assert isinstance(resource, ModelAutoscaler)
    assert resource.spec.min_replicas == 0
    assert [m.label for m in resource.spec.metrics] == [
        "vllm:num_requests_waiting",
        "promql:sum(up)",
    ]


def test_defaults_are_hpa_v2_defaults() -> None:
    resource = parse_resource(autoscaler())
    assert isinstance(resource, ModelAutoscaler)
    assert resource.spec.min_replicas == 1
    assert resource.spec.interval_seconds == 15
    up = resolve(resource.spec.behavior.scale_up, default_scale_up())
    down = resolve(resource.spec.behavior.scale_down, default_scale_down())
    assert up.stabilization_window_seconds == 0
    assert down.stabilization_window_seconds == 300
    assert up.select_policy is SelectPolicy.MAX
    assert down.select_policy is SelectPolicy.MAX
    assert [(p.type, p.value, p.period_seconds) for p in up.policies] == [
        (PolicyType.PODS, 4, 15),
        (PolicyType.PERCENT, 100, 15),
    ]
    assert [(p.type, p.value, p.period_seconds) for p in down.policies] == [
        (PolicyType.PERCENT, 100, 15)
    ]
    assert up.tolerance == down.tolerance == 0.1


def test_partial_rules_keep_the_other_defaults() -> None:
    rules = ScalingRules.model_validate({"stabilizationWindowSeconds": 60})
    down = resolve(rules, default_scale_down())
    assert down.stabilization_window_seconds == 60
    assert down.policies == default_scale_down().policies
    assert down.select_policy is SelectPolicy.MAX


def test_kind_aliases_and_schema() -> None:
    from modelfleet.cli.kinds import resolve as resolve_kind  # the words are the CLI's

    assert resolve_kind("autoscalers") == "ModelAutoscaler"
    assert resolve_kind("ma") == "ModelAutoscaler"
    result = CliRunner().invoke(app, ["schema", "autoscaler"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.output)
    spec = schema["$defs"]["ModelAutoscalerSpec"]
    assert {"scaleTargetRef", "minReplicas", "maxReplicas", "metrics", "behavior"} <= set(
        spec["properties"]
    )
    assert set(spec["required"]) == {"scaleTargetRef", "maxReplicas", "metrics"}


def test_example_validates_and_targets_the_quickstart_deployment() -> None:
    result = load_paths([str(EXAMPLE)])
    assert result.errors == []
    [doc] = result.documents
    resource = doc.resource
    assert isinstance(resource, ModelAutoscaler)
    assert resource.spec.scale_target_ref.name == "qwen3-8b"
    assert resource.namespace == "ml-team"
