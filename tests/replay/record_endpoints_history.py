"""Record the golden history of the endpoint directory, ``histories/endpoints.json`` (a script,
not a test).

    .venv/bin/python tests/replay/record_endpoints_history.py

On the real dev server with continue-as-new suggested at 40 events (the time-skipping server
never suggests it) and a real worker: the fleet's gateway is put, a service watches one
deployment's endpoints (its workflow does not exist, so the first ``endpoints_changed`` signal
fails and the directory forgets the watch), a user-authored endpoint and 30 replica endpoints
are put, one withdrawn, and the directory continues-as-new with the replicas' endpoints grouped.
The first run's history is replayed against the current code and only then written, with its
``index.json`` entry (the other entries are kept).

No ``workflow.patched`` before the first release: when a change alters the commands the
directory issues, re-record this one golden with the change and commit both. A replay failure
without such a change is a determinism bug: fix the code, never re-record to silence it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowHistory
from temporalio.worker import Replayer, Worker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))
from carry_support import suggesting_server
from test_endpoint_directory_carry import AUTHORED, ENDPOINTS, published

from modelfleet.api.services import InferenceGateway, ServiceEndpoint
from modelfleet.contracts.serving_payloads import (
    ENDPOINTS_ID,
    EndpointKey,
    WatchRequest,
)
from modelfleet.endpoints.state import EndpointsInput
from modelfleet.endpoints.workflow import EndpointDirectoryWorkflow
from modelfleet.worker.client import data_converter
from modelfleet.worker.runner import WORKFLOWS

HISTORIES = Path(__file__).resolve().parent / "histories"
FILENAME = "endpoints.json"
SCENARIO = (
    "the gateway put, a watch by a service that is gone (signal failed, watch forgotten), an "
    "authored endpoint and 30 replica endpoints put, one withdrawn, then continue-as-new with "
    "the replicas' endpoints grouped"
)
GATEWAY = InferenceGateway.model_validate(
    {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "InferenceGateway",
        "metadata": {"name": "default"},
        "spec": {"cluster": "c1"},
    }
)
WATCH = WatchRequest(
    watcher="service/team/gone",
    namespace="team",
    entries=[
        ServiceEndpoint.model_validate(
            {"selector": {"matchLabels": {"modelfleet.dev/deployment": "md-0"}}}
        )
    ],
)


async def record(state: Path) -> WorkflowHistory:
    async with suggesting_server(state) as client:
        queue = f"record-{uuid.uuid4()}"
        async with Worker(client, task_queue=queue, workflows=[EndpointDirectoryWorkflow]):
            handle = await client.start_workflow(
                EndpointDirectoryWorkflow.run, EndpointsInput(), id=ENDPOINTS_ID, task_queue=queue
            )
            first = client.get_workflow_handle(ENDPOINTS_ID, run_id=handle.result_run_id)
            await handle.execute_update(EndpointDirectoryWorkflow.put_gateway, GATEWAY)
            await handle.execute_update(EndpointDirectoryWorkflow.watch, WATCH)
            latest = client.get_workflow_handle(ENDPOINTS_ID)
            for record in [AUTHORED, *(published(i) for i in range(ENDPOINTS))]:
                await latest.execute_update(EndpointDirectoryWorkflow.put, record)
                if record.name == published(3).name:
                    key = EndpointKey(namespace="team", name=published(1).name)
                    await latest.execute_update(EndpointDirectoryWorkflow.withdraw, key)
            for _ in range(200):  # the run continues-as-new once its handlers are done
                if (await first.describe()).status is WorkflowExecutionStatus.CONTINUED_AS_NEW:
                    break
                await asyncio.sleep(0.05)
            history = await first.fetch_history()
            last = history.events[-1].event_type
            assert last == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW, last
            await latest.terminate()
            return history


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="modelfleet-record-") as tmp:
        history = await record(Path(tmp))
    replayer = Replayer(workflows=WORKFLOWS, data_converter=data_converter())
    await replayer.replay_workflow(history)
    document = json.loads(history.to_json())
    (HISTORIES / FILENAME).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    index_path = HISTORIES / "index.json"
    index = json.loads(index_path.read_text())
    index[FILENAME] = {
        "scenario": SCENARIO,
        "type": "EndpointDirectory",
        "workflow_id": ENDPOINTS_ID,
    }
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    print(f"wrote {FILENAME}: {len(history.events)} events")


if __name__ == "__main__":
    asyncio.run(main())
