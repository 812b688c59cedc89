"""The activities a ModelService workflow runs, one function each: watching the endpoint
directory, watching its endpoints' health (a long-running activity on a queue of its own),
syncing keys and provider tokens, applying and deleting a front door's objects, asking a gateway
for its address, and removing the global address. Workflow code (it runs inside the
ServiceWorkflow's sandbox): it may touch ``temporalio.workflow`` and the contracts' payloads and
activity names; it decides nothing and holds no state (the workflow does both).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityCancellationType, ActivityHandle

with workflow.unsafe.imports_passed_through():
    from modelfleet.api.naming import workload_namespace
    from modelfleet.api.services import GlobalAddress, ModelService
    from modelfleet.contracts.activity_names import KUBE_APPLY, KUBE_DELETE, KUBE_HEARTBEAT_SECONDS
    from modelfleet.contracts.error_types import (
        MISSING_CREDENTIALS,
        MISSING_SECRET,
        PERMANENT_KUBE_ERROR,
    )
    from modelfleet.contracts.health_watch import (
        SERVING_WATCH_HEALTH,
        HealthWatchRequest,
        HealthWatchResult,
        watch_task_queue,
    )
    from modelfleet.contracts.kube_payloads import (
        ApplyRequest,
        ApplyResult,
        DeleteRequest,
        DeleteResult,
        ObjectRef,
    )
    from modelfleet.contracts.serving_payloads import (
        ENDPOINTS_UNWATCH,
        ENDPOINTS_WATCH,
        SERVING_GATEWAY_ADDRESS,
        SERVING_REMOVE_GLOBAL_ADDRESS,
        SERVING_SYNC_KEYS,
        SERVING_SYNC_PROVIDER_TOKENS,
        GatewayAddressRequest,
        GlobalAddressRemoval,
        ProviderTokensRequest,
        SyncKeysRequest,
        WatchRequest,
        WatchResult,
    )
    from modelfleet.rendering.front_door import api_keys_secret_name

__all__ = [
    "RETRY",
    "apply_door",
    "delete_objects",
    "gateway_authority",
    "remove_global",
    "sync_keys",
    "sync_provider_tokens",
    "unwatch",
    "watch",
    "watch_health",
]

RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=10),
    non_retryable_error_types=[PERMANENT_KUBE_ERROR, MISSING_CREDENTIALS, MISSING_SECRET],
)
# How long a reconcile waits for one front door's calls (its route, keys, address), retries
# included: about one try against a cluster that does not answer (the Kubernetes client's 15 s)
# and a second that fails fast. The doors are applied together and the health watch waits for
# them: a door whose cluster went dark before the global load balancer saw it kept the loop
# (and so the door's own "Out") waiting for 3 minutes of retries. A door that runs out of it
# is recorded failed and applied again on the next reconcile, one probe interval later.
DOOR_CALL_BOUND = timedelta(seconds=20)


async def watch(spec: ModelService) -> WatchResult:
    result: WatchResult = await workflow.execute_activity(
        ENDPOINTS_WATCH,
        WatchRequest(
            watcher=workflow.info().workflow_id,
            namespace=spec.namespace,
            entries=spec.spec.endpoints,
        ),
        result_type=WatchResult,
        start_to_close_timeout=timedelta(seconds=30),
        retry_policy=RETRY,
        summary="watch endpoints",
    )
    return result


async def unwatch() -> None:
    await workflow.execute_activity(
        ENDPOINTS_UNWATCH,
        workflow.info().workflow_id,
        start_to_close_timeout=timedelta(seconds=30),
        schedule_to_close_timeout=timedelta(minutes=2),
        retry_policy=RETRY,
        summary="stop watching endpoints",
    )


def watch_health(request: HealthWatchRequest) -> ActivityHandle[HealthWatchResult]:
    """The service's health watch (``contracts.health_watch``), on the watches' own queue.
    Retried without limit: it is level-triggered (a retry probes at once and compares against
    what the workflow holds), so a worker killed mid-watch costs a heartbeat timeout, never a
    change. A cancelled watch is left to notice on its own (the endpoint set changed: the
    workflow starts the next watch at once), but its handle resolves only once it has stopped,
    so the workflow can wait for that before it removes the global address the watch keeps in
    place (``ServiceWorkflow._stopped_watch``)."""
    targets = len(request.targets)
    # A round probes every target (two attempts each at worst); the bound comes on top.
    round_seconds = 2 * request.timeout_seconds * request.attempts * max(1, targets)
    return workflow.start_activity(
        SERVING_WATCH_HEALTH,
        request,
        result_type=HealthWatchResult,
        task_queue=watch_task_queue(workflow.info().task_queue),
        start_to_close_timeout=timedelta(
            seconds=request.max_seconds + request.interval_seconds + round_seconds + 60
        ),
        heartbeat_timeout=timedelta(seconds=10 + 2 * request.timeout_seconds),
        retry_policy=RetryPolicy(
            initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10)
        ),
        cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        summary=f"watch {targets} endpoint(s)",
    )


async def sync_keys(cluster: str, spec: ModelService, source: str) -> None:
    await workflow.execute_activity(
        SERVING_SYNC_KEYS,
        SyncKeysRequest(
            cluster=cluster,
            namespace=workload_namespace(spec.namespace),
            secret=api_keys_secret_name(spec.name),
            source_secret=source,
            service=spec.name,
        ),
        result_type=int,
        start_to_close_timeout=timedelta(seconds=60),
        schedule_to_close_timeout=DOOR_CALL_BOUND,
        retry_policy=RETRY,
        summary="sync API key hashes",
    )


async def sync_provider_tokens(
    cluster: str, namespace: str, service: str, tokens: dict[str, str]
) -> None:
    await workflow.execute_activity(
        SERVING_SYNC_PROVIDER_TOKENS,
        ProviderTokensRequest(cluster=cluster, namespace=namespace, service=service, tokens=tokens),
        result_type=int,
        start_to_close_timeout=timedelta(seconds=60),
        schedule_to_close_timeout=DOOR_CALL_BOUND,
        retry_policy=RETRY,
        summary=f"sync {len(tokens)} provider key(s)",
    )


async def apply_door(cluster: str, manifests: list[dict[str, Any]], backends: int) -> None:
    await workflow.execute_activity(
        KUBE_APPLY,
        ApplyRequest(cluster=cluster, manifests=manifests),
        result_type=ApplyResult,
        start_to_close_timeout=timedelta(seconds=60),
        heartbeat_timeout=timedelta(seconds=KUBE_HEARTBEAT_SECONDS),
        schedule_to_close_timeout=DOOR_CALL_BOUND,
        retry_policy=RETRY,
        summary=f"front door: {backends} backend(s)",
    )


async def delete_objects(cluster: str, refs: list[ObjectRef]) -> None:
    await workflow.execute_activity(
        KUBE_DELETE,
        DeleteRequest(cluster=cluster, objects=list(reversed(refs))),
        result_type=DeleteResult,
        start_to_close_timeout=timedelta(seconds=60),
        heartbeat_timeout=timedelta(seconds=KUBE_HEARTBEAT_SECONDS),
        schedule_to_close_timeout=timedelta(minutes=5),
        retry_policy=RETRY,
        summary=f"remove {len(refs)} front-door object(s)",
    )


async def gateway_authority(cluster: str) -> str:
    authority: str = await workflow.execute_activity(
        SERVING_GATEWAY_ADDRESS,
        GatewayAddressRequest(cluster=cluster),
        result_type=str,
        start_to_close_timeout=timedelta(seconds=30),
        schedule_to_close_timeout=DOOR_CALL_BOUND,
        retry_policy=RETRY,
        summary="front door address",
    )
    return authority


async def remove_global(spec: ModelService, settings: GlobalAddress) -> None:
    await workflow.execute_activity(
        SERVING_REMOVE_GLOBAL_ADDRESS,
        GlobalAddressRemoval(namespace=spec.namespace, service=spec.name, settings=settings),
        result_type=int,
        start_to_close_timeout=timedelta(seconds=60),
        schedule_to_close_timeout=timedelta(minutes=3),
        retry_policy=RETRY,
        summary="remove global address",
    )
