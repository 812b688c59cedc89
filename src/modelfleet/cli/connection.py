"""Options and helpers shared by every verb that talks to Temporal: address, namespace, the
envconfig profile (the root ``--profile`` option), UI link, and a clear error when the
configuration is unusable or no server or no worker is there."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import typer
from rich.markup import escape
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from modelfleet.cli.output import EXIT_FAILED, EXIT_INVALID, err_console
from modelfleet.contracts.activity_names import TASK_QUEUE
from modelfleet.worker.client import connect
from modelfleet.worker.settings import SettingsError, TemporalSettings

# The connection options are the root command's (``modelfleet --address HOST:PORT get md``, as
# kubectl's global flags); every verb that talks to Temporal still takes them after the verb as
# hidden aliases (``modelfleet get md --address HOST:PORT``), which win over the root's.
# No envvar= on these: settings.TemporalSettings.load reads MODELFLEET_* itself, below the flag
# and above the TEMPORAL_* variables and the profile.
_ADDRESS_HELP = (
    "Temporal frontend host:port (else MODELFLEET_TEMPORAL_ADDRESS, the profile, "
    "TEMPORAL_ADDRESS, 127.0.0.1:7233)."
)
_NAMESPACE_HELP = (
    "Temporal namespace (else MODELFLEET_TEMPORAL_NAMESPACE, the profile, "
    "TEMPORAL_NAMESPACE, 'default')."
)
RootAddressOption = Annotated[
    str | None, typer.Option("--address", help=_ADDRESS_HELP, show_default=False)
]
RootNamespaceOption = Annotated[
    str | None,
    typer.Option("--temporal-namespace", help=_NAMESPACE_HELP, show_default=False),
]
AddressOption = Annotated[
    str | None,
    typer.Option("--address", help=_ADDRESS_HELP, show_default=False, hidden=True),
]
NamespaceOption = Annotated[
    str | None,
    typer.Option("--temporal-namespace", help=_NAMESPACE_HELP, show_default=False, hidden=True),
]
ProfileOption = Annotated[
    str | None,
    typer.Option(
        "--profile",
        help="Temporal client profile from the TOML config file (TEMPORAL_CONFIG_FILE, default "
        "~/.config/temporalio/temporal.toml); else TEMPORAL_PROFILE, else 'default'.",
        show_default=False,
    ),
]

T = TypeVar("T")


# The root command's --profile, --address and --temporal-namespace: one CLI invocation per
# process, and the root callback sets them (to None when absent) before any verb runs.
_profile: list[str | None] = [None]
_root: dict[str, str | None] = {"address": None, "namespace": None}


def use_profile(profile: str | None) -> None:
    _profile[0] = profile


def use_connection(address: str | None, namespace: str | None) -> None:
    _root["address"], _root["namespace"] = address, namespace


def settings(address: str | None, namespace: str | None) -> TemporalSettings:
    """The Temporal settings: a verb's own flags, else the root's, else the environment."""
    address = address or _root["address"]
    namespace = namespace or _root["namespace"]
    try:
        return TemporalSettings.load(_profile[0], address=address, namespace=namespace)
    except SettingsError as exc:
        err_console.print(f"[red]error[/]: {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(EXIT_INVALID) from None


async def open_client(s: TemporalSettings) -> Client:
    try:
        return await connect(s)
    except Exception as exc:
        err_console.print(
            f"[red]error[/]: cannot reach Temporal ({s.describe()}): {escape(str(exc))}\n"
            "Start everything locally with [bold]modelfleet dev[/], or point --address, "
            "MODELFLEET_TEMPORAL_ADDRESS or a Temporal profile (--profile) at your Temporal "
            "service."
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
