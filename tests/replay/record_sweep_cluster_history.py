"""Record the golden history of the InferenceCluster's orphan sweep (a script, not a test).

    .venv/bin/python tests/replay/record_sweep_cluster_history.py

On the time-skipping test server with a real worker and the activity doubles of
``tests/workflow/test_cluster_orphan_sweep.py``: an Existing cluster is Ready, goes dark until
NotReady, comes back (the ``sweep-orphans-after-dark`` patch lists the replicas with objects
there, asks the Fleet's ledger, deletes the one it no longer holds), then is deleted. The
history is replayed against the current code and only then written as ``swept-cluster.json``
with its ``index.json`` entry.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from datetime import timedelta
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, Worker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))
from conftest import start_time_skipping_env
from test_cluster_orphan_sweep import SPEC, FakeCluster, _until

from modelfleet.contracts.status import ClusterStatus
from modelfleet.contracts.workflow_inputs import ClusterInput
from modelfleet.worker.runner import WORKFLOWS
from modelfleet.workflows.cluster import ClusterWorkflow

HISTORIES = Path(__file__).resolve().parent / "histories"
FILENAME = "swept-cluster.json"
WORKFLOW_ID = "cluster/replay-swept"


async def record() -> WorkflowHistory:
    env = await start_time_skipping_env()
    queue = f"record-{uuid.uuid4()}"
    fake = FakeCluster(objects={("ns", "moved"), ("ns", "kept")}, ledger={"ns/kept"})
    try:
        async with Worker(
            env.client, task_queue=queue, workflows=[ClusterWorkflow], activities=fake.activities()
        ):
            handle = await env.client.start_workflow(
                ClusterWorkflow.run,
                ClusterInput(spec=SPEC),
                id=WORKFLOW_ID,
                task_queue=queue,
                result_type=ClusterStatus,
            )
            await _until(env, handle, lambda s: s.ready)
            fake.up = False
            await _until(env, handle, lambda s: not s.ready)
            fake.up = True
            await _until(env, handle, lambda s: s.ready)
            while "sweep ns/moved" not in fake.calls:
                await env.sleep(timedelta(seconds=5))
            assert fake.objects == {("ns", "kept")}, fake.objects
            fake.ledger.clear()
            await handle.execute_update(ClusterWorkflow.delete)
            await handle.result()
            return await handle.fetch_history()
    finally:
        await env.shutdown()


async def main() -> None:
    history = await record()
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    await replayer.replay_workflow(history)
    (HISTORIES / FILENAME).write_text(history.to_json())
    index_path = HISTORIES / "index.json"
    index = json.loads(index_path.read_text())
    index[FILENAME] = {
        "scenario": "an Existing cluster Ready, dark until NotReady, Ready again: the orphan "
        "sweep (sweep-orphans-after-dark patch) listed the replicas there, asked the ledger and "
        "deleted the one it no longer holds; then deleted",
        "type": "InferenceCluster",
        "workflow_id": WORKFLOW_ID,
    }
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    print(f"wrote {FILENAME}: {len(history.events)} events")


if __name__ == "__main__":
    asyncio.run(main())
