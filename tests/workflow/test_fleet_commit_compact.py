"""The Fleet's ``commit`` Update carries keys, not replicas (issue 22): the proposal holds the
new replicas as the book's rows and the others by name, the Update answers a verdict. A retried
placement (same request ID, another worker's copy) is answered as the first booking was, and the
deployment workflow's answer (``fleet.place``'s PlaceResponse) is the whole one."""

from __future__ import annotations

import uuid

from fleet_placing import fresh_placer, placer
from fleet_scale_support import classes, cluster_entries, one_gpu_deployment
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from modelfleet.contracts.fleet_payloads import PlaceRequest
from modelfleet.contracts.workflow_inputs import FleetInput, FleetState
from modelfleet.fleet.workflow import FleetWorkflow

# A ModelReplica dumped whole is ~880 B: 20 of them would be ~17 KB.
REPLICAS = 20


async def test_commit_carries_rows_and_a_retry_is_answered_the_same(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    client = time_skipping_env.client
    queue = f"fleet-commit-{uuid.uuid4()}"
    state = FleetState(classes=classes(), cluster_entries=cluster_entries(10))
    async with Worker(client, task_queue=queue, workflows=[FleetWorkflow]):
        handle = await client.start_workflow(
            FleetWorkflow.run, FleetInput(state=state), id=f"fleet-{uuid.uuid4()}", task_queue=queue
        )
        request = PlaceRequest(
            request_id="grow", deployment=one_gpu_deployment("m", "ns"), desired=REPLICAS
        )
        first = await placer(handle).place(request)
        assert len(first.placed) == REPLICAS
        assert all(r.namespace == "ns" and r.spec.deployment == "m" for r in first.placed)

        # The same request again from a copy that already holds its replicas: it would propose
        # nothing new, and is answered with what was booked.
        again = await fresh_placer(handle).place(request)
        assert [r.model_dump() for r in again.placed] == [r.model_dump() for r in first.placed]
        assert again.version == first.version
        stats = await handle.query(FleetWorkflow.stats)
        assert stats.replicas == REPLICAS

        # A scale-up keeps the booked replicas by name and books only the new one.
        more = await placer(handle).place(
            request.model_copy(update={"request_id": "more", "desired": REPLICAS + 1})
        )
        assert sorted(r.name for r in more.kept) == sorted(r.name for r in first.placed)
        assert len(more.placed) == 1

        history = await handle.fetch_history()
        commits = [
            e.workflow_execution_update_accepted_event_attributes.accepted_request.input
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
        ]
        results = [
            e.workflow_execution_update_completed_event_attributes.outcome.success
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED
        ]
        sizes = [c.args.ByteSize() for c in commits if c.name == "commit"]
        # The first, its retry (recomputed: nothing new), the scale-up.
        assert len(sizes) == 3, sizes
        # 20 new replicas: their rows and one shape, far below 20 whole replicas.
        assert sizes[0] < 4 * 1024, sizes
        # A keep-20-add-1 proposal names the 20 kept: smaller still.
        assert sizes[2] < sizes[0], sizes
        # Verdicts: no replica comes back through the history; the retry's answer is the
        # booking's rows and shape.
        answered = [r.ByteSize() for r in results]
        assert len(answered) == 3, answered
        assert answered[0] < 512, answered
        assert answered[2] < 512, answered
        assert answered[1] < 4 * 1024, answered
