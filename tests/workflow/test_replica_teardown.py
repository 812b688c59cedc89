"""Teardown during a rollout step, on the time-skipping server: the step in progress (a
readiness wait that would last the whole progress deadline) is cancelled at once, everything
applied is deleted, and the replica ends Terminated, not Failed; cancelling the replica's
workflow compensates and ends it Cancelled. Teardown deletes what was applied (as kube.apply
reported it), not only what today's render names, and sweeps by the replica's label."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field

import pytest
from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import CancelledError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from test_replica_saga import REPLICA, FakeCluster, ProgressSink

from modelfleet.api.naming import LABEL_REPLICA
from modelfleet.contracts.activity_names import KUBE_APPLY, KUBE_DELETE, KUBE_WAIT_READY
from modelfleet.contracts.kube_payloads import (
    ApplyRequest,
    ApplyResult,
    DeleteRequest,
    DeleteResult,
    ReadyResult,
    WaitReadyRequest,
)
from modelfleet.contracts.status import ReplicaPhase, ReplicaStep
from modelfleet.contracts.workflow_inputs import ReplicaInput, ReplicaResult
from modelfleet.workflows.replica import ReplicaWorkflow


@dataclass
class HangingCluster(FakeCluster):
    """Readiness never comes; the wait heartbeats until it is cancelled."""

    cancelled: bool = False

    @activity.defn(name=KUBE_WAIT_READY)
    async def wait_ready(self, request: WaitReadyRequest) -> ReadyResult:
        self.calls.append("wait")
        try:
            while True:
                activity.heartbeat()
                await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            self.cancelled = True
            raise


async def _until(check: object, what: str, limit: float = 20.0) -> None:
    deadline = time.monotonic() + limit
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("how", ["teardown", "cancel"])
async def test_teardown_or_cancel_during_the_readiness_wait_ends_it_at_once(
    time_skipping_env: WorkflowEnvironment, how: str
) -> None:
    env = time_skipping_env
    fake = HangingCluster()
    queue = f"tq-{uuid.uuid4()}"
    parent_id = f"sink-{uuid.uuid4()}"
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[ReplicaWorkflow, ProgressSink],
        activities=[fake.apply, fake.wait_ready, fake.check_ready, fake.delete],
    ):
        sink = await env.client.start_workflow(ProgressSink.run, id=parent_id, task_queue=queue)
        handle = await env.client.start_workflow(
            ReplicaWorkflow.run,
            ReplicaInput(replica=REPLICA, parent_id=parent_id, progress_deadline_seconds=1800),
            id=f"replica-{uuid.uuid4()}",
            task_queue=queue,
            result_type=ReplicaResult,
        )
        await _until(lambda: "wait" in fake.calls, "the readiness wait to start")
        started = time.monotonic()
        if how == "teardown":
            await handle.signal(ReplicaWorkflow.teardown)
            result = await handle.result()
            assert result.phase is ReplicaPhase.TERMINATED
        else:
            await handle.cancel()
            with pytest.raises(WorkflowFailureError) as failed:
                await handle.result()
            assert isinstance(failed.value.cause, CancelledError)
        took = time.monotonic() - started
        await sink.signal(ProgressSink.finish)
        seen = await sink.result()
    assert fake.cancelled  # the activity itself was cancelled, not left to run out
    assert took < 15
    applied = {(r.kind, r.name) for r in fake.applied if r.kind != "Namespace"}
    assert applied
    assert applied <= {(r.kind, r.name) for r in fake.deleted}
    assert [p.step for p in seen][-2:] == [ReplicaStep.COMPENSATING, ReplicaStep.DONE]
    assert seen[-1].phase is ReplicaPhase.TERMINATED
    assert all(p.phase is not ReplicaPhase.FAILED for p in seen)


@dataclass
class RenamedCluster(FakeCluster):
    """Answers every apply of a Deployment as if it had also applied the same object under its
    previous name (what a renderer rename leaves on a real cluster), and records the label
    sweep each delete asks for."""

    sweeps: list[dict[str, str]] = field(default_factory=list)

    @activity.defn(name=KUBE_APPLY)
    async def apply(self, request: ApplyRequest) -> ApplyResult:
        result = await FakeCluster.apply(self, request)
        old = [
            r.model_copy(update={"name": f"{r.name}-v0"})
            for r in result.applied
            if r.kind == "Deployment"
        ]
        self.applied.extend(old)
        return ApplyResult(applied=result.applied + old)

    @activity.defn(name=KUBE_DELETE)
    async def delete(self, request: DeleteRequest) -> DeleteResult:
        self.sweeps.append(dict(request.sweep_labels))
        return await FakeCluster.delete(self, request)


async def test_teardown_deletes_what_was_applied_and_sweeps_by_the_replica_label(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    env = time_skipping_env
    fake = RenamedCluster()
    queue = f"tq-{uuid.uuid4()}"
    parent_id = f"sink-{uuid.uuid4()}"
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[ReplicaWorkflow, ProgressSink],
        activities=[fake.apply, fake.wait_ready, fake.check_ready, fake.delete],
    ):
        sink = await env.client.start_workflow(ProgressSink.run, id=parent_id, task_queue=queue)
        handle = await env.client.start_workflow(
            ReplicaWorkflow.run,
            ReplicaInput(replica=REPLICA, parent_id=parent_id, progress_deadline_seconds=600),
            id=f"replica-{uuid.uuid4()}",
            task_queue=queue,
            result_type=ReplicaResult,
        )
        # Whether it is still rolling out or already serving then, teardown deletes the same.
        await _until(
            lambda: any(c.startswith("apply:") and "Deployment" in c for c in fake.calls),
            "the workloads to be applied",
        )
        await handle.signal(ReplicaWorkflow.teardown)
        result = await handle.result()
        await sink.signal(ProgressSink.finish)
        await sink.result()
    assert result.phase is ReplicaPhase.TERMINATED
    deleted = {(r.kind, r.name) for r in fake.deleted}
    stale = {(r.kind, r.name) for r in fake.applied if r.name.endswith("-v0")}
    assert stale
    assert stale <= deleted  # the object under its old name is not orphaned
    assert ("Namespace", "mf-ml") not in deleted
    assert all(r.kind != "Namespace" for r in fake.deleted)
    assert fake.sweeps == [{LABEL_REPLICA: REPLICA.name}]
