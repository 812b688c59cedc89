"""Resilience end to end (issue #6): a replica that never becomes ready is rolled back, cleaned up,
reported and re-placed; a rollout through 20% failing API calls completes without duplicates.

Faults are set on the simulated clusters for the duration of one test and always reset.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from integration_support import (
    Stack,
    delete_deployment,
    deployment,
    h200_deployment,
    wait_for,
)
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from modelfleet.api.deployments import ModelDeployment
from modelfleet.cli.apply import apply_resource
from modelfleet.contracts.ids import replica_id
from modelfleet.contracts.status import DeploymentStatus, ReplicaPhase
from modelfleet.rendering.facts import ClusterFacts
from modelfleet.rendering.replica_manifests import Step, render_replica
from modelfleet.replica.workflow import ReplicaWorkflow
from modelfleet.sim.faults import FaultConfig

# Clusters with a GPU of 20Gi or more that an untolerating deployment can use.
GPU_20GI = ["h100-east", "l4-dev"]
DEADLINE_SECONDS = 10  # the smallest progressDeadlineSeconds the API accepts


@contextmanager
def faults(stack: Stack, configs: dict[str, FaultConfig]) -> Iterator[None]:
    """Set faults on clusters for a block; always back to no faults afterwards."""
    try:
        for cluster, config in configs.items():
            stack.fleet.set_faults(cluster, config)
        yield
    finally:
        for cluster in configs:
            stack.fleet.set_faults(cluster, FaultConfig())


def with_deadline(md: ModelDeployment) -> ModelDeployment:
    md.spec.strategy.progress_deadline_seconds = DEADLINE_SECONDS
    return md


def pods_of(stack: Stack, namespace: str, cluster: str) -> list[dict[str, Any]]:
    store = stack.fleet.store(cluster)
    rt = store.resource_type("v1", "Pod")
    return list(store.list_objects(rt, namespace=f"mf-{namespace}").items)


def scheduled(status: DeploymentStatus) -> tuple[str, str, str]:
    cond = next(c for c in status.conditions if c.type == "ReplicasScheduled")
    return cond.status, cond.reason, cond.message


async def test_never_ready_replica_is_rolled_back_reported_and_placed_elsewhere(
    stack: Stack,
) -> None:
    # Two deployments at once: one that has another cluster to go to, and one pinned to the
    # only pool that fits it (the H200s), which has nowhere else to go.
    movable_ns, pinned_ns = "never-ready", "never-ready-pinned"
    stuck = {c: FaultConfig(never_ready=[f"mf-{movable_ns}/*"]) for c in GPU_20GI}
    stuck["h200-west"] = FaultConfig(never_ready=[f"mf-{pinned_ns}/*"])
    with faults(stack, stuck):
        await apply_resource(stack.client, with_deadline(deployment("m", movable_ns)))
        await apply_resource(stack.client, with_deadline(h200_deployment("m", pinned_ns, gpus=1)))
        first = await stack.wait_status(movable_ns, "m", lambda s: len(s.replicas) == 1, 30)
        bad = first.replicas[0]
        # Only the cluster it was placed on keeps the fault: the other one must serve it.
        for cluster in GPU_20GI:
            if cluster != bad.cluster:
                stack.fleet.set_faults(cluster, FaultConfig())
        pinned_first = await stack.wait_status(pinned_ns, "m", lambda s: len(s.replicas) == 1, 30)
        pinned_bad = pinned_first.replicas[0]
        assert pinned_bad.cluster == "h200-west"

        async def engine_created() -> bool | None:
            kinds = {
                (ns, o["kind"])
                for ns, cluster in ((movable_ns, bad.cluster), (pinned_ns, "h200-west"))
                for o in stack.objects_of(ns, cluster)
            }
            wanted = {(movable_ns, "Deployment"), (pinned_ns, "Deployment")}
            return True if wanted <= kinds else None

        await wait_for(engine_created, 30, "both replicas' workloads to be created")

        moved = await stack.wait_status(
            movable_ns,
            "m",
            lambda s: (
                s.ready == 1 and len(s.replicas) == 1 and s.replicas[0].cluster != bad.cluster
            ),
            60,
        )
        unplaced = await stack.wait_status(
            pinned_ns, "m", lambda s: not s.replicas and scheduled(s)[0] == "False", 60
        )

    # The failed replicas ended by themselves as Failed workflows, after their deadline,
    # saying why (so Temporal's own failure views count them).
    for ns, replica in ((movable_ns, bad), (pinned_ns, pinned_bad)):
        handle = stack.client.get_workflow_handle_for(
            ReplicaWorkflow.run, replica_id(ns, replica.name)
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        cause = failed.value.cause
        assert isinstance(cause, ApplicationError)
        assert cause.type == "ReplicaFailed"
        assert "progress deadline" in cause.message
        assert "ImagePullBackOff" in cause.message
        described = await handle.describe()
        assert described.status == WorkflowExecutionStatus.FAILED
        assert described.close_time is not None
        lasted = (described.close_time - described.start_time).total_seconds()
        assert DEADLINE_SECONDS <= lasted < DEADLINE_SECONDS + 30

    # Everything the failed replicas created is gone from their clusters, pods and claims too.
    for ns, cluster in ((movable_ns, bad.cluster), (pinned_ns, "h200-west")):
        assert stack.objects_of(ns, cluster) == []

        async def pods_gone(ns: str = ns, cluster: str = cluster) -> bool | None:
            return True if not pods_of(stack, ns, cluster) else None

        await wait_for(pods_gone, 30, f"the pods of {ns} on {cluster} to be deleted")

    # Placement was retried elsewhere; the failed cluster is avoided and the status says why.
    new = moved.replicas[0]
    assert new.cluster in GPU_20GI
    assert new.phase is ReplicaPhase.READY
    assert moved.phase == "Ready"
    avoided = moved.rejections[bad.cluster]
    assert "avoided" in avoided
    assert bad.name in avoided
    assert "ImagePullBackOff" in avoided
    view = await stack.fleet_view()
    ledger = {(r.namespace, r.name, r.spec.cluster_name) for r in view.replicas}
    assert (movable_ns, new.name, new.cluster) in ledger
    assert not {e for e in ledger if e[0] == pinned_ns or (e[0] == movable_ns and e[1] == bad.name)}

    # With nowhere else to go, the pinned deployment stays unplaced and says why.
    status, reason, message = scheduled(unplaced)
    assert (status, reason) == ("False", "InsufficientCapacity")
    assert "ImagePullBackOff" in unplaced.rejections["h200-west"]
    assert "not Ready" not in unplaced.summary  # the cluster is Ready, just avoided
    assert "avoided" in unplaced.summary
    assert "avoided" in message

    await delete_deployment(stack, movable_ns, "m")
    await delete_deployment(stack, pinned_ns, "m")
    assert stack.objects_of(movable_ns, new.cluster) == []


def identities(objects: list[dict[str, Any]]) -> Counter[tuple[str, str, str, str]]:
    return Counter(
        (o["apiVersion"], o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
        for o in objects
    )


async def test_rollout_through_failing_api_calls_completes_without_duplicates(
    stack: Stack,
) -> None:
    ns = "flaky-api"
    before = {c: stack.fleet.server.stats(c) for c in GPU_20GI}
    # 20% of every cluster's API calls fail: 10% with 500, 10% with 429 (Retry-After: 1).
    flaky = {
        c: FaultConfig(seed=seed, error_rate_500=0.1, error_rate_429=0.1)
        for seed, c in enumerate(GPU_20GI, start=1)
    }
    with faults(stack, flaky):
        await apply_resource(stack.client, deployment("m", ns, replicas=2))
        status = await stack.wait_status(
            ns, "m", lambda s: s.phase == "Ready" and s.ready == 2 and len(s.replicas) == 2, 60
        )
        after = {c: stack.fleet.server.stats(c) for c in GPU_20GI}
    assert sum(after[c].injected_500 - before[c].injected_500 for c in GPU_20GI) > 0
    assert sum(after[c].injected_429 - before[c].injected_429 for c in GPU_20GI) > 0

    assert sorted(r.cluster for r in status.replicas) == sorted(GPU_20GI)
    view = await stack.fleet_view()
    placed = {r.name: r for r in view.replicas if r.namespace == ns}
    assert sorted(placed) == sorted(r.name for r in status.replicas)
    for cluster in GPU_20GI:
        (replica,) = [r for r in placed.values() if r.spec.cluster_name == cluster]
        rendered = render_replica(replica, ClusterFacts())
        expected = identities(
            [m for s in rendered.steps if s.step is not Step.NAMESPACE for m in s.manifests]
        )
        found = identities(stack.objects_of(ns, cluster))
        # Every rendered object exactly once, and nothing else: retries left no leftovers.
        assert found == expected
        assert set(found.values()) == {1}
        # No duplicate pods either: each workload has exactly the pods it asked for, all Ready.
        workloads = [o for o in stack.objects_of(ns, cluster) if o["kind"] == "Deployment"]
        pods = pods_of(stack, ns, cluster)
        assert len(pods) == sum(w["spec"]["replicas"] for w in workloads)
        assert all(
            any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"]["conditions"])
            for p in pods
        )

    await delete_deployment(stack, ns, "m")
    for cluster in GPU_20GI:
        assert stack.objects_of(ns, cluster) == []
