"""A dev server that suggests continue-as-new early (the time-skipping server never does), and
what a run handed to continue-as-new: its input as the next run receives it, read from the
``ContinuedAsNew`` event of the first run's history."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError

from modelfleet.worker.client import data_converter
from modelfleet.worker.devserver import start_dev_server

CARRY_DEADLINE = 60.0
# Where the server suggests continue-as-new: a few dozen events, so a test drives a run across
# it with a handful of Updates.
SUGGEST_AT = 40


@contextlib.asynccontextmanager
async def suggesting_server(state: Path) -> AsyncIterator[Client]:
    """A fresh in-memory dev server suggesting continue-as-new at ``SUGGEST_AT`` events, and a
    client of it."""
    server = await start_dev_server(
        state,
        ui=False,
        db_file=False,
        extra_args=[
            "--dynamic-config-value",
            f"limit.historyCount.suggestContinueAsNew={SUGGEST_AT}",
        ],
    )
    try:
        yield await Client.connect(server.address, data_converter=data_converter())
    finally:
        server.stop()


async def continued(client: Client, wid: str, run_id: str) -> WorkflowHandle[Any, Any]:
    """The run ``run_id`` of ``wid`` once it has continued-as-new (bounded wait)."""
    first = client.get_workflow_handle(wid, run_id=run_id)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CARRY_DEADLINE
    while (await first.describe()).status is not WorkflowExecutionStatus.CONTINUED_AS_NEW:
        assert loop.time() < deadline, f"{wid} did not continue-as-new in {CARRY_DEADLINE} s"
        await asyncio.sleep(0.05)
    return first


async def drive_until_carried(
    client: Client,
    wid: str,
    run_id: str,
    step: Callable[[WorkflowHandle[Any, Any], int], Awaitable[Any]],
) -> WorkflowHandle[Any, Any]:
    """Call ``step`` (an Update, say) on the run ``run_id`` itself, again and again, until that
    run has continued-as-new; its handle. Every step lands on that run: one sent after the run
    closed fails instead of reaching its successor."""
    first = client.get_workflow_handle(wid, run_id=run_id)
    for i in range(1, 200):
        if (await first.describe()).status is WorkflowExecutionStatus.CONTINUED_AS_NEW:
            return first
        try:
            await step(first, i)
        except RPCError:
            break  # the run closed as the step arrived
    return await continued(client, wid, run_id)


async def carried_input(first: WorkflowHandle[Any, Any]) -> dict[str, Any]:
    """The input the run ``first`` (continued-as-new) gave its successor, as JSON."""
    history = await first.fetch_history()
    last = history.events[-1]
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    attributes = last.workflow_execution_continued_as_new_event_attributes
    carried: dict[str, Any] = json.loads(attributes.input.payloads[0].data)
    return carried
