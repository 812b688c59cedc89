"""Placement requests that name their deployment by ``template_key`` instead of sending it whole:
the Fleet places them as the whole deployment, and answers ``unknown_template`` (deciding and
booking nothing) for a key it does not hold, e.g. after it continued-as-new."""

from __future__ import annotations

import uuid

from fleet_placing import placer
from fleet_scale_support import classes, cluster_entries, one_gpu_deployment
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from modelfleet.contracts.fleet_payloads import FleetStats, PlaceRequest, template_key
from modelfleet.contracts.status import DecisionQuery
from modelfleet.contracts.workflow_inputs import FleetInput, FleetState
from modelfleet.fleet.workflow import FleetWorkflow


async def test_a_named_template_places_as_the_whole_deployment(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    client = time_skipping_env.client
    queue = f"fleet-templates-{uuid.uuid4()}"
    state = FleetState(classes=classes(), cluster_entries=cluster_entries(3))
    async with Worker(client, task_queue=queue, workflows=[FleetWorkflow]):
        handle = await client.start_workflow(
            FleetWorkflow.run, FleetInput(state=state), id=f"fleet-{uuid.uuid4()}", task_queue=queue
        )
        dep = one_gpu_deployment("a", "ns")
        key = template_key(dep)

        unknown = await placer(handle).place(
            PlaceRequest(request_id="early", template=key, desired=1)
        )
        assert unknown.unknown_template
        assert unknown.placed == []
        stats: FleetStats = await handle.query(FleetWorkflow.stats)
        assert stats.replicas == 0

        first = await placer(handle).place(PlaceRequest(request_id="p1", deployment=dep, desired=1))
        named = await placer(handle).place(PlaceRequest(request_id="p2", template=key, desired=3))
        assert not named.unknown_template
        assert [r.name for r in named.kept] == [r.name for r in first.placed]
        assert len(named.placed) == 2
        assert {r.spec.deployment for r in named.placed} == {"a"}
        stats = await handle.query(FleetWorkflow.stats)
        assert stats.replicas == 3
        decisions = await handle.query(
            FleetWorkflow.decisions, DecisionQuery(namespace="ns", deployment="a")
        )
        assert [d.desired for d in decisions] == [1, 3]
        # Another deployment's key is not this one's; a scaled one keeps its key.
        assert template_key(one_gpu_deployment("b", "ns")) != key
        assert template_key(one_gpu_deployment("a", "ns", replicas=5)) == key
