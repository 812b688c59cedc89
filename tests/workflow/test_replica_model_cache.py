"""A ModelReplica whose deployment references a ModelCache, on the time-skipping server: it waits
in its own step (``wait-model-cache``, with the cache's progress as the reason) until the cache is
Ready on its cluster, and only then creates anything; without a reference there is no such step.
The cluster and the cache are activity doubles (see ``test_replica_saga``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from temporalio import activity
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from test_replica_saga import REPLICA, FakeCluster, ProgressSink

from modelfleet.api.deployments import ModelReplica
from modelfleet.contracts.cache_payloads import (
    CACHE_READINESS,
    CacheReadiness,
    CacheReadinessRequest,
)
from modelfleet.contracts.status import ReplicaPhase, ReplicaProgress, ReplicaStep
from modelfleet.contracts.workflow_inputs import ReplicaResult
from modelfleet.replica.state import ReplicaInput
from modelfleet.replica.workflow import ReplicaWorkflow


@dataclass
class FakeCache:
    """Hydrating for ``looks`` questions, then Ready; records who asked and when."""

    looks: int = 3
    asked: list[CacheReadinessRequest] = field(default_factory=list)
    cluster: FakeCluster | None = None

    @activity.defn(name=CACHE_READINESS)
    async def readiness(self, request: CacheReadinessRequest) -> CacheReadiness:
        self.asked.append(request)
        if self.cluster is not None:
            self.cluster.calls.append("cache")
        if len(self.asked) < self.looks:
            return CacheReadiness(ready=False, summary=f"Hydrating {len(self.asked) * 30}%")
        return CacheReadiness(ready=True, summary="Ready")


def cached_replica() -> ModelReplica:
    doc = REPLICA.to_wire()
    doc["spec"]["modelCacheRef"] = {"name": "weights"}
    return ModelReplica.model_validate(doc)


async def _roll_out(
    env: WorkflowEnvironment, replica: ModelReplica, cache: FakeCache, cluster: FakeCluster
) -> tuple[ReplicaResult, list[ReplicaProgress]]:
    queue = f"tq-{uuid.uuid4()}"
    parent_id = f"sink-{uuid.uuid4()}"
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[ReplicaWorkflow, ProgressSink],
        activities=[
            cluster.apply,
            cluster.poll_ready,
            cluster.check_ready,
            cluster.delete,
            cluster.publish,
            cluster.withdraw,
            cluster.check_models,
            cluster.routes_carrying,
            cache.readiness,
        ],
    ):
        sink = await env.client.start_workflow(ProgressSink.run, id=parent_id, task_queue=queue)
        wid = f"replica-{uuid.uuid4()}"
        await env.client.start_workflow(
            ReplicaWorkflow.run,
            ReplicaInput(replica=replica, parent_id=parent_id, progress_deadline_seconds=600),
            id=wid,
            task_queue=queue,
        )
        handle = env.client.get_workflow_handle(wid, result_type=ReplicaResult)
        # The replica's own view (its query, and its details in the UI) shows every step; the
        # deployment is told only what it acts on.
        seen: list[ReplicaProgress] = []
        for _ in range(60):
            progress = await handle.query(ReplicaWorkflow.progress)
            if not seen or seen[-1] != progress.model_copy(update={"at": seen[-1].at}):
                seen.append(progress)
            if progress.phase is ReplicaPhase.READY:
                break
            await env.sleep(1)
        await handle.signal(ReplicaWorkflow.teardown)
        result = await handle.result()
        await sink.signal(ProgressSink.finish)
        await sink.result()
    return result, seen


async def test_a_replica_waits_for_its_cache_with_progress_before_creating_anything(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    cluster = FakeCluster()
    cache = FakeCache(looks=3, cluster=cluster)
    result, seen = await _roll_out(time_skipping_env, cached_replica(), cache, cluster)
    assert result.phase is ReplicaPhase.TERMINATED
    waits = [p for p in seen if p.step is ReplicaStep.MODEL_CACHE]
    assert waits, seen
    assert all(p.phase is ReplicaPhase.PROGRESSING for p in waits)
    assert any(p.reason.startswith("model cache weights: Hydrating ") for p in waits), waits
    assert {(r.namespace, r.name, r.cluster) for r in cache.asked} == {("ml", "weights", "east")}
    # Every question came before the first object was applied.
    first_apply = next(i for i, c in enumerate(cluster.calls) if c.startswith("apply"))
    assert cluster.calls[:first_apply] == ["cache"] * 3
    assert any(p.phase is ReplicaPhase.READY for p in seen)


async def test_a_replica_without_a_cache_never_asks(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    cluster = FakeCluster()
    cache = FakeCache()
    _, seen = await _roll_out(time_skipping_env, REPLICA, cache, cluster)
    assert cache.asked == []
    assert not any(p.step is ReplicaStep.MODEL_CACHE for p in seen)
