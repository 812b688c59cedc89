"""Capacity end to end (issue #6): deployments racing for one pool never overcommit it, and a spec
change on a full pool rolls through unavailable-first instead of deadlocking.

Both tests use the tainted H200 pool of h200-west (4 nodes x 8 GPUs), which only deployments that
tolerate its taint can use, and delete what they created, so the pool is whole again afterwards.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

from integration_support import Stack, delete_deployment, h200_deployment, wait_for

from modelfleet.cli.apply import apply_resource
from modelfleet.contracts.status import DeploymentStatus, FleetView, ReplicaPhase
from modelfleet.deployment.roll import WAITING_FOR_ROOM

CLUSTER, POOL = "h200-west", "gpu-h200"
NODES, GPUS_PER_NODE = 4, 8


def ledger_gpus(view: FleetView) -> int:
    """GPUs the Fleet's ledger has handed out on the H200 pool."""
    return sum(
        engine.copies * member.pods * sum(d.count for d in member.device_requests or [])
        for r in view.replicas
        if r.spec.cluster_name == CLUSTER
        for engine in r.spec.engines
        for member in engine.members
        if member.node_pool_name == POOL
    )


def bound_pods(stack: Stack, namespaces: list[str]) -> list[dict[str, Any]]:
    store = stack.fleet.store(CLUSTER)
    rt = store.resource_type("v1", "Pod")
    return [p for ns in namespaces for p in store.list_objects(rt, namespace=f"mf-{ns}").items]


def check_not_overcommitted(stack: Stack, view: FleetView, namespaces: list[str]) -> None:
    """The ledger never hands out more than the pool has, and on the simulated nodes no device is
    allocated twice, no node carries more than it has, and no pod of ours waits for capacity."""
    assert ledger_gpus(view) <= NODES * GPUS_PER_NODE
    store = stack.fleet.store(CLUSTER)
    claims = store.list_objects(store.resource_type("resource.k8s.io/v1", "ResourceClaim")).items
    devices = [
        (r["pool"], r["device"])
        for c in claims
        for r in ((c.get("status") or {}).get("allocation") or {})
        .get("devices", {})
        .get("results", [])
    ]
    assert len(devices) == len(set(devices)), "a device is allocated twice"
    per_node = Counter(pool for pool, _ in devices)
    assert all(n <= GPUS_PER_NODE for n in per_node.values()), per_node
    for pod in bound_pods(stack, namespaces):
        for cond in (pod.get("status") or {}).get("conditions") or []:
            unschedulable = cond["type"] == "PodScheduled" and cond["status"] == "False"
            assert not unschedulable, f"pod {pod['metadata']['name']}: {cond.get('message')}"


async def pool_is_free(stack: Stack) -> None:
    view = await stack.fleet_view()
    taken = [r.name for r in view.replicas if r.spec.cluster_name == CLUSTER]
    assert not taken, f"this test needs the H200 pool to itself; taken by {taken}"


def scheduled_condition(status: DeploymentStatus) -> tuple[str, str, str]:
    cond = next(c for c in status.conditions if c.type == "ReplicasScheduled")
    return cond.status, cond.reason, cond.message


async def test_concurrent_deployments_never_overcommit_a_pool(stack: Stack) -> None:
    ns = "pool-race"
    await pool_is_free(stack)
    # Each wants 3 whole nodes of the 4-node pool: together they exceed it by 2.
    a = h200_deployment("a", ns, replicas=3)
    b = h200_deployment("b", ns, replicas=3)
    await asyncio.gather(apply_resource(stack.client, a), apply_resource(stack.client, b))
    samples = 0

    async def settled() -> tuple[DeploymentStatus, DeploymentStatus] | None:
        nonlocal samples
        sa, sb = await stack.status(ns, "a"), await stack.status(ns, "b")
        check_not_overcommitted(stack, await stack.fleet_view(), [ns])
        samples += 1
        both = [*sa.replicas, *sb.replicas]
        done = len(both) == NODES and all(r.phase is ReplicaPhase.READY for r in both)
        return (sa, sb) if done else None

    sa, sb = await wait_for(settled, 60, "the pool to be filled by the two deployments")
    assert samples > 1  # the invariant was watched while the two raced, not only at the end
    winner, loser = (sa, sb) if sa.scheduled > sb.scheduled else (sb, sa)
    assert (winner.scheduled, loser.scheduled) == (3, 1)

    assert scheduled_condition(winner)[:2] == ("True", "ReplicasCreated")
    status, reason, message = scheduled_condition(loser)
    assert (status, reason) == ("False", "InsufficientCapacity")
    assert "1 of 3" in message
    # One reason per cluster: the other clusters have no H200, the H200 pool is full.
    assert set(loser.rejections) == {"h100-east", "l4-dev", CLUSTER}
    assert POOL in loser.rejections[CLUSTER]
    assert "free" in loser.rejections[CLUSTER]
    assert loser.summary.startswith("0/3 clusters fit")
    assert loser.summary in message

    # The ledger and the simulated nodes agree: the pool is exactly full, one pod per node.
    view = await stack.fleet_view()
    assert ledger_gpus(view) == NODES * GPUS_PER_NODE
    check_not_overcommitted(stack, view, [ns])
    engine_pods = [p for p in bound_pods(stack, [ns]) if p["spec"].get("resourceClaims")]
    nodes = [p["spec"].get("nodeName") for p in engine_pods]
    assert len(nodes) == NODES
    assert len(set(nodes)) == NODES

    await delete_deployment(stack, ns, "a")
    await delete_deployment(stack, ns, "b")
    view = await stack.fleet_view()
    assert ledger_gpus(view) == 0


async def test_image_change_on_a_full_pool_rolls_unavailable_first(stack: Stack) -> None:
    ns = "pool-full"
    await pool_is_free(stack)
    # Two replicas of two 8-GPU pods each: the whole pool, so there is no room to surge.
    md = h200_deployment("m", ns, replicas=2, copies=2)
    assert md.spec.strategy.max_surge == 1
    assert md.spec.strategy.unavailable(md.spec.replicas) == 1  # the default for 2 replicas
    await apply_resource(stack.client, md)
    old = await stack.wait_status(ns, "m", lambda s: s.phase == "Ready" and s.ready == 2, 60)
    assert ledger_gpus(await stack.fleet_view()) == NODES * GPUS_PER_NODE

    changed = md.model_copy(deep=True)
    container = changed.spec.template.spec.engines[0].members[0].template.spec.containers[0]
    container.image = "vllm/vllm-openai:v0.24.0"
    await apply_resource(stack.client, changed)
    seen: list[DeploymentStatus] = []

    async def rolled() -> DeploymentStatus | None:
        s = await stack.status(ns, "m")
        seen.append(s)
        check_not_overcommitted(stack, await stack.fleet_view(), [ns])
        done = s.phase == "Ready" and s.ready == 2 and s.updated == 2 and len(s.replicas) == 2
        return s if done else None

    new = await wait_for(rolled, 60, "the rollout on the full pool to finish")
    assert new.generation == old.generation + 1
    assert {r.template_hash for r in new.replicas} != {r.template_hash for r in old.replicas}
    # Unavailable-first: never a third replica (no room), never more than one down at a time.
    assert max(len(s.replicas) for s in seen) == 2
    assert min(s.ready for s in seen) >= 1
    # It went through one replica at a time: a moment with one old and one new replica.
    assert any(0 < s.updated < 2 for s in seen)

    for obj in stack.objects_of(ns, CLUSTER):
        if obj["kind"] == "Deployment" and not obj["metadata"]["name"].endswith("-epp"):
            assert obj["spec"]["template"]["spec"]["containers"][0]["image"] == container.image
    engine_pods = [p for p in bound_pods(stack, [ns]) if p["spec"].get("resourceClaims")]
    assert len(engine_pods) == NODES
    assert {c["image"] for p in engine_pods for c in p["spec"]["containers"]} == {container.image}

    await delete_deployment(stack, ns, "m")
    assert ledger_gpus(await stack.fleet_view()) == 0


async def test_a_one_replica_deployment_on_a_full_pool_waits_instead_of_going_to_zero(
    stack: Stack,
) -> None:
    """Issue 29, item 6: one replica of four 8-GPU pods is the whole pool, so a change has no
    room to surge. By default (maxUnavailable unset) the roll waits and the replica keeps
    serving; with maxUnavailable: 1 set it is replaced in place and serves nothing meanwhile
    (the trade-off docs/operations.md states)."""
    ns = "one-full"
    await pool_is_free(stack)
    md = h200_deployment("m", ns, replicas=1, copies=NODES)
    assert md.spec.strategy.max_unavailable is None
    await apply_resource(stack.client, md)
    old = await stack.wait_status(ns, "m", lambda s: s.phase == "Ready" and s.ready == 1, 60)
    changed = md.model_copy(deep=True)
    container = changed.spec.template.spec.engines[0].members[0].template.spec.containers[0]
    container.image = "vllm/vllm-openai:v0.24.0"
    await apply_resource(stack.client, changed)
    seen: list[DeploymentStatus] = []

    async def waiting() -> DeploymentStatus | None:
        s = await stack.status(ns, "m")
        seen.append(s)
        return s if s.observed_generation == old.generation + 1 else None

    status = await wait_for(waiting, 60, "the change's pass to finish")
    assert WAITING_FOR_ROOM in status.summary, status.summary
    assert min(s.ready for s in seen) == 1, [s.ready for s in seen]
    assert [r.name for r in status.replicas] == [r.name for r in old.replicas]
    assert status.replicas[0].phase is ReplicaPhase.READY

    # Opting in: replaced in place, nothing serves until the replacement is Ready.
    explicit = changed.model_copy(deep=True)
    explicit.spec.strategy.max_unavailable = 1
    zero_since: float | None = None
    at_zero = 0.0
    await apply_resource(stack.client, explicit)

    async def rolled() -> DeploymentStatus | None:
        nonlocal zero_since, at_zero
        s = await stack.status(ns, "m")
        now = time.monotonic()
        if s.ready == 0 and zero_since is None:
            zero_since = now
        elif s.ready > 0 and zero_since is not None:
            at_zero += now - zero_since
            zero_since = None
        return s if s.phase == "Ready" and s.ready == 1 and s.updated == 1 else None

    new = await wait_for(rolled, 90, "the in-place roll to finish")
    assert new.replicas[0].name != old.replicas[0].name
    assert at_zero > 0, "an in-place roll of one replica serves nothing for a while"
    print(
        f"default: waited with 1 of 1 serving over {len(seen)} samples; "
        f"maxUnavailable 1: 0 serving for {at_zero:.1f} s"
    )
    await delete_deployment(stack, ns, "m")
    assert ledger_gpus(await stack.fleet_view()) == 0
