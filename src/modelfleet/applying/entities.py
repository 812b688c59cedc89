"""How the CLI writes to entity workflows: ``apply`` hands a resource over with
update-with-start (the first apply starts the workflow, every later one updates the running
workflow in place), and ``delete`` sends the workflow its delete update.

Touches only the Temporal client; the callers choose the workflow, its input and its ID.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy

from modelfleet.adapters import temporal_updates
from modelfleet.contracts.activity_names import TASK_QUEUE


async def update_with_start(
    client: Client,
    update: Any,
    update_arg: Any,
    *,
    run: Any,
    run_arg: Any,
    workflow_id: str,
    summary: str,
    rpc_timeout: timedelta | None = None,
) -> str:
    """Send ``update(update_arg)`` to ``workflow_id``, starting ``run(run_arg)`` there first
    when nothing runs under that ID (a running one is used as it is); returns the ID."""
    start = WithStartWorkflowOperation(
        run,
        run_arg,
        id=workflow_id,
        task_queue=TASK_QUEUE,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        static_summary=summary,
    )
    await temporal_updates.update_with_start(
        client, update, update_arg, start, rpc_timeout=rpc_timeout
    )
    return workflow_id


async def delete_entity(handle: WorkflowHandle[Any, Any], delete: Any, *, wait: bool) -> None:
    """Send the workflow its ``delete`` update and, with ``wait``, wait until it has ended."""
    await handle.execute_update(delete)
    if wait:
        await handle.result()


def rejection_reason(exc: WorkflowUpdateFailedError) -> str:
    """Why a workflow's Update validator (or handler) refused: its own message, not the SDK's
    wrapping of it."""
    cause = exc.cause
    if cause is None:
        return str(exc)
    reason = str(cause.__cause__ or cause)
    # The SDK prefixes the workflow's exception type ("InvalidResourceError: ..."): not for users.
    head, sep, rest = reason.partition(": ")
    return rest if sep and head.isidentifier() and head.endswith("Error") else reason
