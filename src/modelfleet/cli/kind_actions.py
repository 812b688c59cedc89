"""How each kind is deleted and looked up from the CLI: the ``delete`` and ``exists`` hooks that
``cli.kinds``' specs name (the kind's delete Update, or the AcceptedResource workflow for kinds
held without action). Their ``apply`` hooks are ``applying.kinds``', shared with the
controller."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client, WorkflowUpdateStage

from modelfleet.accepted.workflow import AcceptedResourceWorkflow
from modelfleet.applying.entities import delete_entity
from modelfleet.applying.serving import delete_serving
from modelfleet.autoscaler.workflow import AutoscalerWorkflow, autoscaler_id
from modelfleet.cache.workflow import CacheWorkflow
from modelfleet.cli import resources
from modelfleet.cli.clusters import delete_cluster, fetch_clusters
from modelfleet.cli.manifests import Fetched
from modelfleet.contracts.cache_payloads import DeleteCache
from modelfleet.contracts.ids import (
    FLEET_ID,
    cache_id,
    deployment_id,
)
from modelfleet.deployment.workflow import DeploymentWorkflow
from modelfleet.fleet.workflow import FleetWorkflow


def entity_delete(workflow: Any, workflow_id: Any) -> Any:
    """The ``delete`` hook of a kind that follows the entity convention: its workflow's
    ``delete`` Update, then (with ``wait``) the end of the run."""

    async def delete(client: Client, ns: str, name: str, wait: bool, _: bool) -> None:
        handle = client.get_workflow_handle(workflow_id(ns, name))
        await delete_entity(handle, workflow.delete, wait=wait)

    return delete


async def delete_held(client: Client, workflow_id: str, wait: bool) -> None:
    handle = client.get_workflow_handle(workflow_id)
    await delete_entity(handle, AcceptedResourceWorkflow.delete, wait=wait)


async def delete_deployment_kind(client: Client, ns: str, name: str, wait: bool, _: bool) -> None:
    handle = client.get_workflow_handle(deployment_id(ns, name))
    if wait:
        await delete_entity(handle, DeploymentWorkflow.delete, wait=True)
    else:
        await handle.start_update(
            DeploymentWorkflow.delete, wait_for_stage=WorkflowUpdateStage.ACCEPTED
        )


async def delete_cluster_kind(client: Client, _: str, name: str, wait: bool, force: bool) -> None:
    await delete_cluster(client, name, force=force, wait=wait)


async def delete_class_kind(client: Client, _: str, name: str, wait: bool, force: bool) -> None:
    await client.get_workflow_handle(FLEET_ID).execute_update(FleetWorkflow.remove_class, name)


delete_autoscaler_kind = entity_delete(AutoscalerWorkflow, autoscaler_id)


async def delete_cache_kind(client: Client, ns: str, name: str, wait: bool, force: bool) -> None:
    handle = client.get_workflow_handle(cache_id(ns, name))
    await handle.execute_update(CacheWorkflow.delete, DeleteCache(force=force))
    if wait:
        await handle.result()


async def delete_service_kind(client: Client, ns: str, name: str, wait: bool, _: bool) -> None:
    await delete_serving(client, "ModelService", ns, name, wait=wait)


async def delete_endpoint_kind(client: Client, ns: str, name: str, wait: bool, _: bool) -> None:
    await delete_serving(client, "ModelEndpoint", ns, name, wait=wait)


async def endpoint_exists_kind(client: Client, ns: str, name: str) -> bool:
    return any(
        e.name == name and not e.replica for e in await resources.directory_endpoints(client, ns)
    )


async def class_exists_kind(client: Client, _: str, name: str) -> bool:
    return any(c.name == name for c in await resources.fleet_classes(client))


async def fetch_clusters_kind(client: Client, _: str | None, wanted: set[str]) -> list[Fetched]:
    return await fetch_clusters(client, wanted)
