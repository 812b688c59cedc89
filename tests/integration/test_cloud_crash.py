"""A worker SIGKILLed in the middle of each provisioning step (the cloud cluster's operation,
then the first pool's) and restarted, on GKE, EKS and AKS: provisioning completes with exactly
one cluster and one node pool / node group / agent pool per entry. The worker is a separate
``modelfleet worker`` process reaching the simulated clouds through its environment, as in
production."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass

import boto3
import pytest
import pytest_asyncio
import yaml
from cloud_support import CLASSES, CLUSTERS, renamed
from crash_env import CrashEnv, register_fleet, tolerant
from integration_support import wait_for
from temporalio.api.enums.v1 import EventType

from modelfleet.cluster.state import ClusterInput
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.ids import cluster_id
from modelfleet.contracts.status import ClusterStatus
from modelfleet.sim.clouds.clouds import SimulatedClouds
from modelfleet.sim.simulated_fleet import SimulatedFleet
from modelfleet.worker.client import connect
from modelfleet.worker.devserver import free_port
from modelfleet.worker.settings import TemporalSettings

# Long enough operations that the kill lands inside them (0.2 s per poll).
SLOW_POLLS = 15
# Each case waits up to 240 s for the restarted worker to finish provisioning (about 20 s alone;
# minutes on a loaded 2-core machine): the test's own limit is past that wait, so a slow run
# fails with the wait's message, not the suite's 240 s guard.
pytestmark = pytest.mark.timeout(360)


@dataclass
class CloudCrash:
    env: CrashEnv
    clouds: SimulatedClouds


@pytest_asyncio.fixture(scope="module")
async def crash(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CloudCrash]:
    state = tmp_path_factory.mktemp("cloud-crash")
    port = free_port()
    settings = TemporalSettings(address=f"127.0.0.1:{port}")
    async with SimulatedFleet.start([], [], state_dir=state / "sim") as fleet:
        clouds = await SimulatedClouds.start(CLASSES, fleet.server, state_dir=state / "cloud")
        worker_env = {
            k: v for k, v in os.environ.items() if not k.startswith(("MODELFLEET_", "TEMPORAL_"))
        }
        worker_env.update(clouds.worker_env())
        worker_env.update({"MODELFLEET_CLOUD_POLL_SECONDS": "0.2", "PYTHONUNBUFFERED": "1"})
        env = CrashEnv(state, fleet, port, settings, worker_env)
        try:
            await env.start_server()
            env.client = await connect(settings)
            await env.start_worker()
            await register_fleet(env.client, CLASSES.values())
            yield CloudCrash(env, clouds)
        finally:
            try:
                await env.kill_worker()
            finally:
                await env.stop_server()
                await clouds.stop()


async def _status(env: CrashEnv, name: str) -> ClusterStatus | None:
    async def query() -> ClusterStatus:
        handle = env.temporal.get_workflow_handle(cluster_id(name))
        status: ClusterStatus = await handle.query(ClusterWorkflow.status)
        return status

    return await tolerant(query)


# (source, step, the fake's record of the step's cloud call, the activity carrying it)
STEPS = [
    ("gke", "cluster", "createCluster crash-gke-cluster", "gke.create_cluster"),
    ("gke", "pool", "createNodePool gpu-h100", "gke.create_node_pool"),
    ("eks", "cluster", "CreateCluster crash-eks-cluster", "eks.create_cluster"),
    ("eks", "pool", "CreateNodegroup crash-eks-pool/gpu-h200", "eks.create_nodegroup"),
    ("aks", "cluster", "ManagedClusters_CreateOrUpdate crash-aks-cluster", "aks.create_cluster"),
    ("aks", "pool", "AgentPools_CreateOrUpdate gpuh100", "aks.create_agent_pool"),
]
EXAMPLE = {"gke": "gke-central", "eks": "eks-east", "aks": "aks-east"}


async def _attempts(env: CrashEnv, name: str, activity: str) -> int:
    """The attempt number the step's activity finished on (1: never interrupted)."""
    history = await env.temporal.get_workflow_handle(cluster_id(name)).fetch_history()
    scheduled = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    return max(
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and scheduled[e.activity_task_started_event_attributes.scheduled_event_id] == activity
    )


@pytest.mark.parametrize(("source", "step", "call", "activity"), STEPS)
async def test_worker_killed_mid_step_then_restarted_provisions_exactly_once(
    crash: CloudCrash, source: str, step: str, call: str, activity: str
) -> None:
    env, clouds = crash.env, crash.clouds
    fake = {"gke": clouds.gke, "eks": clouds.eks, "aks": clouds.aks}[source]
    name = f"crash-{source}-{step}"
    spec = renamed(CLUSTERS[EXAMPLE[source]], name)
    clouds.gke.polls = clouds.eks.polls = clouds.aks.polls = SLOW_POLLS
    before = len(fake.calls)
    await env.temporal.start_workflow(
        ClusterWorkflow.run,
        ClusterInput.of(spec, cloud_heartbeat_seconds=3),
        id=cluster_id(name),
        task_queue="modelfleet",
    )

    async def in_step() -> bool | None:
        return True if any(c.startswith(call) for c in fake.calls[before:]) else None

    await wait_for(in_step, 60, f"the worker to be inside {call}")
    await env.kill_worker()
    assert env.worker is not None
    assert env.worker.returncode == -9
    clouds.gke.polls = clouds.eks.polls = clouds.aks.polls = 2
    await env.start_worker()

    async def ready() -> ClusterStatus | None:
        status = await _status(env, name)
        return status if status is not None and status.phase == "Ready" else None

    status = await wait_for(ready, 240, f"{name} to be Ready after the restart")
    pool = spec.spec.node_pools[0].name
    assert status.observed_pools[pool].ready_nodes == spec.spec.node_pools[0].node_count
    if source == "gke":
        assert clouds.gke.cluster_names().count(name) == 1
        assert clouds.gke.pool_names(name) == [pool, "system"]
    elif source == "aks":
        assert clouds.aks.cluster_names().count(name) == 1
        assert clouds.aks.pool_names(name) == [pool, "system"]
        # The retry found its own resource and waited on it: each was asked for once.
        calls = clouds.aks.calls[before:]
        assert calls.count(f"ManagedClusters_CreateOrUpdate {name}") == 1
        assert calls.count(f"AgentPools_CreateOrUpdate {pool}") == 1
    else:
        eks = boto3.client(
            "eks",
            endpoint_url=clouds.eks_url,
            region_name="us-east-2",
            aws_access_key_id=env.worker_env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env.worker_env["AWS_SECRET_ACCESS_KEY"],
        )
        # Off the event loop: the simulated clouds answer from it.
        clusters = await asyncio.to_thread(eks.list_clusters)
        groups = await asyncio.to_thread(eks.list_nodegroups, clusterName=name)
        assert name in clusters["clusters"]
        assert sorted(groups["nodegroups"]) == [pool, "system"]
    # The kill really interrupted the step: it finished on a retry, on the restarted worker.
    assert await _attempts(env, name, activity) >= 2


async def test_worker_killed_while_writing_the_kubeconfig_then_restarted(
    crash: CloudCrash,
) -> None:
    """The kill lands inside the kubeconfig step (its cloud read held open): on restart the step
    is retried, the cluster is not created again, and the kubeconfig is whole."""
    env, clouds = crash.env, crash.clouds
    name = "crash-gke-kubeconfig"
    spec = renamed(CLUSTERS["gke-central"], name)
    clouds.gke.polls = 2
    gate = asyncio.Event()
    clouds.gke.stall[f"getCluster {name}"] = gate
    before = len(clouds.gke.calls)
    try:
        await env.temporal.start_workflow(
            ClusterWorkflow.run,
            ClusterInput.of(spec, cloud_heartbeat_seconds=3),
            id=cluster_id(name),
            task_queue="modelfleet",
        )

        async def in_step() -> bool | None:
            return True if f"getCluster {name}" in clouds.gke.calls[before:] else None

        await wait_for(in_step, 60, "the worker to be inside the kubeconfig step")
        await env.kill_worker()
        assert env.worker is not None
        assert env.worker.returncode == -9
    finally:
        clouds.gke.stall.clear()
        gate.set()
    await env.start_worker()

    async def ready() -> ClusterStatus | None:
        status = await _status(env, name)
        return status if status is not None and status.phase == "Ready" else None

    await wait_for(ready, 240, f"{name} to be Ready after the restart")
    assert clouds.gke.cluster_names().count(name) == 1
    assert clouds.gke.calls[before:].count(f"createCluster {name}") == 1
    assert clouds.gke.pool_names(name) == ["gpu-h100", "system"]
    kubeconfig = env.credentials_dir / f"{name}.yaml"
    doc = yaml.safe_load(kubeconfig.read_text())
    assert doc["current-context"] == name
    assert doc["users"][0]["user"]["token"]
    assert not list(env.credentials_dir.glob(f"{name}*.tmp")), "no half-written file left"
    assert await _attempts(env, name, "gke.write_kubeconfig") >= 2
