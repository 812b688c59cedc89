"""Handlers that await between reading an entity's state and writing it hold that entity's
lock (issue 21, item 5; the safe message handlers of temporalio's samples-python): a later
message waits for the earlier one instead of committing in between and being overwritten by it.

* ``Fleet.report_cluster``: a draining report signals the deployments on the cluster before it
  writes the record; a report sent meanwhile must be what the record says afterwards.
* ``InferenceCluster.apply``: removing a pool asks the Fleet which replicas run on it before the
  spec is committed; an apply sent meanwhile must be the spec the cluster ends with.

Both tests fail without the lock (the older message's write lands last)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from fleet_placing import placer
from fleet_scale_support import classes, cluster_entries, one_gpu_deployment
from temporalio import activity
from temporalio.client import WorkflowUpdateStage
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from test_cluster_provisioning import CLUSTERS, FakeCloud

from modelfleet.api.clusters import InferenceCluster
from modelfleet.cluster.state import ClusterInput
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.activity_names import FLEET_PUBLISH_CLUSTER, FLEET_REPLICAS_BY_POOL
from modelfleet.contracts.fleet_payloads import ClusterReport, PlaceRequest, PublishRequest
from modelfleet.contracts.status import ClusterStatus
from modelfleet.contracts.workflow_inputs import FleetInput, FleetState
from modelfleet.fleet.workflow import FleetWorkflow


async def test_a_report_sent_while_a_draining_report_nudges_is_the_one_that_stays(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    env = time_skipping_env
    queue = f"fleet-lock-{uuid.uuid4()}"
    state = FleetState(classes=classes(), cluster_entries=cluster_entries(2))
    async with Worker(env.client, task_queue=queue, workflows=[FleetWorkflow]):
        handle = await env.client.start_workflow(
            FleetWorkflow.run, FleetInput(state=state), id=f"fleet-{uuid.uuid4()}", task_queue=queue
        )
        # Deployments on one cluster: a draining report signals each (none exists here, so
        # each signal fails, after a round trip through the server).
        homes = set()
        for i in range(3):
            md = one_gpu_deployment(f"m{i}", "ns")
            placed = await placer(handle).place(
                PlaceRequest(request_id=f"p{i}", deployment=md, desired=1)
            )
            homes.add(placed.placed[0].spec.cluster_name)
        home = sorted(homes)[0]
        draining = ClusterReport(name=home, ready=False, reason="draining", draining=True)
        later = ClusterReport(name=home, ready=False, reason="2 replica(s) left", draining=True)
        first = await handle.start_update(
            FleetWorkflow.report_cluster, draining, wait_for_stage=WorkflowUpdateStage.ACCEPTED
        )
        second = await handle.start_update(
            FleetWorkflow.report_cluster, later, wait_for_stage=WorkflowUpdateStage.ACCEPTED
        )
        await asyncio.gather(first.result(), second.result())
        record = await handle.query(FleetWorkflow.cluster, home)
        assert record is not None
        assert (record.draining, record.reason) == (True, "2 replica(s) left")
        await handle.terminate()


class HeldFleet(FakeCloud):
    """The cloud doubles, with the Fleet's pool answer held until released, and every spec the
    cluster publishes recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()
        self.answer = asyncio.Event()
        self.specs: list[InferenceCluster] = []

    @activity.defn(name=FLEET_REPLICAS_BY_POOL)
    async def replicas_by_pool(self, cluster: str) -> dict[str, list[str]]:
        self.asked.set()
        await self.answer.wait()
        return {}

    @activity.defn(name=FLEET_PUBLISH_CLUSTER)
    async def publish(self, request: PublishRequest) -> None:
        if request.spec is not None:
            self.specs.append(request.spec)
        await super().publish(request)


async def test_an_apply_sent_while_a_pool_removal_asks_the_fleet_is_the_spec_that_stays(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    env = time_skipping_env
    cloud = HeldFleet()
    spec = CLUSTERS["gke-central"]
    first = spec.spec.node_pools[0]

    def with_pools(*pools: object) -> InferenceCluster:
        return spec.model_copy(
            update={"spec": spec.spec.model_copy(update={"node_pools": list(pools)})}
        )

    extra = first.model_copy(update={"name": "extra"})
    wider = first.model_copy(update={"min_node_count": 1, "max_node_count": 8})
    removal = with_pools(first)  # extra removed: the Fleet is asked first
    latest = with_pools(wider, extra)  # no pool removed: nothing to ask
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        env.client, task_queue=queue, workflows=[ClusterWorkflow], activities=cloud.activities()
    ):
        handle = await env.client.start_workflow(
            ClusterWorkflow.run,
            ClusterInput.of(with_pools(first, extra)),
            id=f"cluster/{spec.name}-{uuid.uuid4()}",
            task_queue=queue,
            result_type=ClusterStatus,
        )
        await cloud.settle()
        removing = await handle.start_update(
            ClusterWorkflow.apply, removal, wait_for_stage=WorkflowUpdateStage.ACCEPTED
        )
        await cloud.asked.wait()
        later = await handle.start_update(
            ClusterWorkflow.apply, latest, wait_for_stage=WorkflowUpdateStage.ACCEPTED
        )
        await asyncio.sleep(0.5)  # without the lock the later apply commits here
        cloud.answer.set()
        await asyncio.gather(removing.result(), later.result())
        published = len(cloud.specs)
        while len(cloud.specs) == published or cloud.specs[-1] != latest:
            if len(cloud.specs) > published + 3:
                break
            await env.sleep(timedelta(seconds=5))
        assert cloud.specs[-1] == latest
        assert "delete pool extra" not in cloud.calls
        await handle.execute_update(ClusterWorkflow.delete)
        await handle.result()
