"""The worker process: three task queues, the Kubernetes and Fleet activities built with their
adapters, bounded concurrency, structured activity logs (``worker.interceptor``) and a graceful
shutdown.

Slot layout: the main queue (``TASK_QUEUE``) runs every workflow type and all activities; the
Fleet's own queue (``fleet_task_queue``) runs only the Fleet and RolloutSlots workflows and the
``fleet.*`` activities, with its own workflow-task and activity slots, so a rollout's hundreds of
workflow tasks and Kubernetes calls never queue in front of a placement or a slot's grant. The
Fleet stays registered on the main queue too: a Fleet started before the split keeps running
there until it is restarted.
The health watches' queue (``watch_task_queue``) runs only ``serving.watch_health``, one
long-running activity per ModelService, with slots of its own.
Which activities may wait long and how they keep from holding slots: docs/fleet.md.

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
from temporalio.worker import Worker, WorkerDeploymentConfig

from modelfleet.activities.autoscaler import AutoscalerActivities
from modelfleet.activities.caches import CacheActivities
from modelfleet.activities.catalog import CatalogActivities
from modelfleet.activities.cloud import CloudActivities
from modelfleet.activities.fleet_updates import FleetActivities
from modelfleet.activities.kube_ops import KubeActivities, KubeconfigStore
from modelfleet.activities.serving import ServingActivities
from modelfleet.activities.stack import StackActivities
from modelfleet.adapters.cloud_config import CloudSettings
from modelfleet.adapters.temporal_updates import ProcessCount, UpdateShare, polling_processes
from modelfleet.admission.workflow import RolloutSlotsWorkflow
from modelfleet.contracts.activity_names import TASK_QUEUE
from modelfleet.contracts.health_watch import watch_task_queue
from modelfleet.contracts.ids import FLEET_ID, ROLLOUT_SLOTS_ID
from modelfleet.fleet.mirror import FleetMirror
from modelfleet.fleet.workflow import FleetWorkflow
from modelfleet.worker.entities import entity_workflows
from modelfleet.worker.interceptor import ActivityLogInterceptor
from modelfleet.worker.tuning import Tuning

log = logging.getLogger(__name__)

WORKFLOWS = entity_workflows()
GRACEFUL_SHUTDOWN = timedelta(seconds=10)
# The Fleet processes one workflow task at a time anyway; a few slots cover its queries.
FLEET_WORKFLOW_TASK_SLOTS = 4
FLEET_ACTIVITY_SLOTS = 16
# Health watches (one per ModelService, each running up to its bound: async, mostly asleep).
WATCH_ACTIVITY_SLOTS = 1000


def fleet_task_queue(task_queue: str = TASK_QUEUE) -> str:
    """The Fleet workflow's own task queue, next to ``task_queue``."""
    return f"{task_queue}-fleet"


async def ensure_fleet(
    client: Client, task_queue: str = TASK_QUEUE, *, tuning: Tuning | None = None
) -> None:
    """Start the singleton Fleet workflow (on its own task queue) unless it is already running;
    a new one takes its NotReady grace from ``tuning`` (default: the environment's)."""
    await client.start_workflow(
        FleetWorkflow.run,
        (tuning or Tuning.from_env()).fleet_input(),
        id=FLEET_ID,
        task_queue=fleet_task_queue(task_queue),
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        static_summary="Fleet: class catalog, cluster capacity and the allocation ledger",
    )
    await ensure_rollout_slots(client, task_queue, tuning=tuning)


async def ensure_rollout_slots(
    client: Client, task_queue: str = TASK_QUEUE, *, tuning: Tuning | None = None
) -> None:
    """Start the RolloutSlots workflow (the fleet-wide rollout bound, on the Fleet's queue)
    unless it runs; with the bound set in ``tuning`` (a worker's environment), a running one
    takes it too. An ``apply`` with nothing set leaves a running one as it is."""
    tuning = tuning or Tuning.from_env()
    settings = tuning.slot_settings()
    await client.start_workflow(
        RolloutSlotsWorkflow.run,
        tuning.slots_input(),
        id=ROLLOUT_SLOTS_ID,
        task_queue=fleet_task_queue(task_queue),
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        static_summary="RolloutSlots: how many deployments roll out at once",
        start_signal="configure" if settings is not None else None,
        start_signal_args=[settings] if settings is not None else [],
    )


def build_worker(
    client: Client,
    credentials_dir: Path,
    *,
    task_queue: str = TASK_QUEUE,
    max_concurrent_activities: int = 32,
    executor: ThreadPoolExecutor | None = None,
    fleet: FleetActivities | None = None,
    serving: ServingActivities | None = None,
    versioning: WorkerDeploymentConfig | None = None,
) -> tuple[Worker, KubeActivities]:
    kube = KubeActivities(KubeconfigStore(credentials_dir))
    fleet = fleet or FleetActivities(client, copy=FleetMirror())
    scaler = AutoscalerActivities(client, KubeconfigStore(credentials_dir))
    serving = serving or ServingActivities(client, credentials_dir)
    # Cloud endpoints and credentials come from the worker's environment (adapters.cloud_config).
    cloud = CloudActivities(CloudSettings.from_env(credentials_dir))
    catalog = CatalogActivities(client)
    # The serving stack's manifests come from MODELFLEET_STACK_SOURCE (a URL or a directory).
    stack = StackActivities(KubeconfigStore(credentials_dir))
    caches = CacheActivities(client, kube.client_for, credentials_dir)
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=WORKFLOWS,
        activities=[
            kube.apply,
            kube.delete,
            kube.poll_ready,
            kube.check_ready,
            kube.drift,
            kube.replicas_found,
            kube.scan_replicas,
            kube.sweep_replicas,
            kube.probe,
            fleet.place,
            fleet.dry_place,
            fleet.release,
            fleet.publish_cluster,
            fleet.replicas_on,
            fleet.replicas_by_pool,
            fleet.sweep_pending,
            *(scaler.target, scaler.read_metrics, scaler.scale, scaler.gateway_waiting),
            scaler.engine_errors,
            scaler.engine_figures,
            serving.publish_replica,
            serving.withdraw,
            serving.watch,
            serving.unwatch,
            serving.gateway_address,
            serving.check_models,
            serving.routes_carrying,
            serving.sync_api_keys,
            serving.sync_provider_tokens,
            serving.remove_global_address,
            catalog.classes,
            stack.verify,
            stack.install,
            stack.check_access,
            *cloud.all(),
            fleet.placement_current,
            *(caches.observe, caches.stage, caches.clean),
            *(caches.targets, caches.report, caches.readiness),
        ],
        activity_executor=executor or ThreadPoolExecutor(max_concurrent_activities),
        max_concurrent_activities=max_concurrent_activities,
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
        interceptors=[ActivityLogInterceptor()],
        deployment_config=versioning,
    )
    return worker, kube


def build_fleet_worker(
    client: Client,
    *,
    task_queue: str = TASK_QUEUE,
    fleet: FleetActivities | None = None,
    versioning: WorkerDeploymentConfig | None = None,
) -> Worker:
    """The worker of the Fleet's own queue: the Fleet workflow and the ``fleet.*`` activities
    (for callers that route them there), with slots of their own. Pass the main worker's
    ``fleet`` activities so the process keeps one bound on its Updates to the Fleet."""
    fleet = fleet or FleetActivities(client, copy=FleetMirror())
    return Worker(
        client,
        task_queue=fleet_task_queue(task_queue),
        workflows=[FleetWorkflow, RolloutSlotsWorkflow],
        activities=[
            fleet.place,
            fleet.dry_place,
            fleet.release,
            fleet.publish_cluster,
            fleet.replicas_on,
            fleet.replicas_by_pool,
            fleet.placement_current,
        ],
        max_concurrent_workflow_tasks=FLEET_WORKFLOW_TASK_SLOTS,
        max_concurrent_activities=FLEET_ACTIVITY_SLOTS,
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
        interceptors=[ActivityLogInterceptor()],
        deployment_config=versioning,
    )


def build_watch_worker(
    client: Client,
    serving: ServingActivities,
    *,
    task_queue: str = TASK_QUEUE,
    versioning: WorkerDeploymentConfig | None = None,
) -> Worker:
    """The worker of the health watches' queue (``watch_task_queue``): only
    ``serving.watch_health``, which holds its slot for as long as it watches (minutes), so it
    has slots of its own and a thousand services never starve the main queue's activities."""
    return Worker(
        client,
        task_queue=watch_task_queue(task_queue),
        activities=[serving.watch_health],
        max_concurrent_activities=WATCH_ACTIVITY_SLOTS,
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
        interceptors=[ActivityLogInterceptor()],
        deployment_config=versioning,
    )


async def run_worker(
    client: Client,
    credentials_dir: Path,
    stop: asyncio.Event,
    *,
    task_queue: str = TASK_QUEUE,
    max_concurrent_activities: int = 32,
    tuning: Tuning | None = None,
    versioning: WorkerDeploymentConfig | None = None,
) -> None:
    """Run until ``stop`` is set, then shut down gracefully. ``versioning``: the worker
    deployment version both workers run as (``worker.versioning``); None, unversioned."""
    await ensure_fleet(client, task_queue, tuning=tuning)
    # One FleetActivities for both workers: one bound on this process's Updates to the Fleet,
    # and with the directory's, a share of the server's limit that follows how many worker
    # processes poll the Fleet's queue (issue 22 item 7: 4 processes stay under it together).
    processes = ProcessCount(lambda: polling_processes(client, fleet_task_queue(task_queue)))
    fleet = FleetActivities(client, copy=FleetMirror(), share=UpdateShare(count=processes))
    serving = ServingActivities(client, credentials_dir, share=UpdateShare(count=processes))
    worker, kube = build_worker(
        client,
        credentials_dir,
        task_queue=task_queue,
        max_concurrent_activities=max_concurrent_activities,
        fleet=fleet,
        serving=serving,
        versioning=versioning,
    )
    fields = {
        "task_queue": task_queue,
        "max_concurrent_activities": max_concurrent_activities,
        "workflows": [w.__name__ for w in WORKFLOWS],
        "identity": client.identity,
        "credentials_dir": str(credentials_dir),
    }
    if versioning is not None:
        fields["worker_deployment_version"] = str(versioning.version)
    fleet_worker = build_fleet_worker(
        client, task_queue=task_queue, fleet=fleet, versioning=versioning
    )
    fields["fleet_task_queue"] = fleet_task_queue(task_queue)
    watch_worker = build_watch_worker(client, serving, task_queue=task_queue, versioning=versioning)
    fields["watch_task_queue"] = watch_task_queue(task_queue)
    try:
        async with worker, fleet_worker, watch_worker:
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
