"""Gang admission in the simulated fleet (issue 26 item 4): a cluster whose InferenceCluster runs
KAI or Kueue serves their kinds with a GPU quota of every GPU it has, and admits each gang whole
or not at all, within the queue's quota. Driven as production drives a cluster: rendered
replicas applied over real HTTP through the Kubernetes adapter; waits are event-driven
(``settle``) and bounded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from render_factories import gang, gpus, replica, standalone
from temporalio.testing import ActivityEnvironment

from modelfleet.activities.kube_ops import KubeconfigStore
from modelfleet.activities.stack import StackActivities
from modelfleet.adapters.kube_client import KubeCluster
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.cluster.stack import stack_reason
from modelfleet.contracts.stack_payloads import StackRequest, stack_for
from modelfleet.rendering.cluster_settings import cluster_facts
from modelfleet.rendering.replica_manifests import RenderedReplica, render_replica
from modelfleet.sim.loop_thread import LoopThread
from modelfleet.sim.simulated_fleet import SimulatedFleet

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WAIT = 10.0
POOL = {"pool": "gpu-h100"}
QUEUE = ("scheduling.run.ai/v2", "Queue")
KUEUE = "kueue.x-k8s.io/v1beta1"


def _load() -> tuple[list[InferenceClass], dict[str, InferenceCluster]]:
    result = load_paths(
        [
            str(EXAMPLES / "quickstart" / "classes.yaml"),
            str(EXAMPLES / "schedulers" / "kai-cluster.yaml"),
            str(EXAMPLES / "schedulers" / "kueue-cluster.yaml"),
        ]
    )
    assert not result.errors
    classes = [r for r in result.resources if isinstance(r, InferenceClass)]
    clusters = {r.name: r for r in result.resources if isinstance(r, InferenceCluster)}
    return classes, clusters


CLASSES, CLUSTERS = _load()


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[LoopThread[SimulatedFleet]]:
    with SimulatedFleet.start_in_thread(
        CLASSES, list(CLUSTERS.values()), state_dir=tmp_path, startup_seconds=0
    ) as f:
        yield f


def _settle(fleet: LoopThread[SimulatedFleet]) -> None:
    fleet.run(fleet.target.settle(WAIT), timeout=WAIT + 5.0)


def _render(cluster: str, name: str, *, nodes: int = 1, copies: int = 1) -> RenderedReplica:
    rep = replica(
        gang("llama", nodes=nodes, leader=POOL, worker=POOL, copies=copies),
        cluster=cluster,
        name=name,
        deployment=name.rsplit("-", 1)[0],
    )
    return render_replica(rep, cluster_facts(CLUSTERS[cluster]))


def _apply(kube: KubeCluster, rendered: RenderedReplica) -> None:
    for manifest in rendered.manifests():
        kube.apply(manifest)


def _gang_pods(kube: KubeCluster, rendered: RenderedReplica) -> list[dict[str, Any]]:
    rule = rendered.readiness[0]
    return kube.list(
        "v1", "Pod", rule.namespace, labels={"leaderworkerset.sigs.k8s.io/name": rule.name}
    )


def _scheduled_message(pod: dict[str, Any]) -> str:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond["type"] == "PodScheduled":
            return str(cond.get("message", ""))
    return ""


def test_each_scheduler_cluster_serves_its_kinds_and_queue(
    fleet: LoopThread[SimulatedFleet],
) -> None:
    with KubeCluster(fleet.target.kubeconfig("h100-kai")) as kube:
        assert kube.serves("scheduling.run.ai/v2alpha2", "PodGroup")
        queue = kube.get(*QUEUE, "team-a")
        assert queue is not None
        assert queue["spec"]["resources"]["gpu"]["quota"] == 32  # 4 nodes x 8 GPUs
        assert not kube.serves(KUEUE, "Workload")
    with KubeCluster(fleet.target.kubeconfig("h100-kueue")) as kube:
        assert kube.serves(KUEUE, "Workload")
        assert kube.serves(KUEUE, "LocalQueue")
        cq = kube.get(KUEUE, "ClusterQueue", "team-a")
        assert cq is not None
        flavor = cq["spec"]["resourceGroups"][0]["flavors"][0]
        assert flavor["resources"] == [{"name": "nvidia.com/gpu", "nominalQuota": 32}]
        assert not kube.serves("scheduling.run.ai/v2", "Queue")


def test_kai_binds_a_gang_and_reports_what_its_queue_holds(
    fleet: LoopThread[SimulatedFleet],
) -> None:
    rendered = _render("h100-kai", "llama-1a2b3")
    with KubeCluster(fleet.target.kubeconfig("h100-kai")) as kube:
        _apply(kube, rendered)
        _settle(fleet)
        assert all(kube.readiness(r).ready for r in rendered.readiness)
        pods = _gang_pods(kube, rendered)
        assert len(pods) == 2
        assert {p["spec"]["schedulerName"] for p in pods} == {"kai-scheduler"}
        queue = kube.get(*QUEUE, "team-a")
        assert queue is not None
        assert queue["status"]["allocated"] == {"nvidia.com/gpu": "16"}


def test_kai_never_binds_part_of_a_gang(fleet: LoopThread[SimulatedFleet]) -> None:
    # Leader + 4 workers of 8 GPUs each on a cluster of four 8-GPU nodes: four would fit, the
    # gang does not, so none is bound (the default scheduler would have bound four).
    rendered = _render("h100-kai", "llama-1a2b3", nodes=4)
    with KubeCluster(fleet.target.kubeconfig("h100-kai")) as kube:
        _apply(kube, rendered)
        _settle(fleet)
        pods = _gang_pods(kube, rendered)
        assert len(pods) == 5
        assert [p["spec"].get("nodeName") for p in pods] == [None] * 5
        assert all("does not fit as a whole" in _scheduled_message(p) for p in pods)
        assert not kube.readiness(rendered.readiness[0]).ready


def _owned(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as its owner would apply it (no resourceVersion: not an update of a read)."""
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {"name": obj["metadata"]["name"]},
        "spec": obj["spec"],
    }


def _kueue_quota(kube: KubeCluster, gpus: int) -> None:
    """The cluster owner sets ClusterQueue team-a's GPU nominalQuota."""
    cq = kube.get(KUEUE, "ClusterQueue", "team-a")
    assert cq is not None
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = gpus
    kube.apply(_owned(cq))


def test_kai_holds_a_gang_its_queue_has_no_quota_for_until_quota_frees(
    fleet: LoopThread[SimulatedFleet],
) -> None:
    rendered = _render("h100-kai", "llama-1a2b3")
    with KubeCluster(fleet.target.kubeconfig("h100-kai")) as kube:
        queue = kube.get(*QUEUE, "team-a")
        assert queue is not None
        queue["spec"]["resources"]["gpu"].update(quota=8, limit=8)
        kube.apply(_owned(queue))
        _apply(kube, rendered)
        _settle(fleet)
        pods = _gang_pods(kube, rendered)
        assert [p["spec"].get("nodeName") for p in pods] == [None, None]
        message = _scheduled_message(pods[0])
        assert "queue team-a has 8 of 8 GPUs free, the gang needs 16" in message
        queue["spec"]["resources"]["gpu"].update(quota=16, limit=16)
        kube.apply(_owned(queue))
        _settle(fleet)
        assert all(kube.readiness(r).ready for r in rendered.readiness)


def _workloads(kube: KubeCluster, namespace: str) -> list[dict[str, Any]]:
    return kube.list(KUEUE, "Workload", namespace)


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


def test_kueue_admits_gangs_whole_within_quota_and_reports_flavor_usage(
    fleet: LoopThread[SimulatedFleet],
) -> None:
    first = _render("h100-kueue", "llama-1a2b3")
    second = _render("h100-kueue", "mixtral-4c5d6")
    with KubeCluster(fleet.target.kubeconfig("h100-kueue")) as kube:
        # The cluster owner gives the queue half the cluster: room for one gang of 16 GPUs.
        _kueue_quota(kube, 16)
        _apply(kube, first)
        _settle(fleet)
        assert all(kube.readiness(r).ready for r in first.readiness)
        (admitted,) = _workloads(kube, first.namespace)
        assert _condition(admitted, "Admitted")["status"] == "True"
        usage = kube.get(KUEUE, "ClusterQueue", "team-a")
        assert usage is not None
        assert usage["status"]["flavorsUsage"] == [
            {
                "name": "gpu",
                "resources": [{"name": "nvidia.com/gpu", "total": "16", "borrowed": "0"}],
            }
        ]

        # The queue is full: the second gang's Workload waits and none of its pods is bound.
        _apply(kube, second)
        _settle(fleet)
        waiting = [
            w
            for w in _workloads(kube, second.namespace)
            if w["metadata"]["name"] != admitted["metadata"]["name"]
        ]
        assert len(waiting) == 1
        reserved = _condition(waiting[0], "QuotaReserved")
        assert reserved["status"] == "False"
        assert "insufficient unused quota for nvidia.com/gpu" in reserved["message"]
        pods = _gang_pods(kube, second)
        assert [p["spec"].get("nodeName") for p in pods] == [None, None]
        assert "waiting for Kueue to admit workload" in _scheduled_message(pods[0])

        # The first gang goes: its quota goes to the second, admitted whole.
        kube.delete(
            first.readiness[0].api_version,
            "LeaderWorkerSet",
            first.readiness[0].name,
            first.namespace,
        )
        _settle(fleet)
        assert all(kube.readiness(r).ready for r in second.readiness)
        (only,) = _workloads(kube, second.namespace)
        assert _condition(only, "Admitted")["status"] == "True"


def test_the_stack_check_names_a_missing_scheduler_and_installs_it(
    fleet: LoopThread[SimulatedFleet], tmp_path: Path
) -> None:
    """The serving stack of a KAI cluster includes KAI: with its PodGroup CRD gone the check
    names it (what the ServingStack condition says), and the install applies KAI's pinned
    release from the stack source."""
    crd = "podgroups.scheduling.run.ai"
    with KubeCluster(fleet.target.kubeconfig("h100-kai")) as kube:
        found = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd)
        assert found is not None
        assert kube.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd)
    scheduler = CLUSTERS["h100-kai"].spec.scheduler
    request = StackRequest(cluster="h100-kai", components=stack_for(scheduler))
    source = tmp_path / "releases"
    activities = StackActivities(KubeconfigStore(fleet.target.kubeconfig_dir), str(source))
    report = activities.verify(request)
    assert [c.kind for c in report.missing] == ["PodGroup"]
    assert stack_reason(report) == (
        "ServingStackMissing: KAI Scheduler v0.9.3 (scheduling.run.ai/v2alpha2 PodGroup)"
    )
    release = source / "kai-scheduler" / "v0.9.3" / "manifests.yaml"
    release.parent.mkdir(parents=True)
    crd_doc = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd},
        "spec": found["spec"],
    }
    release.write_text(yaml.safe_dump(crd_doc))
    installed = ActivityEnvironment().run(activities.install, request)
    assert installed.missing == []
    assert installed.problems == {}


def test_kueue_admits_standalone_pods_one_workload_each_within_quota(
    fleet: LoopThread[SimulatedFleet],
) -> None:
    rep = replica(
        standalone("main", copies=3, pool="gpu-h100", requests=[gpus(8)]),
        cluster="h100-kueue",
        name="qwen-5ab63",
        deployment="qwen",
    )
    rendered = render_replica(rep, cluster_facts(CLUSTERS["h100-kueue"]))
    with KubeCluster(fleet.target.kubeconfig("h100-kueue")) as kube:
        _kueue_quota(kube, 16)
        _apply(kube, rendered)
        _settle(fleet)
        workloads = _workloads(kube, rendered.namespace)
        assert len(workloads) == 3
        admitted = [w for w in workloads if (w.get("status") or {}).get("admission")]
        assert len(admitted) == 2
        pods = kube.list(
            "v1", "Pod", rendered.namespace, labels={"kueue.x-k8s.io/queue-name": "modelfleet"}
        )
        assert sorted(bool(p["spec"].get("nodeName")) for p in pods) == [False, True, True]
        usage = kube.get(KUEUE, "ClusterQueue", "team-a")
        assert usage is not None
        assert usage["status"]["flavorsUsage"][0]["resources"][0]["total"] == "16"
        assert usage["status"]["pendingWorkloads"] == 1
