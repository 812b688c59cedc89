"""How each kind is applied and deleted from the CLI: the ``apply``, ``delete`` and ``exists``
hooks that ``cli.kinds``' specs name (update-with-start on the kind's workflow, its delete
Update, or the AcceptedResource workflow for kinds held without action)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowUpdateStage

from modelfleet.accepted.state import AcceptedDocument, AcceptedInput
from modelfleet.accepted.workflow import AcceptedResourceWorkflow
from modelfleet.api.autoscalers import ModelAutoscaler
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.meta import Resource
from modelfleet.autoscaler.workflow import AutoscalerWorkflow, autoscaler_id
from modelfleet.cache.state import CacheInput
from modelfleet.cache.workflow import CacheWorkflow
from modelfleet.cli import resources
from modelfleet.cli.autoscaler import apply_autoscaler
from modelfleet.cli.clusters import delete_cluster, fetch_clusters
from modelfleet.cli.entities import delete_entity, update_with_start
from modelfleet.cli.manifests import Fetched
from modelfleet.cli.serving import apply_serving, delete_serving
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.cache_payloads import DeleteCache
from modelfleet.contracts.ids import (
    FLEET_ID,
    accepted_id,
    cache_id,
    cluster_id,
    deployment_id,
)
from modelfleet.deployment.workflow import DeploymentInput, DeploymentWorkflow
from modelfleet.fleet.workflow import FleetWorkflow
from modelfleet.worker.tuning import Tuning


def entity_apply(workflow: Any, input_of: Callable[[Any], Any], workflow_id: Any) -> Any:
    """The ``apply`` hook of a kind that follows the entity convention (``cli.kinds.entity_kind``):
    update-with-start of its workflow's ``apply`` Update, the run started with ``input_of``."""

    async def apply(
        client: Client, r: Resource, rpc_timeout: timedelta | None, _: Tuning | None
    ) -> str:
        return await update_with_start(
            client,
            workflow.apply,
            r,
            run=workflow.run,
            run_arg=input_of(r),
            workflow_id=workflow_id(r.namespace, r.name),
            summary=r.ref,
            rpc_timeout=rpc_timeout,
        )

    return apply


def entity_delete(workflow: Any, workflow_id: Any) -> Any:
    """The ``delete`` hook of a kind that follows the entity convention: its workflow's
    ``delete`` Update, then (with ``wait``) the end of the run."""

    async def delete(client: Client, ns: str, name: str, wait: bool, _: bool) -> None:
        handle = client.get_workflow_handle(workflow_id(ns, name))
        await delete_entity(handle, workflow.delete, wait=wait)

    return delete


apply_deployment_kind = entity_apply(
    DeploymentWorkflow, lambda r: DeploymentInput(spec=r), deployment_id
)
apply_cache_kind = entity_apply(CacheWorkflow, CacheInput.of, cache_id)


async def apply_class_kind(
    client: Client, r: InferenceClass, rpc_timeout: timedelta | None, _: Tuning | None
) -> str:
    await client.get_workflow_handle(FLEET_ID).execute_update(
        FleetWorkflow.put_class, r, rpc_timeout=rpc_timeout
    )
    return FLEET_ID


async def apply_cluster_kind(
    client: Client, r: InferenceCluster, rpc_timeout: timedelta | None, tuning: Tuning | None
) -> str:
    return await update_with_start(
        client,
        ClusterWorkflow.apply,
        r,
        run=ClusterWorkflow.run,
        run_arg=(tuning or Tuning.from_env()).cluster_input(r),
        workflow_id=cluster_id(r.name),
        summary=f"InferenceCluster {r.name}",
        rpc_timeout=rpc_timeout,
    )


async def apply_autoscaler_kind(
    client: Client, r: ModelAutoscaler, rpc_timeout: timedelta | None, _: Tuning | None
) -> str:
    return await apply_autoscaler(client, r, rpc_timeout=rpc_timeout)


async def apply_serving_kind(
    client: Client, r: Resource, rpc_timeout: timedelta | None, _: Tuning | None
) -> str:
    return await apply_serving(client, r, rpc_timeout=rpc_timeout)


async def apply_held(client: Client, r: Resource, rpc_timeout: timedelta | None) -> str:
    """Hand a document modelfleet keeps without acting upon to its AcceptedResource workflow."""
    document = r.to_wire()
    return await update_with_start(
        client,
        AcceptedResourceWorkflow.apply,
        AcceptedDocument(document=document),
        run=AcceptedResourceWorkflow.run,
        run_arg=AcceptedInput.of(document),
        workflow_id=accepted_id(r.KIND, r.namespace, r.name),
        summary=f"{r.ref} (accepted, not acted upon)",
        rpc_timeout=rpc_timeout,
    )


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
