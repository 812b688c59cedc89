"""Drift (``adapters.kube_drift``): what counts as an object no longer standing as applied, and
the ``kube.drift`` activity against the simulated API server over real HTTP (server defaults and
other managers' fields are no drift; a deletion or a changed field is)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from placement_builders import existing

from modelfleet.activities.kube_ops import KubeActivities, KubeconfigStore
from modelfleet.adapters.kube_client import KubeCluster
from modelfleet.adapters.kube_drift import Drift, DriftKind, compare, differences, repair_reason
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.kinds import parse_resource
from modelfleet.contracts.kube_payloads import DriftRequest
from modelfleet.rendering.facts import ClusterFacts
from modelfleet.rendering.front_door import FrontDoor, render_front_door
from modelfleet.rendering.namespace import namespace_manifest
from modelfleet.rendering.replica_manifests import Step, render_replica
from modelfleet.sim.apiserver.server import FleetApiServer, serve_in_thread
from modelfleet.sim.loop_thread import LoopThread
from modelfleet.sim.simulated_fleet import SimulatedFleet


def _deployment(name: str = "m-engine", replicas: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "mf-ml", "labels": {"modelfleet.dev/replica": "r"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "engine",
                            "image": "vllm/vllm-openai:v0",
                            "args": ["--port", "8000"],
                            "ports": [{"containerPort": 8000}],
                            "resources": {"limits": {"cpu": 2}},
                        }
                    ]
                },
            },
        },
    }


# ------------------------------------------------------------------------------- pure


def test_missing_and_terminating_objects() -> None:
    assert compare(_deployment(), None) == Drift(DriftKind.MISSING)
    live = _deployment()
    live["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert compare(_deployment(), live) == Drift(DriftKind.TERMINATING)


def test_what_the_server_and_other_managers_add_is_no_drift() -> None:
    live = _deployment()
    live["metadata"] |= {"uid": "u", "resourceVersion": "7", "annotations": {"x": "other"}}
    live["metadata"]["labels"]["team"] = "someone-else"
    live["status"] = {"replicas": 1}
    container = live["spec"]["template"]["spec"]["containers"][0]
    container |= {
        "terminationMessagePath": "/dev/termination-log",
        "imagePullPolicy": "IfNotPresent",
    }
    # A sidecar injected by someone else, quantities and ports handed back as text.
    live["spec"]["template"]["spec"]["containers"].append({"name": "proxy", "image": "envoy"})
    container["resources"]["limits"]["cpu"] = "2"
    assert compare(_deployment(), live) is None


def test_a_changed_field_names_its_path() -> None:
    live = _deployment(replicas=0)
    live["spec"]["template"]["spec"]["containers"][0]["args"] = ["--port", "9000"]
    drift = compare(_deployment(), live)
    assert drift is not None
    assert drift.kind is DriftKind.CHANGED
    assert drift.fields == (
        "spec.replicas",
        "spec.template.spec.containers[engine].args",
    )


def test_a_label_removed_and_a_container_gone_are_drift() -> None:
    live = _deployment()
    live["metadata"]["labels"] = {}
    live["spec"]["template"]["spec"]["containers"] = [{"name": "other", "image": "x"}]
    drift = compare(_deployment(), live)
    assert drift is not None
    assert drift.fields == (
        "metadata.labels.modelfleet.dev/replica",
        "spec.template.spec.containers[engine]",
    )


def test_unnamed_list_items_match_in_any_order_and_scalars_keep_their_order() -> None:
    applied = {"rules": [{"a": 1}, {"b": 2}], "args": ["x", "y"]}
    assert differences(applied, {"rules": [{"b": 2, "z": 0}, {"a": 1}], "args": ["x", "y"]}) == []
    assert differences(applied, {"rules": [{"a": 1}], "args": ["y", "x"]}) == ["rules", "args"]
    # Booleans are not numbers; an empty value applied matches an absent one.
    assert differences({"f": True, "e": {}}, {"f": 1}) == ["f"]


def test_many_changed_fields_are_cut_and_counted() -> None:
    applied = {"spec": {k: 1 for k in "abcde"}}
    drift = compare({"apiVersion": "v1", "kind": "X", **applied}, {"spec": {}})
    assert drift is not None
    assert drift.fields == ("spec.a", "spec.b", "spec.c")
    assert drift.more == 2
    assert repair_reason("X ns/x", drift) == (
        "X ns/x was changed outside modelfleet (spec.a, spec.b, spec.c and 2 more): re-applied"
    )
    assert repair_reason("Deployment ml/x", Drift(DriftKind.MISSING)) == (
        "Deployment ml/x was deleted outside modelfleet: re-created"
    )


# ------------------------------------------------------------------- the activity, over HTTP


@pytest.fixture(scope="module")
def srv() -> Iterator[LoopThread[FleetApiServer]]:
    with serve_in_thread() as server:
        yield server


@pytest.fixture
def setup(
    srv: LoopThread[FleetApiServer], tmp_path: Path
) -> Iterator[tuple[str, KubeCluster, KubeActivities]]:
    name = f"c-{uuid.uuid4().hex[:8]}"
    srv.call(srv.target.add_cluster, name)
    path = srv.call(srv.target.write_kubeconfig, name, tmp_path / f"{name}.yaml")
    activities = KubeActivities(KubeconfigStore(tmp_path))
    with KubeCluster(path, request_timeout=5.0) as kube:
        yield name, kube, activities
    activities.close()


def test_drift_activity_sees_deletion_and_foreign_changes_but_not_defaults(
    setup: tuple[str, KubeCluster, KubeActivities],
) -> None:
    cluster, kube, activities = setup
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mf-ml"}}
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": "mf-ml"},
        "data": {"k": "v"},
    }
    manifests = [namespace, configmap, _deployment()]
    for manifest in manifests:
        kube.apply(manifest)
    request = DriftRequest(cluster=cluster, manifests=manifests)
    # Freshly applied: the server's defaults and status are not drift.
    assert activities.drift(request).drifted == []

    kube.delete("v1", "ConfigMap", "cfg", "mf-ml")
    scaled = _deployment(replicas=3)
    kube._request(  # another manager (a kubectl scale) takes spec.replicas
        "patch",
        "PATCH",
        "/apis/apps/v1/namespaces/mf-ml/deployments/m-engine",
        query=[("fieldManager", "kubectl")],
        body={"spec": {"replicas": scaled["spec"]["replicas"]}},
        content_type="application/merge-patch+json",
    )
    found = activities.drift(request).drifted
    assert [(d.index, d.kind) for d in found] == [(1, "missing"), (2, "changed")]
    assert found[0].reason == "ConfigMap mf-ml/cfg was deleted outside modelfleet: re-created"
    assert "(spec.replicas)" in found[1].reason

    # What a repair does (the workflow re-applies exactly those manifests): drift gone.
    for d in found:
        kube.apply(manifests[d.index])
    assert activities.drift(request).drifted == []


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _quickstart() -> ModelDeployment:
    (dep,) = [d for d in _examples("quickstart/qwen3-8b.yaml") if isinstance(d, ModelDeployment)]
    return dep


def test_a_second_replica_in_a_shared_namespace_finds_no_drift_after_the_front_door(
    setup: tuple[str, KubeCluster, KubeActivities],
) -> None:
    """Issue 23 item 4: two replicas of one deployment on the gateway's cluster. The first
    serves, so the ModelService's front door applies the workload namespace there too (the same
    field manager), and the token and cache writers make sure it exists; the second replica's
    comparison must not find the namespace "changed outside modelfleet (metadata.labels)"."""
    cluster, kube, activities = setup
    dep = _quickstart()
    first, second = (
        render_replica(existing(dep, cluster, i, "gpu-l4", name=f"qwen3-8b-{i}"), ClusterFacts())
        for i in (0, 1)
    )
    [namespace] = first.step(Step.NAMESPACE).manifests
    assert second.step(Step.NAMESPACE).manifests == [namespace]
    kube.apply(namespace)  # both roll out: each applies the namespace first
    kube.apply(namespace)
    door = render_front_door(
        FrontDoor(cluster=cluster, gateway_name="gw", gateway_namespace="sys"),
        dep.namespace,
        "qwen3-8b",
        {},
        [],
    )
    assert door[0]["kind"] == "Namespace"
    assert door[0]["metadata"]["name"] == namespace["metadata"]["name"]
    kube.apply(door[0])
    kube.ensure_namespace(namespace["metadata"]["name"])  # provider tokens, a cache's stage
    # The second replica becomes Ready and compares what it applied with the cluster.
    for rendered in (first, second):
        request = DriftRequest(cluster=cluster, manifests=rendered.step(Step.NAMESPACE).manifests)
        assert activities.drift(request).drifted == []
    live = kube.get("v1", "Namespace", namespace["metadata"]["name"])
    assert live is not None
    labels = live["metadata"]["labels"]
    assert labels == labels | namespace["metadata"]["labels"]


def test_ensure_namespace_creates_it_once_and_never_takes_its_labels(
    setup: tuple[str, KubeCluster, KubeActivities],
) -> None:
    """What only needs the namespace to exist creates it, and leaves labels applied by the
    replicas alone (an apply without them by the same field manager removes them)."""
    cluster, kube, activities = setup
    assert kube.ensure_namespace("mf-solo") is True
    assert kube.ensure_namespace("mf-solo") is False
    labelled = namespace_manifest("mf-solo", "solo", cluster)
    kube.apply(labelled)
    assert kube.ensure_namespace("mf-solo") is False
    request = DriftRequest(cluster=cluster, manifests=[labelled])
    assert activities.drift(request).drifted == []
    # What the writers did before: an apply of the bare namespace strips the labels.
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mf-solo"}})
    (found,) = activities.drift(request).drifted
    assert found.reason == (
        "Namespace mf-solo was changed outside modelfleet (metadata.labels): re-applied"
    )


def _examples(*files: str) -> list[Any]:
    return [
        parse_resource(doc)
        for name in files
        for doc in yaml.safe_load_all((EXAMPLES / name).read_text())
        if doc
    ]


def test_every_example_as_rendered_and_applied_shows_no_drift(tmp_path: Path) -> None:
    """What the renderer produces, once the simulated cluster has stored and defaulted it and its
    controllers have written status, compares as applied: a serving replica never repairs
    (re-applies) in a loop. Every example deployment, as a replica on h200-west."""
    fleet_docs = _examples("quickstart/classes.yaml", "quickstart/clusters.yaml")
    classes = [d for d in fleet_docs if isinstance(d, InferenceClass)]
    clusters = [d for d in fleet_docs if isinstance(d, InferenceCluster)]
    deployments = [
        d
        for d in _examples(
            "quickstart/qwen3-8b.yaml",
            "frontier/qwen3-coder-gang.yaml",
            "frontier/kimi-k2-pd.yaml",
            "frontier/gemma3-variants.yaml",
        )
        if isinstance(d, ModelDeployment)
    ]
    assert len(deployments) >= 4
    with SimulatedFleet.start_in_thread(
        classes, clusters, state_dir=tmp_path, startup_seconds=0
    ) as running:
        fleet = running.target
        activities = KubeActivities(KubeconfigStore(fleet.kubeconfig_dir))
        with KubeCluster(fleet.kubeconfig("h200-west"), request_timeout=5.0) as kube:
            for dep in deployments:
                replica = existing(dep, "h200-west", 0, "gpu-h200", name=f"{dep.name}-x")
                rendered = render_replica(replica, ClusterFacts())
                manifests = [m for s in rendered.steps for m in s.manifests]
                for manifest in manifests:
                    kube.apply(manifest)
                running.run(fleet.settle(10))
                request = DriftRequest(cluster="h200-west", manifests=manifests)
                assert activities.drift(request).drifted == [], dep.name
        activities.close()
