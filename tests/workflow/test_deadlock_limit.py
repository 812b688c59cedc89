"""The tests' workers allow a workflow activation 30 s before calling it a deadlock
(tests/deadlock_limit.py): an activation that holds its thread for 3 s, as a starved CPU can
make an ordinary one, completes; the SDK's own 2 s would fail its task again and again."""

from __future__ import annotations

import asyncio
import time
import uuid

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

from deadlock_limit import TEST_DEADLOCK_SECONDS

HELD_SECONDS = 3.0


@workflow.defn(sandboxed=True)
class HoldsItsThread:
    @workflow.run
    async def run(self) -> str:
        # What a starved CPU looks like from the SDK's side: the activation does not yield.
        with workflow.unsafe.sandbox_unrestricted():
            time.sleep(HELD_SECONDS)  # noqa: ASYNC251 (the point: it blocks)
        return "done"


async def test_an_activation_held_past_two_seconds_completes(dev_client: Client) -> None:
    queue = f"held-{uuid.uuid4()}"
    async with Worker(dev_client, task_queue=queue, workflows=[HoldsItsThread]) as worker:
        limit = worker._workflow_worker._deadlock_timeout_seconds  # type: ignore[union-attr]
        assert limit == TEST_DEADLOCK_SECONDS
        handle = await dev_client.start_workflow(
            HoldsItsThread.run, id=f"held-{uuid.uuid4()}", task_queue=queue
        )
        # Bounded: with the SDK's 2 s the task fails and is retried for ever.
        assert await asyncio.wait_for(handle.result(), 60) == "done"
        history = await handle.fetch_history()
        failed = [e for e in history.events if e.HasField("workflow_task_failed_event_attributes")]
        assert failed == []
