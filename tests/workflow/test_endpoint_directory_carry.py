"""The endpoint directory continues-as-new with its replicas' endpoints grouped
(``rendering.endpoint_groups``) and loses nothing.

On the real dev server, which suggests continue-as-new (the time-skipping server does not),
with the suggestion lowered to 40 events (``carrying_client``) so that 30 published endpoints
cross it."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.worker import Worker

from modelfleet.api.services import InferenceGateway, ServiceEndpoint
from modelfleet.contracts.serving_payloads import WatchRequest
from modelfleet.endpoints.state import EndpointsInput
from modelfleet.endpoints.workflow import EndpointDirectoryWorkflow
from modelfleet.rendering.front_door import EndpointRecord

ENDPOINTS = 30
GATEWAY = InferenceGateway.model_validate(
    {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "InferenceGateway",
        "metadata": {"name": "default"},
        "spec": {"cluster": "c1"},
    }
)
# A service's watch that none of the endpoints here concern (so nothing is signalled).
QUIET_WATCH = WatchRequest(
    watcher="service/elsewhere/svc",
    namespace="elsewhere",
    entries=[ServiceEndpoint.model_validate({"selector": {"matchLabels": {"app": "x"}}})],
)


def published(i: int) -> EndpointRecord:
    name = f"md-{i % 3}-{i:04x}"
    path = f"/team/{name}/"
    return EndpointRecord(
        namespace="team",
        name=name,
        labels={"modelfleet.dev/deployment": f"md-{i % 3}", "modelfleet.dev/cluster": "c1"},
        url=f"http://10.0.0.1:8080{path}v1",
        rewrite_path=path,
        replica=name,
    )


AUTHORED = EndpointRecord(
    namespace="team", name="openai", url="https://api.openai.com/v1", auth_secret="key"
)


async def fill_until_carried(client: Client, wid: str, queue: str) -> WorkflowHandle[Any, Any]:
    """Start the directory, put an authored endpoint and ``ENDPOINTS`` replica endpoints, and
    wait until the first run has continued-as-new; its handle."""
    handle = await client.start_workflow(
        EndpointDirectoryWorkflow.run, EndpointsInput(), id=wid, task_queue=queue
    )
    first = client.get_workflow_handle(wid, run_id=handle.result_run_id)
    await handle.execute_update(EndpointDirectoryWorkflow.put_gateway, GATEWAY)
    await handle.execute_update(EndpointDirectoryWorkflow.watch, QUIET_WATCH)
    for record in [AUTHORED, *(published(i) for i in range(ENDPOINTS))]:
        await client.get_workflow_handle(wid).execute_update(EndpointDirectoryWorkflow.put, record)
    for _ in range(200):  # the run continues-as-new once its handlers are done
        if (await first.describe()).status is WorkflowExecutionStatus.CONTINUED_AS_NEW:
            break
        await asyncio.sleep(0.05)
    return first


async def test_the_directory_carries_its_endpoints_grouped(carrying_client: Client) -> None:
    client = carrying_client
    queue = f"directory-{uuid.uuid4()}"
    wid = f"endpoints-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[EndpointDirectoryWorkflow]):
        first = await fill_until_carried(client, wid, queue)
        history = await first.fetch_history()
        last = history.events[-1]
        assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
        wire = json.loads(
            last.workflow_execution_continued_as_new_event_attributes.input.payloads[0].data
        )
        carried = wire["state"]
        # The replicas' endpoints in groups (one per deployment here), the authored one whole.
        held = await first.query(EndpointDirectoryWorkflow.list_endpoints, "")
        before = {r.key: r for r in held}
        assert [e["name"] for e in carried["endpoints"]] == ["openai"]
        assert len(carried["groups"]) == 3
        assert sum(len(g["members"]) for g in carried["groups"]) == len(before) - 1
        assert len(before) > 4

        # The last run holds every endpoint, those carried as they were (first-seen time too).
        latest = client.get_workflow_handle(wid)
        now = {r.key: r for r in await latest.query(EndpointDirectoryWorkflow.list_endpoints, "")}
        assert len(now) == ENDPOINTS + 1
        assert {k: now[k] for k in before} == before
        # The whole state rode along: endpoints, the service's watch and the gateway.
        state = EndpointsInput.model_validate(wire).state
        assert state.endpoints == before
        assert state.watches == {QUIET_WATCH.watcher: QUIET_WATCH}
        assert state.gateway == GATEWAY
        assert await latest.query(EndpointDirectoryWorkflow.gateway) == GATEWAY
        answer = await latest.execute_update(EndpointDirectoryWorkflow.watch, QUIET_WATCH)
        assert (answer.endpoints, answer.gateway) == ([], GATEWAY)
        # The revision rode along too: answers never go back to an older one.
        assert state.revision > 0
        assert answer.revision >= state.revision
        await client.get_workflow_handle(wid).terminate()
