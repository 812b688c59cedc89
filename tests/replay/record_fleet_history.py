"""Record the golden history of the Fleet workflow, ``histories/fleet.json`` (a script, not a
test).

    .venv/bin/python tests/replay/record_fleet_history.py

On the time-skipping test server with a real worker, a Fleet holding two Ready clusters (as it
carries them) and a low history limit: a class and a third cluster are put, a deployment is
placed through a worker's copy of the fleet and the Fleet's ``commit`` (and the same request sent
again, answered from memory), a dry placement asks where it would go without its replica (on
the copy: no Update), its cluster reports NotReady (a timer starts for the grace), the
clock passes the grace (the timer fires, the cluster is marked changed and the deployment on it
signalled to resync; it does not exist here), the deployment is placed again, on the other
cluster, the first replica released, and reports follow until the Fleet continues-as-new on its
history limit, carrying the compact state. The first run's history is replayed against the
current code and only then written, with its ``index.json`` entry (the other entries are kept).

No ``workflow.patched`` before the first release: when a change alters the commands the Fleet
issues, re-record this one golden with the change and commit both. A replay failure without
such a change is a determinism bug: fix the code, never re-record to silence it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from datetime import timedelta
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer, Worker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))
from conftest import start_time_skipping_env
from fleet_placing import placer
from fleet_scale_support import (
    classes,
    cluster_entries,
    inference_class,
    inference_cluster,
    one_gpu_deployment,
)

from modelfleet.contracts.fleet_payloads import (
    ClusterReport,
    DryPlaceRequest,
    PlacementCheck,
    PlaceRequest,
    ReleaseRequest,
)
from modelfleet.contracts.workflow_inputs import FleetInput, FleetLimits, FleetState
from modelfleet.fleet.workflow import NOT_READY_GRACE, FleetWorkflow
from modelfleet.worker.client import data_converter
from modelfleet.worker.runner import WORKFLOWS

HISTORIES = Path(__file__).resolve().parent / "histories"
FILENAME = "fleet.json"
SCENARIO = (
    "two Ready clusters; a class and a cluster put, a placement computed on a worker's copy and "
    "committed (sent twice, answered from memory), a dry placement (on the copy), its cluster "
    "NotReady past the grace (timer fired, deployment signalled), placed again elsewhere, a "
    "release, continue-as-new on the history limit"
)
# Low enough that the reports after the story end the run, high enough for the story.
HISTORY_LIMIT = 120


async def record() -> WorkflowHistory:
    env = await start_time_skipping_env()
    queue = f"record-{uuid.uuid4()}"
    state = FleetState(classes=classes(), cluster_entries=cluster_entries(2))
    limits = FleetLimits(max_history_events=HISTORY_LIMIT)
    md = one_gpu_deployment("m", "ns")
    try:
        async with Worker(env.client, task_queue=queue, workflows=[FleetWorkflow]):
            handle = await env.client.start_workflow(
                FleetWorkflow.run,
                FleetInput(state=state, limits=limits),
                id="fleet",
                task_queue=queue,
            )
            first_run = handle.result_run_id
            await handle.execute_update(FleetWorkflow.put_class, inference_class("a10-x1", 1))
            await handle.execute_update(
                FleetWorkflow.put_cluster, inference_cluster("c-spare", "eu")
            )
            request = PlaceRequest(request_id="first", deployment=md, desired=1)
            first = await placer(handle).place(request)
            again = await placer(handle).place(request)
            assert [r.name for r in again.placed] == [r.name for r in first.placed]
            home = first.placed[0].spec.cluster_name
            await placer(handle).dry_place(
                DryPlaceRequest(
                    request_id="dry", deployment=md, desired=1, without=[first.placed[0].name]
                ),
            )
            await handle.execute_update(
                FleetWorkflow.report_cluster, ClusterReport(name=home, ready=False, reason="dark")
            )
            for _ in range(int(NOT_READY_GRACE / timedelta(minutes=1)) + 2):
                await env.sleep(timedelta(minutes=1))
                await handle.query(FleetWorkflow.replicas_on, home)
            check = PlacementCheck(namespace="ns", deployment="m", version=first.version)
            assert not await handle.query(FleetWorkflow.placement_current, check)
            moved = await placer(handle).place(
                PlaceRequest(request_id="again", deployment=md, desired=1)
            )
            assert [r.spec.cluster_name for r in moved.placed] != [home], moved
            await handle.execute_update(
                FleetWorkflow.release,
                ReleaseRequest(namespace="ns", replicas=[first.placed[0].name]),
            )
            run = env.client.get_workflow_handle("fleet", run_id=first_run)
            for i in range(HISTORY_LIMIT):
                history = await run.fetch_history()
                if history.events[-1].event_type == (
                    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
                ):
                    break
                await handle.execute_update(
                    FleetWorkflow.report_cluster,
                    ClusterReport(name=home, ready=False, reason=f"probe {i}"),
                )
                await asyncio.sleep(0.05)
            last = history.events[-1].event_type
            assert last == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW, last
            fired = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_TIMER_FIRED]
            assert len(fired) == 1, "the end-of-grace timer did not fire"
            await env.client.get_workflow_handle("fleet").terminate()
            return history
    finally:
        await env.shutdown()


async def main() -> None:
    history = await record()
    replayer = Replayer(workflows=WORKFLOWS, data_converter=data_converter())
    await replayer.replay_workflow(history)
    document = json.loads(history.to_json())
    (HISTORIES / FILENAME).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    index_path = HISTORIES / "index.json"
    index = json.loads(index_path.read_text())
    index[FILENAME] = {"scenario": SCENARIO, "type": "Fleet", "workflow_id": "fleet"}
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    print(f"wrote {FILENAME}: {len(history.events)} events")


if __name__ == "__main__":
    asyncio.run(main())
