"""The RBAC check at adoption (issue 10): one SelfSubjectAccessReview per verb and resource the
worker uses, through the product's Kubernetes adapter, against the simulated API server, whose
``deny_access`` fault plays a cluster whose credentials lack some of them."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from modelfleet.activities.kube_ops import KubeconfigStore
from modelfleet.activities.stack import StackActivities
from modelfleet.adapters.kube_client import KubeCluster
from modelfleet.contracts.stack_payloads import REQUIRED_ACCESS, AccessRequest
from modelfleet.sim.apiserver.server import FleetApiServer, serve_in_thread
from modelfleet.sim.loop_thread import LoopThread


@pytest.fixture(scope="module")
def srv() -> Iterator[LoopThread[FleetApiServer]]:
    with serve_in_thread() as server:
        yield server


def _cluster(srv: LoopThread[FleetApiServer], tmp_path: Path) -> str:
    name = f"c-{uuid.uuid4().hex[:8]}"
    srv.call(srv.target.add_cluster, name)
    srv.call(srv.target.write_kubeconfig, name, tmp_path / f"{name}.yaml")
    return name


def test_can_i_asks_the_server(srv: LoopThread[FleetApiServer], tmp_path: Path) -> None:
    name = _cluster(srv, tmp_path)
    srv.call(srv.target.set_faults, name, {"deny_access": ["delete deployments.apps"]})
    with KubeCluster(tmp_path / f"{name}.yaml") as kube:
        assert kube.can_i("patch", "apps", "deployments")[0]
        allowed, reason = kube.can_i("delete", "apps", "deployments")
    assert not allowed
    assert "delete deployments.apps" in reason


def test_the_review_names_every_denied_verb_and_resource(
    srv: LoopThread[FleetApiServer], tmp_path: Path
) -> None:
    name = _cluster(srv, tmp_path)
    activities = StackActivities(KubeconfigStore(tmp_path))
    request = AccessRequest(cluster=name, needs=REQUIRED_ACCESS)
    env = ActivityEnvironment()
    assert env.run(activities.check_access, request).denied == []
    srv.call(
        srv.target.set_faults,
        name,
        {"deny_access": ["* leaderworkersets.leaderworkerset.x-k8s.io", "list nodes"]},
    )
    assert env.run(activities.check_access, request).denied == [
        "list nodes",
        "get leaderworkersets.leaderworkerset.x-k8s.io",
        "list leaderworkersets.leaderworkerset.x-k8s.io",
        "patch leaderworkersets.leaderworkerset.x-k8s.io",
        "delete leaderworkersets.leaderworkerset.x-k8s.io",
    ]


def test_a_retried_review_resumes_after_the_last_heartbeat(
    srv: LoopThread[FleetApiServer], tmp_path: Path
) -> None:
    name = _cluster(srv, tmp_path)
    srv.call(srv.target.set_faults, name, {"deny_access": ["list nodes", "delete services"]})
    activities = StackActivities(KubeconfigStore(tmp_path))
    request = AccessRequest(cluster=name, needs=REQUIRED_ACCESS)
    beats: list[tuple[object, ...]] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)
    assert env.run(activities.check_access, request).denied == ["list nodes", "delete services"]
    total = sum(len(n.verbs) for n in REQUIRED_ACCESS)
    assert beats[-1] == (total, ["list nodes", "delete services"])
    # A retry after the first denial was recorded: "list nodes" is not asked again, and the
    # rest are (an attempt from the start would report it twice otherwise).
    resumed = ActivityEnvironment()
    resumed.info = dataclasses.replace(resumed.info, heartbeat_details=[1, ["list nodes"]])
    assert resumed.run(activities.check_access, request).denied == [
        "list nodes",
        "delete services",
    ]
