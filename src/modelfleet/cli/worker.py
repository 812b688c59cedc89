"""``modelfleet worker``: run a worker against a Temporal service (local or shared), logging as
text or JSON lines (``worker.logs``)."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from modelfleet.cli.connection import AddressOption, NamespaceOption, open_client, settings
from modelfleet.cli.output import EXIT_INVALID, err_console
from modelfleet.worker.logs import LogFormat, configure_logging
from modelfleet.worker.settings import ENV_CREDENTIALS, SettingsError
from modelfleet.worker.versioning import deployment_config

log = logging.getLogger("modelfleet.worker")

CredentialsOption = Annotated[
    Path,
    typer.Option(
        "--credentials-dir",
        envvar=ENV_CREDENTIALS,
        help="Directory of kubeconfigs, one per cluster: <dir>/<cluster>.yaml.",
    ),
]
LEVELS = ("debug", "info", "warning", "error")


def _level(value: str) -> str:
    if value.lower() not in LEVELS:
        raise typer.BadParameter(f"expected one of {', '.join(LEVELS)}")
    return value


# The worker's and the controller's --log-level: a level logging knows, or a usage error.
LogLevelOption = Annotated[
    str,
    typer.Option(
        "--log-level",
        envvar="MODELFLEET_LOG_LEVEL",
        callback=_level,
        help="debug, info, warning or error (debug adds each activity start and poll).",
    ),
]


def worker(
    credentials_dir: CredentialsOption = Path(".modelfleet/kubeconfigs"),
    max_concurrent_activities: Annotated[int, typer.Option(min=1, max=512)] = 32,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
    log_format: Annotated[
        LogFormat,
        typer.Option(
            "--log-format",
            envvar="MODELFLEET_LOG_FORMAT",
            help="text for people, json (one object per line) for log pipelines.",
        ),
    ] = LogFormat.TEXT,
    log_level: LogLevelOption = "info",
) -> None:
    """Poll the modelfleet task queue until SIGINT/SIGTERM, then shut down gracefully."""
    configure_logging(log_format, log_level)
    s = settings(address, temporal_namespace)
    try:
        # MODELFLEET_WORKER_BUILD_ID set: the workers run as that worker deployment version.
        versioning = deployment_config()
    except SettingsError as exc:
        err_console.print(f"[red]error[/]: {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(EXIT_INVALID) from None

    # Imported here, not at the top: the activities and cloud SDKs it loads would slow every
    # other `modelfleet` verb's start-up by about a second.
    from modelfleet.worker.runner import run_worker

    async def go() -> None:
        client = await open_client(s)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        # describe() names where, never a secret.
        log.info("connected to Temporal: %s", s.describe())
        await run_worker(
            client,
            credentials_dir,
            stop,
            max_concurrent_activities=max_concurrent_activities,
            versioning=versioning,
        )

    asyncio.run(go())
