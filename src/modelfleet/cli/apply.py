"""``modelfleet apply -f``: validate every document first, then hand each to its entity
workflow with update-with-start, so applying twice is idempotent and an invalid change is
rejected (by the workflow's validator) without touching what runs."""

from __future__ import annotations

import typer
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy

from modelfleet.api.autoscalers import ModelAutoscaler
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.loading import load_paths
from modelfleet.api.meta import Resource
from modelfleet.api.support import held_without_action, not_acted_upon
from modelfleet.cli.autoscaler import apply_autoscaler
from modelfleet.cli.connection import (
    AddressOption,
    NamespaceOption,
    open_client,
    require_worker,
    run_async,
    settings,
)
from modelfleet.cli.output import (
    EXIT_INVALID,
    console,
    err_console,
    print_manifest_errors,
    rejection_reason,
)
from modelfleet.cli.serving import SERVING_KINDS, apply_serving
from modelfleet.cli.validate import FilesOption
from modelfleet.contracts.accepted import AcceptedInput
from modelfleet.contracts.activity_names import TASK_QUEUE
from modelfleet.contracts.workflow_inputs import ClusterInput
from modelfleet.worker.runner import ensure_fleet
from modelfleet.worker.settings import TemporalSettings
from modelfleet.workflows.accepted import AcceptedResourceWorkflow
from modelfleet.workflows.cluster import ClusterWorkflow
from modelfleet.workflows.deployment import DeploymentInput, DeploymentWorkflow
from modelfleet.workflows.fleet import FleetWorkflow
from modelfleet.workflows.ids import FLEET_ID, accepted_id, cluster_id, deployment_id

# Classes first (clusters reference them), then clusters, then what runs on them.
ORDER = {
    "InferenceClass": 0,
    "InferenceCluster": 1,
    "InferenceGateway": 2,
    "ModelDeployment": 3,
    "ModelEndpoint": 4,
    "ModelService": 5,
    "ModelAutoscaler": 6,
}


async def apply_resource(client: Client, resource: Resource) -> str:
    """Apply one validated resource; returns the workflow ID that now holds it."""
    if held_without_action(resource):
        wid = accepted_id(resource.KIND, resource.namespace, resource.name)
        document = AcceptedInput(document=resource.to_wire())
        await client.execute_update_with_start_workflow(
            AcceptedResourceWorkflow.apply,
            document,
            start_workflow_operation=WithStartWorkflowOperation(
                AcceptedResourceWorkflow.run,
                document,
                id=wid,
                task_queue=TASK_QUEUE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                static_summary=f"{resource.ref} (accepted, not acted upon)",
            ),
        )
        return wid
    if isinstance(resource, InferenceClass):
        await client.get_workflow_handle(FLEET_ID).execute_update(FleetWorkflow.put_class, resource)
        return FLEET_ID
    if isinstance(resource, InferenceCluster):
        wid = cluster_id(resource.name)
        await client.execute_update_with_start_workflow(
            ClusterWorkflow.apply,
            resource,
            start_workflow_operation=WithStartWorkflowOperation(
                ClusterWorkflow.run,
                ClusterInput(spec=resource),
                id=wid,
                task_queue=TASK_QUEUE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                static_summary=f"InferenceCluster {resource.name}",
            ),
        )
        return wid
    if isinstance(resource, ModelDeployment):
        wid = deployment_id(resource.namespace, resource.name)
        await client.execute_update_with_start_workflow(
            DeploymentWorkflow.apply,
            resource,
            start_workflow_operation=WithStartWorkflowOperation(
                DeploymentWorkflow.run,
                DeploymentInput(spec=resource),
                id=wid,
                task_queue=TASK_QUEUE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                static_summary=f"ModelDeployment {resource.namespace}/{resource.name}",
            ),
        )
        return wid
    if isinstance(resource, ModelAutoscaler):
        return await apply_autoscaler(client, resource)
    if resource.KIND in SERVING_KINDS:
        return await apply_serving(client, resource)
    raise ValueError(f"{resource.KIND} cannot be applied yet")


async def apply_all(client: Client, s: TemporalSettings, resources: list[Resource]) -> int:
    await ensure_fleet(client)
    failures = 0
    for resource in sorted(resources, key=lambda r: ORDER.get(r.KIND, 9)):
        unsupported = not_acted_upon(resource)
        if resource.KIND not in ORDER and not held_without_action(resource):
            reason = unsupported or f"orchestration of {resource.KIND} is not built yet"
            console.print(f"[yellow]skipped[/] {resource.ref}: {reason}")
            continue
        try:
            wid = await apply_resource(client, resource)
        except WorkflowUpdateFailedError as exc:
            failures += 1
            err_console.print(f"[red]rejected[/] {resource.ref}: {rejection_reason(exc)}")
            continue
        console.print(f"[green]applied[/] {resource.ref}  [dim]{s.workflow_url(wid)}[/]")
        if unsupported:
            console.print(f"  [yellow]note[/] {unsupported}")
    return failures


def apply(
    files: FilesOption,
    address: AddressOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Apply classes, clusters and deployments: validated first, then rolled out durably."""
    result = load_paths(files)
    if result.errors:
        print_manifest_errors(result.errors)
        raise typer.Exit(EXIT_INVALID)
    s = settings(address, namespace)

    async def go() -> int:
        client = await open_client(s)
        await require_worker(client, s)
        return await apply_all(client, s, result.resources)

    failures = run_async(go)
    if failures:
        raise typer.Exit(EXIT_INVALID)
