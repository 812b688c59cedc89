"""The AcceptedResource workflow's ``State`` rides continue-as-new whole: the input a run hands
its successor is the state it held, and the next run answers from exactly that state.

On a dev server that suggests continue-as-new after a few dozen events (``carrying_client``);
a handful of re-applies carries the run across it. The other entities' counterparts sit with
their own tests: ``test_endpoint_directory_carry``, ``test_autoscaler_loop`` (its
continue-as-new test), ``test_cache_workflow`` and ``test_cluster_orphan_sweep``
(``..._rides_continue_as_new_whole``)."""

from __future__ import annotations

import copy
import uuid
from typing import Any

from carry_support import carried_input, drive_until_carried
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from modelfleet.accepted.state import AcceptedDocument, AcceptedInput
from modelfleet.accepted.workflow import AcceptedResourceWorkflow
from modelfleet.contracts.accepted import AcceptedStatus

SERVING_STACK: dict[str, Any] = {
    "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
    "kind": "ServingStack",
    "metadata": {"name": "stack", "namespace": "modelplane-system"},
    "spec": {
        "nvidiaDriverRoot": "/opt/nvidia/0",
        "secrets": [{"type": "Kubeconfig", "name": "kc", "key": "kubeconfig", "namespace": "ns"}],
    },
}


async def test_an_accepted_document_is_carried_whole(carrying_client: Client) -> None:
    client = carrying_client
    queue = f"carry-{uuid.uuid4()}"
    wid = f"accepted/carry-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[AcceptedResourceWorkflow]):
        handle = await client.start_workflow(
            AcceptedResourceWorkflow.run,
            AcceptedInput.of(SERVING_STACK),
            id=wid,
            task_queue=queue,
        )
        assert handle.result_run_id is not None

        async def reapply(run: WorkflowHandle[Any, Any], i: int) -> None:
            doc = copy.deepcopy(SERVING_STACK)
            doc["spec"]["nvidiaDriverRoot"] = f"/opt/nvidia/{i}"
            await run.execute_update(AcceptedResourceWorkflow.apply, AcceptedDocument(document=doc))

        # Each re-apply adds history until the server suggests a new run.
        first = await drive_until_carried(client, wid, handle.result_run_id, reapply)
        before: AcceptedStatus = await first.query(AcceptedResourceWorkflow.status)
        carried = AcceptedInput.model_validate(await carried_input(first))
        assert carried.state.document == before.document
        assert carried.state.created == before.created
        assert not carried.state.deleting
        after: AcceptedStatus = await client.get_workflow_handle(wid).query(
            AcceptedResourceWorkflow.status
        )
        assert after == before
        assert after.document["spec"]["nvidiaDriverRoot"].startswith("/opt/nvidia/")
        assert after.document != SERVING_STACK
        await client.get_workflow_handle(wid).terminate()
