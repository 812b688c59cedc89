"""The Kubernetes adapter (official client) against the simulated API server over real HTTP on
127.0.0.1: CRUD and server-side apply semantics, the error taxonomy under injected faults, and
readiness explanations."""

from __future__ import annotations

import pickle
import socket
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from modelfleet.adapters import kube_client as kube_module
from modelfleet.adapters.kube_client import (
    FIELD_MANAGER,
    KubeCluster,
    KubeError,
    PermanentKubeError,
    RetryableKubeError,
)
from modelfleet.adapters.kube_errors import error_from_response, parse_retry_after, redact
from modelfleet.adapters.kube_readiness import evaluate, pod_problem
from modelfleet.rendering.readiness import ReadinessRole, ReadinessRule
from modelfleet.sim.apiserver.server import FleetApiServer, serve_in_thread
from modelfleet.sim.loop_thread import LoopThread


@pytest.fixture(scope="module")
def srv() -> Iterator[LoopThread[FleetApiServer]]:
    with serve_in_thread() as server:
        yield server


@pytest.fixture
def cluster_name(srv: LoopThread[FleetApiServer]) -> str:
    name = f"c-{uuid.uuid4().hex[:8]}"
    srv.call(srv.target.add_cluster, name)
    return name


@pytest.fixture
def kube(
    srv: LoopThread[FleetApiServer], cluster_name: str, tmp_path: Path
) -> Iterator[KubeCluster]:
    path = srv.call(srv.target.write_kubeconfig, cluster_name, tmp_path / "kubeconfig.yaml")
    with KubeCluster(path, request_timeout=5.0) as k:
        yield k


def _configmap(name: str, ns: str = "default", **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "t"}},
        "data": data or {"k": "v"},
    }


def _deployment(name: str, ns: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0"}]},
            },
        },
    }


def _lws(name: str, ns: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": 2,
                "workerTemplate": {"spec": {"containers": [{"name": "vllm", "image": "vllm"}]}},
            },
        },
    }


# ------------------------------------------------------------------------- CRUD and apply


def test_apply_creates_with_field_manager_and_get_reads_it_back(kube: KubeCluster) -> None:
    created = kube.apply(_configmap("a"))
    assert created["metadata"]["uid"]
    assert {m["manager"] for m in created["metadata"]["managedFields"]} == {FIELD_MANAGER}
    got = kube.get("v1", "ConfigMap", "a", "default")
    assert got is not None
    assert got["data"] == {"k": "v"}


def test_identical_reapply_leaves_resource_version_unchanged(kube: KubeCluster) -> None:
    first = kube.apply(_deployment("same"))
    second = kube.apply(_deployment("same"))
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert second["metadata"]["generation"] == first["metadata"]["generation"]


def test_changed_reapply_bumps_generation_and_removes_dropped_fields(kube: KubeCluster) -> None:
    kube.apply(_configmap("cm", k="v", gone="x"))
    updated = kube.apply(_configmap("cm", k="w"))
    assert updated["data"] == {"k": "w"}


def test_apply_a_crd_kind_and_a_cluster_scoped_kind(kube: KubeCluster) -> None:
    lws = kube.apply(_lws("gang"))
    assert lws["kind"] == "LeaderWorkerSet"
    ns = kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    assert "namespace" not in ns["metadata"]
    assert kube.get("v1", "Namespace", "team") is not None


def test_apply_defaults_the_namespace_of_namespaced_kinds(kube: KubeCluster) -> None:
    manifest = _configmap("nons")
    del manifest["metadata"]["namespace"]
    assert kube.apply(manifest)["metadata"]["namespace"] == "default"


def test_get_of_a_missing_object_is_none(kube: KubeCluster) -> None:
    assert kube.get("apps/v1", "Deployment", "nope", "default") is None


def test_delete_reports_presence_and_tolerates_absence(kube: KubeCluster) -> None:
    kube.apply(_configmap("d"))
    assert kube.delete("v1", "ConfigMap", "d", "default") is True
    assert kube.get("v1", "ConfigMap", "d", "default") is None
    assert kube.delete("v1", "ConfigMap", "d", "default") is False


def test_delete_rejects_an_unknown_propagation_policy(kube: KubeCluster) -> None:
    with pytest.raises(ValueError, match="propagation"):
        kube.delete("v1", "ConfigMap", "d", "default", propagation="Sometimes")


def test_list_filters_by_labels_and_restores_kind(kube: KubeCluster) -> None:
    kube.apply(_configmap("x1"))
    other = _configmap("x2")
    other["metadata"]["labels"] = {"app": "other"}
    kube.apply(other)
    items = kube.list("v1", "ConfigMap", "default", labels={"app": "t"})
    assert [i["metadata"]["name"] for i in items] == ["x1"]
    assert items[0]["kind"] == "ConfigMap"
    assert items[0]["apiVersion"] == "v1"


def test_list_pages_through_continue_tokens(
    kube: KubeCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(5):
        kube.apply(_configmap(f"p{i}"))
    monkeypatch.setattr(kube_module, "_PAGE_SIZE", 2)
    names = [i["metadata"]["name"] for i in kube.list("v1", "ConfigMap", "default")]
    assert names == [f"p{i}" for i in range(5)]


def test_list_across_namespaces_and_of_a_missing_namespace(kube: KubeCluster) -> None:
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n2"}})
    kube.apply(_configmap("one", "default"))
    kube.apply(_configmap("two", "n2"))
    everywhere = {i["metadata"]["name"] for i in kube.list("v1", "ConfigMap")}
    assert {"one", "two"} <= everywhere
    assert kube.list("v1", "ConfigMap", "absent-namespace") == []


def test_server_version(kube: KubeCluster) -> None:
    assert kube.server_version().startswith("v1.")


# ------------------------------------------------------------------------- error taxonomy


def test_unknown_kind_is_permanent(kube: KubeCluster) -> None:
    with pytest.raises(PermanentKubeError) as err:
        kube.apply({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})
    assert err.value.reason == "UnknownKind"
    assert "Widget" in str(err.value)
    assert not err.value.retryable


def test_invalid_object_is_permanent_422(kube: KubeCluster) -> None:
    bad = _deployment("bad")
    del bad["spec"]["selector"]
    with pytest.raises(PermanentKubeError) as err:
        kube.apply(bad)
    assert err.value.status == 422
    assert err.value.reason == "Invalid"
    assert "Deployment default/bad" in str(err.value)


def test_apply_into_a_missing_namespace_is_a_permanent_not_found(kube: KubeCluster) -> None:
    with pytest.raises(PermanentKubeError) as err:
        kube.apply(_configmap("orphan", "no-such-namespace"))
    assert err.value.status == 404
    assert err.value.reason == "NotFound"
    assert "no-such-namespace" in str(err.value)


def test_manifest_without_identity_is_rejected_before_any_request(kube: KubeCluster) -> None:
    with pytest.raises(PermanentKubeError, match=r"metadata\.name"):
        kube.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})


def test_500_faults_are_retryable(
    srv: LoopThread[FleetApiServer], cluster_name: str, kube: KubeCluster
) -> None:
    kube.apply(_configmap("before"))  # discovery is cached before the fault starts
    srv.call(srv.target.set_faults, cluster_name, {"error_rate_500": 1.0})
    with pytest.raises(RetryableKubeError) as err:
        kube.get("v1", "ConfigMap", "before", "default")
    assert err.value.status == 500
    assert err.value.retryable
    assert err.value.retry_after is None


def test_429_faults_are_retryable_with_retry_after(
    srv: LoopThread[FleetApiServer], cluster_name: str, kube: KubeCluster
) -> None:
    srv.call(srv.target.set_faults, cluster_name, {"error_rate_429": 1.0, "retry_after_seconds": 7})
    with pytest.raises(RetryableKubeError) as err:
        kube.apply(_configmap("throttled"))
    assert err.value.status == 429
    assert err.value.reason == "TooManyRequests"
    assert err.value.retry_after == 7.0
    assert "retry after 7s" in str(err.value)


def test_dark_cluster_that_hangs_is_a_retryable_timeout(
    srv: LoopThread[FleetApiServer], cluster_name: str, tmp_path: Path
) -> None:
    path = srv.call(srv.target.write_kubeconfig, cluster_name, tmp_path / "kc.yaml")
    srv.call(srv.target.set_faults, cluster_name, {"dark": True})
    try:
        with KubeCluster(path, request_timeout=0.3) as k, pytest.raises(RetryableKubeError) as err:
            k.server_version()
        assert err.value.reason == "Timeout"
        assert err.value.status is None
    finally:
        srv.call(srv.target.set_faults, cluster_name, {})


def test_dark_cluster_that_resets_is_a_retryable_connection_error(
    srv: LoopThread[FleetApiServer], cluster_name: str, kube: KubeCluster
) -> None:
    srv.call(srv.target.set_faults, cluster_name, {"dark": True, "dark_mode": "reset"})
    with pytest.raises(RetryableKubeError) as err:
        kube.server_version()
    assert err.value.reason == "ConnectionError"


def test_nothing_listening_is_a_retryable_connection_error(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # The port was free a moment ago and nothing listens on it now.
    path = tmp_path / "kc.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    with KubeCluster(path, request_timeout=2.0) as k, pytest.raises(RetryableKubeError) as err:
        k.get("v1", "ConfigMap", "x", "default")
    assert err.value.reason == "ConnectionError"


def test_missing_kubeconfig_is_permanent(tmp_path: Path) -> None:
    with pytest.raises(PermanentKubeError) as err:
        KubeCluster(tmp_path / "absent.yaml")
    assert err.value.reason == "InvalidKubeconfig"


TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2lnbmF0dXJlLWJ5dGVz"


def test_errors_never_carry_the_token(srv: LoopThread[FleetApiServer], tmp_path: Path) -> None:
    name = f"c-{uuid.uuid4().hex[:8]}"
    srv.call(srv.target.add_cluster, name)
    path = tmp_path / "kc.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": srv.target.cluster_url(name)}}],
                "users": [{"name": "u", "user": {"token": TOKEN}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    with KubeCluster(path) as k:
        bad = _deployment("bad")
        del bad["spec"]["selector"]
        with pytest.raises(KubeError) as err:
            k.apply(bad)
    assert TOKEN not in str(err.value)
    assert TOKEN not in repr(err.value.args)


def test_a_server_echoing_credentials_is_redacted() -> None:
    body = (
        '{"kind":"Status","reason":"Forbidden","message":"user with Authorization: Bearer '
        + TOKEN
        + ' may not"}'
    )
    err = error_from_response(operation="get x", status=403, body=body, headers={})
    assert isinstance(err, PermanentKubeError)
    assert TOKEN not in str(err)
    assert "<redacted>" in str(err)
    assert redact("password hunter2-long", secrets=["hunter2-long"]) == "password <redacted>"


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(400, False), (403, False), (404, False), (409, False), (422, False), (408, True),
     (429, True), (500, True), (501, False), (503, True), (504, True)],
)  # fmt: skip
def test_status_classification(status: int, retryable: bool) -> None:
    err = error_from_response(operation="op", status=status, body=None, headers=None)
    assert err.retryable is retryable
    assert err.status == status


def test_apply_conflicts_retry_but_other_conflicts_do_not() -> None:
    body = '{"kind":"Status","reason":"Conflict","message":"the object has been modified"}'
    assert error_from_response(
        operation="a", status=409, body=body, headers={}, apply=True
    ).retryable
    assert not error_from_response(operation="c", status=409, body=body, headers={}).retryable


def test_creating_in_a_terminating_namespace_is_retryable() -> None:
    body = (
        '{"kind":"Status","reason":"Forbidden","message":"namespace is being terminated",'
        '"details":{"causes":[{"reason":"NamespaceTerminating"}]}}'
    )
    assert error_from_response(operation="a", status=403, body=body, headers={}).retryable


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_retry_after("3") == 3.0
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(later, now=now.timestamp()) == pytest.approx(30.0)
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_kube_errors_survive_pickling() -> None:
    err = RetryableKubeError("apply x: 429", status=429, reason="TooManyRequests", retry_after=2)
    back = pickle.loads(pickle.dumps(err))
    assert isinstance(back, RetryableKubeError)
    assert (back.status, back.reason, back.retry_after, str(back)) == (
        429,
        "TooManyRequests",
        2,
        "apply x: 429",
    )


# ------------------------------------------------------------------------- readiness (pure)


def _rule(kind: str = "Deployment", name: str = "w") -> ReadinessRule:
    api = "apps/v1" if kind == "Deployment" else "leaderworkerset.x-k8s.io/v1"
    return ReadinessRule(
        api_version=api, kind=kind, namespace="ns", name=name, role=ReadinessRole.WORKLOAD
    )


def _obj(available: str | None, generation: int = 1, observed: int = 1) -> dict[str, Any]:
    conditions = [] if available is None else [{"type": "Available", "status": available}]
    return {
        "kind": "Deployment",
        "metadata": {"name": "w", "namespace": "ns", "generation": generation},
        "status": {"observedGeneration": observed, "conditions": conditions},
    }


def test_readiness_of_a_missing_object() -> None:
    verdict = evaluate(_rule(), None)
    assert not verdict.ready
    assert verdict.reason == "Deployment ns/w not found"


def test_readiness_ignores_conditions_of_an_older_generation() -> None:
    verdict = evaluate(_rule(), _obj("True", generation=2, observed=1))
    assert not verdict.ready
    assert "has not observed generation 2" in verdict.reason
    assert evaluate(_rule(), _obj("True", generation=2, observed=2)).ready


def test_readiness_tells_the_pods_story() -> None:
    pods = [
        {
            "metadata": {"name": "w-1"},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
        {
            "metadata": {"name": "w-2"},
            "status": {
                "conditions": [{"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [
                    {
                        "name": "engine",
                        "ready": False,
                        "state": {"waiting": {"reason": "ErrImagePull", "message": "no such"}},
                    }
                ],
            },
        },
    ]
    verdict = evaluate(_rule(), _obj("False"), pods)
    assert not verdict.ready
    assert "1/2 pods ready" in verdict.reason
    assert "pod w-2: container engine ErrImagePull: no such" in verdict.reason


def test_readiness_counts_the_restarts_of_a_crash_loop() -> None:
    def pod(name: str, restarts: int, waiting: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name},
            "status": {
                "conditions": [{"type": "PodScheduled", "status": "True"}],
                "initContainerStatuses": [{"name": "fetch", "restartCount": 1, "ready": True}],
                "containerStatuses": [
                    {
                        "name": "engine",
                        "ready": False,
                        "restartCount": restarts,
                        "state": {"waiting": {"reason": waiting}},
                        "lastState": {"terminated": {"reason": "Error", "exitCode": 1}},
                    }
                ],
            },
        }

    verdict = evaluate(
        _rule(), _obj("False"), [pod("w-1", 4, "CrashLoopBackOff"), pod("w-2", 0, "Pending")]
    )
    assert verdict.restarts == 4  # the most of one container, not a sum
    assert verdict.backing_off
    assert "container engine CrashLoopBackOff (restarted 4 times)" in verdict.reason
    assert evaluate(_rule(), _obj("False")).restarts == 0  # pods not read: nothing claimed
    restarted = evaluate(_rule(), _obj("False"), [pod("w-1", 4, "ContainerCreating")])
    assert restarted.restarts == 4
    assert not restarted.backing_off  # restarted, but not backing off now


def test_pod_problem_names_running_but_unready_containers() -> None:
    pod = {
        "metadata": {"name": "p"},
        "status": {
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "False"},
            ],
            "containerStatuses": [
                {"name": "engine", "ready": False, "state": {"running": {}}, "restartCount": 0}
            ],
        },
    }
    assert pod_problem(pod) == (
        "container engine is running but not ready (readiness probe not passing)"
    )
