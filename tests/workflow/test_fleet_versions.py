"""The Fleet's "is my placement current?" check (``placement_current``): true while nothing
that could change a deployment's placement happened, false once its cluster, its replicas or
the catalog changed, and always false while it is short of capacity."""

from __future__ import annotations

import uuid

from fleet_placing import placer
from fleet_scale_support import classes, cluster_entries, one_gpu_deployment
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from modelfleet.contracts.fleet_payloads import (
    ClusterReport,
    PlacementCheck,
    PlaceRequest,
    ReleaseRequest,
)
from modelfleet.contracts.workflow_inputs import FleetInput, FleetState
from modelfleet.fleet.workflow import FleetWorkflow


async def test_placement_current_follows_what_matters(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    client = time_skipping_env.client
    queue = f"fleet-versions-{uuid.uuid4()}"
    state = FleetState(classes=classes(), cluster_entries=cluster_entries(3))
    async with Worker(client, task_queue=queue, workflows=[FleetWorkflow]):
        handle = await client.start_workflow(
            FleetWorkflow.run,
            FleetInput(state=state),
            id=f"fleet-{uuid.uuid4()}",
            task_queue=queue,
        )

        async def current(name: str, version: int) -> bool:
            check = PlacementCheck(namespace="ns", deployment=name, version=version)
            result: bool = await handle.query(FleetWorkflow.placement_current, check)
            return result

        a = await placer(handle).place(
            PlaceRequest(request_id="a", deployment=one_gpu_deployment("a", "ns"), desired=1),
        )
        assert len(a.placed) == 1
        assert await current("a", a.version)
        home = a.placed[0].spec.cluster_name

        # Another deployment placed elsewhere or beside it changes nothing for "a".
        b = await placer(handle).place(
            PlaceRequest(request_id="b", deployment=one_gpu_deployment("b", "ns"), desired=2),
        )
        assert b.version > a.version
        assert await current("a", a.version)
        # A report that changes nothing the scheduler reads changes nothing either.
        await handle.execute_update(
            FleetWorkflow.report_cluster,
            ClusterReport(
                name=home, ready=True, reason="probed", gateway_address=f"gateway.{home}.invalid"
            ),
        )
        assert await current("a", a.version)
        # Its cluster going NotReady does.
        await handle.execute_update(
            FleetWorkflow.report_cluster, ClusterReport(name=home, ready=False, reason="down")
        )
        assert not await current("a", a.version)

        # A deployment short of capacity is never current: any change might make room.
        short = await placer(handle).place(
            PlaceRequest(request_id="c", deployment=one_gpu_deployment("c", "ns"), desired=100_000),
        )
        assert short.summary
        assert not await current("c", short.version)
        # Releasing "b" changes "b".
        await handle.execute_update(
            FleetWorkflow.release,
            ReleaseRequest(namespace="ns", replicas=[r.name for r in b.placed]),
        )
        assert not await current("b", b.version)
        await handle.terminate()
