"""The activities a ModelService workflow runs, one function each: watching the endpoint
directory, probing endpoints, syncing keys and provider tokens, applying and deleting a front
door's objects, asking a gateway for its address, and putting in place or removing the global
address. Workflow code (it runs inside the ServiceWorkflow's sandbox): it may touch
``temporalio.workflow`` and the contracts' payloads and activity names; it decides nothing and
holds no state (the workflow does both).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from modelfleet.api.naming import workload_namespace
    from modelfleet.api.services import GlobalAddress, ModelService
    from modelfleet.contracts.activity_names import KUBE_APPLY, KUBE_DELETE, KUBE_HEARTBEAT_SECONDS
    from modelfleet.contracts.error_types import (
        MISSING_CREDENTIALS,
        MISSING_SECRET,
        PERMANENT_KUBE_ERROR,
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
        SERVING_PROBE,
        SERVING_REMOVE_GLOBAL_ADDRESS,
        SERVING_SYNC_GLOBAL_ADDRESS,
        SERVING_SYNC_KEYS,
        SERVING_SYNC_PROVIDER_TOKENS,
        EndpointHealth,
        GatewayAddressRequest,
        GlobalAddressRemoval,
        GlobalAddressRequest,
        GlobalAddressResult,
        ProbeEndpointsRequest,
        ProbeTarget,
        ProviderTokensRequest,
        SyncKeysRequest,
        WatchRequest,
        WatchResult,
    )
    from modelfleet.rendering.front_door import EndpointRecord, api_keys_secret_name

__all__ = [
    "RETRY",
    "apply_door",
    "delete_objects",
    "gateway_authority",
    "probe",
    "remove_global",
    "sync_global",
    "sync_keys",
    "sync_provider_tokens",
    "unwatch",
    "watch",
]

RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=10),
    non_retryable_error_types=[PERMANENT_KUBE_ERROR, MISSING_CREDENTIALS, MISSING_SECRET],
)


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


async def probe(endpoints: Sequence[EndpointRecord], probe_timeout: float) -> list[EndpointHealth]:
    """Each endpoint's health; all unhealthy, with the reason, when the probe itself failed."""
    targets = [ProbeTarget(key=e.key, url=e.url, auth_secret=e.auth_secret) for e in endpoints]
    try:
        results: list[EndpointHealth] = await workflow.execute_activity(
            SERVING_PROBE,
            ProbeEndpointsRequest(targets=targets, timeout_seconds=probe_timeout),
            result_type=list[EndpointHealth],
            start_to_close_timeout=timedelta(seconds=30 + 2 * probe_timeout * len(targets)),
            heartbeat_timeout=timedelta(seconds=10 + 2 * probe_timeout),
            retry_policy=RetryPolicy(maximum_attempts=2),
            summary=f"probe {len(targets)} endpoint(s)",
        )
    except ActivityError as exc:
        reason = f"probe failed: {exc.cause or exc}"
        results = [EndpointHealth(key=t.key, healthy=False, reason=reason) for t in targets]
    return results


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
        schedule_to_close_timeout=timedelta(minutes=3),
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
        schedule_to_close_timeout=timedelta(minutes=3),
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
        schedule_to_close_timeout=timedelta(minutes=3),
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
        schedule_to_close_timeout=timedelta(minutes=2),
        retry_policy=RETRY,
        summary="front door address",
    )
    return authority


async def sync_global(
    spec: ModelService, clusters: list[str], settings: GlobalAddress
) -> GlobalAddressResult:
    result: GlobalAddressResult = await workflow.execute_activity(
        SERVING_SYNC_GLOBAL_ADDRESS,
        GlobalAddressRequest(
            namespace=spec.namespace,
            service=spec.name,
            clusters=clusters,
            settings=settings,
            auth=spec.spec.auth is not None,
        ),
        result_type=GlobalAddressResult,
        # Short: it runs every round, before the doors' applies, and an API outage must
        # not hold them up (the balancer keeps serving with what it has meanwhile).
        start_to_close_timeout=timedelta(seconds=15),
        schedule_to_close_timeout=timedelta(seconds=20),
        retry_policy=RetryPolicy(maximum_attempts=2),
        summary="global address",
    )
    return result


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
