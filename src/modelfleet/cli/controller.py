"""``modelfleet controller --kubeconfig PATH``: run the Kubernetes controller against a management
cluster (the CRDs installed there: ``modelfleet crds | kubectl apply -f -``) until SIGINT or
SIGTERM. Several may run: one leads (a Lease in ``--namespace``), the others wait."""

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
from modelfleet.cli.worker import LogLevelOption
from modelfleet.worker.logs import LogFormat, configure_logging

log = logging.getLogger("modelfleet.controller")


def controller(
    kubeconfig: Annotated[
        Path,
        typer.Option(
            "--kubeconfig",
            envvar="MODELFLEET_MANAGEMENT_KUBECONFIG",
            help="Kubeconfig of the management cluster that holds modelfleet's resources.",
        ),
    ],
    namespace: Annotated[
        str,
        typer.Option(
            "--namespace",
            "-n",
            help="Namespace of the controllers' leader-election Lease (objects are watched in "
            "every namespace).",
        ),
    ] = "kube-system",
    resync_seconds: Annotated[
        float, typer.Option("--resync-seconds", min=5.0, help="Reconcile everything this often.")
    ] = 60.0,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
    log_format: Annotated[
        LogFormat, typer.Option("--log-format", envvar="MODELFLEET_LOG_FORMAT")
    ] = LogFormat.TEXT,
    log_level: LogLevelOption = "info",
) -> None:
    """Hand the management cluster's modelfleet resources to the workflows, as `apply` does,
    and write their status back."""
    from modelfleet.adapters.management import KubeError, ManagementCluster
    from modelfleet.controller.runner import Controller
    from modelfleet.controller.support import ControllerSettings

    configure_logging(log_format, log_level)
    s = settings(address, temporal_namespace)
    try:
        management = ManagementCluster(kubeconfig)
    except KubeError as exc:
        err_console.print(f"[red]error[/]: {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(EXIT_INVALID) from None

    async def go() -> None:
        client = await open_client(s)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        log.info("controller for %s, Temporal %s", management.server, s.describe())
        await Controller(
            management,
            client,
            ControllerSettings(lease_namespace=namespace, resync_seconds=resync_seconds),
        ).run(stop)

    asyncio.run(go())
