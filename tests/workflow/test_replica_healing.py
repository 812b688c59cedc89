"""A serving ModelReplica keeps itself whole, on the time-skipping server with activity doubles
for the cluster: drift repair (what is missing is re-applied, a history step says why; a replica
not repaired within its progress deadline fails and is compensated) and health over time
(Degraded only after N consecutive failed checks or a reported readiness change; a check that
cannot be made counts for nothing).

The doubles answer at once (no heartbeating activity), scripted by how many checks were made."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from test_replica_saga import REPLICA, ProgressSink

from modelfleet.contracts.activity_names import (
    KUBE_APPLY,
    KUBE_CHECK_READY,
    KUBE_DELETE,
    KUBE_DRIFT,
    KUBE_POLL_READY,
)
from modelfleet.contracts.kube_payloads import (
    ApplyRequest,
    ApplyResult,
    DeleteRequest,
    DeleteResult,
    DriftFound,
    DriftRequest,
    DriftResult,
    ObjectRef,
    ReadyResult,
    WaitReadyRequest,
)
from modelfleet.contracts.serving_payloads import (
    ENDPOINTS_PUBLISH_REPLICA,
    ENDPOINTS_WITHDRAW,
    SERVING_CHECK_MODELS,
    SERVING_ROUTES_CARRYING,
    EndpointKey,
    ModelCheck,
    ModelCheckRequest,
    ReplicaEndpointRequest,
    RoutesCarrying,
    RoutesRequest,
)
from modelfleet.contracts.status import ReplicaPhase, ReplicaProgress
from modelfleet.contracts.workflow_inputs import ReplicaResult
from modelfleet.replica.state import ReplicaInput
from modelfleet.replica.workflow import ReplicaWorkflow

READY = ReadyResult(ready=True, reason="all ready")
GONE = ReadyResult(ready=False, reason="Deployment mf-ml/qwen-abcde-vllm-7641c not found")
UNAVAILABLE = ReadyResult(
    ready=False, reason="Deployment mf-ml/qwen-abcde-vllm-7641c not Available", reported=True
)
# A check that cannot be made: the API answered 500 on every attempt.
API_DOWN = "API down"

Answer = ReadyResult | str


@dataclass
class Cluster:
    """A cluster the test scripts: ``health(n)`` answers the n-th health check (0-based);
    ``deployment_gone`` says whether the engine Deployment is missing right now."""

    health: Callable[[int], Answer]
    deployment_gone: Callable[[int], bool] = lambda _: False
    checks: int = 0
    calls: list[str] = field(default_factory=list)
    repairs: list[list[str]] = field(default_factory=list)

    @activity.defn(name=KUBE_APPLY)
    async def apply(self, request: ApplyRequest) -> ApplyResult:
        refs = [ObjectRef.of(m) for m in request.manifests]
        self.calls.append("apply:" + ",".join(r.kind for r in refs))
        return ApplyResult(applied=refs)

    @activity.defn(name=KUBE_POLL_READY)
    async def poll_ready(self, request: WaitReadyRequest) -> ReadyResult:
        return READY

    @activity.defn(name=KUBE_CHECK_READY)
    async def check_ready(self, request: WaitReadyRequest) -> ReadyResult:
        if activity.info().attempt == 1:
            self.checks += 1
        answer = self.health(self.checks - 1)
        self.calls.append("check")
        if isinstance(answer, str):
            raise ApplicationError(answer, type="RetryableKubeError")
        return answer

    @activity.defn(name=KUBE_DRIFT)
    async def drift(self, request: DriftRequest) -> DriftResult:
        self.calls.append("drift")
        if not self.deployment_gone(self.checks - 1):
            return DriftResult()
        found = []
        for index, manifest in enumerate(request.manifests):
            ref = ObjectRef.of(manifest)
            if ref.kind == "Deployment" and ref.name.startswith("qwen-abcde-vllm"):
                reason = f"{ref} was deleted outside modelfleet: re-created"
                found.append(DriftFound(index=index, ref=ref, kind="missing", reason=reason))
        return DriftResult(drifted=found)

    @activity.defn(name=KUBE_DELETE)
    async def delete(self, request: DeleteRequest) -> DeleteResult:
        self.calls.append("delete")
        return DeleteResult(deleted=len(request.objects), absent=0)

    @activity.defn(name=ENDPOINTS_PUBLISH_REPLICA)
    async def publish(self, request: ReplicaEndpointRequest) -> None:
        self.calls.append("publish")

    @activity.defn(name=ENDPOINTS_WITHDRAW)
    async def withdraw(self, key: EndpointKey) -> bool:
        self.calls.append("withdraw")
        return True

    @activity.defn(name=SERVING_CHECK_MODELS)
    async def check_models(self, request: ModelCheckRequest) -> ModelCheck:
        """No service expects anything of it."""
        return ModelCheck()

    @activity.defn(name=SERVING_ROUTES_CARRYING)
    async def routes_carrying(self, request: RoutesRequest) -> RoutesCarrying:
        """No front-door route carries it."""
        return RoutesCarrying()


@dataclass
class Outcome:
    result: ReplicaResult | None
    failure: BaseException | None
    seen: list[ReplicaProgress]
    summaries: list[str]
    # The workflow and its first run (a run may have continued-as-new since).
    workflow_id: str = ""
    first_run: str = ""


async def _serve(
    env: WorkflowEnvironment, cluster: Cluster, *, serve_for: timedelta, **knobs: Any
) -> Outcome:
    """Roll a replica out, let it serve for ``serve_for`` (unless it ends first), tear it down."""
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
            cluster.drift,
            cluster.delete,
            cluster.publish,
            cluster.withdraw,
            cluster.check_models,
            cluster.routes_carrying,
        ],
    ):
        sink = await env.client.start_workflow(ProgressSink.run, id=parent_id, task_queue=queue)
        arg = ReplicaInput(
            replica=REPLICA,
            parent_id=parent_id,
            health_interval_seconds=10,
            **({"progress_deadline_seconds": 600} | knobs),
        )
        workflow_id = f"replica-{uuid.uuid4()}"
        first = await env.client.start_workflow(
            ReplicaWorkflow.run, arg, id=workflow_id, task_queue=queue
        )
        handle: WorkflowHandle[Any, ReplicaResult] = env.client.get_workflow_handle(
            workflow_id, result_type=ReplicaResult
        )
        # Off the 10 s check grid (and the 5 s repair polls): a teardown that cancels a timer as
        # it fires strands the run on the time-skipping server (sdk-java #2606, #3088).
        await env.sleep(serve_for + timedelta(seconds=2.5))
        desc = await handle.describe()
        if desc.status is not None and desc.status.name == "RUNNING":
            await handle.signal(ReplicaWorkflow.teardown)
        result: ReplicaResult | None = None
        failure: BaseException | None = None
        try:
            result = await handle.result()
        except WorkflowFailureError as exc:
            failure = exc.cause
        summaries = await _activity_summaries(env, handle)
        await sink.signal(ProgressSink.finish)
        seen = await sink.result()
    return Outcome(
        result, failure, seen, summaries, workflow_id, first.first_execution_run_id or ""
    )


async def _activity_summaries(
    env: WorkflowEnvironment, handle: WorkflowHandle[Any, ReplicaResult]
) -> list[str]:
    """The summary of every activity the replica scheduled, in order (what the UI shows)."""
    converter = env.client.data_converter.payload_converter
    out = []
    async for event in handle.fetch_history_events():
        scheduled = event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        if scheduled and event.user_metadata.HasField("summary"):
            out.append(str(converter.from_payload(event.user_metadata.summary, str)))
    return out


def _phases(seen: list[ReplicaProgress]) -> list[tuple[ReplicaPhase, str]]:
    return [(p.phase, p.reason) for p in seen]


async def test_a_deleted_deployment_is_re_created_and_the_history_says_why(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    # The engine Deployment vanishes before the 3rd check; the 4th finds it again.
    cluster = Cluster(
        health=lambda n: GONE if n == 2 else (UNAVAILABLE if n == 3 else READY),
        deployment_gone=lambda n: n == 2,
    )
    out = await _serve(time_skipping_env, cluster, serve_for=timedelta(minutes=2))
    assert out.result is not None
    assert out.result.phase is ReplicaPhase.TERMINATED
    why = "Deployment mf-ml/qwen-abcde-vllm-7641c was deleted outside modelfleet: re-created"
    # One failed check prompts a drift check at once; the repair re-applies only what is gone.
    repair_at = cluster.calls.index("drift")
    assert cluster.calls[repair_at + 1] == "apply:Deployment"
    assert f"repair: {why}" in out.summaries
    phases = _phases(out.seen)
    repaired = phases.index((ReplicaPhase.DEGRADED, why))
    # Degraded while it comes back, then Ready again before the teardown.
    assert (ReplicaPhase.READY, "") in phases[repaired:]
    assert [p for p, _ in phases].count(ReplicaPhase.FAILED) == 0


async def test_the_resync_compares_with_the_cluster_while_healthy(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    cluster = Cluster(health=lambda n: READY)
    await _serve(
        time_skipping_env, cluster, serve_for=timedelta(minutes=3), drift_resync_seconds=60
    )
    # Every check passed: the drift checks are the resync's alone (every 60 s of 3 minutes).
    assert 2 <= cluster.calls.count("drift") <= 3
    assert cluster.calls.count("check") >= 12
    assert not any(c.startswith("apply:") for c in cluster.calls[5:])


async def test_not_repaired_within_the_progress_deadline_fails_and_compensates(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    # Gone from the 2nd check on, and every re-creation is deleted again at once.
    cluster = Cluster(health=lambda n: READY if n < 1 else GONE, deployment_gone=lambda n: n >= 1)
    out = await _serve(
        time_skipping_env,
        cluster,
        serve_for=timedelta(minutes=30),
        progress_deadline_seconds=120,
    )
    assert isinstance(out.failure, ApplicationError)
    assert out.failure.type == "ReplicaFailed"
    assert "not repaired within the progress deadline" in str(out.failure)
    assert cluster.calls[-1] == "delete"
    assert out.seen[-1].phase is ReplicaPhase.FAILED


async def test_degraded_only_after_n_consecutive_failed_checks(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    # Two failed samples in a row (then fine), later three in a row.
    script = {2: GONE, 3: GONE, 6: GONE, 7: GONE, 8: GONE}
    cluster = Cluster(health=lambda n: script.get(n, READY))
    out = await _serve(
        time_skipping_env, cluster, serve_for=timedelta(seconds=125), degraded_after_checks=3
    )
    degraded = [r for p, r in _phases(out.seen) if p is ReplicaPhase.DEGRADED]
    # Once, on the third of the three, not on the two before.
    assert degraded == [GONE.reason]
    assert cluster.checks >= 10


async def test_a_reported_readiness_change_degrades_at_once(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    cluster = Cluster(health=lambda n: UNAVAILABLE if n == 1 else READY)
    out = await _serve(time_skipping_env, cluster, serve_for=timedelta(seconds=45))
    phases = _phases(out.seen)
    assert (ReplicaPhase.DEGRADED, UNAVAILABLE.reason) in phases
    assert phases.index((ReplicaPhase.DEGRADED, UNAVAILABLE.reason)) < len(phases) - 1


async def test_api_errors_during_a_check_count_for_nothing(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    # The API fails every attempt of checks 2-5, with failed samples around them: GONE, 4
    # unknown, GONE: two failed samples, never three in a row.
    script: dict[int, Answer] = {1: GONE, 2: API_DOWN, 3: API_DOWN, 4: API_DOWN, 5: GONE}
    cluster = Cluster(health=lambda n: script.get(n, READY))
    out = await _serve(time_skipping_env, cluster, serve_for=timedelta(minutes=2))
    assert not any(p is ReplicaPhase.DEGRADED for p, _ in _phases(out.seen))
    assert cluster.checks >= 7
    # The unknown checks were retried (each attempt asked the cluster again).
    assert cluster.calls.count("check") > cluster.checks
