"""The serving kinds and autoscalers in the kubectl-style CLI: ``get -o yaml`` round-trips each
back into ``apply``, table columns (an autoscaler's metrics against their targets), verdicts
and what ``apply`` leaves alone (endpoints a replica published)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from modelfleet.api.autoscalers import ModelAutoscaler
from modelfleet.api.loading import load_paths, load_text
from modelfleet.api.meta import Condition, Resource
from modelfleet.api.services import InferenceGateway, ModelEndpoint, ModelService
from modelfleet.autoscaler.records import AutoscalerStatus, Decision, MetricReading
from modelfleet.cli import columns
from modelfleet.cli.apply import ORDER
from modelfleet.cli.changes import CONFIGURED, CREATED, UNCHANGED, LiveFleet, read_only, verdict
from modelfleet.cli.manifests import (
    PUBLISHED_BY,
    Fetched,
    as_document,
    autoscaler_resource,
    endpoint_resource,
    gateway_resource,
    service_resource,
)
from modelfleet.cli.mutate import DELETE_ORDER, NOT_DELETED
from modelfleet.contracts.serving_payloads import ServiceEndpointStatus, ServiceStatus
from modelfleet.contracts.status import FleetView
from modelfleet.rendering.front_door import EndpointRecord

ROOT = Path(__file__).resolve().parents[2]
CREATED_AT = datetime(2026, 11, 23, 17, 0, tzinfo=UTC)


def _one(path: Path, kind: type[Resource]) -> Resource:
    loaded = load_paths([str(path)])
    assert not loaded.errors, loaded.errors
    return next(r for r in loaded.resources if isinstance(r, kind))


def service() -> ModelService:
    svc = _one(ROOT / "examples" / "quickstart" / "qwen3-8b.yaml", ModelService)
    assert isinstance(svc, ModelService)
    return svc


def gateway() -> InferenceGateway:
    gw = _one(ROOT / "examples" / "quickstart" / "gateway.yaml", InferenceGateway)
    assert isinstance(gw, InferenceGateway)
    return gw


def autoscaler() -> ModelAutoscaler:
    path = ROOT / "examples" / "autoscaling" / "qwen3-8b-autoscaler.yaml"
    ma = _one(path, ModelAutoscaler)
    assert isinstance(ma, ModelAutoscaler)
    return ma


def external() -> EndpointRecord:
    return EndpointRecord(
        namespace="ml-team",
        name="openai",
        labels={"model": "qwen3-8b"},
        url="https://api.example.com/v1",
        auth_secret="openai-key",
    )


def published() -> EndpointRecord:
    return EndpointRecord(
        namespace="ml-team",
        name="qwen3-8b-l4-dev-abcde",
        labels={"model": "qwen3-8b"},
        url="http://10.0.0.1/ml-team/qwen3-8b-l4-dev-abcde/v1",
        rewrite_path="/ml-team/qwen3-8b-l4-dev-abcde/",
        replica="qwen3-8b-l4-dev-abcde",
    )


def service_status(phase: str = "Ready") -> ServiceStatus:
    return ServiceStatus(
        name="qwen",
        namespace="ml-team",
        phase=phase,
        address="http://10.0.0.9",
        gateway_cluster="l4-dev",
        endpoints=[
            ServiceEndpointStatus(name="a", url="http://a", entry=0, weight=1, healthy=True),
            ServiceEndpointStatus(name="b", url="http://b", entry=0, weight=0, reason="503"),
        ],
    )


def scaler_status(decision: Decision | None = None) -> AutoscalerStatus:
    return AutoscalerStatus(
        namespace="ml-team",
        name="qwen3-8b",
        target="qwen3-8b",
        min_replicas=1,
        max_replicas=6,
        generation=2,
        current=3,
        last_decision=decision,
    )


def decision() -> Decision:
    return Decision(
        at=CREATED_AT,
        current=3,
        ready=3,
        metrics=[
            MetricReading(metric="vllm:num_requests_waiting", target=4, value=6.5, proposal=5),
            MetricReading(metric="vllm:gpu_cache_usage_perc", target=0.8, value=None),
        ],
        recommended=5,
        desired=5,
        applied=5,
        reason="vllm:num_requests_waiting 6.5 > 4 per replica",
    )


def every_kind() -> list[tuple[Fetched, Resource]]:
    """Each new kind as ``get`` prints it, with the resource it must load back as."""
    ext = external()
    ext_resource = ModelEndpoint.model_validate(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelEndpoint",
            "metadata": {"name": ext.name, "namespace": ext.namespace, "labels": ext.labels},
            "spec": {"url": ext.url, "authSecretRef": {"name": "openai-key"}},
        }
    )
    return [
        (service_resource(service(), service_status(), CREATED_AT), service()),
        (gateway_resource(gateway()), gateway()),
        (autoscaler_resource(autoscaler(), scaler_status(decision()), CREATED_AT), autoscaler()),
        (endpoint_resource(ext), ext_resource),
    ]


def test_get_yaml_of_every_new_kind_loads_back_as_the_same_resource() -> None:
    pairs = every_kind()
    for item, resource in pairs:
        assert item.manifest["status"] is not None
        text = yaml.safe_dump(as_document([item], single=True))
        loaded = load_text(text, "<get>")
        assert not loaded.errors, (item.kind, loaded.errors)
        assert [r.to_wire() for r in loaded.resources] == [resource.to_wire()], item.kind
    listed = yaml.safe_dump(as_document([i for i, _ in pairs], single=False))
    loaded = load_text(listed, "<get>")
    assert not loaded.errors, loaded.errors
    assert [r.KIND for r in loaded.resources] == [i.kind for i, _ in pairs]


def test_every_kind_apply_takes_is_also_ordered_for_delete_or_says_why_not() -> None:
    for kind in ORDER:
        assert kind in DELETE_ORDER or kind in NOT_DELETED, kind
    # Reverse dependency order: an autoscaler and a service go before their deployment.
    assert DELETE_ORDER["ModelAutoscaler"] < DELETE_ORDER["ModelDeployment"]
    assert DELETE_ORDER["ModelService"] < DELETE_ORDER["ModelDeployment"]
    assert ORDER["InferenceGateway"] < ORDER["ModelService"] < ORDER["ModelAutoscaler"]


def test_an_endpoint_a_replica_published_is_marked_and_apply_leaves_it_alone() -> None:
    item = endpoint_resource(published())
    assert item.manifest["metadata"]["annotations"][PUBLISHED_BY] == (
        "modelreplica/qwen3-8b-l4-dev-abcde"
    )
    assert item.status == {"source": "replica", "replica": "qwen3-8b-l4-dev-abcde"}
    loaded = load_text(yaml.safe_dump(item.manifest), "<get>")
    assert not loaded.errors, loaded.errors
    live = LiveFleet(FleetView(classes=[], clusters=[], replicas=[]), {})
    why = read_only(live, loaded.resources[0])
    assert why is not None
    assert "published by modelreplica/qwen3-8b-l4-dev-abcde" in why
    # Even without the annotation, the live directory says who published it.
    bare = ModelEndpoint.model_validate(
        {
            **{k: v for k, v in item.manifest.items() if k != "status"},
            "metadata": {"name": item.name, "namespace": item.namespace},
        }
    )
    assert read_only(live, bare) is None
    live.published[("ml-team", item.name)] = "qwen3-8b-l4-dev-abcde"
    assert read_only(live, bare) is not None


def test_verdicts_for_the_new_kinds() -> None:
    live = LiveFleet(FleetView(classes=[], clusters=[], replicas=[]), {})
    svc = service()
    assert verdict(live, svc) == CREATED
    live.others[("ModelService", svc.namespace, svc.name)] = svc
    assert verdict(live, svc) == UNCHANGED
    changed = svc.model_copy(deep=True)
    changed.spec.endpoints[0].weight = 3
    assert verdict(live, changed) == CONFIGURED
    gw = gateway()
    live.others[("InferenceGateway", "", gw.name)] = gw
    assert verdict(live, gw) == UNCHANGED
    # The directory keeps no annotations: adding one is not a change it could show.
    ep = ModelEndpoint.model_validate(
        {k: v for k, v in endpoint_resource(external()).manifest.items() if k != "status"}
    )
    live.others[("ModelEndpoint", ep.namespace, ep.name)] = ep
    annotated = ep.model_copy(deep=True)
    annotated.metadata.annotations["team"] = "ml"
    assert verdict(live, annotated) == UNCHANGED


def test_get_autoscalers_shows_target_bounds_metrics_against_targets_and_desired() -> None:
    item = autoscaler_resource(autoscaler(), scaler_status(decision()), CREATED_AT)
    header = columns.header("ModelAutoscaler", wide=True, all_namespaces=True)
    row = columns.row(item, wide=True, all_namespaces=True, now=CREATED_AT)
    cells = dict(zip(header, row, strict=True))
    assert cells["NAMESPACE"] == "ml-team"
    assert cells["TARGET"] == "ModelDeployment/qwen3-8b"
    assert (cells["MIN"], cells["MAX"], cells["REPLICAS"], cells["DESIRED"]) == ("1", "6", "3", "5")
    assert cells["METRICS"] == ("vllm:num_requests_waiting 6.5/4, vllm:gpu_cache_usage_perc ?/0.8")
    assert cells["REASON"] == "vllm:num_requests_waiting 6.5 > 4 per replica"
    fresh = autoscaler_resource(autoscaler(), scaler_status(None), CREATED_AT)
    cells = dict(
        zip(
            columns.header("ModelAutoscaler", wide=False, all_namespaces=False),
            columns.row(fresh, wide=False, all_namespaces=False, now=CREATED_AT),
            strict=True,
        )
    )
    assert cells["DESIRED"] == "-"
    assert cells["METRICS"].startswith("vllm:num_requests_waiting ?/4")


def test_service_endpoint_and_gateway_rows() -> None:
    svc = service_resource(service(), service_status(), CREATED_AT)
    header = columns.header("ModelService", wide=False, all_namespaces=False)
    row = columns.row(svc, wide=False, all_namespaces=False, now=CREATED_AT)
    assert dict(zip(header, row, strict=True))["IN-ROTATION"] == "1/2"
    assert dict(zip(header, row, strict=True))["ADDRESS"] == "http://10.0.0.9"
    ep = endpoint_resource(published())
    header = columns.header("ModelEndpoint", wide=True, all_namespaces=False)
    cells = dict(zip(header, columns.row(ep, wide=True, all_namespaces=False), strict=True))
    assert (cells["SOURCE"], cells["LABELS"]) == ("replica", "model=qwen3-8b")
    gw = gateway_resource(gateway())
    header = columns.header("InferenceGateway", wide=True, all_namespaces=True)
    cells = dict(zip(header, columns.row(gw, wide=True, all_namespaces=True), strict=True))
    assert "NAMESPACE" not in cells  # fleet-scoped
    assert (cells["CLUSTER"], cells["ADDRESSES"]) == ("l4-dev", "-")


def test_a_pending_service_says_why_in_get_as_describe_does() -> None:
    # Issue 23 item 3: `get services` showed `Pending` while describe said WaitingForGateway.
    status = service_status("Pending").model_copy(
        update={
            "address": "",
            "conditions": [
                Condition(
                    type="RoutingReady",
                    status="False",
                    reason="WaitingForGateway",
                    message="no InferenceGateway 'default' is applied",
                )
            ],
        }
    )
    svc = service_resource(service(), status, CREATED_AT)
    header = columns.header("ModelService", wide=False, all_namespaces=False)
    cells = dict(zip(header, columns.row(svc, wide=False, all_namespaces=False), strict=True))
    assert cells["PHASE"].endswith("Pending[/] (WaitingForGateway)")
    # A Ready service's phase stays as it is.
    ready = service_resource(service(), service_status(), CREATED_AT)
    cells = dict(zip(header, columns.row(ready, wide=False, all_namespaces=False), strict=True))
    assert "(" not in cells["PHASE"]


def test_dev_applies_the_quickstart_front_door_with_the_fleet() -> None:
    # Issue 23 item 3: `modelfleet dev` applied classes and clusters only, so the README's
    # drive-it-yourself ModelService waited for a gateway nobody had applied.
    from modelfleet.cli.devenv import load_fleet

    fleet = load_fleet([str(ROOT / "examples" / "quickstart")])
    kinds = {r.KIND for r in fleet}
    assert kinds == {"InferenceClass", "InferenceCluster", "InferenceGateway"}
    assert [r.name for r in fleet if r.KIND == "InferenceGateway"] == ["default"]


def test_get_and_describe_show_each_front_door_and_its_state(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from modelfleet.cli.serving_inspect import describe_service
    from modelfleet.contracts.serving_payloads import FrontDoorStatus
    from modelfleet.worker.settings import TemporalSettings

    status = service_status().model_copy(
        update={
            "global_address": "http://chat.ml-team.fleet.example/ml-team/chat",
            "front_doors": [
                FrontDoorStatus(cluster="l4-dev", address="http://10.0.0.9", state="Out",
                                reason="TCP connection failed"),
                FrontDoorStatus(cluster="h200-west", address="http://10.0.0.7", state="Serving"),
            ],
        }
    )  # fmt: skip
    svc = service_resource(service(), status, CREATED_AT)
    header = columns.header("ModelService", wide=False, all_namespaces=False)
    cells = dict(zip(header, columns.row(svc, wide=False, all_namespaces=False), strict=True))
    assert cells["FRONT-DOORS"] == "l4-dev Out, h200-west Serving"
    plain = service_resource(service(), service_status(), CREATED_AT)
    cells = dict(zip(header, columns.row(plain, wide=False, all_namespaces=False), strict=True))
    assert cells["FRONT-DOORS"] == "-"
    describe_service(TemporalSettings(), status)
    out = capsys.readouterr().out
    doors = out.split("Front doors", 1)[1].split("Conditions", 1)[0].splitlines()
    [dark] = [line for line in doors if "l4-dev" in line]
    assert dark.split()[:3] == ["l4-dev", "Out", "http://10.0.0.9"]
    assert "TCP connection failed" in dark
    [fine] = [line for line in doors if "h200-west" in line]
    assert fine.split()[:2] == ["h200-west", "Serving"]
