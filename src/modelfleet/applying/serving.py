"""Applying and deleting the serving kinds: a ModelService is held by its own workflow
(update-with-start, like deployments); ModelEndpoints and the InferenceGateway are records in
the endpoint directory, which pushes every change to the services it concerns.

Side effects: Temporal client calls only.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.client import Client

from modelfleet.api.meta import Resource
from modelfleet.api.services import InferenceGateway, ModelEndpoint, ModelService
from modelfleet.applying.entities import delete_entity, update_with_start
from modelfleet.contracts.ids import service_id
from modelfleet.contracts.serving_payloads import ENDPOINTS_ID, EndpointKey
from modelfleet.rendering.front_door import EndpointRecord
from modelfleet.service.state import ServiceInput
from modelfleet.service.workflow import ServiceWorkflow


async def directory_update(
    client: Client,
    update: str,
    arg: Any,
    result_type: type,
    *,
    rpc_timeout: timedelta | None = None,
) -> Any:
    """``activities.serving.directory_update``, imported on first use: that module loads the
    Kubernetes client, which every other verb would pay for at start-up (about half a second)."""
    from modelfleet.activities.serving import directory_update as update_directory

    return await update_directory(client, update, arg, result_type, rpc_timeout=rpc_timeout)


def endpoint_record(endpoint: ModelEndpoint) -> EndpointRecord:
    ref = endpoint.spec.auth_secret_ref
    return EndpointRecord(
        namespace=endpoint.namespace,
        name=endpoint.name,
        labels=dict(endpoint.metadata.labels),
        url=endpoint.spec.url,
        rewrite_path=endpoint.spec.rewrite_path,
        auth_secret=ref.name if ref else None,
    )


async def apply_serving(
    client: Client,
    resource: Resource,
    *,
    probe_interval_seconds: float | None = None,
    rpc_timeout: timedelta | None = None,
) -> str:
    """Apply one validated serving resource; returns the workflow ID that now holds it."""
    if isinstance(resource, InferenceGateway):
        await directory_update(client, "put_gateway", resource, type(None), rpc_timeout=rpc_timeout)
        return ENDPOINTS_ID
    if isinstance(resource, ModelEndpoint):
        await directory_update(
            client, "put", endpoint_record(resource), type(None), rpc_timeout=rpc_timeout
        )
        return ENDPOINTS_ID
    if isinstance(resource, ModelService):
        arg = ServiceInput.of(resource)
        if probe_interval_seconds is not None:
            arg.probe_interval_seconds = probe_interval_seconds
        return await update_with_start(
            client,
            ServiceWorkflow.apply,
            resource,
            run=ServiceWorkflow.run,
            run_arg=arg,
            workflow_id=service_id(resource.namespace, resource.name),
            summary=f"ModelService {resource.namespace}/{resource.name}",
            rpc_timeout=rpc_timeout,
        )
    raise ValueError(f"{resource.KIND} is not a serving kind")


async def delete_serving(
    client: Client, kind: str, namespace: str, name: str, *, wait: bool
) -> None:
    if kind == "ModelService":
        handle = client.get_workflow_handle(service_id(namespace, name))
        await delete_entity(handle, ServiceWorkflow.delete, wait=wait)
    elif kind == "ModelEndpoint":
        await directory_update(
            client, "withdraw", EndpointKey(namespace=namespace, name=name), bool
        )
    else:
        raise ValueError(f"delete {kind} is not supported yet")
