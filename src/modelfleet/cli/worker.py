"""``modelfleet worker``: run a worker against a Temporal service (local or shared)."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path
from typing import Annotated

import typer

from modelfleet.cli.connection import AddressOption, NamespaceOption, open_client, settings
from modelfleet.cli.output import console
from modelfleet.worker.runner import run_worker
from modelfleet.worker.settings import ENV_CREDENTIALS

CredentialsOption = Annotated[
    Path,
    typer.Option(
        "--credentials-dir",
        envvar=ENV_CREDENTIALS,
        help="Directory of kubeconfigs, one per cluster: <dir>/<cluster>.yaml.",
    ),
]


def worker(
    credentials_dir: CredentialsOption = Path(".modelfleet/kubeconfigs"),
    max_concurrent_activities: Annotated[int, typer.Option(min=1, max=512)] = 32,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """Poll the modelfleet task queue until SIGINT/SIGTERM, then shut down gracefully."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    s = settings(address, temporal_namespace)

    async def go() -> None:
        client = await open_client(s)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        console.print(f"worker connected to {s.address}; credentials from {credentials_dir}")
        await run_worker(
            client, credentials_dir, stop, max_concurrent_activities=max_concurrent_activities
        )
        console.print("worker stopped")

    asyncio.run(go())
