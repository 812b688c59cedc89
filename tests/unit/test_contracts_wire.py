"""Workflow/activity payloads survive a rolling upgrade: an old-shaped payload (a field missing)
and a new-shaped one (a field this version does not know, also inside an embedded resource)
both deserialize, directly and through Temporal's pydantic data converter, while user
manifests keep rejecting unknown fields."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from typing import Any, TypeVar

import pytest
from placement_builders import deployment, existing
from pydantic import BaseModel, ValidationError
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter

import modelfleet.contracts
from modelfleet.api.classes import InferenceClass
from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.kinds import parse_resource
from modelfleet.api.manifest_errors import InvalidResourceError
from modelfleet.api.meta import Model
from modelfleet.contracts.fleet_payloads import ClusterReport, PlaceRequest, PlaceResponse
from modelfleet.contracts.fleet_state import ClusterEntry, CompactLedger, DeploymentRows
from modelfleet.contracts.kube_payloads import WaitReadyRequest
from modelfleet.contracts.status import ClusterRecord, FleetView
from modelfleet.contracts.wire import WireModel
from modelfleet.contracts.workflow_inputs import FleetInput, FleetState
from modelfleet.replica.state import ReplicaInput
from modelfleet.worker.client import data_converter

T = TypeVar("T")
# The converter every modelfleet client and worker uses.
CONVERTER = data_converter().payload_converter


def to_json(value: Any) -> dict[str, Any]:
    """What the converter writes for ``value``, as a dict to reshape."""
    (payload,) = CONVERTER.to_payloads([value])
    decoded: dict[str, Any] = json.loads(payload.data)
    return decoded


def through_converter(doc: dict[str, Any], type_: type[T]) -> T:
    """Read ``doc`` as a payload of ``type_`` the way a worker does."""
    (payload,) = CONVERTER.to_payloads([doc])
    payload = Payload(metadata=payload.metadata, data=json.dumps(doc).encode())
    (value,) = CONVERTER.from_payloads([payload], [type_])
    assert isinstance(value, type_)
    return value


def read(doc: dict[str, Any], type_: type[BaseModel]) -> list[Any]:
    """``doc`` read directly and through the converter: both ways must agree."""
    direct = type_.model_validate(doc)
    converted = through_converter(doc, type_)
    assert converted == direct
    return [direct, converted]


def request() -> PlaceRequest:
    return PlaceRequest(
        request_id="r-1",
        deployment=deployment(replicas=2),
        desired=2,
        avoid_clusters=["a"],
        avoid_reasons={"a": "replica x failed"},
    )


def test_every_contract_model_ignores_unknown_fields() -> None:
    models = []
    for info in pkgutil.iter_modules(modelfleet.contracts.__path__):
        module = importlib.import_module(f"modelfleet.contracts.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseModel) and cls.__module__ == module.__name__:
                models.append(cls)
    assert len(models) > 20
    not_wire = [m.__name__ for m in models if m is not WireModel and not issubclass(m, WireModel)]
    assert not_wire == []
    assert all(m.model_config.get("extra") == "ignore" for m in models)


def test_old_shaped_payload_takes_the_defaults() -> None:
    doc = to_json(request())
    del doc["avoidClusters"], doc["avoidReasons"]
    for value in read(doc, PlaceRequest):
        assert value.avoid_clusters == []
        assert value.avoid_reasons == {}
        assert value.deployment == request().deployment

    report = to_json(ClusterReport(name="a", ready=True, draining=True))
    del report["draining"], report["observedPools"]
    for value in read(report, ClusterReport):
        assert value.draining is False
        assert value.observed_pools == {}


def test_new_shaped_payload_drops_unknown_fields_at_every_depth() -> None:
    doc = to_json(request())
    doc["priority"] = 7  # a field a newer worker added to the request
    doc["deployment"]["spec"]["template"]["spec"]["futureKnob"] = {"x": 1}  # inside the resource
    doc["deployment"]["spec"]["template"]["spec"]["engines"][0]["members"][0]["gpuSharing"] = True
    for value in read(doc, PlaceRequest):
        assert value == request()
        assert "priority" not in value.model_dump()


def test_unknown_fields_inside_nested_contracts_and_resources_in_a_continue_as_new_input() -> None:
    dep = deployment()
    replica = existing(dep, "a", 0)
    doc = to_json(ReplicaInput(replica=replica, parent_id="p"))
    doc["replica"]["spec"]["newPlacementHint"] = "pool-2"
    doc["facts"]["newFact"] = 3
    doc["shard"] = 1
    for value in read(doc, ReplicaInput):
        assert value == ReplicaInput(replica=replica, parent_id="p")


def test_a_newer_model_and_an_older_model_read_each_others_payloads() -> None:
    class NewerReplicaInput(ReplicaInput):
        """ReplicaInput as a later version might define it: one more field."""

        watch_jitter_seconds: int = 300

    replica = existing(deployment(), "a", 0)
    newer = NewerReplicaInput(replica=replica, parent_id="p", watch_jitter_seconds=60)
    # new writer -> old reader: the unknown field is dropped
    for value in read(to_json(newer), ReplicaInput):
        assert value == ReplicaInput(replica=replica, parent_id="p")
    # old writer -> new reader: the missing field takes its default
    old = to_json(ReplicaInput(replica=replica, parent_id="p", health_interval_seconds=5))
    for value in read(old, NewerReplicaInput):
        assert value.watch_jitter_seconds == 300
        assert value.health_interval_seconds == 5


def test_unknown_fields_in_embedded_rendering_models_and_status_views_are_dropped() -> None:
    wait = {
        "cluster": "a",
        "rules": [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "namespace": "ml",
                "name": "w",
                "role": "workload",
                "since": "v9",  # unknown to this version
            }
        ],
        "deadline": "2026-01-01T00:00:00Z",
    }
    for value in read(wait, WaitReadyRequest):
        assert value.rules[0].name == "w"

    record = ClusterRecord(spec=_cluster(), ready=True)
    view = to_json(FleetView(classes=["h100"], clusters=[record], replicas=[]))
    view["clusters"][0]["spec"]["spec"]["autoRepair"] = True
    view["clusters"][0]["zone"] = "eu-1"
    for value in read(view, FleetView):
        assert value.clusters == [record]


def test_a_payload_that_is_wrong_beyond_unknown_fields_is_still_rejected() -> None:
    doc = to_json(request())
    doc["newField"] = 1
    doc["deployment"]["spec"]["surprise"] = 1
    del doc["desired"]  # required, no default: a real incompatibility
    with pytest.raises(ValidationError, match="desired"):
        PlaceRequest.model_validate(doc)
    doc["desired"] = "many"
    with pytest.raises(ValidationError, match="desired"):
        through_converter(doc, PlaceRequest)


def test_user_manifests_still_reject_unknown_fields() -> None:
    manifest = deployment().to_wire()
    manifest["spec"]["template"]["spec"]["futureKnob"] = 1
    with pytest.raises(InvalidResourceError, match="futureKnob"):
        parse_resource(manifest)
    with pytest.raises(ValidationError, match="futureKnob"):
        ModelDeployment.model_validate(manifest)
    # And a resource on its own, as an Update argument, stays strict through the converter.
    with pytest.raises(Exception, match="futureKnob"):
        through_converter(manifest, ModelDeployment)
    assert issubclass(ModelDeployment, Model)
    assert ModelDeployment.model_config.get("extra") == "forbid"


def test_the_response_embedding_replicas_round_trips_unchanged() -> None:
    dep = deployment()
    response = PlaceResponse(placed=[existing(dep, "a", 0)], summary="ok")
    for value in read(to_json(response), PlaceResponse):
        assert value == response


def _cluster() -> Any:
    from modelfleet.api.clusters import InferenceCluster

    return InferenceCluster.model_validate(
        {
            "kind": "InferenceCluster",
            "metadata": {"name": "a"},
            "spec": {
                "cluster": {"source": "Existing"},
                "nodePools": [{"name": "gpu", "className": "h100", "nodeCount": 1}],
            },
        }
    )


def test_unknown_fields_deep_inside_embedded_resources_of_the_fleets_carried_state() -> None:
    """The Fleet's continue-as-new input, read by the data converter the worker uses: unknown
    fields at its top, in a nested contract and three levels deep inside an embedded strict
    resource (a class's device attribute) are dropped."""
    gpu_class = InferenceClass.model_validate(
        {
            "kind": "InferenceClass",
            "metadata": {"name": "h100"},
            "spec": {
                "devices": [
                    {
                        "name": "gpu",
                        "driver": "gpu.nvidia.com",
                        "deviceClassName": "gpu.nvidia.com",
                        "count": 8,
                        "attributes": {"productName": {"string": "H100"}},
                    }
                ]
            },
        }
    )
    state = FleetInput(
        state=FleetState(
            classes={"h100": gpu_class},
            cluster_entries={"a": ClusterEntry(spec={"metadata": {"name": "a"}}, ready=True)},
            ledger=CompactLedger(
                deployments=[
                    DeploymentRows(namespace="ml", name="m", rows=[("a", 0, "k", ("gpu",), "")])
                ]
            ),
        )
    )
    doc = to_json(state)
    doc["shard"] = 2
    doc["state"]["clusterEntries"]["a"]["zone"] = "eu-1"
    device = doc["state"]["classes"]["h100"]["spec"]["devices"][0]
    device["attributes"]["productName"]["futureType"] = "semver"
    device["sharing"] = {"mode": "mps"}
    doc["state"]["classes"]["h100"]["spec"]["futureKnob"] = True
    assert through_converter(doc, FleetInput) == state
    assert FleetInput.model_validate(doc) == state
    assert FleetInput.model_validate_json(json.dumps(doc)) == state
    # The class alone is a user resource: strict, also through the converter.
    with pytest.raises(ValidationError, match="futureType"):
        through_converter(doc["state"]["classes"]["h100"], InferenceClass)
    # What the project's converter adds: Temporal's own pydantic converter rejects it.
    (payload,) = CONVERTER.to_payloads([doc])
    with pytest.raises(ValidationError, match="futureType"):
        pydantic_data_converter.payload_converter.from_payloads([payload], [FleetInput])


def test_a_type_built_of_contracts_is_read_by_the_wire_contract_too() -> None:
    """An activity's ``result_type=list[...]``, an optional argument: read leniently as well;
    a list of resources alone stays strict."""
    doc = to_json(request())
    doc["deployment"]["spec"]["template"]["spec"]["futureKnob"] = {"x": 1}
    (payload,) = CONVERTER.to_payloads([[doc, doc]])
    (value,) = CONVERTER.from_payloads([payload], [list[PlaceRequest]])
    assert value == [request(), request()]
    (payload,) = CONVERTER.to_payloads([doc])
    (one,) = CONVERTER.from_payloads([payload], [PlaceRequest | None])
    assert one == request()
    (payload,) = CONVERTER.to_payloads([[doc["deployment"]]])
    with pytest.raises(ValidationError, match="futureKnob"):
        CONVERTER.from_payloads([payload], [list[ModelDeployment]])
