"""The ModelDeployment workflow on the time-skipping server (with its real ModelReplica children
and the activity doubles of ``deployment_fakes``): a delete during each step of a replica's
rollout completes, bounded, and leaves nothing behind.

A step "in progress" is a double that does not answer until the test lets it: it waits on an
event, without heartbeats. Its workflow closes while it still runs, and the time-skipping server
then never skips time again (it holds time still while an activity runs, and a completion the
closed workflow no longer takes never releases it): that is how a heartbeating double hung the
shared server's tests before. Each test has a server of its own (``time_skipping_env``), and
needs no time to skip: the delete is carried out in real time."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
import pytest_asyncio
from deployment_fakes import FakeClusters, FakeFleet
from temporalio import activity
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from test_deployment_workflow import CLUSTERS, Harness

from modelfleet.contracts.activity_names import KUBE_APPLY, KUBE_POLL_READY
from modelfleet.contracts.ids import replica_id
from modelfleet.contracts.kube_payloads import (
    ApplyRequest,
    ApplyResult,
    ReadyResult,
    WaitReadyRequest,
)
from modelfleet.deployment.workflow import DeploymentWorkflow
from modelfleet.replica.workflow import ReplicaWorkflow

# The rollout's cluster calls, in order: namespace, claims, gangs, leader readiness, routing,
# endpoint-picker readiness.
STEPS = ["apply", "apply", "apply", "wait", "apply", "wait"]


@dataclass
class StallingClusters(FakeClusters):
    """``FakeClusters`` whose ``stall_at``-th rollout call (0-based, applies and readiness waits
    counted together) does not answer until ``release`` is set."""

    stall_at: int | None = None
    calls: int = 0
    stalled: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def _maybe_stall(self) -> None:
        index = self.calls
        self.calls += 1
        if index == self.stall_at:
            self.stalled.set()
            await self.release.wait()

    @activity.defn(name=KUBE_APPLY)
    async def apply(self, request: ApplyRequest) -> ApplyResult:
        await self._maybe_stall()
        return await super().apply(request)

    @activity.defn(name=KUBE_POLL_READY)
    async def poll_ready(self, request: WaitReadyRequest) -> ReadyResult:
        await self._maybe_stall()
        return await super().poll_ready(request)


@pytest_asyncio.fixture
async def stalling(time_skipping_env: WorkflowEnvironment) -> AsyncIterator[Harness]:
    fleet, clusters = FakeFleet(clusters=list(CLUSTERS)), StallingClusters()
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        time_skipping_env.client,
        task_queue=queue,
        workflows=[DeploymentWorkflow, ReplicaWorkflow],
        activities=[
            fleet.place,
            fleet.dry_place,
            fleet.release,
            clusters.apply,
            clusters.poll_ready,
            clusters.check_ready,
            clusters.drift,
            clusters.publish,
            clusters.withdraw,
            clusters.check_models,
            clusters.routes_carrying,
            clusters.delete,
        ],
    ):
        harness = Harness(time_skipping_env, fleet, clusters, queue, [])
        try:
            yield harness
        finally:
            # Let a stalled double answer, so the worker can shut down.
            clusters.release.set()
            ids = harness.deployments + [replica_id("ml", n) for n in fleet.names]
            for workflow_id in ids:
                with contextlib.suppress(RPCError):
                    await time_skipping_env.client.get_workflow_handle(workflow_id).terminate()


@pytest.mark.parametrize("step", range(len(STEPS)), ids=[f"{i}-{s}" for i, s in enumerate(STEPS)])
async def test_delete_during_each_rollout_step_completes_and_leaves_nothing(
    stalling: Harness, step: int
) -> None:
    clusters = stalling.clusters
    assert isinstance(clusters, StallingClusters)
    clusters.stall_at = step
    handle = await stalling.start(1)
    await asyncio.wait_for(clusters.stalled.wait(), 30)
    (name,) = stalling.fleet.names
    # The step is in progress (its double has not answered): delete the deployment.
    await handle.execute_update(DeploymentWorkflow.delete)
    final = await asyncio.wait_for(handle.result(), 60)
    assert final.deleting
    assert final.replicas == []
    # The replica's rollout was cut short, compensated (its objects deleted on its cluster),
    # its capacity released, and its workflow is closed: nothing is left running or booked.
    assert clusters.events[-1] == "delete east"
    assert name in stalling.fleet.released
    assert stalling.fleet.ledger == {}
    replica = await stalling.env.client.get_workflow_handle(replica_id("ml", name)).describe()
    assert replica.status is not WorkflowExecutionStatus.RUNNING
    # The stalled step never finished: nothing was applied after it.
    assert clusters.calls == step + 1
