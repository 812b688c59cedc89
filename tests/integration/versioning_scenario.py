"""The Worker Versioning scenario that ``test_worker_versioning.py`` runs in a process of its own
(a script, not a test module): a ModelReplica in flight on version v1 finishes its saga on v1
after v2 became current, while a replica started after the switch runs on v2 alone.

It must run in a process started with ``MODELFLEET_WORKER_BUILD_ID`` set, as a real versioned
worker is: only there do the workflow types declare their behaviours (``contracts.versioning``).
Two workers of one task queue run as two versions of one worker deployment, built by
``worker.versioning.deployment_config``. Each has its own recording doubles for the cluster, so
where every activity ran says which version's code carried each replica; the server's own
record (``versioning_info``) must say the same. Prints ``OK`` last when every check held."""

from __future__ import annotations

import asyncio
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from temporalio import activity, workflow
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import (
    DescribeWorkflowExecutionRequest,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client
from temporalio.common import VersioningBehavior
from temporalio.service import RPCError
from temporalio.worker import Worker

from modelfleet.api.deployments import ModelReplica
from modelfleet.contracts.activity_names import (
    FLEET_SWEEP_PENDING,
    KUBE_APPLY,
    KUBE_CHECK_READY,
    KUBE_DELETE,
    KUBE_POLL_READY,
)
from modelfleet.contracts.kube_payloads import (
    ApplyRequest,
    ApplyResult,
    DeleteRequest,
    DeleteResult,
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
from modelfleet.worker.client import data_converter
from modelfleet.worker.devserver import start_dev_server
from modelfleet.worker.versioning import ENV_BUILD_ID, ENV_DEPLOYMENT, deployment_config

# Every wait of this test is bounded: a version that never becomes current, a replica that never
# moves, each fails the test with what it was waiting for.
WAIT = 60.0


def _replica(name: str) -> ModelReplica:
    return ModelReplica.model_validate(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelReplica",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {
                "clusterName": "east",
                "deployment": "qwen",
                "engines": [
                    {
                        "name": "vllm",
                        "members": [
                            {
                                "nodePoolName": "gpu",
                                "deviceRequests": [
                                    {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 1}
                                ],
                                "template": {
                                    "spec": {"containers": [{"name": "engine", "image": "vllm"}]}
                                },
                            }
                        ],
                    }
                ],
            },
        }
    )


@dataclass
class VersionedCluster:
    """The cluster as one worker version's activities see it: records which replica workflow
    called what; with ``gate`` set, the first apply waits for it (a saga held in flight)."""

    version: str
    gate: asyncio.Event | None = None
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    published: asyncio.Event = field(default_factory=asyncio.Event)
    calls: list[tuple[str, str]] = field(default_factory=list)

    def _record(self) -> None:
        info = activity.info()
        self.calls.append((info.workflow_id or "", info.activity_type))

    @activity.defn(name=KUBE_APPLY)
    async def apply(self, request: ApplyRequest) -> ApplyResult:
        self._record()
        self.entered.set()
        if self.gate is not None:
            await asyncio.wait_for(self.gate.wait(), WAIT)
        return ApplyResult(applied=[ObjectRef.of(m) for m in request.manifests])

    @activity.defn(name=KUBE_POLL_READY)
    async def poll_ready(self, request: WaitReadyRequest) -> ReadyResult:
        self._record()
        return ReadyResult(ready=True, reason="all ready")

    @activity.defn(name=KUBE_CHECK_READY)
    async def check_ready(self, request: WaitReadyRequest) -> ReadyResult:
        self._record()
        return ReadyResult(ready=True, reason="all ready")

    @activity.defn(name=ENDPOINTS_PUBLISH_REPLICA)
    async def publish(self, request: ReplicaEndpointRequest) -> None:
        self._record()
        self.published.set()

    @activity.defn(name=ENDPOINTS_WITHDRAW)
    async def withdraw(self, key: EndpointKey) -> bool:
        self._record()
        return True

    @activity.defn(name=SERVING_CHECK_MODELS)
    async def check_models(self, request: ModelCheckRequest) -> ModelCheck:
        self._record()
        return ModelCheck()

    @activity.defn(name=SERVING_ROUTES_CARRYING)
    async def routes_carrying(self, request: RoutesRequest) -> RoutesCarrying:
        self._record()
        return RoutesCarrying()

    @activity.defn(name=KUBE_DELETE)
    async def delete(self, request: DeleteRequest) -> DeleteResult:
        self._record()
        return DeleteResult(deleted=len(request.objects), absent=0)

    @activity.defn(name=FLEET_SWEEP_PENDING)
    async def sweep_pending(self, cluster_workflow_id: str) -> bool:
        self._record()
        return False

    def activities(self) -> list[object]:
        return [
            self.apply,
            self.poll_ready,
            self.check_ready,
            self.publish,
            self.withdraw,
            self.check_models,
            self.routes_carrying,
            self.delete,
            self.sweep_pending,
        ]

    def ran(self, workflow_id: str) -> list[str]:
        return [name for wid, name in self.calls if wid == workflow_id]


# Not sandboxed: a test stand-in for the parent deployment, with nothing the sandbox guards.
@workflow.defn(name="VersionedProgressSink", sandboxed=False)
class ProgressSink:
    def __init__(self) -> None:
        self.done = False

    @workflow.signal
    def replica_progress(self, progress: ReplicaProgress) -> None:
        pass

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self.done)


def _worker(client: Client, queue: str, deployment: str, cluster: VersionedCluster) -> Worker:
    versioning = deployment_config({ENV_DEPLOYMENT: deployment, ENV_BUILD_ID: cluster.version})
    assert versioning is not None
    return Worker(
        client,
        task_queue=queue,
        workflows=[ReplicaWorkflow, ProgressSink],
        activities=cluster.activities(),
        deployment_config=versioning,
    )


async def _make_current(client: Client, deployment: str, build_id: str) -> None:
    """Set the current version, as `temporal worker deployment set-current-version` does; the
    server knows a version only once one of its workers has polled, so this asks until then."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while True:
        try:
            await client.workflow_service.set_worker_deployment_current_version(
                SetWorkerDeploymentCurrentVersionRequest(
                    namespace=client.namespace, deployment_name=deployment, build_id=build_id
                )
            )
            return
        except RPCError:
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.2)


async def _versioning(client: Client, workflow_id: str) -> tuple[str, int]:
    described = await client.workflow_service.describe_workflow_execution(
        DescribeWorkflowExecutionRequest(
            namespace=client.namespace, execution=WorkflowExecution(workflow_id=workflow_id)
        )
    )
    info = described.workflow_execution_info.versioning_info
    return info.deployment_version.build_id, info.behavior


async def scenario(client: Client) -> None:
    queue = f"versioned-{uuid.uuid4().hex[:8]}"
    deployment = f"modelfleet-{uuid.uuid4().hex[:8]}"
    old = VersionedCluster("v1", gate=asyncio.Event())
    new = VersionedCluster("v2")
    sink_id = f"sink-{uuid.uuid4().hex[:8]}"
    first, second = (
        f"replica/ml/qwen-{uuid.uuid4().hex[:5]}",
        f"replica/ml/qwen-{uuid.uuid4().hex[:5]}",
    )

    async with _worker(client, queue, deployment, old):
        await _make_current(client, deployment, "v1")
        sink = await client.start_workflow(ProgressSink.run, id=sink_id, task_queue=queue)
        await client.start_workflow(
            ReplicaWorkflow.run,
            ReplicaInput(replica=_replica("old"), parent_id=sink_id, progress_deadline_seconds=600),
            id=first,
            task_queue=queue,
        )
        # v1 holds the first replica's saga in its first step.
        await asyncio.wait_for(old.entered.wait(), WAIT)

        async with _worker(client, queue, deployment, new):
            await _make_current(client, deployment, "v2")
            await client.start_workflow(
                ReplicaWorkflow.run,
                ReplicaInput(
                    replica=_replica("new"), parent_id=sink_id, progress_deadline_seconds=600
                ),
                id=second,
                task_queue=queue,
            )
            await asyncio.wait_for(new.published.wait(), WAIT)
            # Only now may the first saga go on: v2 is current and already serving a replica.
            assert old.gate is not None
            old.gate.set()
            await asyncio.wait_for(old.published.wait(), WAIT)

            results = []
            for workflow_id in (first, second):
                handle = client.get_workflow_handle(workflow_id, result_type=ReplicaResult)
                await handle.signal(ReplicaWorkflow.teardown)
                results.append(await asyncio.wait_for(handle.result(), WAIT))
            await sink.signal(ProgressSink.finish)

            assert [r.phase for r in results] == [ReplicaPhase.TERMINATED] * 2
            # The in-flight saga finished on v1, from its first step to its teardown ...
            assert old.ran(first)[0] == KUBE_APPLY
            assert ENDPOINTS_PUBLISH_REPLICA in old.ran(first)
            assert KUBE_DELETE in old.ran(first)
            assert new.ran(first) == []
            # ... while the replica started after the switch ran on v2 alone.
            assert ENDPOINTS_PUBLISH_REPLICA in new.ran(second)
            assert KUBE_DELETE in new.ran(second)
            assert old.ran(second) == []
            # The server says the same: each pinned to the version that started it.
            assert await _versioning(client, first) == ("v1", VersioningBehavior.PINNED.value)
            assert await _versioning(client, second) == ("v2", VersioningBehavior.PINNED.value)


async def main() -> None:
    from modelfleet.contracts.versioning import VERSIONED

    assert VERSIONED, "run with MODELFLEET_WORKER_BUILD_ID set"
    with tempfile.TemporaryDirectory() as state:
        server = await start_dev_server(Path(state), ui=False, db_file=False)
        try:
            client = await Client.connect(server.address, data_converter=data_converter())
            await scenario(client)
        finally:
            server.stop()
    print("OK", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
