"""Record the golden history of the Fleet's end-of-grace timer (a script, not a test).

    .venv/bin/python tests/replay/record_grace_fleet_history.py [--nudge]

On the time-skipping test server with a real worker: a Fleet with two quickstart-shaped Ready
clusters places a deployment, its cluster reports NotReady (the ``fleet-not-ready-grace-timer``
patch starts a timer), the clock passes the grace in steps (the timer fires and marks the
cluster changed), and the deployment is placed again, on the other cluster. The history is
replayed against the current code and only then written as ``grace-fleet.json`` with its
``index.json`` entry. ``grace-fleet.json`` was recorded before the
``fleet-nudge-deployments-at-grace-end`` patch and is kept as it is; ``--nudge`` records the
current code (the timer, then a ``resync`` signal to the deployment on the dark cluster) as
``grace-nudge-fleet.json``.
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
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, Worker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))
from conftest import start_time_skipping_env
from fleet_scale_support import classes, cluster_entries, one_gpu_deployment

from modelfleet.contracts.fleet_payloads import (
    ClusterReport,
    PlacementCheck,
    PlaceRequest,
)
from modelfleet.contracts.workflow_inputs import FleetInput, FleetState
from modelfleet.fleet.workflow import NOT_READY_GRACE, FleetWorkflow
from modelfleet.worker.runner import WORKFLOWS

HISTORIES = Path(__file__).resolve().parent / "histories"
FILENAME = "grace-fleet.json"
NUDGE_FILENAME = "grace-nudge-fleet.json"


async def record() -> WorkflowHistory:
    env = await start_time_skipping_env()
    queue = f"record-{uuid.uuid4()}"
    state = FleetState(classes=classes(), cluster_entries=cluster_entries(2))
    md = one_gpu_deployment("m", "ns")
    try:
        async with Worker(env.client, task_queue=queue, workflows=[FleetWorkflow]):
            handle = await env.client.start_workflow(
                FleetWorkflow.run, FleetInput(state=state), id="fleet", task_queue=queue
            )
            first = await handle.execute_update(
                FleetWorkflow.place, PlaceRequest(request_id="first", deployment=md, desired=1)
            )
            home = first.placed[0].spec.cluster_name
            await handle.execute_update(
                FleetWorkflow.report_cluster, ClusterReport(name=home, ready=False, reason="dark")
            )
            for _ in range(int(NOT_READY_GRACE / timedelta(minutes=1)) + 2):
                await env.sleep(timedelta(minutes=1))
                await handle.query(FleetWorkflow.replicas_on, home)
            check = PlacementCheck(namespace="ns", deployment="m", version=first.version)
            assert not await handle.query(FleetWorkflow.placement_current, check)
            again = await handle.execute_update(
                FleetWorkflow.place, PlaceRequest(request_id="again", deployment=md, desired=1)
            )
            assert [r.spec.cluster_name for r in again.placed] != [home], again
            history = await handle.fetch_history()
            fired = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_TIMER_FIRED]
            assert len(fired) == 1, "the end-of-grace timer did not fire"
            await handle.terminate()
            return history
    finally:
        await env.shutdown()


async def main() -> None:
    nudge = "--nudge" in sys.argv[1:]
    filename = NUDGE_FILENAME if nudge else FILENAME
    history = await record()
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    await replayer.replay_workflow(history)
    (HISTORIES / filename).write_text(history.to_json())
    index_path = HISTORIES / "index.json"
    index = json.loads(index_path.read_text())
    scenario = (
        "the Fleet's end-of-grace timer (fleet-not-ready-grace-timer patch): a "
        "placement, its cluster NotReady past the grace, the timer fired, placed again elsewhere"
    )
    if nudge:
        scenario += (
            "; at the timer the deployment on the cluster is signalled to resync "
            "(fleet-nudge-deployments-at-grace-end patch; the deployment does not exist here)"
        )
    index[filename] = {"scenario": scenario, "type": "Fleet", "workflow_id": "fleet"}
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    print(f"wrote {filename}: {len(history.events)} events")


if __name__ == "__main__":
    asyncio.run(main())
