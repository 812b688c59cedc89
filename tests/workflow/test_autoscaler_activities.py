"""The ``autoscaler.target`` and ``autoscaler.scale`` activities against a real ModelDeployment
workflow on the time-skipping server (its Fleet placement answered by a double that places
nothing, so no cluster is needed): the status query, the ``scale`` Update with its validator and
a deterministic update ID, and a deployment that does not exist. The mapping of replica phases
is checked against a stand-in deployment that reports replicas in every phase."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

from temporalio import activity, workflow
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment
from temporalio.worker import Worker

from modelfleet.activities.autoscaler import AutoscalerActivities
from modelfleet.activities.kube_ops import KubeconfigStore
from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.loading import load_paths
from modelfleet.contracts.activity_names import FLEET_PLACE, FLEET_RELEASE
from modelfleet.contracts.autoscaler_payloads import (
    ScaleTargetRequest,
    TargetReplica,
    TargetRequest,
)
from modelfleet.contracts.fleet_payloads import PlaceRequest, PlaceResponse, ReleaseRequest
from modelfleet.contracts.ids import deployment_id
from modelfleet.contracts.status import DeploymentStatus, ReplicaPhase, ReplicaStatus, ReplicaStep
from modelfleet.deployment.workflow import DeploymentInput, DeploymentWorkflow

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "qwen3-8b.yaml"


def quickstart_deployment(name: str) -> ModelDeployment:
    [md] = [
        d.resource
        for d in load_paths([str(QUICKSTART)]).documents
        if d.resource.KIND == "ModelDeployment"
    ]
    assert isinstance(md, ModelDeployment)
    return md.model_copy(update={"metadata": md.metadata.model_copy(update={"name": name})})


def target(namespace: str, name: str) -> TargetRequest:
    return TargetRequest(workflow_id=deployment_id(namespace, name), namespace=namespace, name=name)


@activity.defn(name=FLEET_PLACE)
async def place_nothing(request: PlaceRequest) -> PlaceResponse:
    return PlaceResponse(summary="no clusters in this test")


@activity.defn(name=FLEET_RELEASE)
async def release(request: ReleaseRequest) -> int:
    return 0


async def test_target_and_scale_through_a_real_deployment_workflow(
    time_skipping_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    env = time_skipping_env
    queue = f"tq-{uuid.uuid4()}"
    name = f"qwen-{uuid.uuid4().hex[:6]}"
    md = quickstart_deployment(name)
    scaler = AutoscalerActivities(env.client, KubeconfigStore(tmp_path))
    run = ActivityEnvironment().run
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[DeploymentWorkflow],
        activities=[place_nothing, release],
    ):
        missing = await run(
            scaler.target,
            target(md.namespace, name),
        )
        assert not missing.found
        assert missing.summary == "no such ModelDeployment"

        await env.client.start_workflow(
            DeploymentWorkflow.run,
            DeploymentInput(spec=md),
            id=deployment_id(md.namespace, name),
            task_queue=queue,
        )
        state = await run(
            scaler.target,
            target(md.namespace, name),
        )
        assert state.found
        assert state.desired == md.spec.replicas
        assert state.scheduled == 0
        assert state.replicas == []

        request = ScaleTargetRequest(
            request_id=f"test/{name}/1",
            workflow_id=deployment_id(md.namespace, name),
            namespace=md.namespace,
            name=name,
            replicas=4,
        )
        scaled = await run(scaler.scale, request)
        assert scaled.accepted
        assert scaled.desired == 4
        # The same request again (a retried activity) is answered from the first Update.
        again = await run(scaler.scale, request)
        assert (again.accepted, again.desired) == (True, 4)
        state = await run(
            scaler.target,
            target(md.namespace, name),
        )
        assert state.desired == 4

        rejected = await run(
            scaler.scale,
            ScaleTargetRequest(
                request_id=f"test/{name}/2",
                workflow_id=deployment_id(md.namespace, name),
                namespace=md.namespace,
                name=name,
                replicas=11,
            ),
        )
        assert not rejected.accepted
        assert "spec.replicas: must be between 0 and 10" in rejected.reason

        gone = await run(
            scaler.scale,
            ScaleTargetRequest(
                request_id="x",
                workflow_id=deployment_id(md.namespace, "absent"),
                namespace=md.namespace,
                name="absent",
                replicas=1,
            ),
        )
        assert not gone.accepted
        assert gone.reason == "the ModelDeployment is gone"

        handle = env.client.get_workflow_handle(deployment_id(md.namespace, name))
        await handle.execute_update(DeploymentWorkflow.delete)
        deleted = await run(
            scaler.target,
            target(md.namespace, name),
        )
        assert not deleted.found


@workflow.defn(name="ModelDeployment", sandboxed=False)
class ReportsEveryPhase:
    """A stand-in deployment whose status lists a replica in every phase."""

    @workflow.query
    def status(self) -> DeploymentStatus:
        at = datetime(2026, 1, 1, tzinfo=UTC)
        return DeploymentStatus(
            namespace="ml",
            name="qwen",
            generation=3,
            desired=7,
            scheduled=6,
            ready=1,
            updated=6,
            phase="Progressing",
            replicas=[
                ReplicaStatus(
                    name=f"r-{phase.value.lower()}",
                    cluster="east",
                    index=i,
                    phase=phase,
                    step=ReplicaStep.SERVING,
                    updated=at,
                )
                for i, phase in enumerate(ReplicaPhase)
            ],
        )

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)


async def test_target_keeps_live_replicas_and_marks_only_ready_ones(
    time_skipping_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    env = time_skipping_env
    queue = f"tq-{uuid.uuid4()}"
    name = f"stub-{uuid.uuid4().hex[:6]}"
    async with Worker(env.client, task_queue=queue, workflows=[ReportsEveryPhase]):
        handle = await env.client.start_workflow(
            ReportsEveryPhase.run, id=deployment_id("ml", name), task_queue=queue
        )
        scaler = AutoscalerActivities(env.client, KubeconfigStore(tmp_path))
        state = await ActivityEnvironment().run(
            scaler.target,
            target("ml", name),
        )
        await handle.terminate()
    assert (state.desired, state.scheduled) == (7, 6)
    assert state.replicas == [
        TargetReplica(name="r-pending", cluster="east", ready=False),
        TargetReplica(name="r-progressing", cluster="east", ready=False),
        TargetReplica(name="r-ready", cluster="east", ready=True),
        TargetReplica(name="r-degraded", cluster="east", ready=False),
        TargetReplica(name="r-unknown", cluster="east", ready=False),
    ]
