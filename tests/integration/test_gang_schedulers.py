"""Gang schedulers end to end (issue 26): on a KAI cluster and on a Kueue cluster (the
examples/schedulers clusters, each 4 x 8 H100 in the simulated fleet), the serving stack check
covers the scheduler, a Leader + Worker gang becomes Ready through the scheduler's admission
(PodGroup / Workload admitted whole), the probe publishes what each queue can still admit, and a
full queue keeps placement away with its reason although the nodes have room.

Its own environment (the real Temporal dev server, the simulated fleet of these two clusters,
a worker): the shared quickstart stack has no gang scheduler."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from integration_support import STACK_TUNING, Stack, wait_for

from modelfleet.adapters.kube_client import KubeCluster
from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.kinds import parse_resource
from modelfleet.cli.apply import apply_resource
from modelfleet.cli.devenv import dev_environment
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.ids import cluster_id
from modelfleet.contracts.status import ClusterRecord, ClusterStatus, ReplicaPhase

ROOT = Path(__file__).resolve().parents[2]
KAI, KUEUE = "h100-kai", "h100-kueue"
KUEUE_API = "kueue.x-k8s.io/v1beta1"
H100 = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("70Gi")) >= 0'


@pytest_asyncio.fixture(scope="module")
async def gangs(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    state_dir = tmp_path_factory.mktemp("gangs")
    paths = [
        str(ROOT / "examples" / "quickstart" / "classes.yaml"),
        str(ROOT / "examples" / "schedulers" / "kai-cluster.yaml"),
        str(ROOT / "examples" / "schedulers" / "kueue-cluster.yaml"),
    ]
    async with dev_environment(
        state_dir, paths, ui=False, startup_seconds=0.3, tuning=STACK_TUNING
    ) as env:
        stack = Stack(env, state_dir)

        async def ready() -> bool | None:
            view = await stack.fleet_view()
            ok = [c for c in view.clusters if c.ready and c.queue is not None]
            return True if len(ok) == len(view.clusters) == 2 else None

        await wait_for(ready, 90, "both scheduler clusters to be Ready with their queues")
        yield stack


def gang_deployment(name: str, namespace: str, scheduler: str | None) -> ModelDeployment:
    """The frontier gang (Leader + 1 Worker, 8 GPUs each) on H100s, for ``scheduler``'s
    cluster (None: either)."""
    doc = yaml.safe_load((ROOT / "examples" / "frontier" / "qwen3-coder-gang.yaml").read_text())
    doc["metadata"] = {"name": name, "namespace": namespace}
    spec = doc["spec"]["template"]["spec"]
    spec.pop("tolerations")
    for member in spec["engines"][0]["members"]:
        member["nodeSelector"]["devices"][0]["selectors"][0]["cel"] = H100
    if scheduler is not None:
        spec["clusterSelector"] = {"matchLabels": {"scheduler": scheduler}}
    doc["spec"]["strategy"] = {"progressDeadlineSeconds": 120}
    resource = parse_resource(doc)
    assert isinstance(resource, ModelDeployment)
    return resource


async def record(stack: Stack, cluster: str) -> ClusterRecord:
    view = await stack.fleet_view()
    return next(c for c in view.clusters if c.spec.name == cluster)


def owned(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as the cluster's owner applies it (no resourceVersion)."""
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {"name": obj["metadata"]["name"]},
        "spec": obj["spec"],
    }


def give_queues_half_the_cluster(stack: Stack) -> None:
    """The owners give modelfleet's queues 16 of the 32 GPUs: one gang's worth."""
    with KubeCluster(stack.fleet.kubeconfig(KAI)) as kube:
        queue = kube.get("scheduling.run.ai/v2", "Queue", "team-a")
        assert queue is not None
        queue["spec"]["resources"]["gpu"].update(quota=16, limit=16)
        kube.apply(owned(queue))
    with KubeCluster(stack.fleet.kubeconfig(KUEUE)) as kube:
        cq = kube.get(KUEUE_API, "ClusterQueue", "team-a")
        assert cq is not None
        cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 16
        kube.apply(owned(cq))


def check_admitted_by_the_schedulers(stack: Stack, ns: str) -> None:
    """Admission, not the default scheduler, bound the gangs: KAI's pods and PodGroup, Kueue's
    admitted Workload and the LocalQueue modelfleet created."""
    with KubeCluster(stack.fleet.kubeconfig(KAI)) as kube:
        pods = kube.list("v1", "Pod", f"mf-{ns}")  # only on-kai runs on this cluster
        gang_pods = [
            p for p in pods if "leaderworkerset.sigs.k8s.io/name" in p["metadata"]["labels"]
        ]
        assert len(gang_pods) == 2
        assert {p["spec"]["schedulerName"] for p in gang_pods} == {"kai-scheduler"}
        (group,) = kube.list("scheduling.run.ai/v2alpha2", "PodGroup", f"mf-{ns}")
        assert group["spec"] == {"minMember": 2, "queue": "team-a"}
    with KubeCluster(stack.fleet.kubeconfig(KUEUE)) as kube:
        (workload,) = kube.list(KUEUE_API, "Workload", f"mf-{ns}")
        admitted = {c["type"]: c["status"] for c in workload["status"]["conditions"]}
        assert admitted["Admitted"] == "True"
        assert kube.get(KUEUE_API, "LocalQueue", "modelfleet", f"mf-{ns}") is not None


async def test_gangs_are_admitted_whole_and_a_full_queue_keeps_placement_away(
    gangs: Stack,
) -> None:
    stack = gangs
    ns = "gangs"
    for cluster, piece in ((KAI, "KAI Scheduler"), (KUEUE, "Kueue")):
        handle = stack.client.get_workflow_handle(cluster_id(cluster))
        cluster_status: ClusterStatus = await handle.query(ClusterWorkflow.status)
        served = {p.name: p.served for p in cluster_status.stack}
        assert served[piece] is True, cluster_status.stack
    # The simulated fleet runs on this event loop: blocking client calls go to a thread.
    await asyncio.to_thread(give_queues_half_the_cluster, stack)

    for name, scheduler in (("on-kai", "kai"), ("on-kueue", "kueue")):
        await apply_resource(stack.client, gang_deployment(name, ns, scheduler))
    for name in ("on-kai", "on-kueue"):
        status = await stack.wait_status(
            ns,
            name,
            lambda s: bool(s.replicas) and all(r.phase is ReplicaPhase.READY for r in s.replicas),
            limit=120,
        )
        assert len(status.replicas) == 1

    await asyncio.to_thread(check_admitted_by_the_schedulers, stack, ns)

    # Both queues are full now (16 of 16), though each cluster has two free nodes left.
    async def queues_full() -> bool | None:
        for cluster in (KAI, KUEUE):
            queue = (await record(stack, cluster)).queue
            if queue is None or queue.free_gpus != 0:
                return None
        return True

    await wait_for(queues_full, 60, "the probes to report both queues full")
    await apply_resource(stack.client, gang_deployment("third", ns, None))
    status = await stack.wait_status(ns, "third", lambda s: bool(s.rejections), limit=60)
    assert status.replicas == []
    assert status.rejections == {
        KAI: "queue team-a: 0 of 16 GPUs free, needs 16",
        KUEUE: "queue team-a: 0 of 16 GPUs free, needs 16",
    }
    assert "queue team-a: 0 of 16 GPUs free" in status.summary
    for cluster in (KAI, KUEUE):
        store = stack.fleet.store(cluster)
        pods = store.list_objects(store.resource_type("v1", "Pod"), namespace=f"mf-{ns}")
        # Only the admitted gang's pods: nothing of the third was bound, or even created.
        assert len(pods.items) == 3  # leader + worker + the endpoint picker
