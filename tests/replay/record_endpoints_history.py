"""Record the golden history of the endpoint directory continuing-as-new with its replicas'
endpoints grouped (patch ``endpoints-grouped-input``; a script, not a test).

    .venv/bin/python tests/replay/record_endpoints_history.py

On the real dev server with continue-as-new suggested at 40 events (the time-skipping server
never suggests it) and a real worker: a user-authored endpoint and 30 replica endpoints are
put, the directory continues-as-new, and its first run's history is replayed against the
current code and only then written as ``grouped-endpoints.json`` with its ``index.json`` entry.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, Worker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))
from test_endpoint_directory_carry import fill_until_carried, suggesting_server

from modelfleet.contracts.serving_payloads import ENDPOINTS_ID
from modelfleet.endpoints.workflow import EndpointDirectoryWorkflow
from modelfleet.worker.runner import WORKFLOWS

HISTORIES = Path(__file__).resolve().parent / "histories"
FILENAME = "grouped-endpoints.json"


async def record(state: Path) -> WorkflowHistory:
    async with suggesting_server(state) as client:
        queue = f"record-{uuid.uuid4()}"
        async with Worker(client, task_queue=queue, workflows=[EndpointDirectoryWorkflow]):
            first = await fill_until_carried(client, ENDPOINTS_ID, queue)
            history = await first.fetch_history()
            last = history.events[-1].event_type
            assert last == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW, last
            await client.get_workflow_handle(ENDPOINTS_ID).terminate()
            return history


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="modelfleet-record-") as tmp:
        history = await record(Path(tmp))
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    await replayer.replay_workflow(history)
    document = json.loads(history.to_json())
    (HISTORIES / FILENAME).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    index_path = HISTORIES / "index.json"
    index = json.loads(index_path.read_text())
    index[FILENAME] = {
        "scenario": (
            "an authored endpoint and 30 replica endpoints put, then continue-as-new with the "
            "replicas' endpoints grouped (endpoints-grouped-input patch)"
        ),
        "type": "EndpointDirectory",
        "workflow_id": ENDPOINTS_ID,
    }
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    print(f"wrote {FILENAME}: {len(history.events)} events")


if __name__ == "__main__":
    asyncio.run(main())
