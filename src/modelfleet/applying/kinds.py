"""The Temporal side of applying each kind: one hook per kind that ``modelfleet apply`` and the
controller both call, and :func:`apply_resource`, which picks it.

Side effects: Temporal client calls only (update-with-start, Updates, queries).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio.client import Client

from modelfleet.accepted.state import AcceptedDocument, AcceptedInput
from modelfleet.accepted.workflow import AcceptedResourceWorkflow
from modelfleet.api.autoscalers import ModelAutoscaler
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.meta import Resource
from modelfleet.api.support import held_without_action
from modelfleet.applying.entities import update_with_start
from modelfleet.applying.serving import apply_serving
from modelfleet.autoscaler.state import AutoscalerInput
from modelfleet.autoscaler.workflow import AutoscalerWorkflow, autoscaler_id
from modelfleet.cache.state import CacheInput
from modelfleet.cache.workflow import CacheWorkflow
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.ids import FLEET_ID, accepted_id, cache_id, cluster_id, deployment_id
from modelfleet.deployment.workflow import DeploymentInput, DeploymentWorkflow
from modelfleet.fleet.workflow import FleetWorkflow
from modelfleet.worker.tuning import Tuning

# client, resource, RPC timeout, tuning -> the ID of the workflow that now holds it
Apply = Callable[[Client, Any, timedelta | None, Tuning | None], Awaitable[str]]


def entity_apply(workflow: Any, input_of: Callable[[Any], Any], workflow_id: Any) -> Apply:
    """The ``apply`` hook of a kind that follows the entity convention: update-with-start of its
    workflow's ``apply`` Update, the run started with ``input_of``."""

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


apply_deployment = entity_apply(
    DeploymentWorkflow, lambda r: DeploymentInput(spec=r), deployment_id
)
apply_cache = entity_apply(CacheWorkflow, CacheInput.of, cache_id)


async def apply_class(
    client: Client, r: InferenceClass, rpc_timeout: timedelta | None, _: Tuning | None
) -> str:
    await client.get_workflow_handle(FLEET_ID).execute_update(
        FleetWorkflow.put_class, r, rpc_timeout=rpc_timeout
    )
    return FLEET_ID


async def apply_cluster(
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


async def apply_autoscaler(
    client: Client, r: ModelAutoscaler, rpc_timeout: timedelta | None, _: Tuning | None = None
) -> str:
    """Start (or update) the autoscaler's workflow; returns its workflow ID."""
    return await update_with_start(
        client,
        AutoscalerWorkflow.apply,
        r,
        run=AutoscalerWorkflow.run,
        run_arg=AutoscalerInput.of(r),
        workflow_id=autoscaler_id(r.namespace, r.name),
        summary=(
            f"ModelAutoscaler {r.namespace}/{r.name} -> "
            f"ModelDeployment {r.spec.scale_target_ref.name}"
        ),
        rpc_timeout=rpc_timeout,
    )


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


# The kinds modelfleet acts upon, by kind (a kind added with ``cli.kinds.entity_kind`` is
# applied through the CLI's registry, which builds its hook with :func:`entity_apply`).
APPLIERS: dict[str, Apply] = {
    "InferenceClass": apply_class,
    "InferenceCluster": apply_cluster,
    "ModelDeployment": apply_deployment,
    "ModelCache": apply_cache,
    "ModelAutoscaler": apply_autoscaler,
    "ModelService": apply_serving_kind,
    "ModelEndpoint": apply_serving_kind,
    "InferenceGateway": apply_serving_kind,
}


async def apply_resource(
    client: Client,
    resource: Resource,
    *,
    rpc_timeout: timedelta | None = None,
    tuning: Tuning | None = None,
) -> str:
    """Apply one validated resource of a kind in :data:`APPLIERS` (or one held without action);
    returns the workflow ID that now holds it."""
    if held_without_action(resource):
        return await apply_held(client, resource, rpc_timeout)
    hook = APPLIERS.get(resource.KIND)
    if hook is None:
        raise ValueError(f"{resource.KIND} cannot be applied")
    return await hook(client, resource, rpc_timeout, tuning)
