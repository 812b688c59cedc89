"""Options and helpers shared by every verb that talks to Temporal: address, namespace, UI link,
and a clear error when no server or no worker is there."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import typer
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from modelfleet.cli.output import EXIT_FAILED, err_console
from modelfleet.contracts.activity_names import TASK_QUEUE
from modelfleet.worker.client import connect
from modelfleet.worker.settings import TemporalSettings

AddressOption = Annotated[
    str | None,
    typer.Option(
        "--address",
        envvar="MODELFLEET_TEMPORAL_ADDRESS",
        help="Temporal frontend host:port (default 127.0.0.1:7233).",
        show_default=False,
    ),
]
NamespaceOption = Annotated[
    str | None,
    typer.Option(
        "--temporal-namespace",
        envvar="MODELFLEET_TEMPORAL_NAMESPACE",
        help="Temporal namespace (default 'default').",
        show_default=False,
    ),
]

T = TypeVar("T")


def settings(address: str | None, namespace: str | None) -> TemporalSettings:
    return TemporalSettings.from_env(address=address, namespace=namespace)


async def open_client(s: TemporalSettings) -> Client:
    try:
        return await connect(s)
    except Exception as exc:
        err_console.print(
            f"[red]error[/]: cannot reach Temporal at {s.address}: {exc}\n"
            "Start everything locally with [bold]modelfleet dev[/], or point --address / "
            "MODELFLEET_TEMPORAL_ADDRESS at your Temporal service."
        )
        raise typer.Exit(EXIT_FAILED) from None


async def require_worker(client: Client, s: TemporalSettings) -> None:
    """Fail fast (instead of hanging) when nothing polls the task queue."""
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=s.namespace,
            task_queue=TaskQueue(name=TASK_QUEUE),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    if not response.pollers:
        err_console.print(
            f"[red]error[/]: no modelfleet worker is polling task queue '{TASK_QUEUE}' at "
            f"{s.address}. Start one with [bold]modelfleet worker[/] (or use "
            "[bold]modelfleet dev[/])."
        )
        raise typer.Exit(EXIT_FAILED)


def run_async(fn: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(fn())  # type: ignore[arg-type]
