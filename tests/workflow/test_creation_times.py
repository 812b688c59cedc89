"""AGE survives continue-as-new for every kind whose workflow continues: the InferenceCluster,
ModelService and AcceptedResource workflows (the ModelAutoscaler's, which really continues
here, in test_autoscaler_loop) report when the resource was
created (the first run's start, carried in their continue-as-new input), and the endpoint
directory keeps when it first recorded each endpoint across re-puts and in the input it
continues with. A run started with a carried time (as continue-as-new starts the next run)
reports that time, not its own start. On the time-skipping server with activity doubles; the
cluster's double also fails its probes, so the reason a dark cluster shows is checked here too.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

from temporalio import activity
from temporalio.client import WorkflowHandle, WorkflowQueryFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from test_service import Doubles, _service, serving_worker

from modelfleet.accepted.state import AcceptedInput, AcceptedState
from modelfleet.accepted.workflow import AcceptedResourceWorkflow
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.api.services import InferenceGateway
from modelfleet.cli import cluster_view
from modelfleet.cli.clusters import cluster_resource
from modelfleet.cluster.state import ClusterInput, ClusterState
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.accepted import AcceptedStatus
from modelfleet.contracts.activity_names import FLEET_PUBLISH_CLUSTER, KUBE_PROBE
from modelfleet.contracts.fleet_payloads import PublishRequest
from modelfleet.contracts.kube_payloads import PoolObservation, ProbeRequest, ProbeResult
from modelfleet.contracts.serving_payloads import ServiceStatus
from modelfleet.contracts.status import ClusterRecord, ClusterStatus
from modelfleet.contracts.workflow_inputs import FleetInput, FleetState
from modelfleet.endpoints.state import EndpointsInput, EndpointsState
from modelfleet.endpoints.workflow import EndpointDirectoryWorkflow
from modelfleet.fleet.workflow import FleetWorkflow
from modelfleet.rendering.front_door import EndpointRecord
from modelfleet.service.state import ServiceInput, ServiceState
from modelfleet.service.workflow import ServiceWorkflow

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
CREATED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
# The workflow's start time and the server's record of it are two reads of the test server's
# clock; on a loaded machine they can be a few hundred ms apart.
START_SLACK = timedelta(seconds=1)
SERVING_STACK = {
    "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
    "kind": "ServingStack",
    "metadata": {"name": "stack", "namespace": "modelplane-system"},
    "spec": {
        "nvidiaDriverRoot": "/home/kubernetes/bin/nvidia",
        "secrets": [{"type": "Kubeconfig", "name": "kc", "key": "kubeconfig", "namespace": "ns"}],
    },
}


T = TypeVar("T")


async def _ask(query: Callable[[], Awaitable[T]]) -> T:
    """A query, asked again when the worker could not answer it in time (an RPC timeout, or the
    SDK's deadlock detector on a starved CPU): that says nothing about the workflow's state."""
    for _ in range(4):
        try:
            return await query()
        except (RPCError, WorkflowQueryFailedError) as exc:
            if "TMPRL1101" not in str(exc) and "Timeout expired" not in str(exc):
                raise
    return await query()


def _l4_dev() -> InferenceCluster:
    found = [
        r
        for r in load_paths([str(QUICKSTART / "clusters.yaml")]).resources
        if isinstance(r, InferenceCluster) and r.name == "l4-dev"
    ]
    return found[0]


class DarkCluster:
    """A cluster that answered once (2 nodes ready), then stops answering."""

    def __init__(self) -> None:
        self.dark = False

    @activity.defn(name=KUBE_PROBE)
    async def probe(self, request: ProbeRequest) -> ProbeResult:
        if self.dark:
            raise ApplicationError(
                "GET /version: connection refused", type="KubeUnreachable", non_retryable=True
            )
        return ProbeResult(
            reachable=True, pools={"gpu-l4": PoolObservation(nodes=2, ready_nodes=2)}
        )

    @activity.defn(name=FLEET_PUBLISH_CLUSTER)
    async def publish(self, request: PublishRequest) -> None:
        return None


async def _status(handle: WorkflowHandle[ClusterWorkflow, ClusterStatus]) -> ClusterStatus:
    result: ClusterStatus = await _ask(lambda: handle.query(ClusterWorkflow.status))
    return result


async def test_a_cluster_keeps_its_creation_time_and_a_dark_one_says_why(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    env = time_skipping_env
    queue = f"tq-{uuid.uuid4()}"
    spec = _l4_dev()
    cloud = DarkCluster()
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[ClusterWorkflow],
        activities=[cloud.probe, cloud.publish],
    ):
        fresh = await env.client.start_workflow(
            ClusterWorkflow.run,
            ClusterInput.of(spec, probe_interval_seconds=5),
            id=f"cluster/fresh-{uuid.uuid4()}",
            task_queue=queue,
        )
        started = (await fresh.describe()).start_time
        created = (await _status(fresh)).created
        assert created is not None
        assert abs(created - started) < START_SLACK
        await fresh.terminate()

        # As continue-as-new starts the next run: the carried time, not this run's start.
        handle = await env.client.start_workflow(
            ClusterWorkflow.run,
            ClusterInput(
                state=ClusterState(spec=spec, created=CREATED),
                probe_interval_seconds=5,
                failure_threshold=2,
            ),
            id=f"cluster/carried-{uuid.uuid4()}",
            task_queue=queue,
        )
        await env.sleep(timedelta(seconds=1))
        seen = await _status(handle)
        assert seen.created == CREATED
        assert seen.observed_pools["gpu-l4"].ready_nodes == 2

        cloud.dark = True
        await env.sleep(timedelta(seconds=11))
        dark = await _status(handle)
        await handle.terminate()
    assert dark.created == CREATED
    assert not dark.ready
    assert dark.reason.startswith("unreachable (2 probes in a row failed): ")
    assert dark.reason.endswith("KubeUnreachable: GET /version: connection refused")
    reachable = {c.type: c for c in dark.conditions}["Reachable"]
    assert reachable.status == "False"
    # The last node counts are kept, but shown as unknown while the cluster does not answer.
    item = cluster_resource(ClusterRecord(spec=spec), dark, None, {}, dark.created)
    assert cluster_view.pool_cell(item.status["pools"][0], item.status["reachable"]) == (
        "gpu-l4 ?/2"
    )
    assert item.created == CREATED


async def test_an_accepted_document_keeps_its_creation_time(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    env = time_skipping_env
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(env.client, task_queue=queue, workflows=[AcceptedResourceWorkflow]):
        fresh = await env.client.start_workflow(
            AcceptedResourceWorkflow.run,
            AcceptedInput.of(SERVING_STACK),
            id=f"accepted/fresh-{uuid.uuid4()}",
            task_queue=queue,
        )
        started = (await fresh.describe()).start_time
        status: AcceptedStatus = await _ask(lambda: fresh.query(AcceptedResourceWorkflow.status))
        assert status.created is not None
        assert abs(status.created - started) < START_SLACK
        carried = await env.client.start_workflow(
            AcceptedResourceWorkflow.run,
            AcceptedInput(state=AcceptedState(document=SERVING_STACK, created=CREATED)),
            id=f"accepted/carried-{uuid.uuid4()}",
            task_queue=queue,
        )
        status = await _ask(lambda: carried.query(AcceptedResourceWorkflow.status))
        assert status.created == CREATED
        await fresh.terminate()
        await carried.terminate()


def _record(name: str, url: str) -> EndpointRecord:
    return EndpointRecord(namespace="ml", name=name, url=url, replica=name)


async def test_the_endpoint_directory_keeps_when_it_first_saw_each_endpoint(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    env = time_skipping_env
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(env.client, task_queue=queue, workflows=[EndpointDirectoryWorkflow]):
        # An endpoint carried from an earlier run keeps its time; a new one gets the put's.
        old = _record("old", "http://10.0.0.1/v1").model_copy(update={"created": CREATED})
        directory = await env.client.start_workflow(
            EndpointDirectoryWorkflow.run,
            EndpointsInput(state=EndpointsState(endpoints={old.key: old})),
            id=f"endpoints-{uuid.uuid4()}",
            task_queue=queue,
        )
        await env.sleep(timedelta(minutes=5))
        await directory.execute_update(
            EndpointDirectoryWorkflow.put, _record("new", "http://10.0.0.2/v1")
        )
        first = await _ask(lambda: directory.query(EndpointDirectoryWorkflow.list_endpoints, "ml"))
        await env.sleep(timedelta(minutes=5))
        # Re-published (a moved replica): the URL changes, the creation time does not.
        await directory.execute_update(
            EndpointDirectoryWorkflow.put, _record("old", "http://10.0.0.3/v1")
        )
        await directory.execute_update(
            EndpointDirectoryWorkflow.put, _record("new", "http://10.0.0.2/v1")
        )
        later = await _ask(lambda: directory.query(EndpointDirectoryWorkflow.list_endpoints, "ml"))
        await directory.terminate()
    by_name = {e.name: e for e in later}
    assert by_name["old"].created == CREATED
    assert by_name["old"].url == "http://10.0.0.3/v1"
    new_at = {e.name: e for e in first}["new"].created
    assert new_at is not None
    assert new_at > CREATED
    assert by_name["new"].created == new_at


async def test_a_service_keeps_its_creation_time(time_skipping_env: WorkflowEnvironment) -> None:
    env = time_skipping_env
    queue = f"tq-{uuid.uuid4()}"
    directory_id = f"endpoints-{uuid.uuid4()}"
    doubles = Doubles(env.client, directory_id)
    spec = _service([{"selector": {"matchLabels": {"dep": "a"}}}])
    async with serving_worker(doubles, queue):
        directory = await env.client.start_workflow(
            EndpointDirectoryWorkflow.run, EndpointsInput(), id=directory_id, task_queue=queue
        )
        fresh = await env.client.start_workflow(
            ServiceWorkflow.run,
            ServiceInput.of(spec),
            id=f"service/ml/fresh-{uuid.uuid4()}",
            task_queue=queue,
        )
        started = (await fresh.describe()).start_time
        status: ServiceStatus = await _ask(lambda: fresh.query(ServiceWorkflow.status))
        assert status.created is not None
        assert abs(status.created - started) < START_SLACK
        carried = await env.client.start_workflow(
            ServiceWorkflow.run,
            ServiceInput(state=ServiceState(spec=spec, created=CREATED)),
            id=f"service/ml/carried-{uuid.uuid4()}",
            task_queue=queue,
        )
        status = await _ask(lambda: carried.query(ServiceWorkflow.status))
        assert status.created == CREATED
        for handle in (fresh, carried, directory):
            await handle.terminate()


async def test_the_fleet_keeps_when_each_class_was_first_applied(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    """``get classes``' AGE (issue 23: it showed ``<unknown>``): a class's time is its first
    apply's, re-applying it keeps it, a carried one keeps its own, a removed one is forgotten."""
    env = time_skipping_env
    queue = f"tq-{uuid.uuid4()}"
    loaded = load_paths([str(QUICKSTART / "classes.yaml")]).resources
    l4, h100 = (c for c in loaded if isinstance(c, InferenceClass) and c.name in ("l4", "h100x8"))
    async with Worker(env.client, task_queue=queue, workflows=[FleetWorkflow]):
        fleet = await env.client.start_workflow(
            FleetWorkflow.run,
            FleetInput(
                state=FleetState(classes={h100.name: h100}, class_created={h100.name: CREATED})
            ),
            id=f"fleet-{uuid.uuid4()}",
            task_queue=queue,
        )
        await env.sleep(timedelta(minutes=5))
        await fleet.execute_update(FleetWorkflow.put_class, l4)
        first = await fleet.query(FleetWorkflow.class_created)
        await env.sleep(timedelta(minutes=5))
        await fleet.execute_update(FleetWorkflow.put_class, l4)  # re-applied
        await fleet.execute_update(FleetWorkflow.put_class, h100)
        later = await fleet.query(FleetWorkflow.class_created)
        await fleet.execute_update(FleetWorkflow.remove_class, l4.name)
        removed = await fleet.query(FleetWorkflow.class_created)
        await fleet.terminate()
    assert first[l4.name] > CREATED
    assert later == {h100.name: CREATED, l4.name: first[l4.name]}
    assert removed == {h100.name: CREATED}


async def test_the_endpoint_directory_keeps_when_the_gateway_was_first_applied(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    """``get gateways``' AGE: the gateway's first apply, kept across re-applies and carried."""
    env = time_skipping_env
    queue = f"tq-{uuid.uuid4()}"
    gateway = next(
        r
        for r in load_paths([str(QUICKSTART / "gateway.yaml")]).resources
        if isinstance(r, InferenceGateway)
    )
    async with Worker(env.client, task_queue=queue, workflows=[EndpointDirectoryWorkflow]):
        directory = await env.client.start_workflow(
            EndpointDirectoryWorkflow.run,
            EndpointsInput(),
            id=f"endpoints-{uuid.uuid4()}",
            task_queue=queue,
        )
        assert await directory.query(EndpointDirectoryWorkflow.gateway_created) is None
        await env.sleep(timedelta(minutes=5))
        await directory.execute_update(EndpointDirectoryWorkflow.put_gateway, gateway)
        first = await directory.query(EndpointDirectoryWorkflow.gateway_created)
        await env.sleep(timedelta(minutes=5))
        await directory.execute_update(EndpointDirectoryWorkflow.put_gateway, gateway)
        later = await directory.query(EndpointDirectoryWorkflow.gateway_created)
        await directory.terminate()
    assert first is not None
    assert later == first
    carried = EndpointsState.model_validate(
        EndpointsState(gateway=gateway, gateway_created=CREATED).model_dump(mode="json")
    )
    assert carried.gateway_created == CREATED
