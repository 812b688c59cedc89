"""The cloud provisioning environment shared by the integration tests and the replay recorder:
a real Temporal dev server, a simulated fleet server, the simulated clouds on it, and a worker
whose adapters reach the clouds through the SDKs (configured by environment, as in production)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from integration_support import ROOT, wait_for
from temporalio.client import Client

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.cli.apply import apply_resource
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.ids import cluster_id
from modelfleet.contracts.status import ClusterStatus
from modelfleet.sim.clouds.clouds import SimulatedClouds
from modelfleet.sim.simulated_fleet import SimulatedFleet
from modelfleet.worker.client import connect
from modelfleet.worker.devserver import start_dev_server
from modelfleet.worker.logs import LogFormat, configure_logging
from modelfleet.worker.runner import ensure_fleet, run_worker
from modelfleet.worker.settings import TemporalSettings

PROVISIONING = ROOT / "examples" / "provisioning"
_LOADED = load_paths([str(PROVISIONING)]).resources
CLASSES = {r.name: r for r in _LOADED if isinstance(r, InferenceClass)}
CLUSTERS = {r.name: r for r in _LOADED if isinstance(r, InferenceCluster)}


@dataclass
class CloudStack:
    client: Client
    clouds: SimulatedClouds
    fleet: SimulatedFleet
    credentials: Path
    state_dir: Path

    async def cluster(self, name: str) -> ClusterStatus:
        handle = self.client.get_workflow_handle(cluster_id(name))
        status: ClusterStatus = await handle.query(ClusterWorkflow.status)
        return status

    async def wait_phase(self, name: str, phase: str, limit: float = 90) -> ClusterStatus:
        async def probe() -> ClusterStatus | None:
            status = await self.cluster(name)
            return status if status.phase == phase else None

        return await wait_for(probe, limit, f"cluster {name} to be {phase}")

    def pool_nodes(self, cluster: str, pool: str) -> list[dict[str, Any]]:
        """The emulated cluster's Nodes labelled as ``pool``'s."""
        store = self.clouds.fleet.store(cluster)
        return [
            n
            for n in store.list_objects(store.registry.by_kind("v1", "Node")).items  # type: ignore[arg-type]
            if n["metadata"]["labels"].get("modelfleet.dev/pool") == pool
        ]


@contextlib.contextmanager
def captured_debug_log() -> Iterator[io.StringIO]:
    """Everything the worker's log handler prints at DEBUG (every SDK's records included) while
    open, for a module's no-secrets check."""
    root = logging.getLogger()
    level = root.level
    buffer = io.StringIO()
    handler = configure_logging(LogFormat.TEXT, logging.DEBUG, stream=buffer)
    try:
        yield buffer
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def renamed(spec: InferenceCluster, name: str) -> InferenceCluster:
    return spec.model_copy(update={"metadata": spec.metadata.model_copy(update={"name": name})})


@contextlib.asynccontextmanager
async def cloud_environment(
    state: Path,
    *,
    stack_source: str | None = None,
    stockouts: dict[str, list[dict[str, str]]] | None = None,
) -> AsyncIterator[CloudStack]:
    """``stockouts``: per cloud, the zones out of capacity from the start (``SimulatedClouds``)."""
    server = await start_dev_server(state / "temporal", ui=False)
    stop = asyncio.Event()
    saved = dict(os.environ)
    try:
        client = await connect(TemporalSettings(address=server.address))
        async with SimulatedFleet.start([], [], state_dir=state / "sim") as fleet:
            clouds = await SimulatedClouds.start(
                CLASSES, fleet.server, state_dir=state / "cloud", stockouts=stockouts
            )
            os.environ.update(clouds.worker_env())
            os.environ["MODELFLEET_CLOUD_POLL_SECONDS"] = "0.2"
            if stack_source is not None:
                os.environ["MODELFLEET_STACK_SOURCE"] = stack_source
            credentials = state / "worker-credentials"
            credentials.mkdir()
            worker = asyncio.create_task(run_worker(client, credentials, stop))
            await ensure_fleet(client)
            for klass in CLASSES.values():
                await apply_resource(client, klass)
            try:
                yield CloudStack(client, clouds, fleet, credentials, state)
            finally:
                stop.set()
                await worker
                await clouds.stop()
    finally:
        os.environ.clear()
        os.environ.update(saved)
        server.stop()
