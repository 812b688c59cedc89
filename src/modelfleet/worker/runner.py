"""The worker process: one task queue, every workflow type, the Kubernetes and Fleet activities
built with their adapters, bounded concurrency, structured activity logs (``worker.interceptor``)
and a graceful shutdown.

The worker is where credentials live: kubeconfigs are read from its credentials directory by
the activities, never shipped through Temporal.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.worker import Worker

from modelfleet.activities.fleet_updates import FleetActivities
from modelfleet.activities.kube_ops import KubeActivities, KubeconfigStore
from modelfleet.contracts.activity_names import TASK_QUEUE
from modelfleet.contracts.workflow_inputs import FleetInput
from modelfleet.worker.interceptor import ActivityLogInterceptor
from modelfleet.workflows.cluster import ClusterWorkflow
from modelfleet.workflows.deployment import DeploymentWorkflow
from modelfleet.workflows.fleet import FleetWorkflow
from modelfleet.workflows.ids import FLEET_ID
from modelfleet.workflows.replica import ReplicaWorkflow

log = logging.getLogger(__name__)

WORKFLOWS = [FleetWorkflow, DeploymentWorkflow, ReplicaWorkflow, ClusterWorkflow]
GRACEFUL_SHUTDOWN = timedelta(seconds=10)


async def ensure_fleet(client: Client, task_queue: str = TASK_QUEUE) -> None:
    """Start the singleton Fleet workflow unless it is already running."""
    await client.start_workflow(
        FleetWorkflow.run,
        FleetInput(),
        id=FLEET_ID,
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        static_summary="Fleet: class catalog, cluster capacity and the allocation ledger",
    )


def build_worker(
    client: Client,
    credentials_dir: Path,
    *,
    task_queue: str = TASK_QUEUE,
    max_concurrent_activities: int = 32,
    executor: ThreadPoolExecutor | None = None,
) -> tuple[Worker, KubeActivities]:
    kube = KubeActivities(KubeconfigStore(credentials_dir))
    fleet = FleetActivities(client)
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=WORKFLOWS,
        activities=[
            kube.apply,
            kube.delete,
            kube.wait_ready,
            kube.check_ready,
            kube.probe,
            fleet.place,
            fleet.dry_place,
            fleet.release,
            fleet.publish_cluster,
            fleet.replicas_on,
        ],
        activity_executor=executor or ThreadPoolExecutor(max_concurrent_activities),
        max_concurrent_activities=max_concurrent_activities,
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
        interceptors=[ActivityLogInterceptor()],
    )
    return worker, kube


async def run_worker(
    client: Client,
    credentials_dir: Path,
    stop: asyncio.Event,
    *,
    task_queue: str = TASK_QUEUE,
    max_concurrent_activities: int = 32,
) -> None:
    """Run until ``stop`` is set, then shut down gracefully."""
    await ensure_fleet(client, task_queue)
    worker, kube = build_worker(
        client,
        credentials_dir,
        task_queue=task_queue,
        max_concurrent_activities=max_concurrent_activities,
    )
    fields = {
        "task_queue": task_queue,
        "max_concurrent_activities": max_concurrent_activities,
        "workflows": [w.__name__ for w in WORKFLOWS],
        "identity": client.identity,
        "credentials_dir": str(credentials_dir),
    }
    try:
        async with worker:
            # The wording is relied on by tests/integration/crash_env.py (start detection).
            log.info("worker polling task queue %s", task_queue, extra={"fields": fields})
            await stop.wait()
            log.info(
                "worker stopping: in-flight activities get %d s",
                GRACEFUL_SHUTDOWN.total_seconds(),
                extra={"fields": {"task_queue": task_queue}},
            )
    finally:
        kube.close()
        log.info("worker stopped", extra={"fields": {"task_queue": task_queue}})
