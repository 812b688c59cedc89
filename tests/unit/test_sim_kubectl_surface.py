"""The pure parts of the simulator's kubectl surface: server-side table cells, the protobuf
request decoder, API defaults, access reviews, the OpenAPI documents (and the CRD schemas
derived from tests/schemas staying in step), engine log lines and the events.k8s.io view."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from modelfleet.sim.apiserver.access_review import answer_review
from modelfleet.sim.apiserver.api_defaults import default_object
from modelfleet.sim.apiserver.events_view import to_events_v1
from modelfleet.sim.apiserver.field_validation import check_fields, unknown_fields
from modelfleet.sim.apiserver.openapi import definition_name, v3_document, v3_root
from modelfleet.sim.apiserver.openapi_schemas import crd_schema_from_file, crd_schemas
from modelfleet.sim.apiserver.pod_logs import PodLogBook
from modelfleet.sim.apiserver.protobuf import decode_object
from modelfleet.sim.apiserver.registry import ResourceRegistry
from modelfleet.sim.apiserver.status_errors import ApiError
from modelfleet.sim.apiserver.tables import (
    human_duration,
    object_table,
    pod_status_reason,
    wants_table,
)
from modelfleet.sim.controllers.engine_logs import startup_lines
from modelfleet.sim.faults import FaultConfig

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"
REGISTRY = ResourceRegistry()
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def _rt(api_version: str, kind: str) -> Any:
    rt = REGISTRY.by_kind(api_version, kind)
    assert rt is not None
    return rt


# -- tables ----------------------------------------------------------------------------------


def test_wants_table_reads_kubectls_accept_header() -> None:
    accept = (
        "application/json;as=Table;v=v1;g=meta.k8s.io,"
        "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
    )
    assert wants_table(accept)
    assert not wants_table("application/json")
    assert not wants_table("application/json;as=Table;v=v2;g=meta.k8s.io")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (5, "5s"),
        (119, "119s"),
        (125, "2m5s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 3600, "3d1h"),
        (40 * 86400, "40d"),
    ],
)
def test_human_duration_matches_the_printers(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def _pod(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "creationTimestamp": "2026-01-01T11:58:00Z"},
        "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
        "status": status,
    }


def test_pod_row_columns() -> None:
    pod = _pod(
        phase="Running",
        podIP="10.0.0.7",
        containerStatuses=[
            {"name": "a", "ready": True, "restartCount": 0, "state": {"running": {}}},
            {
                "name": "b",
                "ready": False,
                "restartCount": 2,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"finishedAt": "2026-01-01T11:59:30Z"}},
            },
        ],
    )
    table = object_table(_rt("v1", "Pod"), [pod], list_meta={}, now=NOW)
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names[:7] == ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node"]
    assert table["rows"][0]["cells"][:7] == [
        "p",
        "1/2",
        "CrashLoopBackOff",
        "2 (30s ago)",
        "2m",
        "10.0.0.7",
        "n1",
    ]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


def test_pod_status_reason_terminating_and_creating() -> None:
    creating = _pod(
        phase="Pending",
        containerStatuses=[{"name": "a", "state": {"waiting": {"reason": "ContainerCreating"}}}],
    )
    assert pod_status_reason(creating) == "ContainerCreating"
    creating["metadata"]["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    assert pod_status_reason(creating) == "Terminating"


def test_node_and_deployment_rows() -> None:
    node = {
        "metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/gpu": ""}},
        "spec": {"unschedulable": True},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "10.1.2.3"}],
            "nodeInfo": {"kubeletVersion": "v1.34.0"},
        },
    }
    cells = object_table(_rt("v1", "Node"), [node], list_meta={}, now=NOW)["rows"][0]["cells"]
    assert cells[1:3] == ["Ready,SchedulingDisabled", "gpu"]
    assert cells[4:7] == ["v1.34.0", "10.1.2.3", "<none>"]
    dep = {
        "metadata": {"name": "d"},
        "spec": {
            "replicas": 3,
            "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    }
    row = object_table(_rt("apps/v1", "Deployment"), [dep], list_meta={}, now=NOW)["rows"][0]
    assert row["cells"][:4] == ["d", "2/3", 3, 2]


def test_resource_slices_print_node_driver_and_pool_as_kubectl_does() -> None:
    """`kubectl get resourceslices` shows NAME NODE DRIVER POOL AGE (issue 23)."""
    piece = {
        "metadata": {"name": "n1-gpu.nvidia.com", "creationTimestamp": "2026-01-01T11:58:00Z"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "devices": [],
        },
    }
    table = object_table(_rt("resource.k8s.io/v1", "ResourceSlice"), [piece], list_meta={}, now=NOW)
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Node",
        "Driver",
        "Pool",
        "Age",
    ]
    assert {c["priority"] for c in table["columnDefinitions"]} == {0}
    assert table["rows"][0]["cells"] == ["n1-gpu.nvidia.com", "n1", "gpu.nvidia.com", "n1", "2m"]


def test_unknown_kinds_get_name_and_age() -> None:
    table = object_table(
        _rt("v1", "ConfigMap"),
        [{"metadata": {"name": "c", "creationTimestamp": "2026-01-01T11:59:00Z"}}],
        list_meta={"resourceVersion": "9"},
        include_object="None",
        now=NOW,
    )
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Age"]
    assert table["rows"] == [{"cells": ["c", "60s"]}]
    assert table["metadata"] == {"resourceVersion": "9"}


# -- protobuf --------------------------------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, value: bytes | str | int) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    raw = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(raw)) + raw


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _field(1, api_version) + _field(2, kind)
    return b"k8s\x00" + _field(1, type_meta) + _field(2, raw) + _field(3, "") + _field(4, "")


def test_decodes_a_self_subject_access_review() -> None:
    attrs = _field(1, "default") + _field(2, "delete") + _field(5, "pods") + _field(3, "")
    body = _envelope(
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
        _field(1, b"") + _field(2, _field(1, attrs)),
    )
    obj = decode_object(body)
    assert obj == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {
            "resourceAttributes": {"namespace": "default", "verb": "delete", "resource": "pods"}
        },
    }


def test_decodes_a_deployment_with_maps_repeated_fields_and_pointer_zero() -> None:
    labels = _field(11, _field(1, "app") + _field(2, "web"))
    container = _field(1, "web") + _field(2, "nginx") + _field(4, "--a") + _field(4, "--b")
    template = _field(1, labels) + _field(2, _field(2, container))
    spec = _field(1, 0) + _field(2, _field(1, _field(1, "app") + _field(2, "web")))
    spec += _field(3, template)
    obj = decode_object(
        _envelope("apps/v1", "Deployment", _field(1, _field(1, "web")) + _field(2, spec))
    )
    assert obj["metadata"] == {"name": "web"}
    assert obj["spec"]["replicas"] == 0  # a pointer field keeps its zero
    assert obj["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    assert obj["spec"]["template"]["spec"]["containers"] == [
        {"name": "web", "image": "nginx", "args": ["--a", "--b"]}
    ]


def test_protobuf_of_an_unknown_kind_is_415_and_garbage_is_400() -> None:
    with pytest.raises(ApiError) as unknown:
        decode_object(_envelope("batch/v1", "Job", b""))
    assert unknown.value.code == 415
    with pytest.raises(ApiError) as garbage:
        decode_object(b"k8s\x00\x0a\xff")
    assert garbage.value.code == 400


# -- defaults, reviews, events ---------------------------------------------------------------


def test_api_defaults_for_deployments_and_probes() -> None:
    dep: dict[str, Any] = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "a",
                            "image": "x:latest",
                            "readinessProbe": {"httpGet": {}},
                            "ports": [{"containerPort": 80}],
                        },
                        {"name": "b", "image": "y:1.0"},
                    ]
                }
            }
        }
    }
    default_object(_rt("apps/v1", "Deployment"), dep)
    spec = dep["spec"]
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
    }
    assert spec["revisionHistoryLimit"] == 10
    assert spec["progressDeadlineSeconds"] == 600
    pod = spec["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 30
    a, b = pod["containers"]
    assert (a["imagePullPolicy"], b["imagePullPolicy"]) == ("Always", "IfNotPresent")
    assert a["readinessProbe"]["failureThreshold"] == 3
    assert a["readinessProbe"]["httpGet"]["scheme"] == "HTTP"
    assert a["ports"][0]["protocol"] == "TCP"


def test_recreate_strategy_gets_no_rolling_update() -> None:
    dep: dict[str, Any] = {"spec": {"strategy": {"type": "Recreate"}}}
    default_object(_rt("apps/v1", "Deployment"), dep)
    assert dep["spec"]["strategy"] == {"type": "Recreate"}


def test_access_review_allowed_unless_denied() -> None:
    review = {"spec": {"resourceAttributes": {"verb": "delete", "resource": "pods"}}}
    assert answer_review(review, FaultConfig())["status"]["allowed"] is True
    faults = FaultConfig(deny_access=["delete pods", "* secrets"])
    denied = answer_review(review, faults)["status"]
    assert denied["allowed"] is False
    assert denied["denied"] is True
    secrets = {"spec": {"resourceAttributes": {"verb": "get", "resource": "secrets"}}}
    assert answer_review(secrets, faults)["status"]["allowed"] is False
    dep = {
        "spec": {
            "resourceAttributes": {"verb": "delete", "resource": "deployments", "group": "apps"}
        }
    }
    assert answer_review(dep, faults)["status"]["allowed"] is True
    with pytest.raises(ApiError):
        answer_review({"spec": {}}, faults)


def test_events_v1_view() -> None:
    core = {
        "metadata": {"name": "e", "namespace": "ns"},
        "involvedObject": {"kind": "Pod", "name": "p"},
        "reason": "Started",
        "message": "Started container a",
        "source": {"component": "kubelet", "host": "n1"},
        "count": 2,
        "type": "Normal",
        "firstTimestamp": "2026-01-01T00:00:00Z",
    }
    view = to_events_v1(core)
    assert view["regarding"] == {"kind": "Pod", "name": "p"}
    assert view["note"] == "Started container a"
    assert view["reportingController"] == "kubelet"
    assert view["deprecatedCount"] == 2


# -- OpenAPI ---------------------------------------------------------------------------------


def test_definition_names_follow_the_real_server() -> None:
    assert definition_name(_rt("apps/v1", "Deployment")) == "io.k8s.api.apps.v1.Deployment"
    assert definition_name(_rt("v1", "Pod")) == "io.k8s.api.core.v1.Pod"
    lws = _rt("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    assert definition_name(lws) == "io.x-k8s.leaderworkerset.v1.LeaderWorkerSet"


def test_v3_documents_advertise_field_validation_and_patch_types() -> None:
    root = v3_root(REGISTRY, "/clusters/c", "v1.34.0")
    url = root["paths"]["apis/apps/v1"]["serverRelativeURL"]
    assert url.startswith("/clusters/c/openapi/v3/apis/apps/v1?hash=")
    apps = v3_document(REGISTRY, "apps", "v1", "v1.34.0")
    assert apps is not None
    patch = apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "apps",
        "version": "v1",
        "kind": "Deployment",
    }
    assert "fieldValidation" in {p["name"] for p in patch["parameters"]}
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    lws_doc = v3_document(REGISTRY, "leaderworkerset.x-k8s.io", "v1", "v1.34.0")
    assert lws_doc is not None
    lws_patch = next(iter(lws_doc["paths"].values()))["patch"]
    assert "application/strategic-merge-patch+json" not in lws_patch["requestBody"]["content"]
    assert "#/definitions/" not in json.dumps(lws_doc)


def test_packaged_crd_schemas_match_tests_schemas() -> None:
    for name in ("leaderworkerset", "resourceclaimtemplate", "inferencepool", "httproute"):
        api_version, kind, schema = crd_schema_from_file(
            json.loads((SCHEMAS / f"{name}.json").read_text())
        )
        assert crd_schemas()[(api_version, kind)] == schema, (
            f"{name}: regenerate src/modelfleet/sim/apiserver/openapi_crd_schemas.json"
        )


# -- engine logs -----------------------------------------------------------------------------


def test_vllm_startup_lines_name_model_and_address() -> None:
    lines = startup_lines(
        {
            "name": "vllm",
            "image": "vllm/vllm-openai:v0.11",
            "args": ["serve", "Qwen/Qwen3-8B"],
            "ports": [{"containerPort": 8000}],
        },
        "10.0.0.9",
    )
    assert any("Qwen/Qwen3-8B" in line for line in lines)
    assert "http://10.0.0.9:8000" in lines[-2]
    assert lines[-1] == "INFO Application startup complete."


# -- field validation and pod logs -----------------------------------------------------------


def test_unknown_fields_where_schemas_are_complete() -> None:
    dep = _rt("apps/v1", "Deployment")
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "labelz": {}},
        "spec": {
            "replicass": 1,
            "template": {"spec": {"containers": [{"name": "c", "anything": 1}]}},
            "$setElementOrder/x": [],
        },
    }
    # PodSpec and Container are described only in part, so they are not checked.
    assert unknown_fields(dep, body) == ["metadata.labelz", "spec.replicass"]
    lws = _rt("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    assert unknown_fields(lws, {"spec": {"leaderWorkerTemplate": {"sise": 2}}}) == [
        "spec.leaderWorkerTemplate.sise"
    ]
    role = _rt("rbac.authorization.k8s.io/v1", "Role")
    assert unknown_fields(role, {"rules": []}) == []
    assert check_fields(dep, body, None) is None
    assert check_fields(dep, body, "Ignore") is None
    warning = check_fields(dep, body, "Warn")
    assert warning is not None
    assert 'unknown field "spec.replicass"' in warning
    with pytest.raises(ApiError) as strict:
        check_fields(dep, body, "Strict")
    assert strict.value.code == 400


def test_pod_log_book_keeps_runs_per_pod_uid() -> None:
    book = PodLogBook()
    pod = {"metadata": {"namespace": "ns", "name": "p", "uid": "u1"}}
    book.append(pod, "c", ["one", "two"])
    book.terminated(pod, "c")
    book.new_run(pod, "c")
    book.append(pod, "c", ["three"])
    assert [line for _, line in book.lines("ns", "p", "c", "u1")] == ["three"]
    assert [line for _, line in book.lines("ns", "p", "c", "u1", previous=True)] == [
        "one",
        "two",
    ]
    # A new pod with the same name starts a new log.
    book.append({"metadata": {"namespace": "ns", "name": "p", "uid": "u2"}}, "c", ["fresh"])
    assert book.lines("ns", "p", "c", "u1") == []
    assert [line for _, line in book.lines("ns", "p", "c", "u2")] == ["fresh"]


def test_simulated_kubelets_report_the_api_servers_version() -> None:
    """`kubectl version` and `kubectl get nodes` agree, as on a real cluster (issue 23)."""
    from modelfleet.sim.apiserver.server import ServerSettings
    from modelfleet.sim.infrastructure import node_manifest

    node = node_manifest("c", "n", layout=None)
    assert node["status"]["nodeInfo"]["kubeletVersion"] == ServerSettings().kubernetes_version
