"""Capacity borrowing during a roll (issue 25, item 1), on the shared simulated fleet: a
deployment whose home is l4-dev (``homeSelector: tier=dev``) fills its gpu-l4 pool (2 nodes, one
L4 each). A change with ``maxSurge: 1, maxUnavailable: 0`` has no room to surge at home: without
borrowing the roll waits with both replicas serving; with ``strategy.borrow: Fleet`` it surges
on h100-east (which its rules allow and which fits), drains an old replica, and once the roll is
over the borrowed replica comes back to l4-dev, never with fewer than 2 serving."""

from __future__ import annotations

import time

from integration_support import Stack, delete_deployment, deployment, wait_for

from modelfleet.api.deployments import BorrowPolicy, ClusterSelector, ModelDeployment
from modelfleet.cli.apply import apply_resource
from modelfleet.contracts.ids import deployment_id
from modelfleet.contracts.status import DeploymentStatus, ReplicaPhase
from modelfleet.deployment.decisions import LogEntry
from modelfleet.deployment.roll import BLOCKED
from modelfleet.deployment.workflow import DeploymentWorkflow

HOME, AWAY = "l4-dev", "h100-east"


def homed(image: str, borrow: BorrowPolicy) -> ModelDeployment:
    md = deployment("chat", "borrow", replicas=2, image=image)
    md.spec.template.spec.home_selector = ClusterSelector(match_labels={"tier": "dev"})
    md.spec.strategy.max_unavailable = 0
    md.spec.strategy.borrow = borrow
    return md


async def decisions(stack: Stack) -> list[str]:
    handle = stack.client.get_workflow_handle(deployment_id("borrow", "chat"))
    log: list[LogEntry] = await handle.query(DeploymentWorkflow.decisions)
    return [e.message for e in log]


async def test_a_roll_completes_by_borrowing_another_cluster_and_then_returns(
    stack: Stack,
) -> None:
    view = await stack.fleet_view()
    assert not [r.name for r in view.replicas if r.spec.cluster_name == HOME], "l4-dev is taken"
    md = homed("vllm/vllm-openai:v0.23.0", BorrowPolicy.NONE)
    await apply_resource(stack.client, md)
    old = await stack.wait_status(
        "borrow", "chat", lambda s: s.phase == "Ready" and s.ready == 2, 90
    )
    assert {r.cluster for r in old.replicas} == {HOME}  # home only, though h100-east fits

    # Without borrowing: no room to surge at home and none may go down: the roll waits.
    changed = homed("vllm/vllm-openai:v0.24.0", BorrowPolicy.NONE)
    await apply_resource(stack.client, changed)
    waiting = await stack.wait_status(
        "borrow", "chat", lambda s: s.observed_generation == old.generation + 1, 60
    )
    assert BLOCKED in waiting.summary, waiting.summary
    assert sorted(r.name for r in waiting.replicas) == sorted(r.name for r in old.replicas)
    assert waiting.ready == 2

    # Opting in: the same roll borrows h100-east and completes.
    borrowing = homed("vllm/vllm-openai:v0.24.0", BorrowPolicy.FLEET)
    started = time.monotonic()
    await apply_resource(stack.client, borrowing)
    seen: list[DeploymentStatus] = []

    async def back_home() -> DeploymentStatus | None:
        s = await stack.status("borrow", "chat")
        seen.append(s)
        done = (
            s.observed_generation == old.generation + 2
            and s.ready == 2
            and s.updated == 2
            and len(s.replicas) == 2
            and {r.cluster for r in s.replicas} == {HOME}
        )
        return s if done else None

    final = await wait_for(back_home, 180, "the roll to borrow h100-east and come back home")
    took = time.monotonic() - started
    borrowed = [r for s in seen for r in s.replicas if r.borrowed]
    assert borrowed, "no replica was ever borrowed"
    assert {r.cluster for r in borrowed} == {AWAY}
    assert "gpu-l4" in borrowed[0].borrowed
    assert HOME in borrowed[0].borrowed
    min_serving = min(s.ready for s in seen)
    assert min_serving >= 2, [s.ready for s in seen]  # replicas - maxUnavailable
    assert not any(r.borrowed for r in final.replicas)
    assert all(r.phase is ReplicaPhase.READY for r in final.replicas)
    assert not {r.name for r in final.replicas} & {r.name for r in old.replicas}

    log = await decisions(stack)
    surged = [m for m in log if m.startswith("surged ") and f" on {AWAY}: " in m]
    assert surged, log
    assert "gpu-l4" in surged[0]
    assert surged[0].endswith(f"on {HOME}")
    assert any("back home: replaced by" in m for m in log), log
    print(
        f"without borrow: waited ({waiting.summary!r}), 2 of 2 serving; "
        f"borrow Fleet: completed and back home in {took:.1f} s, min serving "
        f"{min_serving} of 2 over {len(seen)} samples; decision: {surged[0]}"
    )
    await delete_deployment(stack, "borrow", "chat")
