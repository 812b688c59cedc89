"""The Temporal side of deleting each kind for the controller's finalizer: each hook returns
once what the resource ran is gone (a deployment's replicas torn down and their capacity
released), or says why it will not delete (a cluster replicas still run on, as ``modelfleet
delete`` without ``--force``). A resource whose workflow no longer runs counts as deleted.

Side effects: Temporal client calls only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from modelfleet.accepted.workflow import AcceptedResourceWorkflow
from modelfleet.api.deployments import ModelReplica
from modelfleet.applying.serving import delete_serving
from modelfleet.autoscaler.workflow import AutoscalerWorkflow, autoscaler_id
from modelfleet.cache.workflow import CacheWorkflow
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.cache_payloads import DeleteCache
from modelfleet.contracts.fleet_payloads import ReplicaPage, ReplicaPageRequest
from modelfleet.contracts.ids import (
    FLEET_ID,
    accepted_id,
    cache_id,
    cluster_id,
    deployment_id,
)
from modelfleet.deployment.workflow import DeploymentWorkflow
from modelfleet.fleet.workflow import FleetWorkflow

# client, namespace, name -> None once gone, else why it is not deleted (yet)
Delete = Callable[[Client, str, str], Awaitable[str | None]]


async def _running(client: Client, workflow_id: str) -> bool:
    try:
        described = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            return False
        raise
    return described.status is WorkflowExecutionStatus.RUNNING


async def _delete_entity(client: Client, workflow_id: str, update: Any, *args: Any) -> None:
    """Send the entity its delete Update and wait for its run to end (nothing when none runs)."""
    if not await _running(client, workflow_id):
        return
    handle = client.get_workflow_handle(workflow_id)
    await handle.execute_update(update, *args)
    await handle.result()


async def delete_deployment(client: Client, namespace: str, name: str) -> str | None:
    # The delete Update returns once no replica is left (capacity released to the Fleet).
    await _delete_entity(client, deployment_id(namespace, name), DeploymentWorkflow.delete)
    return None


async def delete_autoscaler(client: Client, namespace: str, name: str) -> str | None:
    await _delete_entity(client, autoscaler_id(namespace, name), AutoscalerWorkflow.delete)
    return None


async def delete_cache(client: Client, namespace: str, name: str) -> str | None:
    await _delete_entity(
        client, cache_id(namespace, name), CacheWorkflow.delete, DeleteCache(force=False)
    )
    return None


async def delete_service(client: Client, namespace: str, name: str) -> str | None:
    await delete_serving(client, "ModelService", namespace, name, wait=True)
    return None


async def delete_endpoint(client: Client, namespace: str, name: str) -> str | None:
    await delete_serving(client, "ModelEndpoint", namespace, name, wait=True)
    return None


async def delete_class(client: Client, _: str, name: str) -> str | None:
    await client.get_workflow_handle(FLEET_ID).execute_update(FleetWorkflow.remove_class, name)
    return None


async def replicas_on(client: Client, cluster: str) -> list[ModelReplica]:
    """The replicas the Fleet has placed on ``cluster``, page by page."""
    handle = client.get_workflow_handle(FLEET_ID)
    placed: list[ModelReplica] = []
    after: str | None = ""
    while after is not None:
        page: ReplicaPage = await handle.query(
            FleetWorkflow.replica_page, ReplicaPageRequest(after=after, cluster=cluster)
        )
        placed += page.replicas
        after = page.next_after or None
    return placed


def still_runs(cluster: str, replicas: list[ModelReplica]) -> str | None:
    """Why cluster ``cluster`` is not deleted while ``replicas`` run on it (None: it may be).
    The words of ``modelfleet delete`` without ``--force``."""
    if not replicas:
        return None
    names = ", ".join(f"{r.namespace}/{r.name}" for r in replicas)
    return (
        f"inferencecluster.modelfleet.dev/{cluster} still runs {len(replicas)} replica(s): "
        f"{names}; scale or delete their deployments first"
    )


async def delete_cluster(client: Client, _: str, name: str) -> str | None:
    refused = still_runs(name, await replicas_on(client, name))
    if refused:
        return refused
    await _delete_entity(client, cluster_id(name), ClusterWorkflow.delete)
    return None


def delete_held(kind: str) -> Delete:
    async def delete(client: Client, namespace: str, name: str) -> str | None:
        await _delete_entity(
            client, accepted_id(kind, namespace, name), AcceptedResourceWorkflow.delete
        )
        return None

    return delete


# The kinds the controller deletes. An InferenceGateway is not deleted by name (the fleet
# always has a front door): its object goes, the directory keeps the gateway.
DELETERS: dict[str, Delete] = {
    "InferenceClass": delete_class,
    "InferenceCluster": delete_cluster,
    "ModelDeployment": delete_deployment,
    "ModelCache": delete_cache,
    "ModelAutoscaler": delete_autoscaler,
    "ModelService": delete_service,
    "ModelEndpoint": delete_endpoint,
}
